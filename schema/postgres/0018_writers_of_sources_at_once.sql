-- Schema version 18 on PostgreSQL: writers of different sources write at once; token sums that
-- do not overflow.
--
-- A write scoped to one source now holds that source's write lock, not the whole store's
-- (`store::sql::WRITE_LOCK`), so hosts syncing their own sources write side by side. What they
-- still share is made so that they do not queue behind one another:
-- - The search totals were one row, which every writer indexing its messages updated and so
--   kept locked until it committed. They are now kept in slots, one per server process (its
--   pid, modulo 1024): a writer adds its counts to its own slot, and the totals are the sums
--   (the view `message_terms_totals`, read as before).
-- - Writers take the waiting messages they index with `FOR UPDATE SKIP LOCKED`, each its own
--   (`store::message_terms::index_waiting`).
--
-- And the listing's order by tokens is indexed on their sum as numeric: token counts saturate
-- at bigint's maximum, and version 15's bigint sum made such a conversation fail to import
-- ("bigint out of range"); SQLite makes the same sum a float.
--
-- Invariant (as in version 16): the sums of `message_terms_counts` are the count and the summed
-- lengths of message_terms' rows.

CREATE TABLE message_terms_counts (
    slot        INT PRIMARY KEY,
    documents   BIGINT NOT NULL,
    tokens      BIGINT NOT NULL
);
INSERT INTO message_terms_counts (slot, documents, tokens) SELECT 0, documents, tokens FROM message_terms_totals;
DROP TABLE message_terms_totals;
CREATE VIEW message_terms_totals AS
    SELECT coalesce(sum(documents), 0)::bigint AS documents, coalesce(sum(tokens), 0)::bigint AS tokens FROM message_terms_counts;

CREATE OR REPLACE FUNCTION message_terms_count_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO message_terms_counts AS t (slot, documents, tokens)
        SELECT pg_backend_pid() % 1024, count(*), coalesce(sum(length), 0) FROM changed
        ON CONFLICT (slot) DO UPDATE SET documents = t.documents + excluded.documents, tokens = t.tokens + excluded.tokens;
    RETURN NULL;
END $$;
CREATE OR REPLACE FUNCTION message_terms_count_removed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO message_terms_counts AS t (slot, documents, tokens)
        SELECT pg_backend_pid() % 1024, -count(*), -coalesce(sum(length), 0) FROM changed
        ON CONFLICT (slot) DO UPDATE SET documents = t.documents + excluded.documents, tokens = t.tokens + excluded.tokens;
    RETURN NULL;
END $$;

DROP INDEX conversations_by_tokens;
CREATE INDEX conversations_by_tokens ON conversations ((input_tokens::numeric + output_tokens) DESC, chat_id);
