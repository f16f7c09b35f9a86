-- 0022: the search sets keyed by text (store::texts), not by message, as SQLite's 0022.
--
-- Every text is indexed once, however many messages say it: gptme's system prompt, in every
-- conversation, is one row of the sets, and an import indexes each text it has not seen before.
-- A search finds texts and reaches their messages through `messages_by_text`; relevance (bm25,
-- from the totals below) is a text's.
--
-- Invariant (0016's, for texts): every text has a row in text_terms or in text_terms_pending
-- (added with the text by the trigger below, in its transaction), never both once a catch-up
-- commits; text_terms_counts' slots add up to the count and the summed lengths of text_terms'
-- rows (0018). The sets start empty here: every text waits, and the next search, sync or
-- import indexes them.

DROP TRIGGER messages_pend_terms ON messages;
DROP FUNCTION message_terms_pend();
DROP VIEW message_terms_totals;
DROP TABLE message_terms_counts;
DROP TABLE message_terms_pending;
DROP TABLE message_terms;
DROP FUNCTION message_terms_count_added();
DROP FUNCTION message_terms_count_removed();

CREATE TABLE text_terms (
    text_id     BIGINT PRIMARY KEY REFERENCES texts(id) ON DELETE CASCADE,
    -- The text's distinct words, each cut to at most 2,000 bytes; NULL when they would not
    -- fit in a tsvector (such a text is a candidate of every word query).
    words       tsvector,
    -- The distinct trigrams of the lowered text; NULL as for words.
    trigrams    tsvector,
    -- The number of words, for bm25.
    length      BIGINT NOT NULL
);
CREATE INDEX text_terms_words ON text_terms USING gin (words);
CREATE INDEX text_terms_trigrams ON text_terms USING gin (trigrams);
CREATE INDEX text_terms_without_words ON text_terms (text_id) WHERE words IS NULL;
CREATE INDEX text_terms_without_trigrams ON text_terms (text_id) WHERE trigrams IS NULL;

CREATE TABLE text_terms_pending (
    text_id     BIGINT PRIMARY KEY REFERENCES texts(id) ON DELETE CASCADE
);
CREATE FUNCTION text_terms_pend() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO text_terms_pending (text_id) SELECT id FROM added;
    RETURN NULL;
END $$;
CREATE TRIGGER texts_pend_terms AFTER INSERT ON texts
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION text_terms_pend();
INSERT INTO text_terms_pending (text_id) SELECT id FROM texts;

-- The totals bm25 needs, in per-process slots so that writers of several sources add to them
-- at once (0018).
CREATE TABLE text_terms_counts (
    slot        INT PRIMARY KEY,
    documents   BIGINT NOT NULL,
    tokens      BIGINT NOT NULL
);
CREATE VIEW text_terms_totals AS
    SELECT coalesce(sum(documents), 0)::bigint AS documents, coalesce(sum(tokens), 0)::bigint AS tokens FROM text_terms_counts;
CREATE FUNCTION text_terms_count_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO text_terms_counts AS t (slot, documents, tokens)
        SELECT pg_backend_pid() % 1024, count(*), coalesce(sum(length), 0) FROM changed
        ON CONFLICT (slot) DO UPDATE SET documents = t.documents + excluded.documents, tokens = t.tokens + excluded.tokens;
    RETURN NULL;
END $$;
CREATE FUNCTION text_terms_count_removed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO text_terms_counts AS t (slot, documents, tokens)
        SELECT pg_backend_pid() % 1024, -count(*), -coalesce(sum(length), 0) FROM changed
        ON CONFLICT (slot) DO UPDATE SET documents = t.documents + excluded.documents, tokens = t.tokens + excluded.tokens;
    RETURN NULL;
END $$;
CREATE TRIGGER text_terms_added AFTER INSERT ON text_terms
    REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION text_terms_count_added();
CREATE TRIGGER text_terms_removed AFTER DELETE ON text_terms
    REFERENCING OLD TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION text_terms_count_removed();
