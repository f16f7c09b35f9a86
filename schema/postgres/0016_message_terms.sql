-- The search indexes on PostgreSQL at schema version 16: each message's words and trigrams,
-- made by sessiondb itself (`store::message_terms`) with the very rules of the SQLite indexes
-- (FTS5's unicode61 words, the trigrams of the text lowered as Python lowers it), and kept as
-- lexeme sets in GIN indexes. The server's own parsers (a `simple` tsvector, pg_trgm) split
-- text by other rules than FTS5 (`example.com` is one token there, two words here) and fold
-- case by the database's locale, so version 15's expression indexes could miss messages a
-- search on SQLite finds; these hold a superset of what each query needs, and every candidate
-- is checked exactly.
--
-- Invariant: every message has a row in message_terms or in message_terms_pending (added with
-- the message by the trigger below, in its transaction), never both once a catch-up commits;
-- message_terms_totals holds the count and the summed lengths of message_terms' rows.

DROP INDEX messages_words;
DROP INDEX messages_substrings;

CREATE TABLE message_terms (
    message_id  BIGINT PRIMARY KEY REFERENCES messages(id) ON DELETE CASCADE,
    -- The message's distinct words, each cut to at most 2,000 bytes; NULL when they would not
    -- fit in a tsvector (such a message is a candidate of every word query).
    words       tsvector,
    -- The distinct trigrams of the lowered text; NULL as for words.
    trigrams    tsvector,
    -- The number of words, for bm25.
    length      BIGINT NOT NULL
);
CREATE INDEX message_terms_words ON message_terms USING gin (words);
CREATE INDEX message_terms_trigrams ON message_terms USING gin (trigrams);
CREATE INDEX message_terms_without_words ON message_terms (message_id) WHERE words IS NULL;
CREATE INDEX message_terms_without_trigrams ON message_terms (message_id) WHERE trigrams IS NULL;

CREATE TABLE message_terms_pending (
    message_id  BIGINT PRIMARY KEY REFERENCES messages(id) ON DELETE CASCADE
);

CREATE FUNCTION message_terms_pend() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO message_terms_pending (message_id) SELECT id FROM added;
    RETURN NULL;
END $$;
CREATE TRIGGER messages_pend_terms AFTER INSERT ON messages
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION message_terms_pend();

INSERT INTO message_terms_pending (message_id) SELECT id FROM messages;

CREATE TABLE message_terms_totals (
    only_row    BOOLEAN PRIMARY KEY DEFAULT true CHECK (only_row),
    documents   BIGINT NOT NULL,
    tokens      BIGINT NOT NULL
);
INSERT INTO message_terms_totals (documents, tokens) VALUES (0, 0);

CREATE FUNCTION message_terms_count_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE message_terms_totals SET documents = documents + (SELECT count(*) FROM changed),
                                    tokens = tokens + (SELECT coalesce(sum(length), 0) FROM changed);
    RETURN NULL;
END $$;
CREATE FUNCTION message_terms_count_removed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE message_terms_totals SET documents = documents - (SELECT count(*) FROM changed),
                                    tokens = tokens - (SELECT coalesce(sum(length), 0) FROM changed);
    RETURN NULL;
END $$;
CREATE TRIGGER message_terms_added AFTER INSERT ON message_terms
    REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION message_terms_count_added();
CREATE TRIGGER message_terms_removed AFTER DELETE ON message_terms
    REFERENCING OLD TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION message_terms_count_removed();

-- SQLite's hex() of a blob, as `doctor` names blobs: upper-case hexadecimal.
CREATE FUNCTION hex(bytea) RETURNS text LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE RETURN upper(encode($1, 'hex'));
