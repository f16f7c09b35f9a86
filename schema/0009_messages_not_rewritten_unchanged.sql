-- 0009: which lines gptme would not write back unchanged, found without visiting every line.
--
-- An undo takes its fast path (the branch after it, and its backup, are prefixes of the file's
-- bytes and of its rows) only when gptme writes every line of the branch back as it is
-- (messages.rewrites_unchanged = 1, see 0008). That was decided by visiting every line of the
-- branch and its message row, so the undo of a long branch read the whole branch. Messages
-- gptme would rewrite differently are rare (gptme writes each line as it would write it back),
-- so the question is now asked from their side: this index holds exactly the messages not known
-- to be rewritten unchanged, by conversation, and each is looked up among the branch's lines.
CREATE INDEX messages_not_rewritten_unchanged ON messages (conversation_id) WHERE rewrites_unchanged IS NOT 1;
