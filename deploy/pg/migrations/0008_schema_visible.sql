-- SPDX-License-Identifier: Apache-2.0
-- The service role reads schema_migrations: omsd checks at start and on every connection
-- that the database holds exactly the migrations it was built for (persist/pst_db_sql.c,
-- PST_SCHEMA_VERSION; docs/persist.md, "Schema version"), and refuses one that lacks a
-- migration it needs or holds one it does not know, naming both versions.
GRANT SELECT ON schema_migrations TO omsd;
