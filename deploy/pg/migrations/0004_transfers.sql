-- SPDX-License-Identifier: Apache-2.0
-- Transfers idempotent for their lifetime (docs/oms.md, "Transfers for their lifetime").
-- 1. Every deposit or withdrawal an OMS shard applied, with its original outcome, keyed by
--    (user, transfer id). Written by the fenced flush (persist/pst_db_sql.c SQL_FLUSH) in
--    the same statement as the account row, first answer kept (ON CONFLICT DO NOTHING);
--    read by the persister's transfer lookup when a transfer id is no longer in the
--    resident window. Rows are kept for the life of the account: deleting one re-opens
--    that transfer id.
-- 2. accounts.xfer_id_max: the highest transfer id ever recorded for the user (the bigint of
--    the same 64 bits), flushed with the row; a transfer with a larger id needs no lookup.
--    0 for existing rows: their transfers before this migration were never recorded here
--    beyond the window they carry (recorded at their next flush).
-- 3. struct wire_recent grew from 24 to 32 bytes (WIRE_VERSION 4: a transfer entry keeps
--    its asset and amount after the version-3 prefix). Stored windows are widened in place:
--    each 24-byte entry gets 8 zero bytes (asset was reserved and zero there), which the
--    OMS reads as a transfer of unknown content.
CREATE TABLE transfers (
	user_id     bigint      NOT NULL,
	transfer_id bigint      NOT NULL, -- the client's 64-bit id, as the bigint of the same bits
	asset       integer     NOT NULL, -- 0: unknown (an entry carried over from version 3)
	amount      bigint      NOT NULL, -- > 0 deposit, < 0 withdrawal; 0: unknown
	reason      smallint    NOT NULL, -- enum wire_reason: 0 applied, else the refusal
	total       bigint      NOT NULL, -- the balance total the original reply carried
	shard       integer     NOT NULL, -- the OMS shard whose flush recorded it
	epoch       bigint      NOT NULL, -- that flush's fencing epoch
	recorded_at timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (user_id, transfer_id),
	CONSTRAINT transfers_asset_ok CHECK (asset >= 0),
	CONSTRAINT transfers_reason_ok CHECK (reason >= 0)
);

GRANT SELECT, INSERT ON transfers TO omsd;

ALTER TABLE accounts ADD COLUMN xfer_id_max bigint NOT NULL DEFAULT 0;
ALTER TABLE accounts DROP CONSTRAINT accounts_recent_ok;
UPDATE accounts SET recent = (
	SELECT coalesce(string_agg(substring(recent FROM i * 24 + 1 FOR 24) ||
				   '\x0000000000000000'::bytea, ''::bytea ORDER BY i), ''::bytea)
	FROM generate_series(0, length(recent) / 24 - 1) AS i)
WHERE length(recent) > 0;
ALTER TABLE accounts ADD CONSTRAINT accounts_recent_ok
	CHECK (length(recent) % 32 = 0 AND length(recent) <= 16 * 32);
