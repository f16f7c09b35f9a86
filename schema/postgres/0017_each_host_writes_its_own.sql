-- Schema version 17 on PostgreSQL: each source is written by one role, enforced by the server.
--
-- Every source records the role that writes it (`writer`: the role that made it, by default;
-- the store's owner can hand a source to another role with an UPDATE). Row-level security then
-- lets a role other than the tables' owner read every row but write only the rows of the
-- sources it writes: the source itself, its conversations and everything under them
-- (messages, documents and their lines, events, checkpoints, files, queued paths, acknowledged
-- appends). So when each host connects with a role of its own (tools/pg/host-role.sql), no
-- host can change, add to or remove another host's conversations, whatever it runs.
--
-- What every writer shares:
-- - Attachments are stored once by content (`blobs`, `blob_chunks`): any writer may add one;
--   chunks can be added only to a blob no conversation holds yet (one being written), and a
--   blob can be removed only when no conversation of any source holds it. These are checked by
--   functions that see every row, whatever the caller may read.
-- - The search sets (`message_terms`, its waiting list and totals) are made from the messages
--   by whichever process catches up first, so any writer may write them. A role that damages
--   them changes what a search finds, never a conversation; `sessiondb doctor --reindex`
--   makes them again from the rows.
-- - `store_state`: counters any writer moves.
--
-- The owner of the tables (the role that ran this migration) is not held by these policies, as
-- PostgreSQL never holds a table's owner by them: a store whose hosts all use the owner's role
-- works as before.
--
-- Invariant: a role that is neither the owner nor a source's writer cannot insert, update or
-- delete a row of that source's conversations; sessiondb refuses such a write before it starts
-- (`StoreError::NotWriter`), and the server refuses it whatever client tries.

ALTER TABLE sources ADD COLUMN writer TEXT COLLATE "C" NOT NULL DEFAULT current_user;

-- Whether role `who` writes source `source` (or conversation, document, message; or may
-- change blob `blob`). SECURITY DEFINER: they read the tables as their owner, so a role that
-- may read only some rows (tools/pg/own-sources.sql) is judged on all of them.
CREATE FUNCTION sessiondb_writes_source(source BIGINT, who TEXT) RETURNS BOOLEAN
    LANGUAGE sql STABLE SECURITY DEFINER SET search_path FROM CURRENT
    AS $$ SELECT EXISTS (SELECT 1 FROM sources WHERE id = source AND writer = who) $$;
CREATE FUNCTION sessiondb_writes_conversation(conversation BIGINT, who TEXT) RETURNS BOOLEAN
    LANGUAGE sql STABLE SECURITY DEFINER SET search_path FROM CURRENT
    AS $$ SELECT EXISTS (SELECT 1 FROM conversations c JOIN sources s ON s.id = c.source_id WHERE c.id = conversation AND s.writer = who) $$;
CREATE FUNCTION sessiondb_writes_document(document BIGINT, who TEXT) RETURNS BOOLEAN
    LANGUAGE sql STABLE SECURITY DEFINER SET search_path FROM CURRENT
    AS $$ SELECT EXISTS (SELECT 1 FROM documents d JOIN conversations c ON c.id = d.conversation_id JOIN sources s ON s.id = c.source_id
                         WHERE d.id = document AND s.writer = who) $$;
CREATE FUNCTION sessiondb_blob_unheld(blob BIGINT) RETURNS BOOLEAN
    LANGUAGE sql STABLE SECURITY DEFINER SET search_path FROM CURRENT
    AS $$ SELECT NOT EXISTS (SELECT 1 FROM entries e JOIN blobs b ON b.sha256 = e.blob_sha256 WHERE b.id = blob) $$;

-- Every table: read by all who may read it (grants decide who may); written as below.
DO $$
DECLARE t TEXT;
BEGIN
    FOREACH t IN ARRAY ARRAY['sources', 'conversations', 'acknowledged_lines', 'messages', 'documents', 'entries', 'pending_paths',
                             'document_lines', 'events', 'event_messages', 'conv_checkpoints', 'blobs', 'blob_chunks']
    LOOP
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('CREATE POLICY sessiondb_read ON %I FOR SELECT USING (true)', t);
    END LOOP;
END $$;

CREATE POLICY sessiondb_write ON sources FOR ALL USING (writer = current_user) WITH CHECK (writer = current_user);
CREATE POLICY sessiondb_write ON conversations FOR ALL
    USING (sessiondb_writes_source(source_id, current_user)) WITH CHECK (sessiondb_writes_source(source_id, current_user));
CREATE POLICY sessiondb_write ON acknowledged_lines FOR ALL
    USING (sessiondb_writes_source(source_id, current_user)) WITH CHECK (sessiondb_writes_source(source_id, current_user));

DO $$
DECLARE t TEXT;
BEGIN
    FOREACH t IN ARRAY ARRAY['messages', 'documents', 'entries', 'pending_paths']
    LOOP
        EXECUTE format('CREATE POLICY sessiondb_write ON %I FOR ALL USING (sessiondb_writes_conversation(conversation_id, current_user))
                        WITH CHECK (sessiondb_writes_conversation(conversation_id, current_user))', t);
    END LOOP;
    FOREACH t IN ARRAY ARRAY['document_lines', 'events', 'event_messages', 'conv_checkpoints']
    LOOP
        EXECUTE format('CREATE POLICY sessiondb_write ON %I FOR ALL USING (sessiondb_writes_document(document_id, current_user))
                        WITH CHECK (sessiondb_writes_document(document_id, current_user))', t);
    END LOOP;
END $$;

CREATE POLICY sessiondb_add ON blobs FOR INSERT WITH CHECK (true);
CREATE POLICY sessiondb_remove ON blobs FOR DELETE USING (sessiondb_blob_unheld(id));
CREATE POLICY sessiondb_add ON blob_chunks FOR INSERT WITH CHECK (sessiondb_blob_unheld(blob_id));
CREATE POLICY sessiondb_remove ON blob_chunks FOR DELETE USING (sessiondb_blob_unheld(blob_id));
