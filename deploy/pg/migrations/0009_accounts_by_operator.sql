-- SPDX-License-Identifier: Apache-2.0
-- No account from nowhere (docs/security.md): accounts are opened by the operator or the
-- onboarding system (deploy/pg/accounts, or an INSERT as a role that may), never by omsd.
-- The service role reads, claims and writes back existing rows only; a hydration of a user
-- without a row is answered UNKNOWN_USER (persist/pst_db_sql.c, SQL_HYDRATE).
REVOKE INSERT ON accounts FROM omsd;
