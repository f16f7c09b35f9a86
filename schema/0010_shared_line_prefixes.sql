-- 0010: a document may share the first lines of another document's rows instead of copying them.
--
-- An undo's backup branch is its branch as it was: every line the branch keeps, then the lines
-- the undo takes away. Copying the kept lines made an undo's time grow with the conversation
-- (a million rows copied for a 1 GiB branch). Now the backup *borrows* them: its lines are the
-- first `base_len` lines of the document `base_id` (their rows stay under `base_id`), followed
-- by its own rows, numbered from `base_len` on.
--
-- Invariants (store::modify keeps them; doctor checks them):
--   * a document with no base has base_id NULL and base_len 0;
--   * a base is always a document without a base of its own, in the same conversation
--     (sharing is one level deep, so reading a document is at most two index ranges);
--   * a document's own rows are numbered base_len .. line_count - 1;
--   * the rows of a base below any borrower's base_len exist and never change.
-- The last one is the database's to keep, not every writer's: before a row another document
-- borrows is deleted (by a truncation, a rewrite, or the cascade of a deleted document), the
-- trigger below gives every borrower its own copy of the lines it borrows from that row on, and
-- lowers its base_len to that row. So a borrower never loses a line, whoever deletes what, and
-- the copying costs only what a deleting writer takes away. Rows that are borrowed are never
-- updated in place (the second trigger refuses it; nothing in sessiondb updates them).
ALTER TABLE documents ADD COLUMN base_id INTEGER REFERENCES documents(id);
ALTER TABLE documents ADD COLUMN base_len INTEGER NOT NULL DEFAULT 0;
CREATE INDEX documents_by_base ON documents (base_id) WHERE base_id IS NOT NULL;

CREATE TRIGGER document_lines_keep_borrowed BEFORE DELETE ON document_lines
WHEN EXISTS (SELECT 1 FROM documents WHERE base_id = old.document_id AND base_len > old.line_no)
BEGIN
    INSERT INTO document_lines (document_id, line_no, message_id)
        SELECT d.id, l.line_no, l.message_id
        FROM documents d JOIN document_lines l
          ON l.document_id = d.base_id AND l.line_no >= old.line_no AND l.line_no < d.base_len
        WHERE d.base_id = old.document_id AND d.base_len > old.line_no;
    UPDATE documents SET base_len = old.line_no, base_id = CASE WHEN old.line_no = 0 THEN NULL ELSE base_id END
        WHERE base_id = old.document_id AND base_len > old.line_no;
END;

CREATE TRIGGER document_lines_borrowed_are_fixed BEFORE UPDATE ON document_lines
WHEN EXISTS (SELECT 1 FROM documents WHERE base_id = old.document_id AND base_len > old.line_no)
BEGIN
    SELECT RAISE(ABORT, 'a line another document borrows cannot be changed in place');
END;
