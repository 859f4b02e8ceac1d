-- SPDX-License-Identifier: Apache-2.0
-- The flush ledger: one row per successful flush, written in the same statement as the
-- account update. A repeated flush (after a failover or a lost answer) finds its own row here
-- even when later flushes have moved the account on, so it is reported OK, not CONFLICT.
-- Rows older than any possible repeat (days) may be deleted by the migration role.
CREATE TABLE account_flushes (
	user_id      bigint      NOT NULL,
	base_version bigint      NOT NULL, -- the version the flush replaced (CAS expected)
	shard        integer     NOT NULL, -- flushing OMS shard
	epoch        bigint      NOT NULL, -- its fencing epoch for the user
	flushed_at   timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (user_id, base_version)
);

GRANT SELECT, INSERT ON account_flushes TO omsd;
