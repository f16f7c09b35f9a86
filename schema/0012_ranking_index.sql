-- 0012: what the ranking index (store::ranking, a tantivy index beside the database) needs
-- from the store to follow it.
--
-- The ranking index answers word queries ranked over the whole history without scoring every
-- match (block-max WAND), which FTS5's bm25 cannot: a word found in most messages cost a
-- microsecond per match. It is derived, never the source of truth: it holds messages up to a
-- watermark kept in its own commits (with the id of the store it belongs to), and can be made
-- again from the rows at any time.
--
-- Messages are never changed in place and their ids never reused (AUTOINCREMENT), so new
-- messages are simply those past its watermark. Deletions are the one thing it cannot see in
-- the rows: every deleted message id is logged here, in the deleting transaction, and the
-- index applies the log past its own mark of it (ranking_deletions.seq, AUTOINCREMENT so
-- that a pruned log never hands out a number twice). Entries the index has applied are pruned.
CREATE TABLE ranking_deletions (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    message_id  INTEGER NOT NULL
);
CREATE TRIGGER ranking_deletions_log AFTER DELETE ON messages
BEGIN
    INSERT INTO ranking_deletions (message_id) VALUES (old.id);
END;
-- Which store an index on disk belongs to: an index whose commits name another id (the
-- database was replaced by another) is rebuilt rather than trusted, as is one whose marks are
-- past anything this store handed out (the database was restored from an older copy).
INSERT INTO store_state (key, value) VALUES ('ranking_store_id', random());
