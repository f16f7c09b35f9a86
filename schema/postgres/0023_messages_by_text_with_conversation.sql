-- 0023: the messages saying a text found with their conversations, as SQLite's 0023.

DROP INDEX messages_by_text;
CREATE INDEX messages_by_text ON messages (text_id, conversation_id);
