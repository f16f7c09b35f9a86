-- 0023: the messages saying a text found with their conversations, from the index alone.
--
-- A search for a word in most conversations reaches every message saying each matching text
-- (to count them, to group them by conversation); `messages_by_text` gave the message's id only,
-- and each conversation id was a read of the message's whole row, most of a common word's
-- search. The index now holds the conversation id too: the same rows, a few bytes more each.

DROP INDEX messages_by_text;
CREATE INDEX messages_by_text ON messages (text_id, conversation_id);
