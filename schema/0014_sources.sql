-- 0014: many logs roots in one store. Each logs root a conversation is read from is a
-- *source*, and a conversation is identified by (source, chat id): two roots' `my-chat` are
-- two conversations, where `conversations.chat_id` was UNIQUE before.
--
-- Applied with foreign keys off (src/store/schema.rs does so around every migration and checks
-- them before committing), as SQLite's procedure for changing a table's constraints requires:
-- `conversations` is rebuilt without the UNIQUE on chat_id, keeping every row's id, so that
-- the rows of every other table keep pointing at their conversation.

-- `name` is how commands name the source (`SOURCE:CHAT`, `--source`); it defaults to
-- `hostname:path`. `root` is the absolute path of the logs root it is read from on this
-- machine; one source per root, so that two sources never claim the same directories.
CREATE TABLE sources (
    id      INTEGER PRIMARY KEY,
    name    TEXT NOT NULL UNIQUE,
    root    TEXT NOT NULL UNIQUE
);

-- Every stored conversation's source is the logs root it came from: the parent of its
-- `source_dir` (everything before the last '/'; a directory directly under '/' has root '/').
-- The name is this host's name and that path (sessiondb_hostname() is registered by the
-- migration runner); the path is the one recorded at import, not resolved again.
CREATE TEMP TABLE source_of_conversation AS
    SELECT id, CASE WHEN parent = '' THEN '/' ELSE parent END AS root
    FROM (SELECT id, rtrim(rtrim(source_dir, replace(source_dir, '/', '')), '/') AS parent FROM conversations);
INSERT INTO sources (name, root)
    SELECT sessiondb_hostname() || ':' || root, root FROM (SELECT DISTINCT root FROM source_of_conversation ORDER BY root);

CREATE TABLE conversations_0014 (
    id              INTEGER PRIMARY KEY,
    source_id       INTEGER NOT NULL REFERENCES sources(id),
    chat_id         TEXT NOT NULL,
    source_dir      TEXT NOT NULL,
    fingerprint     BLOB NOT NULL,
    imported_at     TEXT NOT NULL,
    name            TEXT,
    config_model    TEXT,
    workspace       TEXT,
    created         REAL NOT NULL,
    modified        REAL NOT NULL,
    message_count   INTEGER NOT NULL DEFAULT 0,
    branch_count    INTEGER NOT NULL DEFAULT 1,
    model           TEXT,
    total_cost      REAL DEFAULT 0,
    input_tokens    INTEGER NOT NULL DEFAULT 0,
    output_tokens   INTEGER NOT NULL DEFAULT 0,
    cache_read_tokens INTEGER NOT NULL DEFAULT 0,
    cache_creation_tokens INTEGER NOT NULL DEFAULT 0,
    models_usage    TEXT NOT NULL DEFAULT '{}',
    last_role       TEXT,
    last_preview    TEXT,
    first_message_seen INTEGER NOT NULL DEFAULT 0,
    first_message_time REAL,
    role_counts     TEXT NOT NULL DEFAULT '{}',
    deleted_at      TEXT,
    UNIQUE (source_id, chat_id)
);
INSERT INTO conversations_0014 (
    id, source_id, chat_id, source_dir, fingerprint, imported_at, name, config_model, workspace, created, modified,
    message_count, branch_count, model, total_cost, input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens,
    models_usage, last_role, last_preview, first_message_seen, first_message_time, role_counts, deleted_at)
SELECT
    c.id, s.id, c.chat_id, c.source_dir, c.fingerprint, c.imported_at, c.name, c.config_model, c.workspace, c.created, c.modified,
    c.message_count, c.branch_count, c.model, c.total_cost, c.input_tokens, c.output_tokens, c.cache_read_tokens, c.cache_creation_tokens,
    c.models_usage, c.last_role, c.last_preview, c.first_message_seen, c.first_message_time, c.role_counts, c.deleted_at
FROM conversations c JOIN source_of_conversation sc ON sc.id = c.id JOIN sources s ON s.root = sc.root;
DROP TABLE source_of_conversation;

-- The views name `conversations`; they are made again over the new table, now with the source.
DROP VIEW branches;
DROP VIEW views;
DROP VIEW attachments;
DROP VIEW import_warnings;
DROP TABLE conversations;
ALTER TABLE conversations_0014 RENAME TO conversations;

-- The listing's indexes (0006), the chat id keeping ties in a stable order.
CREATE INDEX conversations_by_modified ON conversations (modified DESC, chat_id);
CREATE INDEX conversations_by_created ON conversations (created DESC, chat_id);
CREATE INDEX conversations_by_cost ON conversations (coalesce(total_cost, 0) DESC, chat_id);
CREATE INDEX conversations_by_tokens ON conversations (input_tokens + output_tokens DESC, chat_id);
CREATE INDEX conversations_by_messages ON conversations (message_count DESC, chat_id);
-- A bare chat id given on the command line is looked up in every source.
CREATE INDEX conversations_by_chat_id ON conversations (chat_id);

CREATE VIEW branches AS
    SELECT s.name AS source, c.chat_id, d.name AS branch, d.path, d.line_count, d.id AS document_id
    FROM documents d JOIN conversations c ON c.id = d.conversation_id JOIN sources s ON s.id = c.source_id WHERE d.kind = 'branch';
CREATE VIEW views AS
    SELECT s.name AS source, c.chat_id, d.name AS view, d.path, d.line_count, d.id AS document_id
    FROM documents d JOIN conversations c ON c.id = d.conversation_id JOIN sources s ON s.id = c.source_id WHERE d.kind = 'view';
CREATE VIEW attachments AS
    SELECT s.name AS source, c.chat_id, e.path, b.size, e.blob_sha256
    FROM entries e JOIN conversations c ON c.id = e.conversation_id JOIN sources s ON s.id = c.source_id
    JOIN blobs b ON b.sha256 = e.blob_sha256
    WHERE e.path GLOB 'files/*';
CREATE VIEW import_warnings AS
    SELECT s.name AS source, c.chat_id, d.path, dl.line_no + 1 AS line, m.malformed AS reason
    FROM document_lines dl
    JOIN documents d ON d.id = dl.document_id
    JOIN conversations c ON c.id = d.conversation_id
    JOIN sources s ON s.id = c.source_id
    JOIN messages m ON m.id = dl.message_id
    WHERE m.malformed IS NOT NULL
    UNION ALL
    SELECT s.name, c.chat_id, d.path, e.line_no + 1, e.malformed
    FROM events e
    JOIN documents d ON d.id = e.document_id
    JOIN conversations c ON c.id = d.conversation_id
    JOIN sources s ON s.id = c.source_id
    WHERE e.malformed IS NOT NULL;

-- Acknowledged appends (0007) are kept by chat id, to outlive a re-read of the conversation's
-- rows; now by source and chat id. A record whose conversation is no longer stored has no
-- source to go to and is dropped (nothing can restore a message into a conversation the store
-- does not hold).
CREATE TABLE acknowledged_lines_0014 (
    source_id   INTEGER NOT NULL REFERENCES sources(id),
    chat_id     TEXT NOT NULL,
    path        TEXT NOT NULL,
    message_key BLOB NOT NULL,
    line        BLOB NOT NULL,
    event_seq   INTEGER NOT NULL,
    appended_at REAL NOT NULL,
    PRIMARY KEY (source_id, chat_id, path, message_key)
) WITHOUT ROWID;
INSERT INTO acknowledged_lines_0014 (source_id, chat_id, path, message_key, line, event_seq, appended_at)
    SELECT c.source_id, a.chat_id, a.path, a.message_key, a.line, a.event_seq, a.appended_at
    FROM acknowledged_lines a JOIN conversations c ON c.chat_id = a.chat_id;
DROP TABLE acknowledged_lines;
ALTER TABLE acknowledged_lines_0014 RENAME TO acknowledged_lines;
