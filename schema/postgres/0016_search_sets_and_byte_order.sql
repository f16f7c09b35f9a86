-- Schema version 16 on PostgreSQL: the search indexes made by sessiondb, SQLite's hex(), and
-- text in byte order (below).
--
-- The search indexes: each message's words and trigrams,
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

-- Text compares and sorts as SQLite compares it (byte by byte: code point order in UTF-8),
-- whatever the database's locale: every text column takes the "C" collation, so that `list`,
-- its ties and pages, and every name and path order, are the same on both engines (an en_US
-- database sorts `a_b` before `aB`, SQLite after). The views over these columns are made again
-- as they were. Only sessiondb's own tables and views (those of 0015 and of this file) are
-- touched: whatever else the schema holds (an extension's views, such as pg_stat_statements',
-- another program's tables) is left as it is.
DO $$
DECLARE
    v record;
    c record;
BEGIN
    CREATE TEMP TABLE sessiondb_saved_views ON COMMIT DROP AS
        SELECT k.relname AS name, pg_get_viewdef(k.oid) AS definition
        FROM pg_class k JOIN pg_namespace n ON n.oid = k.relnamespace
        WHERE k.relkind = 'v' AND n.nspname = current_schema()
          AND k.relname IN ('attachments', 'branches', 'import_warnings', 'views');
    FOR v IN SELECT name FROM sessiondb_saved_views LOOP
        EXECUTE format('DROP VIEW %I', v.name);
    END LOOP;
    FOR c IN
        SELECT col.table_name, col.column_name
        FROM information_schema.columns col JOIN pg_tables t ON t.tablename = col.table_name AND t.schemaname = col.table_schema
        WHERE col.table_schema = current_schema() AND col.data_type = 'text'
          AND col.table_name IN ('acknowledged_lines', 'blob_chunks', 'blobs', 'conv_checkpoints', 'conversations',
              'document_lines', 'documents', 'entries', 'event_messages', 'events', 'messages', 'pending_paths',
              'sources', 'store_state', 'message_terms', 'message_terms_pending', 'message_terms_totals')
    LOOP
        EXECUTE format('ALTER TABLE %I ALTER COLUMN %I TYPE text COLLATE "C"', c.table_name, c.column_name);
    END LOOP;
    FOR v IN SELECT name, definition FROM sessiondb_saved_views LOOP
        EXECUTE format('CREATE VIEW %I AS %s', v.name, v.definition);
    END LOOP;
END $$;
