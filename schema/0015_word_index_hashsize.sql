-- 0015: the word index gathers up to 16 MiB of terms in memory before writing a segment.
--
-- With FTS5's default (1 MiB) the word index wrote a segment every few hundred messages and
-- merged them again and again: an import of 10,000 realistic conversations (rows, then the
-- three search indexes) took 37 s with the default and 33 s with this. The substring index
-- has had the same since 0013. A setting kept in the index's own config table; nothing is
-- rebuilt.
INSERT INTO messages_fts (messages_fts, rank) VALUES ('hashsize', 16777216);
