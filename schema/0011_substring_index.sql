-- 0011: a substring index, so that a literal query finds exactly the messages that contain it.
--
-- messages_fts splits text into words, so it cannot answer "which messages contain `(x`, `C:\`
-- or 😀". This index holds every three-character sequence of each message's text lowercased as
-- Python's str.lower() does (sessiondb_lower: the whole text at once, so a final sigma is ς),
-- and answers a literal query of three or more characters with a superset of the messages that
-- contain it, which store::search then checks exactly; shorter queries are answered by a scan.
--
-- detail = 'none': only which message holds a trigram, not where. Positions would let FTS5
-- match whole phrases, but the exact check is made anyway, and they made the index 4.5 times
-- larger (2.3 times the text it indexes rather than half of it) and slower to build.
-- Contentless, like messages_fts since 0003: the lowered text is not stored again.
--
-- Same invariant and discipline as messages_fts (see store::fts): messages with
-- id <= store_state['substring_indexed_upto'] are indexed, later ones are not; writers index
-- the rows past the watermark and move it in the transaction that adds them.
CREATE VIRTUAL TABLE messages_substring USING fts5(
    content,
    content = '',
    contentless_delete = 1,
    detail = 'none',
    tokenize = 'trigram case_sensitive 1'
);
-- FTS5 writes its pending terms out as a new segment whenever they pass `hashsize` (1 MiB by
-- default); a message gives about as many trigrams as it has characters, so at the default
-- an import wrote a segment every few hundred messages and spent most of its indexing time
-- merging them. 16 MiB (the most one writing connection holds in memory for this index)
-- halved that time and left the index a little smaller.
INSERT INTO messages_substring (messages_substring, rank) VALUES ('hashsize', 16777216);
INSERT INTO store_state (key, value)
    SELECT 'substring_indexed_upto', value FROM store_state WHERE key = 'fts_indexed_upto';
INSERT INTO messages_substring (rowid, content)
    SELECT id, sessiondb_lower(content) FROM messages
    WHERE id <= (SELECT value FROM store_state WHERE key = 'substring_indexed_upto');
CREATE TRIGGER messages_substring_delete AFTER DELETE ON messages
WHEN old.id <= (SELECT value FROM store_state WHERE key = 'substring_indexed_upto')
BEGIN
    DELETE FROM messages_substring WHERE rowid = old.id;
END;
