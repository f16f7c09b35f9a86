-- 0024: a text is found by its hash first, then its source.
--
-- `texts_by_hash` led with the source, and the server's planner, going by sizes it sampled
-- while the table was nearly empty (an import fills it within minutes), read every text of the
-- source through the index's first column and filtered them by hash: 5 ms a lookup at 1,000
-- conversations, growing with the store. Led by the hash, the index gives no such plan: the
-- only way to use it is by the hashes asked for.

DROP INDEX texts_by_hash;
CREATE INDEX texts_by_hash ON texts (hash, source_id);
