-- 0022: the search indexes keyed by text (store::texts), not by message.
--
-- Every text is indexed once, however many messages say it: gptme's system prompt, in every
-- conversation, is one document of each index, and an import indexes each text it has not
-- seen before. A search finds texts and reaches their messages through `messages_by_text`.
-- Relevance (bm25) is a text's: the same text ranks the same in every message that holds it.
--
-- The watermarks now count texts (`texts.id` is AUTOINCREMENT: ids only grow, and a row is never
-- changed in place but by recompression, which keeps its text): every text with an id at or
-- below one is in its index, no later one is. Both indexes start empty here; the next search,
-- sync or import fills them from the texts (`store::fts::catch_up`). The ranking index beside
-- the database follows texts too: it is told it belongs to another store, and is made again.

DROP TRIGGER IF EXISTS messages_fts_delete;
DROP TRIGGER IF EXISTS messages_substring_delete;
DROP TABLE IF EXISTS messages_fts;
DROP TABLE IF EXISTS messages_substring;

CREATE VIRTUAL TABLE texts_fts USING fts5(
    content,
    content = '',
    contentless_delete = 1,
    tokenize = 'unicode61 remove_diacritics 2'
);
INSERT INTO texts_fts (texts_fts, rank) VALUES ('hashsize', 16777216);
CREATE VIRTUAL TABLE texts_substring USING fts5(
    content,
    content = '',
    contentless_delete = 1,
    detail = 'none',
    tokenize = 'sessiondb_trigram'
);
INSERT INTO texts_substring (texts_substring, rank) VALUES ('hashsize', 16777216);
UPDATE store_state SET value = 0 WHERE key IN ('fts_indexed_upto', 'substring_indexed_upto');

CREATE TRIGGER texts_fts_delete AFTER DELETE ON texts
WHEN old.id <= (SELECT value FROM store_state WHERE key = 'fts_indexed_upto')
BEGIN
    DELETE FROM texts_fts WHERE rowid = old.id;
END;
CREATE TRIGGER texts_substring_delete AFTER DELETE ON texts
WHEN old.id <= (SELECT value FROM store_state WHERE key = 'substring_indexed_upto')
BEGIN
    DELETE FROM texts_substring WHERE rowid = old.id;
END;

-- The ranking index's deletion log: of texts now.
DROP TRIGGER IF EXISTS ranking_deletions_log;
DROP TABLE ranking_deletions;
CREATE TABLE ranking_deletions (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    text_id     INTEGER NOT NULL
);
CREATE TRIGGER ranking_deletions_log AFTER DELETE ON texts
BEGIN
    INSERT INTO ranking_deletions (text_id) VALUES (old.id);
END;
UPDATE store_state SET value = random() WHERE key = 'ranking_store_id';
