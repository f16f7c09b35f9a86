-- 0025: gptme's usual message metadata kept in the message row's own columns, as SQLite's
-- 0025 (store::metadata_columns). Rows a server stored before it keep their metadata as text
-- (read as before); every message written from now on takes the new form. The server keeps its
-- unique index on (conversation_id, line_sha256): a B-tree of PostgreSQL's deduplicates nothing
-- here and the queries that find a line by the first eight bytes of its digest use it as well.

ALTER TABLE messages ADD COLUMN IF NOT EXISTS metadata_shape BIGINT;
