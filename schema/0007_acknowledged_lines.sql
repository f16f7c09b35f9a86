-- 0007: messages sessiondb appended, kept until no gptme can hold a copy without them.
--
-- gptme 0.35.1 reads a transcript before it takes `.lock`, so a message sessiondb appends in
-- that gap is missing from gptme's copy, and gptme's next rewrite of the file drops it. Each
-- message sessiondb appends to a branch is recorded here, by chat id (not conversation row id:
-- re-reading a conversation replaces its rows, and this must outlive that), until it is safe:
-- see `sync::acknowledged`. A record is one line, so the table stays small.
CREATE TABLE acknowledged_lines (
    chat_id     TEXT NOT NULL,
    -- The transcript it was appended to ('conversation.jsonl', 'branches/<b>.jsonl').
    path        TEXT NOT NULL,
    -- SHA-256 of role, content and timestamp: how the message is recognised in a transcript
    -- that gptme rewrote (a rewrite may re-encode the line).
    message_key BLOB NOT NULL,
    -- The exact line written, so that the message can be restored from this table alone.
    line        BLOB NOT NULL,
    -- seq of the `message_append` event written with it: an `undo` or `message_edit` event of
    -- the same branch with a higher seq explains its removal.
    event_seq   INTEGER NOT NULL,
    -- When it was appended (epoch seconds).
    appended_at REAL NOT NULL,
    PRIMARY KEY (chat_id, path, message_key)
) WITHOUT ROWID;
