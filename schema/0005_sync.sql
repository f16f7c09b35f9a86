-- 0005: what the bidirectional sync with a gptme logs root keeps.

-- Incremental ingest watermarks, per file (`documents`' entries): the inode the bytes were read
-- from and the SHA-256 of the last (up to) 4096 bytes read. `entries.size` is how many bytes
-- were read. gptme appends to its transcripts and event logs in place and rewrites them through
-- a new file (a new inode), so a file that keeps its inode, has grown, and still has those
-- bytes just before the old end only gained lines: sync then reads only the new bytes.
ALTER TABLE entries ADD COLUMN ino INTEGER;
ALTER TABLE entries ADD COLUMN tail_sha256 BLOB;

-- Set when a sync found the conversation directory gone: the conversation stays in the store
-- (hidden from list, search and stats) until `sessiondb rm`, or until the directory returns.
ALTER TABLE conversations ADD COLUMN deleted_at TEXT;

-- Files that changed in the store but not yet in the directory (operations run with
-- `--queue`), with what the directory held when the store last agreed with it: the size and
-- mtime of the file then, both NULL when it did not exist. `sessiondb sync` writes each
-- path whose directory copy still matches its base, and keeps both versions of any other.
CREATE TABLE pending_paths (
    conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    path            TEXT NOT NULL,
    base_size       INTEGER,
    base_mtime_ns   INTEGER,
    PRIMARY KEY (conversation_id, path)
) WITHOUT ROWID;
