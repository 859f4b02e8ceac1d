-- SPDX-License-Identifier: Apache-2.0
-- The system of record for accounts (ARCHITECTURE.md §1, §6). One row per user: the
-- quiescent state an OMS actor flushes, its version (the CAS), and the owner claim (fencing).
CREATE TABLE accounts (
	user_id          bigint      PRIMARY KEY,
	user_seq         bigint      NOT NULL DEFAULT 0,  -- last orderId sequence used
	tier             smallint    NOT NULL DEFAULT 0,  -- rate-limit tier
	version          bigint      NOT NULL DEFAULT 0,  -- +1 per flush; the CAS compares it
	owner_shard      integer,                         -- OMS shard holding the claim, NULL: free
	owner_epoch      bigint,                          -- that shard's fencing epoch at claim
	last_flush_shard integer,                         -- who wrote the current version
	last_flush_epoch bigint,
	assets           integer[]   NOT NULL DEFAULT '{}', -- asset ids
	totals           bigint[]    NOT NULL DEFAULT '{}', -- minor units, same order as assets
	updated_at       timestamptz NOT NULL DEFAULT now(),
	CONSTRAINT accounts_seq_ok CHECK (user_seq >= 0),
	CONSTRAINT accounts_version_ok CHECK (version >= 0),
	CONSTRAINT accounts_tier_ok CHECK (tier BETWEEN 0 AND 255),
	CONSTRAINT accounts_claim_whole CHECK ((owner_shard IS NULL) = (owner_epoch IS NULL)),
	CONSTRAINT accounts_arrays_match CHECK (cardinality(assets) = cardinality(totals)),
	CONSTRAINT accounts_arrays_small CHECK (cardinality(assets) <= 16),
	CONSTRAINT accounts_arrays_flat CHECK (array_ndims(assets) IS NULL OR array_ndims(assets) = 1),
	CONSTRAINT accounts_assets_valid CHECK (0 < ALL (assets)),
	CONSTRAINT accounts_totals_nonneg CHECK (0 <= ALL (totals))
);

GRANT SELECT, INSERT, UPDATE ON accounts TO omsd;
