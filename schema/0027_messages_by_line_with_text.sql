-- 0027: a conversation's messages and their texts read from one index.
--
-- A search's page of conversations reads each one's messages with their text ids (to count the
-- matches among them, to show the best ones): `messages_by_line` found them by conversation and
-- each text id was a read of the message's whole row, most of a large page's time. The index
-- now holds the text id too (after the eight bytes of the line's digest it is looked up by): a
-- byte or three more a row, 2% of the index, and those reads come from the index alone.

DROP INDEX messages_by_line;
CREATE INDEX messages_by_line ON messages (conversation_id, substr(line_sha256, 1, 8), text_id);
