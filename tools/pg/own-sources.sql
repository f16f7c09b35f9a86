-- Row-level security for a sessiondb store on PostgreSQL: each reader sees only the sources
-- (logs roots) named for it in `source_readers`, and every row that belongs to them:
-- conversations, their messages, branches, views, events, attachments, and the search indexes'
-- rows. The store's owner still sees and writes everything: it owns the tables, and PostgreSQL
-- does not apply their policies to it. A host's role (tools/pg/host-role.sql) sees the sources
-- it writes, and those named for it here; it writes only the former (schema 17's policies).
-- This replaces the policy by which everyone who may read the tables reads every row.
--
-- Run once as the store's owner, after sessiondb has made the schema:
--   psql "$OWNER_URL" -f tools/pg/own-sources.sql
-- then, for each person, make a reader (tools/pg/reader-role.sql) and name their sources:
--   CREATE ROLE alice LOGIN PASSWORD '…';
--   psql "$OWNER_URL" -v role=alice -f tools/pg/reader-role.sql
--   INSERT INTO source_readers (role_name, source_id) SELECT 'alice', id FROM sources WHERE name IN ('alice-laptop', 'alice-pod');
--
-- What a reader can still learn of others: the number of messages and words in the store (the
-- search's ranking statistics, `text_terms_totals`), and the schema version.
\set ON_ERROR_STOP on
BEGIN;
CREATE TABLE IF NOT EXISTS source_readers (
    role_name   TEXT NOT NULL,
    source_id   BIGINT NOT NULL REFERENCES sources(id) ON DELETE CASCADE,
    PRIMARY KEY (role_name, source_id)
);
ALTER TABLE source_readers ENABLE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS own_rows ON source_readers;
CREATE POLICY own_rows ON source_readers FOR SELECT USING (role_name = current_user);

ALTER TABLE sources ENABLE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS sessiondb_read ON sources;
DROP POLICY IF EXISTS own_sources ON sources;
CREATE POLICY own_sources ON sources FOR SELECT USING (id IN (SELECT source_id FROM source_readers) OR writer = current_user);
ALTER TABLE acknowledged_lines ENABLE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS sessiondb_read ON acknowledged_lines;
DROP POLICY IF EXISTS own_sources ON acknowledged_lines;
CREATE POLICY own_sources ON acknowledged_lines FOR SELECT USING (source_id IN (SELECT id FROM sources));
ALTER TABLE conversations ENABLE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS sessiondb_read ON conversations;
DROP POLICY IF EXISTS own_sources ON conversations;
CREATE POLICY own_sources ON conversations FOR SELECT USING (source_id IN (SELECT id FROM sources));

ALTER TABLE messages ENABLE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS sessiondb_read ON messages;
DROP POLICY IF EXISTS own_sources ON messages;
CREATE POLICY own_sources ON messages FOR SELECT USING (conversation_id IN (SELECT id FROM conversations));
ALTER TABLE documents ENABLE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS sessiondb_read ON documents;
DROP POLICY IF EXISTS own_sources ON documents;
CREATE POLICY own_sources ON documents FOR SELECT USING (conversation_id IN (SELECT id FROM conversations));
ALTER TABLE entries ENABLE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS sessiondb_read ON entries;
DROP POLICY IF EXISTS own_sources ON entries;
CREATE POLICY own_sources ON entries FOR SELECT USING (conversation_id IN (SELECT id FROM conversations));
ALTER TABLE pending_paths ENABLE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS sessiondb_read ON pending_paths;
DROP POLICY IF EXISTS own_sources ON pending_paths;
CREATE POLICY own_sources ON pending_paths FOR SELECT USING (conversation_id IN (SELECT id FROM conversations));

ALTER TABLE document_lines ENABLE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS sessiondb_read ON document_lines;
DROP POLICY IF EXISTS own_sources ON document_lines;
CREATE POLICY own_sources ON document_lines FOR SELECT USING (document_id IN (SELECT id FROM documents));
ALTER TABLE events ENABLE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS sessiondb_read ON events;
DROP POLICY IF EXISTS own_sources ON events;
CREATE POLICY own_sources ON events FOR SELECT USING (document_id IN (SELECT id FROM documents));
ALTER TABLE event_messages ENABLE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS sessiondb_read ON event_messages;
DROP POLICY IF EXISTS own_sources ON event_messages;
CREATE POLICY own_sources ON event_messages FOR SELECT USING (document_id IN (SELECT id FROM documents));
ALTER TABLE conv_checkpoints ENABLE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS sessiondb_read ON conv_checkpoints;
DROP POLICY IF EXISTS own_sources ON conv_checkpoints;
CREATE POLICY own_sources ON conv_checkpoints FOR SELECT USING (document_id IN (SELECT id FROM documents));

-- Message texts are rows of their source; the search sets' rows are those of the texts one sees
-- (any host may index a text it sees: the sets are made from the texts, 0022).
ALTER TABLE texts ENABLE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS sessiondb_read ON texts;
DROP POLICY IF EXISTS own_sources ON texts;
CREATE POLICY own_sources ON texts FOR SELECT USING (source_id IN (SELECT id FROM sources));
ALTER TABLE text_dictionaries ENABLE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS sessiondb_read ON text_dictionaries;
DROP POLICY IF EXISTS own_sources ON text_dictionaries;
CREATE POLICY own_sources ON text_dictionaries FOR SELECT USING (source_id IN (SELECT id FROM sources));
ALTER TABLE text_terms ENABLE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS own_sources ON text_terms;
CREATE POLICY own_sources ON text_terms FOR ALL USING (text_id IN (SELECT id FROM texts));
ALTER TABLE text_terms_pending ENABLE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS own_sources ON text_terms_pending;
CREATE POLICY own_sources ON text_terms_pending FOR ALL USING (text_id IN (SELECT id FROM texts));

-- Attachments are stored once by content, whoever holds them: a reader sees those its
-- conversations hold.
ALTER TABLE blobs ENABLE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS sessiondb_read ON blobs;
DROP POLICY IF EXISTS own_sources ON blobs;
CREATE POLICY own_sources ON blobs FOR SELECT USING (sha256 IN (SELECT blob_sha256 FROM entries) OR sessiondb_blob_unheld(id));
ALTER TABLE blob_chunks ENABLE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS sessiondb_read ON blob_chunks;
DROP POLICY IF EXISTS own_sources ON blob_chunks;
CREATE POLICY own_sources ON blob_chunks FOR SELECT USING (blob_id IN (SELECT id FROM blobs));

-- The views read their tables as the reader, policies and all (by default a view reads them as
-- its owner, who sees every row).
ALTER VIEW branches SET (security_invoker = true);
ALTER VIEW views SET (security_invoker = true);
ALTER VIEW attachments SET (security_invoker = true);
ALTER VIEW import_warnings SET (security_invoker = true);
COMMIT;
