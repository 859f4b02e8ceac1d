-- SPDX-License-Identifier: Apache-2.0
-- accounts.egress_seq: the last per-user report sequence number the OMS sent (the bigint of
-- the same 64 bits; docs/oms.md, "Sessions, rate limits"). Flushed with the row and read back
-- at hydration, so a user evicted and hydrated again, or moved to another OMS shard,
-- continues its report sequence instead of starting again at 1 (clients drop a repeated
-- sequence number as a duplicate). 0 for existing rows: their sequence restarts once, as
-- it did before this column.
ALTER TABLE accounts ADD COLUMN egress_seq bigint NOT NULL DEFAULT 0;
