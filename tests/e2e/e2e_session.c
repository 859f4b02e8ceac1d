/* SPDX-License-Identifier: Apache-2.0 */
/*
 * e2e_session: tries every session rule against a live node (tests/e2e/test_sessions.sh)
 * with frames it builds itself, so nothing of the client library stands between the test
 * and the wire:
 *
 *   e2e_session --host IP --port P --keys FILE STEP
 *
 * FILE is the node's key file (the driver reads the secrets of keys 1..4: 1 trades users
 * 1-100 and reads, 2 may do everything for any user, 3 trades user 7 and is the one the
 * shell revokes, 4 is unknown to the node). Steps:
 *   logons     good logon, then BAD_KEY, BAD_SIGNATURE, STALE_LOGON (past and future),
 *              NONCE_REUSED (the good LOGON sent again), SESSION_IN_USE, truncated and
 *              oversize LOGONs (refused by the decoder: no answer)
 *   frames     UNKNOWN_SESSION, a bad MAC (no answer), SEQ_GAP and SEQ_REPEAT naming the
 *              expected seq, a deposit and an order ACKed in a session, NOT_ENTITLED,
 *              NO_PERMISSION (a transfer by a trade-only key), NO_SESSION (order entry
 *              outside a session), HEARTBEAT answered, LOGOUT then UNKNOWN_SESSION
 *   revoke     log on with key 3, print "ready", wait (up to 10 s) for LOGOUT
 *              KEY_REVOKED (the shell revokes the key meanwhile), then a new LOGON with key 3
 *              must get KEY_REVOKED
 * Every check prints "ok <what>" or "FAIL <what>: ..." and the exit status is the number of
 * failures (0 = all passed).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "auth/auth.h"

#define WAIT_MS 1500

static int fd = -1;
static int fails;
static struct auth_key key_mem[16];
static struct auth_keys keys = { .keys = key_mem, .cap = 16 };

static uint64_t
wall_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t
rnd64(void)
{
	uint64_t v = 0;
	if (getrandom(&v, sizeof(v), 0) != sizeof(v))
		abort();
	return v;
}

#define CHECK_THAT(cond, ...)                                                              \
	do {                                                                               \
		if (cond) {                                                                \
			printf("ok   ");                                                      \
		} else {                                                                   \
			printf("FAIL ");                                                      \
			fails++;                                                           \
		}                                                                          \
		printf(__VA_ARGS__);                                                       \
		printf("\n");                                                              \
		fflush(stdout);                                                            \
	} while (0)

static void
send_raw(const void *buf, size_t len)
{
	if (send(fd, buf, len, 0) != (ssize_t)len) {
		perror("e2e_session: send");
		exit(100);
	}
}

/* One received frame's messages, decoded with key (NULL: only an un-MAC'd frame). */
struct rx {
	uint64_t buf[WIRE_FRAME_MAX / 8];
	const struct wire_msg_hdr *msgs[WIRE_FRAME_MSGS_MAX];
	uint32_t count;
	bool macd;
};

/* Wait for a frame holding a message of type; false on timeout. Frames that do not decode
 * under key (or without a MAC) are skipped. */
static const struct wire_msg_hdr *
wait_for(struct rx *r, const struct wire_key *key, uint16_t type, int ms)
{
	uint64_t end = wall_ns() + (uint64_t)ms * 1000000u;
	for (;;) {
		uint64_t now = wall_ns();
		if (now >= end)
			return NULL;
		struct pollfd p = { .fd = fd, .events = POLLIN };
		if (poll(&p, 1, (int)((end - now) / 1000000u) + 1) <= 0)
			continue;
		ssize_t n = recv(fd, r->buf, sizeof(r->buf), 0);
		if (n <= 0)
			continue;
		uint32_t sender;
		r->macd = (wire_frame_flags(r->buf, (size_t)n) & WIRE_FRAME_F_MAC) != 0;
		if (wire_frame_decode(r->buf, (size_t)n, r->macd ? key : NULL, r->msgs,
				      WIRE_FRAME_MSGS_MAX, &r->count, &sender) != WIRE_E_OK)
			continue;
		for (uint32_t i = 0; i < r->count; i++)
			if (r->msgs[i]->type == type)
				return r->msgs[i];
	}
}

/* Nothing at all arrives for ms (a refusal the node must not answer). */
static bool
silence(int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	return poll(&p, 1, ms) == 0;
}

static const struct auth_key *
key(uint64_t id)
{
	const struct auth_key *k = auth_keys_find(&keys, id);
	if (k == NULL) {
		fprintf(stderr, "e2e_session: key %llu not in the key file\n",
			(unsigned long long)id);
		exit(100);
	}
	return k;
}

static struct wire_logon
make_logon(uint64_t key_id, const uint8_t *secret, uint32_t session, uint64_t ts)
{
	struct wire_logon m;
	memset(&m, 0, sizeof(m));
	wire_hdr_init(&m.hdr, WIRE_LOGON, 0);
	m.key_id = key_id;
	m.ts_ns = ts;
	m.nonce = rnd64();
	m.session_id = session;
	m.heartbeat_ms = 1000;
	auth_logon_sign(secret, &m);
	return m;
}

static void
send_logon(const struct wire_logon *m)
{
	uint64_t buf[64];
	struct wire_builder b;
	wire_builder_init(&b, buf, sizeof(buf), m->session_id);
	if (wire_builder_add(&b, m) != 0)
		abort();
	send_raw(buf, wire_builder_finish(&b, NULL));
}

/* LOGON and its reply's reason (UINT16_MAX: no reply). */
static uint16_t
logon_reason(const struct wire_logon *m, const uint8_t *secret)
{
	struct rx r;
	struct wire_key k = { 0 };
	if (secret != NULL)
		auth_session_key(secret, m, &k);
	send_logon(m);
	const struct wire_logon_reply *rep = (const void *)wait_for(&r, &k, WIRE_LOGON_REPLY, WAIT_MS);
	if (rep == NULL)
		return UINT16_MAX;
	/* Accepted replies are MAC'd under the session key (the node proves the secret). */
	if (rep->reason == 0 && !r.macd)
		return UINT16_MAX - 1;
	return rep->reason;
}

struct session {
	uint32_t id;
	uint64_t seq;
	struct wire_key key;
};

static bool
open_session(struct session *s, uint64_t key_id, uint32_t id)
{
	const struct auth_key *k = key(key_id);
	struct wire_logon m = make_logon(key_id, k->secret, id, wall_ns());
	s->id = id;
	s->seq = 1;
	auth_session_key(k->secret, &m, &s->key);
	return logon_reason(&m, k->secret) == 0;
}

/* A session frame with seq, holding the given messages, MAC'd under key. */
static void
send_session(const struct session *s, uint64_t seq, const struct wire_key *key,
	     const void *const *msgs, uint32_t n)
{
	uint64_t buf[256];
	struct wire_builder b;
	struct wire_session_hdr sh;
	memset(&sh, 0, sizeof(sh));
	wire_hdr_init(&sh.hdr, WIRE_SESSION_HDR, 0);
	sh.session_id = s->id;
	sh.seq = seq;
	wire_builder_init(&b, buf, sizeof(buf), s->id);
	wire_builder_session(&b);
	if (wire_builder_add(&b, &sh) != 0)
		abort();
	for (uint32_t i = 0; i < n; i++)
		if (wire_builder_add(&b, msgs[i]) != 0)
			abort();
	send_raw(buf, wire_builder_finish(&b, key));
}

static void
send_next(struct session *s, const void *msg)
{
	send_session(s, s->seq++, &s->key, &msg, msg != NULL ? 1 : 0);
}

static struct wire_new_order
order(uint64_t user, uint64_t cl)
{
	struct wire_new_order o;
	memset(&o, 0, sizeof(o));
	wire_hdr_init(&o.hdr, WIRE_NEW_ORDER, 0);
	o.user = user;
	o.cl_ord_id = cl;
	o.symbol = 1;
	o.side = WIRE_SIDE_BUY;
	o.ord_type = WIRE_ORD_LIMIT;
	o.tif = WIRE_TIF_GTC;
	o.px = 100;
	o.qty = 1;
	return o;
}

static struct wire_transfer
deposit(uint64_t user, uint64_t id)
{
	struct wire_transfer t;
	memset(&t, 0, sizeof(t));
	wire_hdr_init(&t.hdr, WIRE_TRANSFER, 0);
	t.hdr.flags = WIRE_TRANSFER_F_ROUTE;
	t.user = user;
	t.transfer_id = id;
	t.asset = 2;
	t.amount = 1000000;
	return t;
}

static const char *
rname(uint16_t r)
{
	return r == UINT16_MAX ? "no answer" : r == UINT16_MAX - 1 ? "unauthenticated reply"
								   : wire_reason_name(r);
}

static void
step_logons(void)
{
	const struct auth_key *k1 = key(1), *k2 = key(2), *k4 = key(4);
	uint32_t sid = (uint32_t)(rnd64() | 1);
	struct wire_logon good = make_logon(1, k1->secret, sid, wall_ns());
	uint16_t r = logon_reason(&good, k1->secret);
	CHECK_THAT(r == 0, "logon with key 1: %s", r == 0 ? "accepted, reply MAC'd" : rname(r));

	struct wire_logon m = make_logon(4, k4->secret, sid + 2, wall_ns());
	r = logon_reason(&m, NULL);
	CHECK_THAT(r == WIRE_REASON_BAD_KEY, "unknown key id refused: %s", rname(r));

	m = make_logon(1, k2->secret, sid + 2, wall_ns()); /* signed with another secret */
	r = logon_reason(&m, NULL);
	CHECK_THAT(r == WIRE_REASON_BAD_SIGNATURE, "bad signature refused: %s", rname(r));

	m = make_logon(1, k1->secret, sid + 2, wall_ns() - UINT64_C(60000000000));
	r = logon_reason(&m, NULL);
	CHECK_THAT(r == WIRE_REASON_STALE_LOGON, "timestamp 60 s old refused: %s", rname(r));
	m = make_logon(1, k1->secret, sid + 2, wall_ns() + UINT64_C(60000000000));
	r = logon_reason(&m, NULL);
	CHECK_THAT(r == WIRE_REASON_STALE_LOGON, "timestamp 60 s ahead refused: %s", rname(r));

	r = logon_reason(&good, NULL);
	CHECK_THAT(r == WIRE_REASON_NONCE_REUSED, "the same LOGON replayed refused: %s", rname(r));

	m = make_logon(2, k2->secret, sid, wall_ns()); /* key 1 holds sid */
	r = logon_reason(&m, NULL);
	CHECK_THAT(r == WIRE_REASON_SESSION_IN_USE, "another key's session id refused: %s",
		   rname(r));

	/* Truncated and oversize LOGONs never reach the gateway: the decoder refuses them
	 * (dp.frame_err.*, checked by the shell). */
	uint64_t buf[64];
	m = make_logon(1, k1->secret, sid + 4, wall_ns());
	struct wire_builder b;
	wire_builder_init(&b, buf, sizeof(buf), m.session_id);
	(void)wire_builder_add(&b, &m);
	uint32_t len = wire_builder_finish(&b, NULL);
	struct wire_frame_hdr *fh = (void *)buf;
	struct wire_msg_hdr *mh = (void *)(fh + 1);
	mh->length = (uint16_t)(sizeof(m) - 8);
	fh->length = len - 8;
	send_raw(buf, len - 8);
	bool quiet = silence(500);
	mh->length = (uint16_t)(sizeof(m) + 8);
	fh->length = len + 8;
	memset((uint8_t *)buf + len, 0, 8);
	send_raw(buf, len + 8);
	quiet = silence(500) && quiet;
	CHECK_THAT(quiet, "truncated and oversize LOGONs dropped unanswered");
}

static void
step_frames(void)
{
	struct rx r;
	struct session s1, s2, ghost = { .id = 77, .seq = 1, .key = { 5, 6 } };
	uint32_t base = (uint32_t)(rnd64() | 1);
	if (!open_session(&s1, 1, base) || !open_session(&s2, 2, base + 1)) {
		CHECK_THAT(false, "log on with keys 1 and 2");
		return;
	}
	const struct wire_session_reject *rej;

	send_next(&ghost, NULL);
	rej = (const void *)wait_for(&r, NULL, WIRE_SESSION_REJECT, WAIT_MS);
	CHECK_THAT(rej != NULL && rej->reason == WIRE_REASON_UNKNOWN_SESSION,
		   "frame of no session: %s", rej ? rname(rej->reason) : "no answer");

	struct wire_key wrong = { 1, 2 };
	struct wire_new_order o = order(1, 1);
	const void *one = &o;
	send_session(&s1, s1.seq, &wrong, &one, 1);
	CHECK_THAT(silence(500), "bad MAC dropped unanswered");

	send_session(&s1, s1.seq + 3, &s1.key, &one, 1);
	rej = (const void *)wait_for(&r, &s1.key, WIRE_SESSION_REJECT, WAIT_MS);
	CHECK_THAT(rej != NULL && rej->reason == WIRE_REASON_SEQ_GAP && rej->expected_seq == 1,
		   "seq gap refused: %s, expected %llu", rej ? rname(rej->reason) : "no answer",
		   rej ? (unsigned long long)rej->expected_seq : 0ull);

	/* Key 2 funds user 1; key 1 (trade) orders for it. */
	struct wire_transfer t = deposit(1, 1000 + base % 100000);
	send_next(&s2, &t);
	const struct wire_admin_reply *ar = (const void *)wait_for(&r, &s2.key, WIRE_ADMIN_REPLY,
								  3000);
	CHECK_THAT(ar != NULL && ar->reason == 0, "deposit in a session: %s",
		   ar ? (ar->reason ? rname(ar->reason) : "done") : "no answer");
	o = order(1, 100 + base % 100000);
	send_next(&s1, &o);
	const struct wire_ack *ack = (const void *)wait_for(&r, &s1.key, WIRE_ACK, 3000);
	CHECK_THAT(ack != NULL && ack->cl_ord_id == o.cl_ord_id,
		   "order in a session ACKed under the session key");

	send_session(&s1, s1.seq - 1, &s1.key, &one, 1);
	rej = (const void *)wait_for(&r, &s1.key, WIRE_SESSION_REJECT, WAIT_MS);
	CHECK_THAT(rej != NULL && rej->reason == WIRE_REASON_SEQ_REPEAT &&
			   rej->expected_seq == s1.seq,
		   "seq repeat refused: %s, expected %llu", rej ? rname(rej->reason) : "no answer",
		   rej ? (unsigned long long)rej->expected_seq : 0ull);

	o = order(500, 2);
	send_next(&s1, &o);
	const struct wire_nak *nak = (const void *)wait_for(&r, &s1.key, WIRE_NAK, WAIT_MS);
	CHECK_THAT(nak != NULL && nak->reason == WIRE_REASON_NOT_ENTITLED && nak->user == 500,
		   "order for user 500 outside key 1's users: %s",
		   nak ? rname(nak->reason) : "no answer");

	t = deposit(1, 2);
	send_next(&s1, &t);
	ar = (const void *)wait_for(&r, &s1.key, WIRE_ADMIN_REPLY, WAIT_MS);
	CHECK_THAT(ar != NULL && ar->reason == WIRE_REASON_NO_PERMISSION,
		   "transfer by a trade-only key: %s", ar ? rname(ar->reason) : "no answer");

	/* Order entry outside a session. */
	uint64_t buf[32];
	struct wire_builder b;
	o = order(1, 3);
	wire_builder_init(&b, buf, sizeof(buf), 5);
	(void)wire_builder_add(&b, &o);
	send_raw(buf, wire_builder_finish(&b, NULL));
	nak = (const void *)wait_for(&r, NULL, WIRE_NAK, WAIT_MS);
	CHECK_THAT(nak != NULL && nak->reason == WIRE_REASON_NO_SESSION,
		   "order entry outside a session: %s", nak ? rname(nak->reason) : "no answer");

	struct wire_heartbeat hb;
	memset(&hb, 0, sizeof(hb));
	wire_hdr_init(&hb.hdr, WIRE_HEARTBEAT, 0);
	hb.session_id = s1.id;
	send_next(&s1, &hb);
	CHECK_THAT(wait_for(&r, &s1.key, WIRE_HEARTBEAT, WAIT_MS) != NULL, "heartbeat answered");

	struct wire_logout lo;
	memset(&lo, 0, sizeof(lo));
	wire_hdr_init(&lo.hdr, WIRE_LOGOUT, 0);
	lo.session_id = s1.id;
	send_next(&s1, &lo);
	const struct wire_logout *lr = (const void *)wait_for(&r, &s1.key, WIRE_LOGOUT, WAIT_MS);
	CHECK_THAT(lr != NULL && lr->reason == 0, "logout answered");
	send_next(&s1, &hb);
	rej = (const void *)wait_for(&r, NULL, WIRE_SESSION_REJECT, WAIT_MS);
	CHECK_THAT(rej != NULL && rej->reason == WIRE_REASON_UNKNOWN_SESSION,
		   "frame after logout: %s", rej ? rname(rej->reason) : "no answer");
}

static void
step_revoke(void)
{
	struct rx r;
	struct session s3;
	uint32_t id = (uint32_t)(rnd64() | 1);
	const struct auth_key *k3 = key(3);
	if (!open_session(&s3, 3, id)) {
		CHECK_THAT(false, "log on with key 3");
		return;
	}
	printf("ready\n");
	fflush(stdout);
	/* Keep the session alive while the shell revokes the key. */
	const struct wire_logout *lo = NULL;
	for (int i = 0; i < 20 && lo == NULL; i++) {
		struct wire_heartbeat hb;
		memset(&hb, 0, sizeof(hb));
		wire_hdr_init(&hb.hdr, WIRE_HEARTBEAT, 0);
		hb.session_id = s3.id;
		send_next(&s3, &hb);
		for (;;) {
			const struct wire_msg_hdr *m = wait_for(&r, &s3.key, WIRE_LOGOUT, 500);
			if (m == NULL)
				break;
			lo = (const void *)m;
			break;
		}
	}
	CHECK_THAT(lo != NULL && lo->reason == WIRE_REASON_KEY_REVOKED,
		   "revoked key's session ended: %s", lo ? rname(lo->reason) : "no LOGOUT");
	struct wire_logon m = make_logon(3, k3->secret, id, wall_ns());
	uint16_t rr = logon_reason(&m, NULL);
	CHECK_THAT(rr == WIRE_REASON_KEY_REVOKED, "logon with the revoked key: %s", rname(rr));
}

int
main(int argc, char **argv)
{
	const char *host = NULL, *keys_path = NULL;
	int port = 7400;
	static const struct option opts[] = {
		{ "host", required_argument, NULL, 'h' },
		{ "port", required_argument, NULL, 'p' },
		{ "keys", required_argument, NULL, 'k' },
		{ NULL, 0, NULL, 0 },
	};
	int c;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'h': host = optarg; break;
		case 'p': port = atoi(optarg); break;
		case 'k': keys_path = optarg; break;
		default: return 100;
		}
	}
	if (host == NULL || keys_path == NULL || optind != argc - 1) {
		fprintf(stderr, "usage: e2e_session --host IP [--port P] --keys FILE "
				"logons|frames|revoke\n");
		return 100;
	}
	FILE *f = fopen(keys_path, "r");
	static char text[1 << 16];
	size_t n = f != NULL ? fread(text, 1, sizeof(text), f) : 0;
	if (f != NULL)
		fclose(f);
	char err[256];
	if (n == 0 || auth_keys_parse(text, n, keys_path, &keys, err, sizeof(err)) != 0) {
		fprintf(stderr, "e2e_session: %s\n", n == 0 ? "cannot read the key file" : err);
		return 100;
	}
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	if (inet_pton(AF_INET, host, &sa.sin_addr) != 1)
		return 100;
	fd = socket(AF_INET, SOCK_DGRAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		perror("e2e_session: socket");
		return 100;
	}
	const char *step = argv[optind];
	if (strcmp(step, "logons") == 0)
		step_logons();
	else if (strcmp(step, "frames") == 0)
		step_frames();
	else if (strcmp(step, "revoke") == 0)
		step_revoke();
	else
		return 100;
	return fails;
}
