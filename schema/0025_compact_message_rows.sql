-- 0025: message rows made smaller, by about half.
--
-- 1. gptme's usual message metadata kept in the row's own columns. An assistant message's
--    metadata (`{"model": …, "usage": {…}, "cost": …}`) repeats what the row's model, token and
--    cost columns hold. Such metadata is now written as its shape (which of those keys, in which
--    order; store::metadata_columns) with `metadata` NULL, and rebuilt from the columns when
--    read; other metadata stays text. After this SQL the migration rewrites the rows stored
--    before it (store::metadata_columns::compact_sqlite), in the same transaction.
-- 2. A message row is found in its conversation by the first eight bytes of its line's SHA-256
--    (`messages_by_line`, an index on that expression), the whole digest compared in the row:
--    the unique index on (conversation_id, line_sha256) held the 32 bytes again for every row.
--    The writer never stores a line twice in a conversation (it looks each up first, under the
--    conversation's write lock), as it did with the constraint there.
-- 3. A timestamp of gptme's own form (`2025-01-01T12:35:30.236366`, what it writes for every
--    message) is kept as the integer of its microseconds (8 bytes for 26; store::timestamps),
--    any other as its text: the column has no affinity (declared BLOB), so SQLite keeps each
--    value as given. The migration's pass rewrites the rows stored before it, as for 1.
--
-- SQLite's procedure for changing a table's constraints: the table again, ids kept (so every
-- reference and the search indexes stay as they are), its sequence, view, indexes and trigger.

CREATE TABLE messages_0025 (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    line_sha256     BLOB NOT NULL,
    role            TEXT,
    text_id         INTEGER REFERENCES texts(id),
    timestamp       BLOB,               -- text, or gptme's own form as its microseconds
    files           TEXT,
    file_hashes     TEXT,
    call_id         TEXT,
    pinned          INTEGER NOT NULL DEFAULT 0,
    hide            INTEGER NOT NULL DEFAULT 0,
    ui_only         INTEGER NOT NULL DEFAULT 0,
    ephemeral_ttl   INTEGER,
    metadata        TEXT,
    extra           TEXT,
    raw             BLOB,
    malformed       TEXT,
    model           TEXT,
    cost            REAL DEFAULT 0,
    input_tokens    INTEGER NOT NULL DEFAULT 0,
    output_tokens   INTEGER NOT NULL DEFAULT 0,
    cache_read_tokens INTEGER NOT NULL DEFAULT 0,
    cache_creation_tokens INTEGER NOT NULL DEFAULT 0,
    rewrites_unchanged INTEGER,
    metadata_shape  INTEGER
);
INSERT INTO messages_0025 (
    id, conversation_id, line_sha256, role, text_id, timestamp, files, file_hashes, call_id, pinned, hide, ui_only,
    ephemeral_ttl, metadata, extra, raw, malformed, model, cost, input_tokens, output_tokens, cache_read_tokens,
    cache_creation_tokens, rewrites_unchanged)
SELECT
    id, conversation_id, line_sha256, role, text_id, timestamp, files, file_hashes, call_id, pinned, hide, ui_only,
    ephemeral_ttl, metadata, extra, raw, malformed, model, cost, input_tokens, output_tokens, cache_read_tokens,
    cache_creation_tokens, rewrites_unchanged
FROM messages ORDER BY id;
-- Ids only grow: the new table goes on from where the old one's sequence was.
DELETE FROM sqlite_sequence WHERE name = 'messages_0025';
INSERT INTO sqlite_sequence (name, seq) SELECT 'messages_0025', seq FROM sqlite_sequence WHERE name = 'messages';

DROP VIEW import_warnings;
DROP TABLE messages;
ALTER TABLE messages_0025 RENAME TO messages;
CREATE INDEX messages_by_line ON messages (conversation_id, substr(line_sha256, 1, 8));
CREATE INDEX messages_not_rewritten_unchanged ON messages (conversation_id) WHERE rewrites_unchanged IS NOT 1;
CREATE INDEX messages_by_text ON messages (text_id, conversation_id);

CREATE VIEW import_warnings AS
    SELECT c.chat_id, d.path, dl.line_no + 1 AS line, m.malformed AS reason
    FROM document_lines dl
    JOIN documents d ON d.id = dl.document_id
    JOIN conversations c ON c.id = d.conversation_id
    JOIN messages m ON m.id = dl.message_id
    WHERE m.malformed IS NOT NULL
    UNION ALL
    SELECT c.chat_id, d.path, e.line_no + 1, e.malformed
    FROM events e
    JOIN documents d ON d.id = e.document_id
    JOIN conversations c ON c.id = d.conversation_id
    WHERE e.malformed IS NOT NULL;

CREATE TRIGGER messages_let_go_of_text AFTER DELETE ON messages
WHEN old.text_id IS NOT NULL
BEGIN
    INSERT OR IGNORE INTO texts_let_go (text_id) VALUES (old.text_id);
END;
