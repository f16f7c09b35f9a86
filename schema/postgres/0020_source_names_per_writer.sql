-- Schema version 20 on PostgreSQL: a source's name and root are its writer's own.
--
-- Since version 17 each source is written by one role (`sources.writer`), but names and roots
-- were unique across all of them: a host could make a source with the name or the root another
-- host was going to need (its `hostname:path` default, or the `--source NAME` it syncs with),
-- and that host's import and sync were then refused. Two hosts whose logs roots have the same
-- path (the same user name on two machines) could not both sync either. From this version a
-- name, and a root, is unique among one writer's sources only.
--
-- How sessiondb finds a source (`store::sources`): an import or sync of a root reads it into a
-- source of the connection's role, or into one of the store's owner (which the owner may hand
-- over), never into another role's, so that no other role's names or roots stand in its way. A
-- name given to a reading command (`--source NAME`, `SOURCE:CHAT`) is the role's own source of
-- that name first; otherwise the one source of any role with it. Where several roles have a
-- source of one name, each is also named `NAME@ROLE`, and is shown so.
--
-- Invariant: no two sources of one writer share a name or a root.

ALTER TABLE sources DROP CONSTRAINT sources_name_key, DROP CONSTRAINT sources_root_key,
    ADD CONSTRAINT sources_name_key UNIQUE (writer, name), ADD CONSTRAINT sources_root_key UNIQUE (writer, root);
