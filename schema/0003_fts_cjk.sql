-- 0003: full-text search that finds CJK text.
--
-- unicode61 splits on spaces and punctuation, so a run of Chinese or Japanese characters was
-- one token and no word inside it could be found. The index now holds each message's text
-- through sessiondb_fts_text(), which sets every CJK character apart as its own token; queries
-- go through the same transform, so a CJK word is a phrase of consecutive characters.
-- The table is contentless (the transformed text is not stored again); contentless_delete
-- lets a message's entry be removed by rowid. Snippets are made from messages.content.
DROP TRIGGER messages_fts_delete;
DROP TABLE messages_fts;
CREATE VIRTUAL TABLE messages_fts USING fts5(
    content,
    content = '',
    contentless_delete = 1,
    tokenize = 'unicode61 remove_diacritics 2'
);
INSERT INTO messages_fts (rowid, content)
    SELECT id, sessiondb_fts_text(content) FROM messages
    WHERE id <= (SELECT value FROM store_state WHERE key = 'fts_indexed_upto');
-- Same invariant as before (see store::fts): rows up to the watermark are indexed.
CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages
WHEN old.id <= (SELECT value FROM store_state WHERE key = 'fts_indexed_upto')
BEGIN
    DELETE FROM messages_fts WHERE rowid = old.id;
END;
