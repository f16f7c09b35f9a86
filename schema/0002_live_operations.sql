-- 0002: what live operations need to change a stored conversation in place.

-- Each file's size when it was imported or last written by sessiondb. An operation that is
-- about to append to a file first checks that its size on disk is still this; when another
-- program (gptme) wrote it meanwhile, the conversation is re-read before anything is written.
ALTER TABLE entries ADD COLUMN size INTEGER;

-- Listing totals that an append must be able to carry forward without re-reading messages:
-- whether a line gptme would load as a message has been seen yet, and that first message's
-- time (NULL when it had no timestamp, so `created` falls back to the file's mtime).
ALTER TABLE conversations ADD COLUMN first_message_seen INTEGER NOT NULL DEFAULT 0;
ALTER TABLE conversations ADD COLUMN first_message_time REAL;

-- Conversations imported under schema 1: where `created` differs from `modified`, it came from
-- the first message's timestamp. Where they are equal the first message had none, or there is
-- none; a later `sessiondb import` of a changed directory recomputes both exactly.
UPDATE conversations SET first_message_seen = 1, first_message_time = created WHERE created != modified;
