-- 0006: listing indexes that match the listing's whole ORDER BY, one per `list --sort` key.
--
-- `list` orders by (modified DESC, chat_id), `--sort created` by (created DESC, chat_id), and
-- so on; `--reverse` is the exact reverse of each. The expressions are the ones
-- store::queries::listing_sql orders by, so that SQLite can use these indexes for them.
--
-- With an index on the first key only, SQLite still needed a sort for ties and, for `-n 1` or
-- `-n 2`, chose to sort the whole table instead (15 ms rather than 4 ms at 10,000
-- conversations), as it did for every `--sort` key without an index. With the full key the
-- index is read in order and the scan stops after N rows, whatever N is. The totals change on
-- every append; keeping three more index entries up to date costs an append microseconds,
-- however long the conversation.
DROP INDEX conversations_by_modified;
CREATE INDEX conversations_by_modified ON conversations (modified DESC, chat_id);
CREATE INDEX conversations_by_created ON conversations (created DESC, chat_id);
CREATE INDEX conversations_by_cost ON conversations (coalesce(total_cost, 0) DESC, chat_id);
CREATE INDEX conversations_by_tokens ON conversations (input_tokens + output_tokens DESC, chat_id);
CREATE INDEX conversations_by_messages ON conversations (message_count DESC, chat_id);
