-- 0013: the substring index made again with sessiondb's own trigram tokenizer.
--
-- Same index as 0011 (every three-character sequence of each message's lowercased text,
-- detail = 'none', contentless), but tokenized by `sessiondb_trigram` (store::trigram_tokens),
-- which gives each distinct trigram of a message once where FTS5's `trigram` gives every
-- occurrence. The index holds the same terms for the same rows; building it costs FTS5 one
-- pending-hash lookup per distinct trigram instead of one per character, which in gptme's logs
-- (three trigrams in four repeat within their message) was half of an import's time.
--
-- Also run by `doctor --reindex` (store::fts::rebuild_substring_index) to make the index
-- again from the rows, so it starts from whatever state the index is in, even gone.
DROP TRIGGER IF EXISTS messages_substring_delete;
DROP TABLE IF EXISTS messages_substring;
DELETE FROM store_state WHERE key = 'substring_indexed_upto';
CREATE VIRTUAL TABLE messages_substring USING fts5(
    content,
    content = '',
    contentless_delete = 1,
    detail = 'none',
    tokenize = 'sessiondb_trigram'
);
INSERT INTO messages_substring (messages_substring, rank) VALUES ('hashsize', 16777216);
-- Every message is in the word index at every commit, so indexing up to its watermark here
-- covers them all (store::fts::index_pending is the safety net).
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
