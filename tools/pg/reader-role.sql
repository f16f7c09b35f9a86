-- Makes an existing role a reader of a sessiondb store on PostgreSQL: it may read every table
-- (today's and those later versions of sessiondb add) and write none. For dashboards, a shared
-- `sessiondb serve`, an MCP server, people searching the team's history. sessiondb run as it
-- lists, shows, searches, exports and checks (doctor) as the store's owner does; a command
-- that would write is refused by the server, and sessiondb says the role may not write there.
--
-- Run as the store's owner (the role sessiondb's hosts write as), once per reader:
--   psql "$OWNER_URL" -v role=dashboard -f tools/pg/reader-role.sql
-- after making the role:
--   CREATE ROLE dashboard LOGIN PASSWORD '…';
\set ON_ERROR_STOP on
GRANT USAGE ON SCHEMA public TO :"role";
GRANT SELECT ON ALL TABLES IN SCHEMA public TO :"role";
ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT ON TABLES TO :"role";
