-- 0021: message texts stored once per source, compressed (store::texts).
--
-- gptme writes its whole system prompt into every conversation and tools print the same output
-- again and again: most of a history's text is text it holds already. A message's content is
-- now a row of `texts`, shared by every message of the source that says the same, found by the
-- first eight bytes of its SHA-256 (`hash`; the text itself is compared before a row is shared).
-- `data` is a codec byte and the text: plain (0), a zstd frame (1), or a dictionary's id and a
-- zstd frame made with it (2); dictionaries, each trained on one source's own texts, are kept
-- in `text_dictionaries` and never change. This migration stores every text plain; the first
-- import or sync after it trains the store's dictionary and compresses them.
--
-- A text no message holds any more is removed when the write transaction that let go of it
-- finishes (store::texts::remove_unheld), from the ids `texts_let_go` collects: a conversation
-- read again whole lets go of its texts and takes them back a moment later.

CREATE TABLE texts (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    source_id   INTEGER NOT NULL REFERENCES sources(id),
    hash        INTEGER NOT NULL,
    data        BLOB NOT NULL
);
CREATE INDEX texts_by_hash ON texts (source_id, hash);

-- A source's dictionaries, trained on its own texts only (a dictionary holds pieces of them).
CREATE TABLE text_dictionaries (
    id          INTEGER PRIMARY KEY,
    source_id   INTEGER NOT NULL REFERENCES sources(id),
    data        BLOB NOT NULL,
    created     INTEGER NOT NULL
);
CREATE INDEX text_dictionaries_by_source ON text_dictionaries (source_id, created);

CREATE TABLE texts_let_go (
    text_id     INTEGER PRIMARY KEY
);

INSERT INTO texts (source_id, hash, data)
    SELECT source_id, sessiondb_text_hash(content), sessiondb_text_plain(content)
    FROM (SELECT DISTINCT c.source_id AS source_id, m.content AS content
          FROM messages m JOIN conversations c ON c.id = m.conversation_id
          WHERE m.content IS NOT NULL);

-- The messages again, their content a text's id (SQLite's procedure for changing a table's
-- columns; ids kept, so every reference and both search indexes stay as they are).
CREATE TABLE messages_0021 (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    line_sha256     BLOB NOT NULL,
    role            TEXT,
    text_id         INTEGER REFERENCES texts(id),
    timestamp       TEXT,
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
    UNIQUE (conversation_id, line_sha256)
);
INSERT INTO messages_0021 (
    id, conversation_id, line_sha256, role, text_id, timestamp, files, file_hashes, call_id, pinned, hide, ui_only,
    ephemeral_ttl, metadata, extra, raw, malformed, model, cost, input_tokens, output_tokens, cache_read_tokens,
    cache_creation_tokens, rewrites_unchanged)
SELECT
    m.id, m.conversation_id, m.line_sha256, m.role,
    (SELECT t.id FROM texts t
      WHERE t.source_id = c.source_id AND t.hash = sessiondb_text_hash(m.content) AND t.data = sessiondb_text_plain(m.content)),
    m.timestamp, m.files, m.file_hashes, m.call_id, m.pinned, m.hide, m.ui_only,
    m.ephemeral_ttl, m.metadata, m.extra, m.raw, m.malformed, m.model, m.cost, m.input_tokens, m.output_tokens, m.cache_read_tokens,
    m.cache_creation_tokens, m.rewrites_unchanged
FROM messages m JOIN conversations c ON c.id = m.conversation_id;
-- Ids only grow: the new table goes on from where the old one's sequence was.
DELETE FROM sqlite_sequence WHERE name = 'messages_0021';
INSERT INTO sqlite_sequence (name, seq) SELECT 'messages_0021', seq FROM sqlite_sequence WHERE name = 'messages';

DROP VIEW import_warnings;
DROP TABLE messages;
ALTER TABLE messages_0021 RENAME TO messages;
CREATE INDEX messages_not_rewritten_unchanged ON messages (conversation_id) WHERE rewrites_unchanged IS NOT 1;
CREATE INDEX messages_by_text ON messages (text_id);

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

-- The triggers the old table had, on the new one.
CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages
WHEN old.id <= (SELECT value FROM store_state WHERE key = 'fts_indexed_upto')
BEGIN
    DELETE FROM messages_fts WHERE rowid = old.id;
END;
CREATE TRIGGER messages_substring_delete AFTER DELETE ON messages
WHEN old.id <= (SELECT value FROM store_state WHERE key = 'substring_indexed_upto')
BEGIN
    DELETE FROM messages_substring WHERE rowid = old.id;
END;
CREATE TRIGGER ranking_deletions_log AFTER DELETE ON messages
BEGIN
    INSERT INTO ranking_deletions (message_id) VALUES (old.id);
END;
CREATE TRIGGER messages_let_go_of_text AFTER DELETE ON messages
WHEN old.text_id IS NOT NULL
BEGIN
    INSERT OR IGNORE INTO texts_let_go (text_id) VALUES (old.text_id);
END;
