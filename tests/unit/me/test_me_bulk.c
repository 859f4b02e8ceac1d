/* SPDX-License-Identifier: Apache-2.0 */
/*
 * me bulk cancels (me_bulk.c): a halt with cancel, a kill-switch or a mass GTD expiry of
 * several times events_max orders never writes over retention an OMS has not acknowledged;
 * it goes on in chunks as acks free room, every order ends with exactly its CANCELLED + DONE
 * in its stream, and a snapshot taken in the middle of a job continues identically.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "me_fixture.h"

#define B WIRE_SIDE_BUY
#define S WIRE_SIDE_SELL
#define EV_MAX 64
#define EV_RESERVE 12
#define N_ORDERS (3 * EV_MAX) /* 3 x events_max resting orders */
#define LOG_MAX 2048

static const struct me_limits bulk_limits = {
	.shard = 0,
	.streams_max = 4,
	.symbols_max = 4,
	.orders_max = 1024,
	.users_max = 64,
	.levels_max = 512,
	.levels_side_max = 256,
	.gtd_max = 512,
	.events_max = EV_MAX,
	.events_reserve = EV_RESERVE,
};

static void
bulk_setup(void)
{
	fx_setup_limits(&bulk_limits);
}

TestSuite(me_bulk, .init = bulk_setup, .fini = fx_fini);

/* ---- helpers ---- */

static struct me_stream_info
info(uint16_t shard)
{
	struct me_stream_info si;
	for (uint32_t i = 0; me_stream_info_at(fx_me, i, &si) == 0; i++)
		if (si.shard == shard)
			return si;
	cr_assert_fail("no stream for OMS shard %u", shard);
	abort();
}

/* The OMS side of a stream: acknowledge everything emitted so far. */
static void
ack_all(uint16_t shard)
{
	fx_ack(shard, info(shard).next_seq - 1);
}

/* Retention was never overrun: each stream still holds every event after its ack. */
static void
check_no_overrun(void)
{
	struct me_stream_info si;
	for (uint32_t i = 0; me_stream_info_at(fx_me, i, &si) == 0; i++) {
		cr_assert_eq(si.oldest, si.acked + 1, "stream %u: oldest %lu, acked %lu", si.shard,
			     (unsigned long)si.oldest, (unsigned long)si.acked);
		cr_assert(si.next_seq - si.oldest <= EV_MAX);
	}
	cr_assert_eq(me_counter(fx_me, ME_C_EVENTS_OVERRUN), 0);
}

/* Every event captured so far, per stream, checked to be contiguous from seq 1 (a replayed
 * event must equal the first emission byte for byte). */
struct slog {
	struct wire_me_event ev[LOG_MAX];
	uint64_t n;
};

static void
slog_gather(struct slog *log, uint16_t shard)
{
	log->n = 0;
	for (uint32_t i = 0; i < fx_events(); i++) {
		const struct wire_me_event *e = fx_ev(i);
		if (e->hdr.shard != shard)
			continue;
		cr_assert(e->seq >= 1 && e->seq <= log->n + 1, "stream %u: gap before seq %lu",
			  shard, (unsigned long)e->seq);
		cr_assert(e->seq < LOG_MAX);
		if (e->seq <= log->n) {
			cr_assert(memcmp(&log->ev[e->seq - 1], e, sizeof(*e)) == 0,
				  "replayed seq %lu differs", (unsigned long)e->seq);
			continue;
		}
		log->ev[log->n++] = *e;
	}
}

static uint16_t
shard_of(uint32_t k)
{
	return (uint16_t)(1 + k % 2);
}

/* Rest N_ORDERS sells of qty 1 over 50 price levels, alternately from OMS shards 1 and 2
 * (users 11 and 12), each stream acked as the OMS would. */
static void
rest_burst(void)
{
	for (uint32_t k = 0; k < N_ORDERS; k++) {
		fx_oms_shard = shard_of(k);
		fx_gtc(10 + fx_oms_shard, k + 1, S, 100 + 10 * (int64_t)(k % 50), 1);
		cr_assert_eq(fx_count(10 + fx_oms_shard, k + 1, WIRE_EV_RESTED), 1, "order %u", k);
		ack_all(fx_oms_shard);
	}
	cr_assert_eq(me_orders_resting(fx_me), N_ORDERS);
}

/* Every order of the burst ended with exactly one CANCELLED(cause) then its DONE, read from
 * the streams as an OMS sees them (replayed copies folded into the first emission). */
static void
check_each_cancelled_once(uint8_t cause)
{
	struct slog *log[2];
	for (uint16_t i = 0; i < 2; i++) {
		log[i] = calloc(1, sizeof(*log[i]));
		cr_assert(log[i] != NULL);
		slog_gather(log[i], (uint16_t)(i + 1));
	}
	uint32_t *cancelled = calloc(N_ORDERS, sizeof(*cancelled));
	uint32_t *done = calloc(N_ORDERS, sizeof(*done));
	cr_assert(cancelled != NULL && done != NULL);
	for (uint16_t i = 0; i < 2; i++) {
		for (uint64_t q = 0; q < log[i]->n; q++) {
			const struct wire_me_event *e = &log[i]->ev[q];
			uint64_t k = (e->oid.shard_seq & WIRE_USER_SEQ_MAX) - 1;
			if (k >= N_ORDERS)
				continue; /* not an order of the burst */
			cr_assert_eq(shard_of((uint32_t)k), i + 1);
			cr_assert_neq(e->event, WIRE_EV_FILL, "order %lu traded", (unsigned long)k);
			if (e->event == WIRE_EV_CANCELLED) {
				cr_assert_eq(e->cause, cause);
				cr_assert_eq(e->qty, 1);
				cancelled[k]++;
				/* The CANCELLED says the order is done: no DONE of its own. */
				if (e->hdr.flags & WIRE_EV_F_DONE)
					done[k]++;
			} else if (e->event == WIRE_EV_DONE) {
				done[k]++;
			}
		}
	}
	for (uint32_t k = 0; k < N_ORDERS; k++) {
		cr_assert_eq(cancelled[k], 1, "order %u", k);
		cr_assert_eq(done[k], 1, "order %u", k);
	}
	free(cancelled);
	free(done);
	free(log[0]);
	free(log[1]);
}

/* Halt with cancel, then let only stream 1 acknowledge until the job waits on stream 2. */
static void
halt_until_stalled(void)
{
	rest_burst();
	uint64_t acked2 = info(2).acked;
	cr_assert_eq(fx_status(FX_SYM, WIRE_SYM_HALTED, 1), WIRE_REASON_NONE);
	check_no_overrun();
	cr_assert_eq(me_counter(fx_me, ME_C_BULK_PENDING), 1);
	for (int round = 0; round < 100; round++) {
		uint32_t before = me_orders_resting(fx_me);
		ack_all(1);
		check_no_overrun();
		if (me_orders_resting(fx_me) == before)
			break;
	}
	cr_assert_eq(info(2).acked, acked2, "stream 2 acknowledged nothing");
	cr_assert_gt(me_orders_resting(fx_me), 0);
	cr_assert_eq(me_counter(fx_me, ME_C_BULK_PENDING), 1);
	cr_assert_gt(me_counter(fx_me, ME_C_BULK_DEFERRED), 0);
}

/* ---- tests ---- */

/* Goal: halting a symbol with 3 x events_max resting orders from two OMS shards, one of which
 * acknowledges nothing for a while, overwrites no unacknowledged event; the orders wait
 * (still LIVE, the symbol HALTED and not tradable), and acks let the job finish with every
 * order CANCELLED(HALT) + DONE once, each stream gap-free and replayable.
 * Method: events_max 64, reserve 12; 192 sells alternating shards 1 and 2; halt with cancel;
 * ack only stream 1 until the job stalls; check retention, replay stream 2, refuse a resume;
 * then ack both streams until the job is done. Without me_bulk.c the halt cancels all 192 in
 * one apply and EVENTS_OVERRUN counts the events written over stream 2's retention. */
Test(me_bulk, halt_burst_waits_for_acks)
{
	halt_until_stalled();
	/* Replay of stream 2 from its ack re-emits exactly what was sent. */
	struct slog *log = calloc(1, sizeof(*log));
	cr_assert(log != NULL);
	slog_gather(log, 2);
	uint64_t n2 = log->n;
	fx_replay(2, info(2).acked + 1);
	slog_gather(log, 2);
	cr_assert_eq(log->n, n2);
	/* Meanwhile: the orders not yet cancelled are live on a halted book. */
	cr_assert_eq(me_sym(fx_me, 0)->status, WIRE_SYM_HALTED);
	cr_assert_eq(fx_status(FX_SYM, WIRE_SYM_TRADING, 0), WIRE_REASON_BACKPRESSURE);
	cr_assert_eq(me_sym(fx_me, 0)->status, WIRE_SYM_HALTED);
	fx_oms_shard = 1;
	fx_gtc(11, 9000, B, 1000, 1);
	cr_assert_eq(fx_reject_reason(11, 9000), WIRE_REASON_HALTED);
	/* Acks from both shards let the job finish. */
	for (int round = 0; round < 200 && me_counter(fx_me, ME_C_BULK_PENDING) > 0; round++) {
		ack_all(2);
		check_no_overrun();
		ack_all(1);
		check_no_overrun();
	}
	cr_assert_eq(me_counter(fx_me, ME_C_BULK_PENDING), 0);
	cr_assert_eq(me_orders_resting(fx_me), 0);
	check_each_cancelled_once(WIRE_CAUSE_HALT);
	slog_gather(log, 1);
	slog_gather(log, 2);
	cr_assert_eq(me_counter(fx_me, ME_C_BULK_JOBS), 1);
	cr_assert_eq(me_counter(fx_me, ME_C_BULK_CANCELLED), N_ORDERS);
	cr_assert_eq(me_counter(fx_me, ME_C_HALT_CANCELLED), N_ORDERS);
	cr_assert_eq(fx_status(FX_SYM, WIRE_SYM_TRADING, 0), WIRE_REASON_NONE);
	free(log);
}

/* Goal: a tick while no stream has room cancels nothing and counts a deferral; the next ack
 * of the stream the job waits on resumes it.
 * Method: stall the halt on stream 2, tick, then ack stream 2. */
Test(me_bulk, tick_resumes_only_with_room)
{
	halt_until_stalled();
	uint32_t resting = me_orders_resting(fx_me);
	uint64_t deferred = me_counter(fx_me, ME_C_BULK_DEFERRED);
	fx_tick(fx_now + 1000);
	check_no_overrun();
	cr_assert_eq(me_orders_resting(fx_me), resting);
	cr_assert_gt(me_counter(fx_me, ME_C_BULK_DEFERRED), deferred);
	ack_all(2);
	cr_assert_lt(me_orders_resting(fx_me), resting);
	check_no_overrun();
}

/* Goal: a user kill-switch over 150 orders of one stream that acknowledges nothing cancels
 * what fits, then waits; a taker meeting the killed user's orders meanwhile never trades with
 * them (they are cancelled on the spot instead, so the order of cancels is not oldest first
 * here); the release is refused until the job ends; acks finish it, each order cancelled
 * once.
 * Method: events_max 64; user 5 (shard 1) rests 150 sells; kill; user 7 (shard 2) buys
 * across the book; then ack shard 1 until done. */
Test(me_bulk, kill_switch_user_many_orders)
{
	enum { N = 150 };
	fx_oms_shard = 1;
	for (uint32_t k = 0; k < N; k++) {
		fx_gtc(5, k + 1, S, 100 + 10 * (int64_t)(k % 40), 1);
		ack_all(1);
	}
	cr_assert_eq(fx_kill(WIRE_KILL_USER, 5, 1), WIRE_REASON_NONE);
	check_no_overrun();
	cr_assert_eq(me_counter(fx_me, ME_C_BULK_PENDING), 1);
	cr_assert_gt(me_orders_resting(fx_me), 0);
	cr_assert_eq(fx_kill(WIRE_KILL_USER, 5, 0), WIRE_REASON_BACKPRESSURE);
	/* A taker from another shard crosses the whole book: no trade with a killed user. */
	fx_oms_shard = 2;
	fx_limit(7, 1, B, 1000, 10, WIRE_TIF_IOC);
	cr_assert_eq(fx_count(7, 1, WIRE_EV_FILL), 0);
	cr_assert_eq(me_counter(fx_me, ME_C_TRADES), 0);
	check_no_overrun();
	fx_oms_shard = 1;
	for (int round = 0; round < 200 && me_counter(fx_me, ME_C_BULK_PENDING) > 0; round++) {
		ack_all(1);
		check_no_overrun();
	}
	cr_assert_eq(me_counter(fx_me, ME_C_BULK_PENDING), 0);
	cr_assert_eq(me_orders_resting(fx_me), 0);
	for (uint32_t k = 0; k < N; k++) {
		cr_assert_eq(fx_count(5, k + 1, WIRE_EV_CANCELLED), 1, "order %u", k);
		cr_assert_eq(fx_done(5, k + 1), 1, "order %u", k);
		const struct wire_me_event *c = fx_find(5, k + 1, WIRE_EV_CANCELLED, 0);
		cr_assert_eq(c->cause, WIRE_CAUSE_KILL_SWITCH);
		cr_assert_eq(c->hdr.flags, WIRE_EV_F_DONE);
	}
	cr_assert_eq(me_counter(fx_me, ME_C_KILLED), N);
	cr_assert_eq(fx_kill(WIRE_KILL_USER, 5, 0), WIRE_REASON_NONE);
}

/* Goal: a mass GTD expiry waits for acks too, and a maker past its time that is still
 * waiting for room is cancelled, not traded, when a taker meets it.
 * Method: 150 GTD sells of shard 1 expire together; tick past it without acks; a shard-2
 * taker crosses; then acks finish the expiry. */
Test(me_bulk, mass_expiry_waits_for_acks)
{
	enum { N = 150 };
	fx_oms_shard = 1;
	for (uint32_t k = 0; k < N; k++) {
		struct wire_submit s = fx_order(5, k + 1, S, WIRE_ORD_LIMIT, WIRE_TIF_GTD,
						100 + 10 * (int64_t)(k % 40), 1);
		s.expire_ns = 5000;
		fx_submit(&s);
		ack_all(1);
	}
	fx_tick(5000);
	check_no_overrun();
	cr_assert_gt(me_orders_resting(fx_me), 0);
	fx_oms_shard = 2;
	fx_limit(7, 1, B, 1000, 10, WIRE_TIF_IOC);
	cr_assert_eq(me_counter(fx_me, ME_C_TRADES), 0);
	fx_oms_shard = 1;
	for (int round = 0; round < 200 && me_orders_resting(fx_me) > 0; round++) {
		ack_all(1);
		check_no_overrun();
	}
	cr_assert_eq(me_orders_resting(fx_me), 0);
	for (uint32_t k = 0; k < N; k++) {
		cr_assert_eq(fx_count(5, k + 1, WIRE_EV_CANCELLED), 1, "order %u", k);
		cr_assert_eq(fx_find(5, k + 1, WIRE_EV_CANCELLED, 0)->cause, WIRE_CAUSE_EXPIRED);
		cr_assert_eq(fx_done(5, k + 1), 1, "order %u", k);
	}
	cr_assert_eq(me_counter(fx_me, ME_C_EXPIRED), N);
	cr_assert_gt(me_counter(fx_me, ME_C_BULK_DEFERRED), 0);
}

/* A second sink for the restored engine. */
static uint8_t *cap2;
static size_t cap2_len;

static void
capture2(void *ctx, enum wire_dest dest, const struct wire_msg_hdr *msg)
{
	(void)ctx;
	(void)dest;
	cr_assert(cap2_len + msg->length <= (size_t)1 << 20);
	memcpy(cap2 + cap2_len, msg, msg->length);
	cap2_len += msg->length;
}

/* The bytes fx_me emitted from capture index `from` on. */
static size_t
fx_bytes_since(uint32_t from, uint8_t *out)
{
	size_t n = 0;
	for (uint32_t i = from; i < fx_cap_count; i++) {
		memcpy(out + n, fx_caps[i].u.bytes, fx_caps[i].u.hdr.length);
		n += fx_caps[i].u.hdr.length;
	}
	return n;
}

/* Goal: a snapshot taken while a halt job waits restores the job (state hash equal), and the
 * restored engine then emits, for the same acks and ticks, byte for byte what the original
 * emits, ending in the same state: a new leader or a restarted replica goes on identically.
 * Method: stall the halt; snapshot; restore into a second engine; feed both the same acks and
 * ticks; compare egress and hashes after each message. */
Test(me_bulk, snapshot_mid_job_continues_identically)
{
	halt_until_stalled();
	size_t len = me_snapshot_size(fx_me);
	void *buf = malloc(len);
	cr_assert(buf != NULL);
	cr_assert_eq(me_snapshot(fx_me, buf, len), len);
	struct me *e2 = fx_new_engine(&bulk_limits);
	cr_assert_eq(me_restore(e2, buf, len), 0);
	cr_assert_eq(me_state_hash(e2), me_state_hash(fx_me));
	cr_assert_eq(me_counter(e2, ME_C_BULK_PENDING), 1);
	cap2 = malloc((size_t)1 << 20);
	uint8_t *cap1 = malloc((size_t)1 << 20);
	cr_assert(cap2 != NULL && cap1 != NULL);
	struct svc_sink sink2 = {.ctx = NULL, .emit = capture2};
	for (int round = 0; round < 200 && me_counter(fx_me, ME_C_BULK_PENDING) > 0; round++) {
		for (uint16_t shard = 1; shard <= 2; shard++) {
			struct wire_stream_ack a;
			memset(&a, 0, sizeof(a));
			wire_hdr_init(&a.hdr, WIRE_STREAM_ACK, 0);
			a.stream = shard;
			/* Shard 2 acknowledges half of what it has: smaller chunks. */
			struct me_stream_info si = info(shard);
			a.seq = shard == 1 ? si.next_seq - 1 : si.acked + (si.next_seq - 1 - si.acked) / 2;
			uint32_t from = fx_cap_count;
			cap2_len = 0;
			fx_apply(&a);
			me_apply(e2, fx_now, &a.hdr, &sink2);
			size_t n1 = fx_bytes_since(from, cap1);
			cr_assert_eq(n1, cap2_len);
			cr_assert(memcmp(cap1, cap2, n1) == 0, "egress differs after restore");
			cr_assert_eq(me_state_hash(e2), me_state_hash(fx_me));
		}
		fx_now += 10;
		uint32_t from = fx_cap_count;
		cap2_len = 0;
		fx_tick(fx_now);
		me_tick(e2, fx_now, &sink2);
		cr_assert_eq(fx_bytes_since(from, cap1), cap2_len);
		cr_assert_eq(me_state_hash(e2), me_state_hash(fx_me));
	}
	cr_assert_eq(me_counter(fx_me, ME_C_BULK_PENDING), 0);
	cr_assert_eq(me_orders_resting(e2), 0);
	check_each_cancelled_once(WIRE_CAUSE_HALT);
	free(cap1);
	free(cap2);
	free(buf);
}

/* Goal: a snapshot whose bulk job is not one an engine could hold is refused, not used.
 * Method: stall a halt, snapshot, set the job's symbol index past the configured symbols and
 * recompute the checksum: restore returns -EINVAL; the true bytes restore. */
Test(me_bulk, snapshot_bad_job_refused)
{
	halt_until_stalled();
	size_t len = me_snapshot_size(fx_me);
	uint8_t *buf = malloc(len);
	cr_assert(buf != NULL);
	cr_assert_eq(me_snapshot(fx_me, buf, len), len);
	struct me *e2 = fx_new_engine(&bulk_limits);
	/* The state header follows the 88-byte snapshot header; find the job in it. */
	size_t hdr = 88;
	size_t job_off = hdr + offsetof(struct me, bulk) - ME_RT_SIZE;
	struct me_bulk_job j;
	memcpy(&j, buf + job_off, sizeof(j));
	cr_assert_eq(j.kind, ME_BULK_BOOK);
	j.id = 3; /* past symbols_used */
	memcpy(buf + job_off, &j, sizeof(j));
	uint64_t sum = XXH3_64bits(buf + hdr, len - hdr);
	memcpy(buf + 24, &sum, sizeof(sum)); /* me_snap_hdr.checksum */
	cr_assert_eq(me_restore(e2, buf, len), -EINVAL);
	/* Unchanged, the same bytes restore. */
	j.id = 0;
	memcpy(buf + job_off, &j, sizeof(j));
	sum = XXH3_64bits(buf + hdr, len - hdr);
	memcpy(buf + 24, &sum, sizeof(sum));
	cr_assert_eq(me_restore(e2, buf, len), 0);
	cr_assert_eq(me_state_hash(e2), me_state_hash(fx_me));
	free(buf);
}
