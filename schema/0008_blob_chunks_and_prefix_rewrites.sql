-- 0008: blob bytes are stored in chunks, so that a file of any size fits; messages record whether gptme rewrites them unchanged.
--
-- SQLite refuses any single value of 1,000,000,000 bytes or more ("string or blob too big"),
-- so a file that large made its whole conversation unimportable. A blob's bytes are now the
-- concatenation of its chunks in `seq` order (0, 1, 2, ...); sessiondb writes chunks of at most
-- store::blobs::CHUNK bytes. An empty file has no chunks. `blobs` keeps the identity (sha256)
-- and the size; the trigger below removes a blob's chunks with it.
--
-- A rowid table, so that a chunk is read through incremental blob I/O in small pieces: a chunk
-- moved here from version 7 (below) is the whole former value, up to SQLite's limit.
CREATE TABLE blob_chunks (
    id      INTEGER PRIMARY KEY,
    blob_id INTEGER NOT NULL REFERENCES blobs(id) ON DELETE CASCADE,
    seq     INTEGER NOT NULL,
    data    BLOB NOT NULL,
    UNIQUE (blob_id, seq)
);

INSERT INTO blob_chunks (blob_id, seq, data) SELECT id, 0, data FROM blobs WHERE length(data) > 0;
ALTER TABLE blobs DROP COLUMN data;

-- Whatever deletes a blob (with or without foreign key enforcement) deletes its chunks, so a
-- reused blob id never finds another file's chunks.
CREATE TRIGGER blobs_delete_chunks AFTER DELETE ON blobs
BEGIN
    DELETE FROM blob_chunks WHERE blob_id = old.id;
END;

-- 1 when gptme, rewriting a transcript from this message, writes this very line back: the line
-- is the codec's encoding of the columns (raw IS NULL) and gptme's reader normalises nothing in
-- it (see ops::normalise). An undo of a branch made only of such lines keeps a prefix of the
-- file's bytes and rows, without reading the branch. NULL (rows from before this version)
-- counts as 0 until the conversation is read again.
ALTER TABLE messages ADD COLUMN rewrites_unchanged INTEGER;
