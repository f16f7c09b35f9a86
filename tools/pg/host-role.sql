-- Makes an existing role a host of a sessiondb store on PostgreSQL: it reads the store and
-- writes only the sources it makes (the logs roots it imports and syncs), enforced by the
-- server's row-level security (schema 17, schema/postgres/0017_each_host_writes_its_own.sql):
-- whatever it runs, it cannot add to, change or remove another host's conversations.
--
-- Run as the store's owner once the store exists (the owner's first `sessiondb import` or
-- `sync` makes the schema), once per host:
--   CREATE ROLE laptop_alice LOGIN PASSWORD '…';
--   psql "$OWNER_URL" -v role=laptop_alice -f tools/pg/host-role.sql
-- then on that host: sessiondb --db 'postgres://laptop_alice@db.example/sessiondb' sync --source alice-laptop
--
-- A source made by another role (by the owner, say, before hosts had roles of their own) is
-- written by that role until the owner hands it over:
--   UPDATE sources SET writer = 'laptop_alice' WHERE name = 'alice-laptop';
-- sessiondb refuses to write a source this role does not write, naming both roles. Schema
-- migrations alter tables, so they run as the owner: a host finding the store older than its
-- sessiondb is refused until the owner has run the newer sessiondb once.
\set ON_ERROR_STOP on
GRANT USAGE ON SCHEMA public TO :"role";
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO :"role";
GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO :"role";
ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO :"role";
ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT USAGE, SELECT ON SEQUENCES TO :"role";
