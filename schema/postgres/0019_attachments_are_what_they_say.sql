-- Schema version 19 on PostgreSQL: an attachment is what its SHA-256 says, whoever stored it
-- first.
--
-- Attachments (`blobs`, `blob_chunks`) are stored once by content, under their SHA-256, and
-- shared by the sources of every role (version 17). The key is only a claim, and any role may
-- make it: a host could store its own bytes under the SHA-256 of a file another host attaches
-- later, and that host's conversation would then hold them. From this version:
--
-- - Each blob records the role that wrote it (`writer`; NULL for the blobs written before) and
--   the transaction that made it (`made_in`), both as the server sets them: a role inserts a
--   blob as itself, in its own transaction, and no role changes a blob row afterwards.
-- - Its chunks are written in that transaction, by that role, and never after: no role but
--   the tables' owner may add, change or remove a chunk of a blob that already exists (they go
--   with their blob, by the foreign key's cascade, when a blob no conversation holds is
--   removed). So once a transaction has seen a blob whole, every later one sees the same bytes.
-- - `blob_vouchers` holds, per role, the blobs that role has read back whole and found to hash
--   to their key. A role writes and sees its own vouchers only.
--
-- sessiondb stores a file whose blob exists already by holding that blob (the entry's key then
-- locks its row until the transaction ends, so that it cannot be removed meanwhile), and trusts
-- it without reading it when its role wrote it or vouched for it; otherwise it reads it back
-- once, hashing it, and vouches for it, or, finding other bytes, puts the file's own in their
-- place when no other conversation holds them and refuses the file when one does
-- (`store::blobs`). Every read of a blob checks its bytes against its key, and `doctor` checks
-- every blob.
--
-- Invariant: a blob that role R wrote or holds a voucher for held, when R's sessiondb wrote or
-- read it, exactly the bytes its SHA-256 names, and still does.

ALTER TABLE blobs ADD COLUMN writer TEXT COLLATE "C";
ALTER TABLE blobs ALTER COLUMN writer SET DEFAULT current_user;
ALTER TABLE blobs ADD COLUMN made_in xid8;
ALTER TABLE blobs ALTER COLUMN made_in SET DEFAULT pg_current_xact_id();

-- Whether role `who` is making blob `blob` in this transaction (SECURITY DEFINER, as version
-- 17's: the blob may be one the caller cannot read).
CREATE FUNCTION sessiondb_makes_blob(blob BIGINT, who TEXT) RETURNS BOOLEAN
    LANGUAGE sql STABLE SECURITY DEFINER SET search_path FROM CURRENT
    AS $$ SELECT EXISTS (SELECT 1 FROM blobs WHERE id = blob AND writer = who AND made_in = pg_current_xact_id()) $$;

DROP POLICY sessiondb_add ON blobs;
CREATE POLICY sessiondb_add ON blobs FOR INSERT WITH CHECK (writer = current_user AND made_in = pg_current_xact_id());
DROP POLICY sessiondb_add ON blob_chunks;
CREATE POLICY sessiondb_add ON blob_chunks FOR INSERT WITH CHECK (sessiondb_makes_blob(blob_id, current_user));
DROP POLICY sessiondb_remove ON blob_chunks;

CREATE TABLE blob_vouchers (
    blob_id     BIGINT NOT NULL REFERENCES blobs(id) ON DELETE CASCADE,
    role_name   TEXT COLLATE "C" NOT NULL DEFAULT current_user,
    PRIMARY KEY (blob_id, role_name)
);
ALTER TABLE blob_vouchers ENABLE ROW LEVEL SECURITY;
CREATE POLICY sessiondb_own ON blob_vouchers FOR ALL USING (role_name = current_user) WITH CHECK (role_name = current_user);
