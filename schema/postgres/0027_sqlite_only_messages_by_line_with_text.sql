-- 0027: a change to an SQLite store only (schema/0027_messages_by_line_with_text.sql: a search
-- reads a conversation's messages and their texts from SQLite's index alone); versions are one
-- sequence for both engines, and a server's store takes this one unchanged.
SELECT 1;
