-- SPDX-License-Identifier: Apache-2.0
-- 1. The user's recent request ids and their outcomes travel with the account, so the
--    idempotency window moves with the user between OMS shards (docs/fencing.md). Stored as
--    packed little-endian struct wire_recent entries (24 bytes each, at most 16).
-- 2. The flush is epoch-fenced (docs/fencing.md): under our claim a version ahead of what we
--    expect is our own earlier flush, which a newer one overwrites. Expected versions then
--    repeat, so the ledger is keyed by the flush itself: (user, shard, epoch), and an epoch
--    is never reused by a shard.
ALTER TABLE accounts ADD COLUMN recent bytea NOT NULL DEFAULT ''::bytea;
ALTER TABLE accounts ADD CONSTRAINT accounts_recent_ok
	CHECK (length(recent) % 24 = 0 AND length(recent) <= 16 * 24);
ALTER TABLE account_flushes DROP CONSTRAINT account_flushes_pkey;
ALTER TABLE account_flushes ADD PRIMARY KEY (user_id, shard, epoch);
