-- 0026: conversations archived out of their logs root (`sessiondb archive`, ops::archive).
--
-- `archived_at` (the time, as `deleted_at`) marks a conversation whose directory was removed
-- from gptme's logs root on purpose, after the store was found to hold it byte for byte. It
-- stays listed, searchable and readable; a sync does not take its missing directory for a
-- deletion; `sessiondb restore` writes the directory back and clears the mark, as does a
-- sync that finds the directory changed (gptme resumed it from a copy put back by hand).
ALTER TABLE conversations ADD COLUMN archived_at TEXT;
