-- 0001: the working store for gptme conversations.
--
-- A conversation directory is kept as: its filesystem entries (every path, with mode and
-- mtime), the JSONL documents the codec understands (transcripts, event logs, conversation
-- checkpoints) as ordered lines, and content-addressed blobs for every other file.
-- Export rebuilds each file from these rows; nothing else is needed.

CREATE TABLE conversations (
    id              INTEGER PRIMARY KEY,
    chat_id         TEXT NOT NULL UNIQUE,
    -- Where it was imported from (absolute path of the conversation directory).
    source_dir      TEXT NOT NULL,
    -- Digest of (path, kind, size, mode, mtime, link target) of every entry at import time:
    -- when it is unchanged, importing again has nothing to do.
    fingerprint     BLOB NOT NULL,
    imported_at     TEXT NOT NULL,
    -- config.toml's [chat] name, NULL when absent (listing then shows the chat id).
    name            TEXT,
    config_model    TEXT,
    workspace       TEXT,
    -- Totals of the main branch (conversation.jsonl), kept up to date by every write so that
    -- listing never reads messages. Their meanings are gptme's ConversationMeta's:
    -- message_count counts every non-blank line, malformed ones included.
    created         REAL NOT NULL,      -- first message's timestamp (epoch s), else modified
    modified        REAL NOT NULL,      -- mtime of conversation.jsonl (epoch s)
    message_count   INTEGER NOT NULL DEFAULT 0,
    branch_count    INTEGER NOT NULL DEFAULT 1,
    model           TEXT,               -- last model named in metadata
    -- NULL when the sum is not a finite number (a NaN or Infinity cost in some metadata;
    -- SQLite cannot store NaN).
    total_cost      REAL DEFAULT 0,
    input_tokens    INTEGER NOT NULL DEFAULT 0,  -- input + cache_read + cache_creation
    output_tokens   INTEGER NOT NULL DEFAULT 0,
    cache_read_tokens INTEGER NOT NULL DEFAULT 0,
    cache_creation_tokens INTEGER NOT NULL DEFAULT 0,
    -- Per-model usage, a JSON object {model: {cost, input_tokens, output_tokens, cache_read_tokens}}.
    models_usage    TEXT NOT NULL DEFAULT '{}',
    last_role       TEXT,
    last_preview    TEXT
);
CREATE INDEX conversations_by_modified ON conversations (modified DESC);

-- Content-addressed bytes of opaque files (attachments in files/, config.toml, unknown files).
-- A rowid table so that large files can be streamed in through incremental blob I/O.
CREATE TABLE blobs (
    id      INTEGER PRIMARY KEY,
    sha256  BLOB NOT NULL UNIQUE,
    size    INTEGER NOT NULL,
    data    BLOB NOT NULL
);

-- Every path inside a conversation directory, relative to it ('' is never stored: the
-- directory itself is the conversation). kind:
--   'dir'      a directory (kept even when empty)
--   'symlink'  a symbolic link, never followed; target as written
--   'blob'     a regular file kept as opaque bytes
--   'document' a JSONL file the codec understands; its lines are in `documents`
CREATE TABLE entries (
    conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    path            TEXT NOT NULL,
    kind            TEXT NOT NULL CHECK (kind IN ('dir', 'symlink', 'blob', 'document')),
    mode            INTEGER NOT NULL,   -- permission bits (st_mode & 0o7777)
    mtime_ns        INTEGER NOT NULL,   -- modification time, nanoseconds since the epoch
    blob_sha256     BLOB REFERENCES blobs(sha256),
    link_target     BLOB,               -- raw bytes of the symlink target
    PRIMARY KEY (conversation_id, path)
) WITHOUT ROWID;
CREATE INDEX entries_by_blob ON entries (blob_sha256) WHERE blob_sha256 IS NOT NULL;

-- JSONL files the codec parses. kind:
--   'branch'   conversation.jsonl (name 'main') or branches/<name>.jsonl
--   'view'     views/<name>.jsonl
--   'lossless' lossless.jsonl (name 'lossless')
--   'events'   events.jsonl (name 'main') or branches/<name>/events.jsonl
--   'conv_checkpoints' conv-checkpoints.jsonl
CREATE TABLE documents (
    id              INTEGER PRIMARY KEY,
    conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    path            TEXT NOT NULL,
    kind            TEXT NOT NULL,
    name            TEXT NOT NULL,
    -- 0 when the last line has no terminating newline (a write cut short).
    ends_with_newline INTEGER NOT NULL,
    line_count      INTEGER NOT NULL,
    UNIQUE (conversation_id, path)
);
CREATE INDEX documents_by_kind ON documents (conversation_id, kind, name);

-- Messages, each stored once per conversation however many branches, views and events hold
-- it: rows are keyed by the SHA-256 of the line's bytes.
-- role IS NULL marks a line that is not a message (blank or malformed): only `raw` is set.
-- `raw` holds the original line bytes whenever the codec's encoding of the typed columns
-- would not reproduce them; export writes `raw` when present, else encodes the columns.
-- AUTOINCREMENT: ids only ever grow, which the full-text watermark relies on (see below).
CREATE TABLE messages (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    line_sha256     BLOB NOT NULL,
    role            TEXT,
    content         TEXT,
    timestamp       TEXT,               -- exactly as written
    files           TEXT,               -- JSON array, NULL when none
    file_hashes     TEXT,               -- JSON object, NULL when none
    call_id         TEXT,
    pinned          INTEGER NOT NULL DEFAULT 0,
    hide            INTEGER NOT NULL DEFAULT 0,
    ui_only         INTEGER NOT NULL DEFAULT 0,
    ephemeral_ttl   INTEGER,
    metadata        TEXT,               -- JSON (Python dialect), as written
    extra           TEXT,               -- JSON object of unknown fields, in order
    raw             BLOB,
    malformed       TEXT,               -- why the line is not a message (role IS NULL)
    -- Derived from metadata for statistics (usage is read as gptme reads it: nested or flat).
    model           TEXT,
    cost            REAL DEFAULT 0,     -- NULL when not a finite number
    input_tokens    INTEGER NOT NULL DEFAULT 0,
    output_tokens   INTEGER NOT NULL DEFAULT 0,
    cache_read_tokens INTEGER NOT NULL DEFAULT 0,
    cache_creation_tokens INTEGER NOT NULL DEFAULT 0,
    UNIQUE (conversation_id, line_sha256)
);

-- The lines of 'branch', 'view' and 'lossless' documents, in order.
CREATE TABLE document_lines (
    document_id     INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    line_no         INTEGER NOT NULL,   -- 0-based
    message_id      INTEGER NOT NULL REFERENCES messages(id),
    PRIMARY KEY (document_id, line_no)
) WITHOUT ROWID;
CREATE INDEX document_lines_by_message ON document_lines (message_id);

-- The lines of 'events' documents. Typed columns are NULL for a damaged line (then `raw`).
-- Payloads that carry messages refer to `messages` through event_messages; `payload` holds
-- any other payload as JSON text.
CREATE TABLE events (
    document_id     INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    line_no         INTEGER NOT NULL,
    seq             INTEGER,
    ts              TEXT,
    type            TEXT,
    -- 'message' ({"message": m}), 'messages' ({"messages": [...]}) or 'json' (payload column).
    payload_form    TEXT,
    payload         TEXT,
    raw             BLOB,
    malformed       TEXT,
    PRIMARY KEY (document_id, line_no)
) WITHOUT ROWID;
CREATE INDEX events_by_seq ON events (document_id, seq);

CREATE TABLE event_messages (
    document_id     INTEGER NOT NULL,
    line_no         INTEGER NOT NULL,
    position        INTEGER NOT NULL,
    message_id      INTEGER NOT NULL REFERENCES messages(id),
    PRIMARY KEY (document_id, line_no, position),
    FOREIGN KEY (document_id, line_no) REFERENCES events(document_id, line_no) ON DELETE CASCADE
) WITHOUT ROWID;
CREATE INDEX event_messages_by_message ON event_messages (message_id);

-- The lines of 'conv_checkpoints' documents (/backtrack bookmarks).
CREATE TABLE conv_checkpoints (
    document_id     INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    line_no         INTEGER NOT NULL,
    idx             INTEGER,
    label           TEXT,
    timestamp       TEXT,
    raw             BLOB,
    PRIMARY KEY (document_id, line_no)
) WITHOUT ROWID;

-- Named views over `documents` and `entries` for tools that query the store.
CREATE VIEW branches AS
    SELECT c.chat_id, d.name AS branch, d.path, d.line_count, d.id AS document_id
    FROM documents d JOIN conversations c ON c.id = d.conversation_id WHERE d.kind = 'branch';
CREATE VIEW views AS
    SELECT c.chat_id, d.name AS view, d.path, d.line_count, d.id AS document_id
    FROM documents d JOIN conversations c ON c.id = d.conversation_id WHERE d.kind = 'view';
-- Attachments as gptme stores them: files/<first 16 hex of sha256><suffix>, kept as blobs.
CREATE VIEW attachments AS
    SELECT c.chat_id, e.path, b.size, e.blob_sha256
    FROM entries e JOIN conversations c ON c.id = e.conversation_id JOIN blobs b ON b.sha256 = e.blob_sha256
    WHERE e.path GLOB 'files/*';

-- Lines that are not what gptme would load, reported at import: path:line: reason.
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

-- Small facts about the store as a whole.
CREATE TABLE store_state (
    key     TEXT PRIMARY KEY,
    value   INTEGER NOT NULL
) WITHOUT ROWID;

-- Full-text search over message content (external content: the text lives once, in messages).
--
-- The index is filled in bulk, not by an insert trigger: FTS5 flushes its in-memory index at
-- every savepoint, so indexing row by row inside per-conversation savepoints costs several
-- times more than indexing a whole batch in one statement. The invariant, kept by
-- store::fts::index_pending inside every write transaction before it commits:
--   messages with id <= store_state['fts_indexed_upto'] are indexed; later ones are not.
-- Ids only grow (AUTOINCREMENT), so a new row can never fall below the watermark; the
-- watermark and the index commit in the same transaction as the rows, so a crash cannot
-- separate them.
CREATE VIRTUAL TABLE messages_fts USING fts5(
    content,
    content = 'messages',
    content_rowid = 'id',
    tokenize = 'unicode61 remove_diacritics 2'
);
INSERT INTO store_state (key, value) VALUES ('fts_indexed_upto', 0);

-- Removing an indexed message removes it from the index (external-content delete needs the
-- exact old content, which the row still has here). Unindexed rows are not in the index.
CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages
WHEN old.id <= (SELECT value FROM store_state WHERE key = 'fts_indexed_upto')
BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, content) VALUES ('delete', old.id, old.content);
END;
