-- SPDX-License-Identifier: Apache-2.0
-- Client API keys (docs/security.md): one row per key, managed with `omsctl keys` as a role
-- that may write them (the migration role owns the table); nodes with
-- [sessions] keys_source = database read them every keys_refresh_ms and end at once the
-- sessions of a key revoked or removed. The secret is the HMAC key itself (it cannot be
-- hashed): only the omsd role and the table's owner read it.
CREATE TABLE api_keys (
	key_id     bigint      PRIMARY KEY,
	secret     bytea       NOT NULL,
	perms      text        NOT NULL,          -- trade,transfer,read | all
	users      text        NOT NULL,          -- * | ranges 1-1000,5000
	created_at timestamptz NOT NULL DEFAULT now(),
	updated_at timestamptz NOT NULL DEFAULT now(),
	revoked_at timestamptz,
	CONSTRAINT api_keys_id_ok CHECK (key_id > 0),
	CONSTRAINT api_keys_secret_ok CHECK (length(secret) = 32),
	CONSTRAINT api_keys_perms_ok CHECK (perms ~ '^(all|(trade|transfer|read)(,(trade|transfer|read))*)$'),
	CONSTRAINT api_keys_users_ok CHECK (users ~ '^(\*|[1-9][0-9]*(-[1-9][0-9]*)?(,[1-9][0-9]*(-[1-9][0-9]*)?)*)$')
);

GRANT SELECT ON api_keys TO omsd;
