/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Client sessions (auth/auth.h): the signature, the session key, the logon rules (key,
 * signature, window, nonce, session id), the frame rules (MAC, seq, rate), entitlements,
 * key revocation, idleness and the key file's errors.
 */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <string.h>

#include "auth/auth.h"

#define SEC UINT64_C(1000000000)
#define T0 (UINT64_C(1700000000) * SEC) /* a wall clock */
#define M0 (UINT64_C(5000) * SEC)        /* a monotonic clock */

static const char KEYS[] =
	"# id secret perms users\n"
	"1001 0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20 trade,read 1-100,500\n"
	"1002 2222222222222222222222222222222222222222222222222222222222222222 all *\n"
	"1003 3333333333333333333333333333333333333333333333333333333333333333 transfer 7 revoked\n";

static struct auth_key key_mem[8];
static struct auth_keys keys = { .keys = key_mem, .cap = 8 };
static struct auth_sessions t;

static void
setup(void)
{
	char err[256];
	cr_assert(eq(int, auth_keys_parse(KEYS, strlen(KEYS), "keys", &keys, err, sizeof(err)), 0),
		  "%s", err);
	struct auth_config cfg = {
		.sessions_max = 8,
		.nonces_max = 64,
		.logon_window_ns = 5 * SEC,
		.heartbeat_ms = 1000,
		.msgs_per_window = 10,
		.rate_window_ns = SEC,
		.warn_pct = 80,
	};
	cr_assert(eq(int, auth_sessions_init(&t, &cfg, &keys), 0));
}

static void
teardown(void)
{
	auth_sessions_free(&t);
}

static struct wire_logon
logon(uint64_t key_id, uint32_t session, uint64_t nonce, uint64_t ts)
{
	struct wire_logon m;
	memset(&m, 0, sizeof(m));
	wire_hdr_init(&m.hdr, WIRE_LOGON, 0);
	m.key_id = key_id;
	m.ts_ns = ts;
	m.nonce = nonce;
	m.session_id = session;
	m.heartbeat_ms = 1000;
	const struct auth_key *k = auth_keys_find(&keys, key_id);
	if (k != NULL)
		auth_logon_sign(k->secret, &m);
	return m;
}

/* A signed session frame of `extra` heartbeats after the SESSION_HDR. */
struct frame {
	uint64_t buf[64];
	uint32_t len;
	const struct wire_session_hdr *sh;
};

static void
session_frame(struct frame *f, const struct wire_key *key, uint32_t session, uint64_t seq,
	      uint32_t extra)
{
	struct wire_builder b;
	struct wire_session_hdr sh;
	memset(&sh, 0, sizeof(sh));
	wire_hdr_init(&sh.hdr, WIRE_SESSION_HDR, 0);
	sh.session_id = session;
	sh.seq = seq;
	wire_builder_init(&b, f->buf, sizeof(f->buf), session);
	wire_builder_session(&b);
	cr_assert(eq(int, wire_builder_add(&b, &sh), 0));
	for (uint32_t i = 0; i < extra; i++) {
		struct wire_heartbeat hb;
		memset(&hb, 0, sizeof(hb));
		wire_hdr_init(&hb.hdr, WIRE_HEARTBEAT, 0);
		hb.session_id = session;
		cr_assert(eq(int, wire_builder_add(&b, &hb), 0));
	}
	f->len = wire_builder_finish(&b, key);
	const struct wire_msg_hdr *msgs[8];
	uint32_t count, sender;
	cr_assert(eq(int, wire_session_frame_decode(f->buf, f->len, msgs, 8, &count, &sender),
		     WIRE_E_OK));
	f->sh = (const void *)msgs[0];
}

static struct auth_session *
logged_on(uint64_t key_id, uint32_t session, uint64_t nonce)
{
	struct wire_logon m = logon(key_id, session, nonce, T0);
	struct auth_session *s;
	cr_assert(eq(u16, auth_logon(&t, &m, T0, M0, 42, &s), 0));
	return s;
}

TestSuite(auth, .init = setup, .fini = teardown);

/* Goal: the signed bytes and the frame key are the documented ones (docs/security.md),
 * pinned by vectors computed independently (Python's hmac over the canonical layout). */
Test(auth, signature_and_session_key_vectors)
{
	struct wire_logon m = logon(1001, 77, UINT64_C(0x0123456789abcdef), T0);
	static const uint8_t want[32] = {
		0x56, 0xa1, 0xf4, 0x44, 0x74, 0x1c, 0xf1, 0x38, 0xff, 0x84, 0x77,
		0x2c, 0xa0, 0xda, 0x56, 0x75, 0x94, 0xbb, 0x47, 0xc4, 0x7c, 0x0b,
		0x2a, 0x5e, 0x5a, 0x5f, 0x2c, 0x36, 0x36, 0x5e, 0xdf, 0xc3,
	};
	cr_assert(eq(int, memcmp(m.sig, want, 32), 0));
	struct wire_key k;
	auth_session_key(auth_keys_find(&keys, 1001)->secret, &m, &k);
	cr_assert(eq(u64, k.k0, UINT64_C(0x6eb421d39b6078bd)));
	cr_assert(eq(u64, k.k1, UINT64_C(0xed760f0e55de5d13)));
}

/* Goal: every signed field is covered: changing any one breaks the signature. */
Test(auth, signature_covers_every_field)
{
	const uint8_t *sec = auth_keys_find(&keys, 1001)->secret;
	struct wire_logon m = logon(1001, 77, 5, T0);
	cr_assert(auth_logon_verify(sec, &m));
	for (int f = 0; f < 6; f++) {
		struct wire_logon x = m;
		switch (f) {
		case 0: x.key_id ^= 1; break;
		case 1: x.ts_ns ^= 1; break;
		case 2: x.nonce ^= 1; break;
		case 3: x.session_id ^= 1; break;
		case 4: x.heartbeat_ms ^= 1; break;
		case 5: x.sig[31] ^= 1; break;
		}
		cr_assert(not(auth_logon_verify(sec, &x)), "field %d", f);
	}
	/* Another key's secret does not verify it either. */
	cr_assert(not(auth_logon_verify(auth_keys_find(&keys, 1002)->secret, &m)));
}

/* Goal: the logon refusals, each with its own reason and counter, and nothing opened. */
Test(auth, logon_refusals)
{
	struct auth_session *s;
	struct wire_logon m = logon(9999, 1, 1, T0); /* unknown key: unsigned */
	cr_assert(eq(u16, auth_logon(&t, &m, T0, M0, 0, &s), WIRE_REASON_BAD_KEY));
	m = logon(1001, 1, 1, T0);
	m.sig[0] ^= 0x80;
	cr_assert(eq(u16, auth_logon(&t, &m, T0, M0, 0, &s), WIRE_REASON_BAD_SIGNATURE));
	m = logon(1001, 1, 2, T0 - 5 * SEC - 1);
	cr_assert(eq(u16, auth_logon(&t, &m, T0, M0, 0, &s), WIRE_REASON_STALE_LOGON));
	m = logon(1001, 1, 3, T0 + 5 * SEC + 1); /* from the future too */
	cr_assert(eq(u16, auth_logon(&t, &m, T0, M0, 0, &s), WIRE_REASON_STALE_LOGON));
	m = logon(1003, 1, 4, T0);
	cr_assert(eq(u16, auth_logon(&t, &m, T0, M0, 0, &s), WIRE_REASON_KEY_REVOKED));
	cr_assert(eq(u32, t.count, 0));
	cr_assert(eq(u64, t.c[AUTH_C_REF_BAD_KEY], 1));
	cr_assert(eq(u64, t.c[AUTH_C_REF_BAD_SIGNATURE], 1));
	cr_assert(eq(u64, t.c[AUTH_C_REF_STALE], 2));
	cr_assert(eq(u64, t.c[AUTH_C_REF_REVOKED], 1));
	/* At the edge of the window it is accepted. */
	m = logon(1001, 1, 5, T0 - 5 * SEC);
	cr_assert(eq(u16, auth_logon(&t, &m, T0, M0, 0, &s), 0));
	cr_assert(eq(u64, s->next_seq, 1));
}

/* Goal: a nonce is refused while a logon with it could still be in the window, and forgotten
 * after; a refused (unsigned) logon does not spend a nonce. */
Test(auth, nonce_reuse)
{
	struct auth_session *s;
	struct wire_logon bad = logon(1001, 1, 77, T0);
	bad.sig[3] ^= 1;
	cr_assert(eq(u16, auth_logon(&t, &bad, T0, M0, 0, &s), WIRE_REASON_BAD_SIGNATURE));
	struct wire_logon m = logon(1001, 1, 77, T0);
	cr_assert(eq(u16, auth_logon(&t, &m, T0, M0, 0, &s), 0));
	/* The same LOGON replayed (another session id would change the signature). */
	cr_assert(eq(u16, auth_logon(&t, &m, T0 + SEC, M0, 0, &s), WIRE_REASON_NONCE_REUSED));
	/* Another key may use the same nonce. */
	struct wire_logon o = logon(1002, 2, 77, T0);
	cr_assert(eq(u16, auth_logon(&t, &o, T0, M0, 0, &s), 0));
	/* Ten seconds on, the replay is stale before its nonce is looked at. */
	cr_assert(eq(u16, auth_logon(&t, &m, T0 + 10 * SEC + 1, M0, 0, &s),
		     WIRE_REASON_STALE_LOGON));
	cr_assert(eq(u64, t.c[AUTH_C_REF_NONCE], 1));
}

/* Goal: a session id belongs to one key; the same key logging on again replaces its
 * session (a client restarting), with a fresh seq and key. */
Test(auth, session_id_in_use_and_replaced)
{
	struct auth_session *s = logged_on(1001, 7, 1);
	struct wire_key k1 = s->frame_key;
	s->next_seq = 50;
	struct wire_logon m = logon(1002, 7, 2, T0);
	cr_assert(eq(u16, auth_logon(&t, &m, T0, M0, 0, &s), WIRE_REASON_SESSION_IN_USE));
	m = logon(1001, 7, 3, T0);
	cr_assert(eq(u16, auth_logon(&t, &m, T0, M0, 0, &s), 0));
	cr_assert(eq(u64, s->next_seq, 1));
	cr_assert(s->frame_key.k0 != k1.k0 || s->frame_key.k1 != k1.k1);
	cr_assert(eq(u32, t.count, 1));
	cr_assert(eq(u64, t.c[AUTH_C_LOGONS_REPLACED], 1));
}

/* Goal: a frame an io lcore proved (auth_frame_proven) skips the MAC check only when the key
 * it was proved under is the session's own now; a stale key (the session re-keyed by a new
 * LOGON since), another session's key or none, and the MAC is checked as before. */
Test(auth, frame_proven_only_under_the_session_key)
{
	struct auth_session *s = logged_on(1001, 5, 1), *got;
	struct wire_key key = s->frame_key, other = { 1, 2 };
	struct frame f;
	bool warn;

	/* Sealed under another key: the io lcore's "proof" under that key proves nothing. */
	session_frame(&f, &other, 5, 1, 0);
	cr_assert(eq(u16, auth_frame_proven(&t, f.buf, f.len, f.sh, 0, M0, 1, &other, &got,
					    &warn), WIRE_REASON_BAD_SIGNATURE));
	cr_assert(eq(u64, t.c[AUTH_C_MAC_PROVEN], 0));
	/* Proved under the session's key: taken without a second check (the tag is broken
	 * here to show that it is not looked at again). */
	session_frame(&f, &key, 5, 1, 0);
	((uint8_t *)f.buf)[f.len - 1] ^= 1;
	cr_assert(eq(u16, auth_frame_proven(&t, f.buf, f.len, f.sh, 0, M0, 1, &key, &got,
					    &warn), 0));
	cr_assert(eq(u64, t.c[AUTH_C_MAC_PROVEN], 1));
	cr_assert(eq(u64, got->next_seq, 2));
	/* A new LOGON re-keys the session: a frame proved under the old key is checked, and
	 * its MAC under the old key fails. */
	struct wire_logon m = logon(1001, 5, 2, T0);
	cr_assert(eq(u16, auth_logon(&t, &m, T0, M0, 0, &s), 0));
	session_frame(&f, &key, 5, 1, 0);
	cr_assert(eq(u16, auth_frame_proven(&t, f.buf, f.len, f.sh, 0, M0, 1, &key, &got,
					    &warn), WIRE_REASON_BAD_SIGNATURE));
	/* No proof: the ordinary check, which the new key passes. */
	session_frame(&f, &s->frame_key, 5, 1, 0);
	cr_assert(eq(u16, auth_frame_proven(&t, f.buf, f.len, f.sh, 0, M0, 1, NULL, &got,
					    &warn), 0));
	cr_assert(eq(u64, t.c[AUTH_C_MAC_PROVEN], 1));
}

/* Goal: sessions_max is a hard bound (CAPACITY), and ending one makes room. */
Test(auth, capacity)
{
	for (uint32_t i = 1; i <= 8; i++)
		(void)logged_on(1002, i, i);
	struct auth_session *s;
	struct wire_logon m = logon(1002, 9, 9, T0);
	cr_assert(eq(u16, auth_logon(&t, &m, T0, M0, 0, &s), WIRE_REASON_CAPACITY));
	auth_session_end(&t, auth_session_find(&t, 4));
	m = logon(1002, 9, 10, T0);
	cr_assert(eq(u16, auth_logon(&t, &m, T0, M0, 0, &s), 0));
	for (uint32_t i = 1; i <= 9; i++)
		cr_assert(eq(int, auth_session_find(&t, i) != NULL, i != 4), "session %u", i);
}

/* Goal: frames: an unknown session, a bad MAC (the session's key, not another's), a gap
 * and a repeat are refused and leave the seq alone; in-order frames advance it. */
Test(auth, frame_rules)
{
	struct auth_session *s = logged_on(1001, 5, 1), *got;
	struct wire_key key = s->frame_key, other = { 1, 2 };
	struct frame f;
	bool warn;

	session_frame(&f, &key, 6, 1, 0);
	cr_assert(eq(u16, auth_frame(&t, f.buf, f.len, f.sh, 0, M0, 1, &got, &warn),
		     WIRE_REASON_UNKNOWN_SESSION));
	session_frame(&f, &other, 5, 1, 0);
	cr_assert(eq(u16, auth_frame(&t, f.buf, f.len, f.sh, 0, M0, 1, &got, &warn),
		     WIRE_REASON_BAD_SIGNATURE));
	session_frame(&f, &key, 5, 2, 0);
	cr_assert(eq(u16, auth_frame(&t, f.buf, f.len, f.sh, 0, M0, 1, &got, &warn),
		     WIRE_REASON_SEQ_GAP));
	cr_assert(eq(u64, got->next_seq, 1));
	session_frame(&f, &key, 5, 1, 0);
	cr_assert(eq(u16, auth_frame(&t, f.buf, f.len, f.sh, 0, M0, 99, &got, &warn), 0));
	cr_assert(eq(u64, got->next_seq, 2));
	cr_assert(eq(u64, got->peer, 99));
	cr_assert(eq(u16, auth_frame(&t, f.buf, f.len, f.sh, 0, M0, 1, &got, &warn),
		     WIRE_REASON_SEQ_REPEAT));
	/* One flipped byte anywhere in a proven frame breaks its MAC. */
	session_frame(&f, &key, 5, 2, 1);
	((uint8_t *)f.buf)[f.len - 20] ^= 4;
	cr_assert(eq(u16, auth_frame(&t, f.buf, f.len, f.sh, 1, M0, 1, &got, &warn),
		     WIRE_REASON_BAD_SIGNATURE));
	cr_assert(eq(u64, t.c[AUTH_C_REF_UNKNOWN_SESSION], 1));
	cr_assert(eq(u64, t.c[AUTH_C_REF_BAD_MAC], 2));
	cr_assert(eq(u64, t.c[AUTH_C_REF_SEQ_GAP], 1));
	cr_assert(eq(u64, t.c[AUTH_C_REF_SEQ_REPEAT], 1));
	cr_assert(eq(u64, t.c[AUTH_C_FRAMES], 1));
}

/* Goal: messaging control: a warning once at 80 % of the window's budget, refusals past it
 * (the seq does not advance), and a new window starts afresh. */
Test(auth, message_rate)
{
	struct auth_session *s = logged_on(1001, 5, 1), *got;
	struct frame f;
	bool warn;
	uint64_t seq = 1;
	for (int i = 0; i < 4; i++) {
		session_frame(&f, &s->frame_key, 5, seq, 2);
		cr_assert(eq(u16, auth_frame(&t, f.buf, f.len, f.sh, 2, M0 + 1000u * (unsigned)i, 0,
					     &got, &warn), 0));
		cr_assert(eq(int, warn, i == 3), "frame %d", i); /* 8 of 10 */
		seq++;
	}
	session_frame(&f, &s->frame_key, 5, seq, 3);
	cr_assert(eq(u16, auth_frame(&t, f.buf, f.len, f.sh, 3, M0 + 5000, 0, &got, &warn),
		     WIRE_REASON_MSG_RATE));
	cr_assert(eq(u64, got->next_seq, seq));
	cr_assert(eq(u16, auth_frame(&t, f.buf, f.len, f.sh, 3, M0 + SEC, 0, &got, &warn), 0));
	cr_assert(eq(u64, t.c[AUTH_C_RATE_WARNED], 1));
	cr_assert(eq(u64, t.c[AUTH_C_REF_RATE], 1));
}

static struct wire_msg_hdr
hdr_of(uint16_t type)
{
	struct wire_msg_hdr h;
	wire_hdr_init(&h, type, 0);
	return h;
}

/* Goal: entitlements: users by range, permissions by message type; admin and Raft types
 * are never a session's to send. */
Test(auth, entitlements)
{
	struct auth_session *s = logged_on(1001, 5, 1); /* trade,read 1-100,500 */
	struct wire_msg_hdr no = hdr_of(WIRE_NEW_ORDER), tr = hdr_of(WIRE_TRANSFER),
			    rr = hdr_of(WIRE_REPORT_REPLAY), ks = hdr_of(WIRE_KILL_SWITCH),
			    hb = hdr_of(WIRE_HEARTBEAT);
	cr_assert(eq(u16, auth_check_msg(&t, s, &no, 1), 0));
	cr_assert(eq(u16, auth_check_msg(&t, s, &no, 100), 0));
	cr_assert(eq(u16, auth_check_msg(&t, s, &no, 500), 0));
	cr_assert(eq(u16, auth_check_msg(&t, s, &no, 101), WIRE_REASON_NOT_ENTITLED));
	cr_assert(eq(u16, auth_check_msg(&t, s, &no, 0), WIRE_REASON_NOT_ENTITLED));
	cr_assert(eq(u16, auth_check_msg(&t, s, &rr, 7), 0));
	cr_assert(eq(u16, auth_check_msg(&t, s, &tr, 7), WIRE_REASON_NO_PERMISSION));
	cr_assert(eq(u16, auth_check_msg(&t, s, &ks, 7), WIRE_REASON_NO_PERMISSION));
	cr_assert(eq(u16, auth_check_msg(&t, s, &hb, 0), 0));
	struct auth_session *all = logged_on(1002, 6, 1);
	cr_assert(eq(u16, auth_check_msg(&t, all, &tr, UINT64_C(1) << 60), 0));
	cr_assert(eq(u64, t.c[AUTH_C_REF_NOT_ENTITLED], 2));
	cr_assert(eq(u64, t.c[AUTH_C_REF_NO_PERMISSION], 2));
}

static uint32_t ended_ids[16];
static uint16_t ended_reasons[16];
static uint32_t ended_count;

static void
on_end(void *ctx, const struct auth_session *s, uint16_t reason)
{
	(void)ctx;
	ended_ids[ended_count] = s->id;
	ended_reasons[ended_count++] = reason;
}

/* Goal: a new key set ends at once the sessions of keys revoked or removed, keeps the
 * others (pointing at the new set's keys), and a revoked key's logon is refused. */
Test(auth, revocation_ends_sessions)
{
	(void)logged_on(1001, 1, 1);
	(void)logged_on(1002, 2, 1);
	(void)logged_on(1001, 3, 2);
	static const char NEW[] =
		"1001 0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20 trade 1 revoked\n"
		"1002 2222222222222222222222222222222222222222222222222222222222222222 read 5\n";
	static struct auth_key mem2[4];
	static struct auth_keys k2 = { .keys = mem2, .cap = 4 };
	char err[128];
	cr_assert(eq(int, auth_keys_parse(NEW, strlen(NEW), "new", &k2, err, sizeof(err)), 0));
	ended_count = 0;
	cr_assert(eq(u32, auth_keys_swap(&t, &k2, on_end, NULL), 2));
	cr_assert(eq(u32, ended_count, 2));
	cr_assert(eq(u16, ended_reasons[0], WIRE_REASON_KEY_REVOKED));
	cr_assert(auth_session_find(&t, 1) == NULL && auth_session_find(&t, 3) == NULL);
	struct auth_session *s = auth_session_find(&t, 2);
	cr_assert(s != NULL && s->key == &mem2[1]);
	struct wire_msg_hdr no = hdr_of(WIRE_NEW_ORDER);
	cr_assert(eq(u16, auth_check_msg(&t, s, &no, 5), WIRE_REASON_NO_PERMISSION));
	struct wire_logon m = logon(1001, 9, 9, T0);
	cr_assert(eq(u16, auth_logon(&t, &m, T0, M0, 0, &s), WIRE_REASON_KEY_REVOKED));
}

/* Goal: a session silent for three heartbeats ends (SESSION_IDLE); a heartbeat's frame
 * keeps it. */
Test(auth, idle_sessions_end)
{
	struct auth_session *a = logged_on(1002, 1, 1), *got;
	(void)logged_on(1002, 2, 2);
	struct frame f;
	bool warn;
	session_frame(&f, &a->frame_key, 1, 1, 1);
	cr_assert(eq(u16, auth_frame(&t, f.buf, f.len, f.sh, 1, M0 + 2 * SEC, 0, &got, &warn), 0));
	ended_count = 0;
	cr_assert(eq(u32, auth_expire(&t, M0 + 3 * SEC, on_end, NULL), 0));
	cr_assert(eq(u32, auth_expire(&t, M0 + 3 * SEC + 1, on_end, NULL), 1));
	cr_assert(eq(u32, ended_ids[0], 2));
	cr_assert(eq(u16, ended_reasons[0], WIRE_REASON_SESSION_IDLE));
	cr_assert(eq(u32, auth_expire(&t, M0 + 5 * SEC + 1, on_end, NULL), 1));
	cr_assert(eq(u32, t.count, 0));
}

/* Goal: the table stays consistent through many logons and ends in a seeded order (the
 * backward-shift deletion keeps every probe chain). Method: a reference bitmap. */
Test(auth, table_churn)
{
	auth_sessions_free(&t);
	struct auth_config cfg = { .sessions_max = 200, .nonces_max = 4096,
				   .logon_window_ns = 5 * SEC };
	cr_assert(eq(int, auth_sessions_init(&t, &cfg, &keys), 0));
	static bool live[1000];
	memset(live, 0, sizeof(live));
	uint64_t x = 12345, nonce = 1;
	for (int step = 0; step < 20000; step++) {
		x = x * UINT64_C(6364136223846793005) + 1442695040888963407u;
		uint32_t id = (uint32_t)(x >> 33) % 999 + 1;
		struct auth_session *s = auth_session_find(&t, id);
		cr_assert(eq(int, s != NULL, live[id]), "step %d id %u", step, id);
		if (s != NULL) {
			auth_session_end(&t, s);
			live[id] = false;
		} else if (t.count < 200) {
			/* A tenth of a second a step: remembered nonces expire. */
			uint64_t wall = T0 + (uint64_t)step * (SEC / 10);
			struct wire_logon m = logon(1002, id, nonce++, wall);
			cr_assert(eq(u16, auth_logon(&t, &m, wall, M0, 0, &s), 0));
			live[id] = true;
		}
	}
}

static void
count_end(void *ctx, const struct auth_session *s, uint16_t reason)
{
	(void)s;
	cr_assert(eq(u16, reason, WIRE_REASON_SESSION_IDLE));
	(*(uint32_t *)ctx)++;
}

/* Goal: auth_expire_step walks the table in slices of at most max slots, says when a pass
 * is done, and over one pass ends the idle sessions and no other. Method: 150 sessions,
 * the even ids heard from later; slices of 64 over a table of 512 slots (with these ids no
 * deletion shifts an idle session back across a slice's start, which would leave it to the
 * next pass). */
Test(auth, expire_in_slices)
{
	auth_sessions_free(&t);
	struct auth_config cfg = { .sessions_max = 200, .nonces_max = 4096,
				   .logon_window_ns = 5 * SEC, .heartbeat_ms = 1000 };
	cr_assert(eq(int, auth_sessions_init(&t, &cfg, &keys), 0));
	cr_assert(eq(u32, t.mask + 1, 512));
	for (uint32_t id = 1; id <= 150; id++) {
		struct auth_session *s;
		struct wire_logon m = logon(1002, id, id, T0);
		cr_assert(eq(u16, auth_logon(&t, &m, T0, M0, 0, &s), 0));
		if (id % 2 == 0)
			s->last_rx_ns = M0 + 3 * SEC;
	}
	uint32_t ended = 0, slices = 0;
	bool done = false;
	while (!done) {
		uint32_t n = auth_expire_step(&t, M0 + 3 * SEC + 1, 64, &done, count_end, &ended);
		slices++;
		cr_assert(le(u32, slices, 8));
		cr_assert(eq(u32, t.expire_at, done ? 0 : slices * 64));
		(void)n;
	}
	cr_assert(eq(u32, slices, 8));
	cr_assert(eq(u32, ended, 75));
	cr_assert(eq(u32, t.count, 75));
	for (uint32_t id = 1; id <= 150; id++)
		cr_assert(eq(int, auth_session_find(&t, id) != NULL, id % 2 == 0), "id %u", id);
	/* The next pass starts at slot 0 and ends the rest once they are idle too. */
	ended = 0;
	done = false;
	while (!done)
		(void)auth_expire_step(&t, M0 + 6 * SEC + 1, 512, &done, count_end, &ended);
	cr_assert(eq(u32, ended, 75));
	cr_assert(eq(u32, t.count, 0));
}

/* Goal: the gateway's logon budget: past logons_per_window in a window every LOGON is
 * refused MSG_RATE before its HMAC is computed (a good one too), and the next window serves
 * again. */
Test(auth, logon_budget)
{
	auth_sessions_free(&t);
	struct auth_config cfg = { .sessions_max = 8, .nonces_max = 64,
				   .logon_window_ns = 5 * SEC, .rate_window_ns = SEC,
				   .logons_per_window = 3 };
	cr_assert(eq(int, auth_sessions_init(&t, &cfg, &keys), 0));
	struct auth_session *s;
	for (uint32_t i = 0; i < 3; i++) {
		struct wire_logon bad = logon(1001, 10 + i, 100 + i, T0);
		bad.sig[0] ^= 1;
		cr_assert(eq(u16, auth_logon(&t, &bad, T0, M0, 0, &s), WIRE_REASON_BAD_SIGNATURE));
	}
	struct wire_logon good = logon(1001, 20, 200, T0);
	cr_assert(eq(u16, auth_logon(&t, &good, T0, M0 + SEC / 2, 0, &s), WIRE_REASON_MSG_RATE));
	cr_assert(eq(u64, t.c[AUTH_C_REF_LOGON_RATE], 1));
	cr_assert(eq(u64, t.c[AUTH_C_REF_BAD_SIGNATURE], 3));
	good = logon(1001, 20, 201, T0);
	cr_assert(eq(u16, auth_logon(&t, &good, T0, M0 + SEC, 0, &s), 0));
}

/* Goal: the key file's errors name the file, the line and what is wrong. */
Test(auth, key_file_errors)
{
	static const struct {
		const char *text, *want;
	} cases[] = {
		{ "1 00 trade *\n", "f:1: secret" },
		{ "\n\n0 2222222222222222222222222222222222222222222222222222222222222222 trade *\n",
		  "f:3: key_id" },
		{ "1 2222222222222222222222222222222222222222222222222222222222222222 sell *\n",
		  "f:1: perms" },
		{ "1 2222222222222222222222222222222222222222222222222222222222222222 trade 5-2\n",
		  "f:1: users" },
		{ "1 2222222222222222222222222222222222222222222222222222222222222222 trade 0\n",
		  "f:1: users" },
		{ "1 2222222222222222222222222222222222222222222222222222222222222222 trade 1 x\n",
		  "f:1: want" },
		{ "1 0000000000000000000000000000000000000000000000000000000000000000 trade 1\n",
		  "f:1: secret" },
		{ "1 2222222222222222222222222222222222222222222222222222222222222222 trade 1\n"
		  "1 3333333333333333333333333333333333333333333333333333333333333333 read 2\n",
		  "f:2: key_id 1 given twice" },
		{ "1 2222222222222222222222222222222222222222222222222222222222222222 trade "
		  "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17\n",
		  "f:1: users" },
		{ "99999999999999999999999 2222222222222222222222222222222222222222222222222222222222222222 trade 1\n",
		  "f:1: key_id" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char err[256] = "";
		cr_assert(eq(int, auth_keys_parse(cases[i].text, strlen(cases[i].text), "f", &keys,
						  err, sizeof(err)), -1), "case %zu", i);
		cr_assert(strstr(err, cases[i].want) != NULL, "case %zu: %s", i, err);
	}
	uint64_t id;
	uint8_t sec[AUTH_SECRET_SIZE];
	char err[128];
	cr_assert(eq(int, auth_client_key_parse(KEYS, strlen(KEYS), &id, sec, err, sizeof(err)), 0));
	cr_assert(eq(u64, id, 1001));
	cr_assert(eq(u8, sec[0], 1));
	cr_assert(eq(int, auth_client_key_parse("# nothing\n", 10, &id, sec, err, sizeof(err)), -1));
}
