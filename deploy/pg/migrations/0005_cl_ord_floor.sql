-- SPDX-License-Identifier: Apache-2.0
-- accounts.cl_ord_floor: the highest clientOrderId whose outcome the user's idempotency
-- window has forgotten (the bigint of the same 64 bits; docs/oms.md, "Sessions, rate
-- limits"). Flushed with the row and read back at hydration: a re-sent order, cancel, amend
-- or replace at or below it that the window does not hold is refused STALE_REQUEST instead
-- of executing a second time. 0 for existing rows: nothing forgotten is known for them
-- (the window they carry still answers its own entries).
ALTER TABLE accounts ADD COLUMN cl_ord_floor bigint NOT NULL DEFAULT 0;
