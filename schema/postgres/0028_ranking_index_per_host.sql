-- 0028: what each host's ranking index (store::ranking, a tantivy index in the host's cache
-- directory) needs to follow a server's texts.
--
-- SQLite's ranking index follows the texts by their ids (0012, 0022): one writer at a time
-- commits them, in the order of their ids. A server's writers commit at once, so a text can
-- become visible after one with a higher id, and an index that went by ids would never see it.
-- Here each text records the transaction that added it (`added`: a 64-bit transaction id,
-- which never wraps around), and a host's index keeps the oldest transaction still running when
-- it last caught up: every text added by an older one is in the index, or never committed. A
-- deleted text is logged with the transaction that deleted it, for the same reason.
--
-- Invariant: `added` is the id of the transaction that inserted the row (set by the trigger
-- below whatever the writer sent, kept on update), and every text deleted since this
-- migration has a row in `ranking_deletions` with the id of the transaction that deleted it;
-- no role but the tables' owner writes that log directly.

ALTER TABLE texts ADD COLUMN added xid8 NOT NULL DEFAULT pg_current_xact_id();
CREATE INDEX texts_by_added ON texts (added);

CREATE FUNCTION texts_stamp_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        NEW.added := pg_current_xact_id();
    ELSE
        NEW.added := OLD.added;
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER texts_stamp_added BEFORE INSERT OR UPDATE ON texts
    FOR EACH ROW EXECUTE FUNCTION texts_stamp_added();

CREATE TABLE ranking_deletions (
    text_id     BIGINT NOT NULL,
    deleted     xid8 NOT NULL DEFAULT pg_current_xact_id()
);
CREATE INDEX ranking_deletions_by_deleted ON ranking_deletions (deleted);
-- SECURITY DEFINER: written as the owner whoever deletes, and by no one else.
CREATE FUNCTION ranking_deletions_log() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
BEGIN
    INSERT INTO ranking_deletions (text_id) SELECT id FROM gone;
    RETURN NULL;
END $$;
CREATE TRIGGER texts_log_deletions AFTER DELETE ON texts
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION ranking_deletions_log();
ALTER TABLE ranking_deletions ENABLE ROW LEVEL SECURITY;
CREATE POLICY sessiondb_read ON ranking_deletions FOR SELECT USING (true);
