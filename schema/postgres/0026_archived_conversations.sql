-- 0026: conversations archived out of their logs root, as SQLite's 0026 (ops::archive).
ALTER TABLE conversations ADD COLUMN IF NOT EXISTS archived_at TEXT;
