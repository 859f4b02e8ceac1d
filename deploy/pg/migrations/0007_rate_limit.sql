-- SPDX-License-Identifier: Apache-2.0
-- accounts.rl_tokens, accounts.rl_tokens_ns: the user's rate-limit bucket as of the flush
-- that wrote the row, in nano-requests, and the OMS cluster time of that figure (docs/oms.md,
-- "Sessions, rate limits"). Flushed with the row and read back at hydration, so a user
-- evicted and hydrated again, or moved to another OMS shard, refills its bucket from what
-- it had left instead of getting a full one (issue 17: everything a client-visible answer
-- depends on is part of the user's saved state). The OMS clamps the figure to its tier's
-- burst and the time to its own clock. 0, 0 for existing rows: rl_tokens_ns 0 means nothing
-- was saved, and the user starts with a full bucket once, as it did before these columns.
-- A negative time is no cluster time (the hydration would refuse the row): refused on
-- write. NOT VALID: every existing row holds the default 0, so no scan under the lock.
ALTER TABLE accounts ADD COLUMN rl_tokens bigint NOT NULL DEFAULT 0,
	ADD COLUMN rl_tokens_ns bigint NOT NULL DEFAULT 0,
	ADD CONSTRAINT accounts_rl_tokens_ns_ok CHECK (rl_tokens_ns >= 0) NOT VALID;
