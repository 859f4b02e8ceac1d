/* SPDX-License-Identifier: Apache-2.0 */
/*
 * omsclient: request table (open addressing over a slab with a free list), a min-heap of
 * retransmit deadlines, per-user egress seq tracking with holes and their replay, frame
 * building and decoding, and the client side of a session (logon, seq, heartbeats, the
 * node's rejects and logouts; client.h).
 * Everything is sized once in client_open; nothing is allocated afterwards (but the key
 * file's text, read before client_open).
 */
#include "tools/client.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/check.h"
#include "common/hash.h"

#define HEAP_NONE UINT32_MAX
#define SEQ_WORDS (CLIENT_SEQ_WINDOW / 64)
#define DUE_NONE UINT64_MAX
#define NS_PER_MS UINT64_C(1000000)
/* SESSION_REJECT hdr.flags bit 0 (the gateway's contract): a warning, nothing was refused. */
#define SESSION_REJECT_F_WARN 0x1
/* A LOGON frame: header, the message and the builder's room for a MAC it will not carry. */
#define LOGON_FRAME_WORDS                                                                  \
	((sizeof(struct wire_frame_hdr) + sizeof(struct wire_logon) + WIRE_MAC_SIZE) / 8)
static_assert(sizeof(struct wire_session_hdr) + sizeof(struct wire_frame_hdr) +
			      CLIENT_MSG_MAX + WIRE_MAC_SIZE <= 128,
	      "a session frame of one request fits the smallest frame_max");

/* Where a client stands with its session (cfg.logon). */
enum sess_state {
	SESS_OFF = 0, /* no API key: plain frames, never a session */
	SESS_DOWN,    /* not logged on: before client_logon, after a logout, refusal or end */
	SESS_LOGON,   /* LOGON sent, waiting for its LOGON_REPLY (client_logon or a relogon) */
	SESS_UP,      /* logged on: every frame a session frame */
};

static_assert(CLIENT_SEQ_WINDOW % 64 == 0, "the seq window is whole words");
static_assert((CLIENT_SEQ_WINDOW & (CLIENT_SEQ_WINDOW - 1)) == 0,
	      "seq % window must be a mask: the bitmap is a ring indexed by seq");

/*
 * One user's egress seqs. Invariant: contig <= newest <= contig + CLIENT_SEQ_WINDOW, and
 * bit (s % CLIENT_SEQ_WINDOW) of seen is set exactly for the seqs s in (contig, newest]
 * that were seen: the window's W residues are distinct, so the bitmap is a ring that
 * needs no shifting as contig advances (its bit is cleared as contig passes it).
 */
struct user_track {
	uint64_t user;           /* the account */
	uint64_t contig;         /* every seq <= contig seen (the first seq is the baseline),
				  * or abandoned when the window moved past it */
	uint64_t newest;         /* highest seq seen */
	uint64_t replay_due_ns;  /* next automatic REPORT_REPLAY while contig < newest,
				  * DUE_NONE without a hole */
	uint64_t seen[SEQ_WORDS]; /* the ring above contig (see the invariant) */
};

struct client {
	int fd;                       /* UDP socket, connected to the node */
	struct client_config cfg;     /* with defaults filled in */
	struct wire_builder b;        /* frame being built */
	bool building;                /* b holds at least one message */
	uint32_t frame_class;         /* route class of the messages in b (frame_class_of) */
	uint64_t *tx;                 /* frame memory (frame_max bytes, 8-aligned) */
	uint64_t *rx;                 /* receive buffer (WIRE_FRAME_MAX bytes) */

	struct client_req *reqs;      /* slab of requests_max */
	uint32_t *free_list;          /* free slab indices */
	uint32_t free_count;
	uint32_t *index;              /* open addressing: slab index + 1, 0 empty */
	uint32_t index_mask;          /* index size - 1 (power of two, >= 2 * requests_max) */
	uint32_t *heap;               /* slab indices of SENT requests by next_ns */
	uint32_t heap_count;

	struct user_track *users;     /* users_max, the first user_count in use */
	uint32_t *user_index;         /* open addressing: users index + 1, 0 empty */
	uint32_t user_mask;           /* user_index size - 1 (power of two, >= 2 * users_max) */
	uint32_t user_count;          /* users tracked (never forgotten) */
	uint32_t users_holed;         /* users with contig < newest: 0 skips the replay pass */
	uint32_t replay_cursor;       /* next users index the replay pass visits */
	uint64_t replay_after_ns;     /* cfg.replay_after_ms in ns */
	uint64_t replay_every_ns;     /* cfg.replay_every_ms in ns */

	uint32_t unanswered;          /* requests in state SENT */
	struct client_stats stats;

	uint8_t sess;                 /* enum sess_state */
	bool relogging;               /* the pending LOGON replaces a session the node ended */
	bool logon_async;             /* the pending LOGON is resent and timed out by
				       * client_tick (a relogon, or client_logon_start) */
	int logon_err;                /* client_logon_status while SESS_DOWN */
	uint16_t logon_reason;        /* the last refusal's reason, 0 */
	uint32_t frame_base;          /* messages in b before the payload (1: SESSION_HDR) */
	struct wire_logon logon;      /* the last LOGON sent: its fields derive sess_key */
	struct wire_key sess_key;     /* the session frame key (zero before the first LOGON) */
	uint64_t tx_seq;              /* seq of the next session frame */
	uint64_t hb_ns;               /* agreed heartbeat interval */
	uint64_t clock_ns;            /* the newest now_ns handed in: stamps what is sent */
	uint64_t last_tx_ns;          /* when the last frame left */
	uint64_t logon_first_ns;      /* first LOGON of the pending logon */
	uint64_t logon_next_ns;       /* its next resend */
	uint64_t logon_retry_ns;      /* cfg.logon_retry_ms in ns */
	uint64_t logon_end_ns;        /* logon_async: the pending logon fails at this time */
	uint64_t rebase_seq;          /* the last seq taken from a SESSION_REJECT ... */
	uint64_t rebase_ns;           /* ... and when */
};

uint64_t
client_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

const char *
client_exec_name(uint8_t exec)
{
	static const char *const names[WIRE_EXEC_MAX] = {
		[WIRE_EXEC_PENDING] = "pending",     [WIRE_EXEC_OPEN] = "open",
		[WIRE_EXEC_REJECTED] = "rejected",   [WIRE_EXEC_FILL] = "fill",
		[WIRE_EXEC_CANCELLED] = "cancelled", [WIRE_EXEC_DONE] = "done",
		[WIRE_EXEC_AMENDED] = "amended",     [WIRE_EXEC_CANCEL_REJECTED] = "cancel_rejected",
	};
	return exec < WIRE_EXEC_MAX && names[exec] != NULL ? names[exec] : "?";
}

const char *
client_cause_name(uint8_t cause)
{
	static const char *const names[WIRE_CAUSE_MAX] = {
		[WIRE_CAUSE_USER] = "user",         [WIRE_CAUSE_IOC] = "ioc",
		[WIRE_CAUSE_FOK] = "fok",           [WIRE_CAUSE_STP] = "stp",
		[WIRE_CAUSE_EXPIRED] = "expired",   [WIRE_CAUSE_HALT] = "halt",
		[WIRE_CAUSE_KILL_SWITCH] = "kill_switch",
		[WIRE_CAUSE_NO_LIQUIDITY] = "no_liquidity",
		[WIRE_CAUSE_REPLACED] = "replaced", [WIRE_CAUSE_RECONCILE] = "reconcile",
	};
	return cause < WIRE_CAUSE_MAX && names[cause] != NULL ? names[cause] : "-";
}

static uint32_t
pow2_at_least(uint32_t n)
{
	uint32_t p = 1;
	while (p < n)
		p <<= 1;
	return p;
}

static uint64_t
wall_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * 64 random bits for a LOGON nonce or a session id. What the node needs of a nonce is that it
 * never repeats within the logon window, so without getrandom (an old kernel, a seccomp
 * filter) both clocks and a counter through mix64 still serve.
 */
static uint64_t
random_u64(void)
{
	static uint64_t fallbacks; /* makes two fallbacks within one clock tick differ */
	uint64_t v;
	if (getrandom(&v, sizeof(v), 0) == (ssize_t)sizeof(v))
		return v;
	return hash_fmix64(wall_ns() ^ hash_fmix64(client_now_ns() + ++fallbacks));
}

static uint32_t
req_home(const struct client *c, uint64_t user, uint64_t id)
{
	return (uint32_t)hash_fmix64(user * UINT64_C(0x9e3779b97f4a7c15) ^ id) & c->index_mask;
}

/* Free the client's tables and the client (its socket is the caller's to close). */
static void
client_free(struct client *c)
{
	free(c->tx);
	free(c->rx);
	free(c->reqs);
	free(c->free_list);
	free(c->index);
	free(c->heap);
	free(c->users);
	free(c->user_index);
	free(c);
}

int
client_open(struct client **out, const struct client_config *cfg)
{
	struct client_config k = *cfg;
	if (k.host == NULL)
		k.host = CLIENT_DEFAULT_HOST;
	if (k.port == 0)
		k.port = CLIENT_DEFAULT_PORT;
	if (k.frame_max == 0)
		k.frame_max = CLIENT_FRAME_DEFAULT;
	if (k.requests_max == 0)
		k.requests_max = 1024;
	if (k.users_max == 0)
		k.users_max = 1024;
	if (k.retry_first_ms == 0)
		k.retry_first_ms = 200;
	if (k.retry_cap_ms == 0)
		k.retry_cap_ms = 2000;
	if (k.retries_max == 0)
		k.retries_max = 8;
	if (k.give_up_ms == 0)
		k.give_up_ms = 10000;
	if (k.replay_after_ms == 0)
		k.replay_after_ms = 100;
	if (k.replay_every_ms == 0)
		k.replay_every_ms = 300;
	if (k.logon_retry_ms == 0)
		k.logon_retry_ms = CLIENT_LOGON_RETRY_MS;
	if (k.frame_max < 128 || k.frame_max > WIRE_FRAME_MAX || k.requests_max > (1u << 24) ||
	    k.users_max > (1u << 24))
		return -EINVAL;
	/* A session's frames are MAC'd under its own key: a shared one as well is a mistake. */
	if (k.logon && (k.key_id == 0 || k.key.k0 != 0 || k.key.k1 != 0))
		return -EINVAL;
	while (k.logon && k.session_id == 0) /* ends: a zero from getrandom is one in 2^32 */
		k.session_id = (uint32_t)random_u64();
	k.frame_max &= ~7u;

	struct sockaddr_in peer = {.sin_family = AF_INET, .sin_port = htons(k.port)};
	if (inet_pton(AF_INET, k.host, &peer.sin_addr) != 1)
		return -EINVAL;
	struct sockaddr_in local = {.sin_family = AF_INET, .sin_port = htons(k.bind_port)};
	if (k.bind_host != NULL && inet_pton(AF_INET, k.bind_host, &local.sin_addr) != 1)
		return -EINVAL;

	struct client *c = calloc(1, sizeof(*c));
	if (c == NULL)
		return -ENOMEM;
	c->cfg = k;
	c->cfg.host = NULL; /* not kept: the caller's string */
	c->cfg.bind_host = NULL;
	uint32_t index_size = pow2_at_least(k.requests_max * 2);
	uint32_t user_size = pow2_at_least(k.users_max * 2);
	c->index_mask = index_size - 1;
	c->user_mask = user_size - 1;
	c->tx = aligned_alloc(8, k.frame_max);
	c->rx = aligned_alloc(8, WIRE_FRAME_MAX);
	c->reqs = calloc(k.requests_max, sizeof(*c->reqs));
	c->free_list = calloc(k.requests_max, sizeof(uint32_t));
	c->index = calloc(index_size, sizeof(uint32_t));
	c->heap = calloc(k.requests_max, sizeof(uint32_t));
	c->users = calloc(k.users_max, sizeof(*c->users));
	c->user_index = calloc(user_size, sizeof(uint32_t));
	c->replay_after_ns = (uint64_t)k.replay_after_ms * 1000000u;
	c->replay_every_ns = (uint64_t)k.replay_every_ms * 1000000u;
	c->logon_retry_ns = (uint64_t)k.logon_retry_ms * NS_PER_MS;
	c->sess = k.logon ? SESS_DOWN : SESS_OFF;
	c->logon_err = -ENOTCONN;
	int err = -ENOMEM;
	if (!c->tx || !c->rx || !c->reqs || !c->free_list || !c->index || !c->heap ||
	    !c->users || !c->user_index)
		goto fail_alloc;
	for (uint32_t i = 0; i < k.requests_max; i++)
		c->free_list[i] = k.requests_max - 1 - i;
	c->free_count = k.requests_max;

	c->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (c->fd < 0) {
		err = -errno;
		goto fail_alloc;
	}
	int rcvbuf = 4 << 20;
	(void)setsockopt(c->fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
	if (bind(c->fd, (struct sockaddr *)&local, sizeof(local)) < 0 ||
	    connect(c->fd, (struct sockaddr *)&peer, sizeof(peer)) < 0) {
		err = -errno;
		goto fail_socket;
	}
	*out = c;
	return 0;

fail_socket:
	close(c->fd);
fail_alloc:
	explicit_bzero(c->cfg.secret, sizeof(c->cfg.secret));
	client_free(c);
	return err;
}

void
client_close(struct client *c)
{
	if (c == NULL)
		return;
	close(c->fd);
	/* The secret, and what was derived from it, do not outlive the client. */
	explicit_bzero(c->cfg.secret, sizeof(c->cfg.secret));
	explicit_bzero(&c->sess_key, sizeof(c->sess_key));
	explicit_bzero(&c->logon, sizeof(c->logon));
	client_free(c);
}

int
client_fd(const struct client *c)
{
	return c->fd;
}

uint16_t
client_local_port(const struct client *c)
{
	struct sockaddr_in a;
	socklen_t len = sizeof(a);
	if (getsockname(c->fd, (struct sockaddr *)&a, &len) < 0)
		return 0;
	return ntohs(a.sin_port);
}

const struct client_stats *
client_stats(const struct client *c)
{
	return &c->stats;
}

uint32_t
client_tracked(const struct client *c)
{
	return c->cfg.requests_max - c->free_count;
}

uint32_t
client_unanswered(const struct client *c)
{
	return c->unanswered;
}

/* ---------------------------------------------------------------------------------------
 * Request index (linear probing, backward-shift deletion: no tombstones).
 * ------------------------------------------------------------------------------------- */

struct client_req *
client_find(struct client *c, uint64_t user, uint64_t id)
{
	uint32_t i = req_home(c, user, id);
	for (uint32_t n = 0; n <= c->index_mask; n++, i = (i + 1) & c->index_mask) {
		uint32_t v = c->index[i];
		if (v == 0)
			return NULL;
		struct client_req *r = &c->reqs[v - 1];
		if (r->user == user && r->id == id)
			return r;
	}
	return NULL;
}

static void
index_insert(struct client *c, uint32_t slab)
{
	const struct client_req *r = &c->reqs[slab];
	uint32_t i = req_home(c, r->user, r->id);
	while (c->index[i] != 0)
		i = (i + 1) & c->index_mask; /* the index is at most half full: this ends */
	c->index[i] = slab + 1;
}

static void
index_remove(struct client *c, uint32_t slab)
{
	const struct client_req *r = &c->reqs[slab];
	uint32_t i = req_home(c, r->user, r->id);
	while (c->index[i] != slab + 1) {
		CHECK(c->index[i] != 0);
		i = (i + 1) & c->index_mask;
	}
	/* Shift later members of the cluster back over the hole when their home allows. */
	uint32_t j = i;
	for (;;) {
		j = (j + 1) & c->index_mask;
		uint32_t v = c->index[j];
		if (v == 0)
			break;
		const struct client_req *q = &c->reqs[v - 1];
		uint32_t home = req_home(c, q->user, q->id);
		/* q may move to i when its home is not cyclically within (i, j]. */
		bool in_range = i <= j ? (home > i && home <= j) : (home > i || home <= j);
		if (!in_range) {
			c->index[i] = v;
			i = j;
		}
	}
	c->index[i] = 0;
}

/* ---------------------------------------------------------------------------------------
 * Retransmit heap (min by next_ns).
 * ------------------------------------------------------------------------------------- */

static bool
heap_less(const struct client *c, uint32_t a, uint32_t b)
{
	return c->reqs[c->heap[a]].next_ns < c->reqs[c->heap[b]].next_ns;
}

static void
heap_swap(struct client *c, uint32_t a, uint32_t b)
{
	uint32_t t = c->heap[a];
	c->heap[a] = c->heap[b];
	c->heap[b] = t;
	c->reqs[c->heap[a]].heap_index = a;
	c->reqs[c->heap[b]].heap_index = b;
}

static void
heap_up(struct client *c, uint32_t i)
{
	while (i > 0 && heap_less(c, i, (i - 1) / 2)) {
		heap_swap(c, i, (i - 1) / 2);
		i = (i - 1) / 2;
	}
}

static void
heap_down(struct client *c, uint32_t i)
{
	for (;;) {
		uint32_t l = 2 * i + 1, r = l + 1, m = i;
		if (l < c->heap_count && heap_less(c, l, m))
			m = l;
		if (r < c->heap_count && heap_less(c, r, m))
			m = r;
		if (m == i)
			return;
		heap_swap(c, i, m);
		i = m;
	}
}

static void
heap_push(struct client *c, uint32_t slab)
{
	CHECK(c->heap_count < c->cfg.requests_max);
	c->heap[c->heap_count] = slab;
	c->reqs[slab].heap_index = c->heap_count;
	c->heap_count++;
	heap_up(c, c->heap_count - 1);
}

static void
heap_remove(struct client *c, uint32_t slab)
{
	uint32_t i = c->reqs[slab].heap_index;
	if (i == HEAP_NONE)
		return;
	CHECK(i < c->heap_count && c->heap[i] == slab);
	c->heap_count--;
	if (i != c->heap_count) {
		c->heap[i] = c->heap[c->heap_count];
		c->reqs[c->heap[i]].heap_index = i;
		heap_down(c, i);
		heap_up(c, i);
	}
	c->reqs[slab].heap_index = HEAP_NONE;
}

uint64_t
client_next_due_ns(const struct client *c)
{
	return c->heap_count > 0 ? c->reqs[c->heap[0]].next_ns : UINT64_MAX;
}

/* ---------------------------------------------------------------------------------------
 * Sending.
 * ------------------------------------------------------------------------------------- */

int
client_flush(struct client *c)
{
	if (!c->building)
		return 0;
	c->building = false;
	if (c->b.count == c->frame_base)
		return 0; /* a SESSION_HDR alone: nothing to say */
	const struct wire_key *key = &c->cfg.key;
	if (c->frame_base != 0) {
		/* The seq is stamped as the frame leaves, so seqs follow the order frames leave
		 * in whatever happened to the session while this one was being built. */
		uint8_t *seq_at = (uint8_t *)c->tx + sizeof(struct wire_frame_hdr) +
				  offsetof(struct wire_session_hdr, seq);
		memcpy(seq_at, &c->tx_seq, sizeof(c->tx_seq));
		key = &c->sess_key;
	}
	uint32_t len = wire_builder_finish(&c->b, key);
	uint16_t count = (uint16_t)(c->b.count - c->frame_base);
	ssize_t w = send(c->fd, c->tx, len, MSG_NOSIGNAL);
	if (w != (ssize_t)len) {
		c->stats.send_errors++;
		return w < 0 ? -errno : -EIO; /* the seq is not used up: the node never saw it */
	}
	if (c->frame_base != 0)
		c->tx_seq++;
	c->last_tx_ns = c->clock_ns;
	c->stats.frames_tx++;
	c->stats.msgs_tx += count;
	return 0;
}

/* Start a frame: a session frame opens with SESSION_HDR (its seq stamped by client_flush). */
static void
frame_start(struct client *c, uint32_t cls)
{
	wire_builder_init(&c->b, c->tx, c->cfg.frame_max, c->cfg.session_id);
	c->building = true;
	c->frame_class = cls;
	c->frame_base = 0;
	if (c->sess == SESS_OFF)
		return;
	CHECK(c->sess == SESS_UP);
	struct wire_session_hdr sh;
	memset(&sh, 0, sizeof(sh));
	wire_hdr_init(&sh.hdr, WIRE_SESSION_HDR, 0);
	sh.session_id = c->cfg.session_id;
	wire_builder_session(&c->b);
	CHECK(wire_builder_add(&c->b, &sh) == 0); /* frame_max >= 128 (client_open) */
	c->frame_base = 1;
}

/*
 * The node routes a whole frame by the class of its messages and refuses a frame that mixes
 * classes or destination shards (dataplane: frame_mixed). Order entry and routed transfers
 * (WIRE_TRANSFER_F_ROUTE) go to the gateway; an addressed TRANSFER goes to the shard named in
 * hdr.shard. So a
 * frame only ever holds messages of one class and one shard.
 */
static uint32_t
frame_class_of(const struct wire_msg_hdr *h)
{
	if (wire_type_class(h->type) == WIRE_CLS_GATEWAY)
		return 1;
	if (h->type == WIRE_TRANSFER && (h->flags & WIRE_TRANSFER_F_ROUTE) != 0)
		return 1; /* routed by the gateway, like an order */
	return 2u + h->shard; /* per destination shard */
}

/* Whether frames may be sent: always without a key, only logged on with one. */
static bool
sendable(const struct client *c)
{
	return c->sess == SESS_OFF || c->sess == SESS_UP;
}

static int
frame_add(struct client *c, const void *msg)
{
	if (!sendable(c))
		return -ENOTCONN; /* tracked requests go once the session is up */
	uint32_t cls = frame_class_of(msg);
	if (c->building && cls != c->frame_class) {
		int err = client_flush(c);
		if (err < 0)
			return err;
	}
	for (int attempt = 0; attempt < 2; attempt++) {
		if (!c->building)
			frame_start(c, cls);
		if (wire_builder_add(&c->b, msg) == 0)
			return 0;
		if (c->b.count == c->frame_base)
			return -EMSGSIZE; /* does not fit even an empty frame */
		int err = client_flush(c);
		if (err < 0)
			return err;
	}
	return -EMSGSIZE;
}

int
client_send_untracked(struct client *c, const void *msg)
{
	const struct wire_msg_hdr *h = msg;
	if (wire_type_size(h->type) == 0)
		return -EINVAL;
	return frame_add(c, msg);
}

/* The key a request is matched by. */
static int
request_key(const struct wire_msg_hdr *h, uint64_t *user, uint64_t *id)
{
	switch (h->type) {
	case WIRE_NEW_ORDER:
	case WIRE_CANCEL:
	case WIRE_AMEND:
	case WIRE_CANCEL_REPLACE: {
		/* user and cl_ord_id lead every client request. */
		const struct wire_cancel *m = (const void *)h;
		*user = m->user;
		*id = m->cl_ord_id;
		return 0;
	}
	case WIRE_TRANSFER: {
		const struct wire_transfer *t = (const void *)h;
		*user = CLIENT_TRANSFER_USER;
		*id = t->transfer_id;
		return 0;
	}
	default:
		return -EINVAL;
	}
}

static uint64_t
backoff_ns(const struct client *c, uint32_t tries)
{
	uint64_t ms = c->cfg.retry_first_ms;
	for (uint32_t i = 1; i < tries && ms < c->cfg.retry_cap_ms; i++)
		ms *= 2;
	if (ms > c->cfg.retry_cap_ms)
		ms = c->cfg.retry_cap_ms;
	return ms * 1000000u;
}

struct client_req *
client_submit(struct client *c, const void *msg, uint64_t tag, uint64_t now_ns, int *err)
{
	const struct wire_msg_hdr *h = msg;
	uint64_t user, id;
	int dummy;
	if (err == NULL)
		err = &dummy;
	c->clock_ns = now_ns;
	if (request_key(h, &user, &id) < 0 || h->length != wire_type_size(h->type) ||
	    h->length > CLIENT_MSG_MAX) {
		*err = -EINVAL;
		return NULL;
	}
	if (client_find(c, user, id) != NULL) {
		*err = -EEXIST;
		return NULL;
	}
	if (c->free_count == 0) {
		c->stats.table_full++;
		*err = -ENOSPC;
		return NULL;
	}
	uint32_t slab = c->free_list[--c->free_count];
	struct client_req *r = &c->reqs[slab];
	memset(r, 0, sizeof(*r));
	r->user = user;
	r->id = id;
	r->tag = tag;
	r->type = h->type;
	r->msg_len = h->length;
	memcpy(r->msg, msg, h->length);
	r->state = CLIENT_REQ_SENT;
	r->tries = 1;
	r->first_ns = now_ns;
	r->next_ns = now_ns + backoff_ns(c, 1);
	r->heap_index = HEAP_NONE;
	index_insert(c, slab);
	heap_push(c, slab);
	c->unanswered++;
	int rc = frame_add(c, r->msg);
	*err = rc;
	/* A send failure is not fatal for the request: the retransmit timer resends it, and a
	 * request submitted while not logged on goes once the session is up (-ENOTCONN). */
	return r;
}

void
client_release(struct client *c, struct client_req *r)
{
	uint32_t slab = (uint32_t)(r - c->reqs);
	CHECK(slab < c->cfg.requests_max);
	CHECK(r->state != 0);
	if (r->state == CLIENT_REQ_SENT)
		c->unanswered--;
	heap_remove(c, slab);
	index_remove(c, slab);
	r->state = 0;
	c->free_list[c->free_count++] = slab;
}

/* Stop retransmitting: the node has seen the request. */
static void
answered(struct client *c, struct client_req *r, uint8_t state, uint16_t reason, uint64_t now_ns)
{
	if (r->state != CLIENT_REQ_SENT)
		return;
	heap_remove(c, (uint32_t)(r - c->reqs));
	c->unanswered--;
	r->state = state;
	r->reason = reason;
	r->answer_ns = now_ns;
}

/* ---------------------------------------------------------------------------------------
 * The session (client.h, "Sessions"): LOGON, seq, heartbeats, the node's rejects and ends.
 * ------------------------------------------------------------------------------------- */

/* Every unanswered request due at now_ns: after a resync or a logon, nothing that was in
 * flight can have been acted on, so there is no reason to wait for the back-off. All keys
 * equal keeps the heap a heap. */
static void
requests_due_now(struct client *c, uint64_t now_ns)
{
	for (uint32_t i = 0; i < c->heap_count; i++) /* <= requests_max */
		c->reqs[c->heap[i]].next_ns = now_ns;
}

/* One LOGON in a frame of its own, without a MAC (the signature is the proof), with a fresh
 * nonce and timestamp: a resend is a new LOGON, never a replay the node would refuse. The
 * session key becomes this LOGON's, so only the reply to it is taken. */
static int
logon_send(struct client *c, uint64_t now_ns)
{
	struct wire_logon *m = &c->logon;
	memset(m, 0, sizeof(*m));
	wire_hdr_init(&m->hdr, WIRE_LOGON, 0);
	m->key_id = c->cfg.key_id;
	m->ts_ns = wall_ns();
	m->nonce = random_u64();
	m->session_id = c->cfg.session_id;
	m->heartbeat_ms = c->cfg.heartbeat_ms;
	auth_logon_sign(c->cfg.secret, m); /* last: the signature covers every field above */
	auth_session_key(c->cfg.secret, m, &c->sess_key);
	c->logon_next_ns = now_ns + c->logon_retry_ns;

	uint64_t frame[LOGON_FRAME_WORDS];
	struct wire_builder b;
	wire_builder_init(&b, frame, sizeof(frame), c->cfg.session_id);
	CHECK(wire_builder_add(&b, m) == 0);
	uint32_t len = wire_builder_finish(&b, NULL);
	c->stats.logons_sent++;
	ssize_t w = send(c->fd, frame, len, MSG_NOSIGNAL);
	if (w != (ssize_t)len) {
		c->stats.send_errors++;
		return w < 0 ? -errno : -EIO; /* the next resend tries again */
	}
	c->last_tx_ns = now_ns;
	c->stats.frames_tx++;
	c->stats.msgs_tx++;
	return 0;
}

/* The LOGON of a relogon or of client_logon_start, resent when due. It is bounded: a
 * relogon like a request (after give_up_ms nothing the client waits for can be answered
 * any more, and the session is over), client_logon_start by its timeout. */
static void
logon_due(struct client *c, uint64_t now_ns)
{
	if (c->sess != SESS_LOGON || !c->logon_async)
		return;
	if (now_ns >= c->logon_end_ns) {
		c->sess = SESS_DOWN;
		c->logon_async = false;
		c->logon_err = -ETIMEDOUT;
		if (c->relogging)
			c->stats.session_ended++;
		c->relogging = false;
		return;
	}
	if (now_ns >= c->logon_next_ns)
		(void)logon_send(c, now_ns);
}

/* A HEARTBEAT when nothing has gone out for the agreed interval: the node ends a session
 * silent for AUTH_IDLE_BEATS of them. */
static void
heartbeat_due(struct client *c, uint64_t now_ns)
{
	if (c->sess != SESS_UP || c->building || now_ns < c->last_tx_ns + c->hb_ns)
		return;
	struct wire_heartbeat m;
	memset(&m, 0, sizeof(m));
	wire_hdr_init(&m.hdr, WIRE_HEARTBEAT, 0);
	m.session_id = c->cfg.session_id;
	m.ts_ns = wall_ns();
	if (frame_add(c, &m) == 0)
		c->stats.heartbeats_tx++;
}

/*
 * Take the seq the node expects from a SESSION_REJECT. Every frame sent before the first
 * reject reached the client is refused too, naming the same expected seq: taken again, that
 * echo would rewind the seq over frames the node has accepted since. Echoes arrive within a
 * round trip of the first, so the same seq is not taken twice within half of retry_first_ms
 * (many round trips; a MSG_RATE'd request is sent again a whole one later). Either mistake
 * heals: a seq wrongly kept draws a SEQ_GAP later, one wrongly taken a SEQ_REPEAT.
 * Returns whether the seq was taken.
 */
static bool
seq_rebase(struct client *c, uint64_t expected, uint64_t now_ns)
{
	if (expected == 0)
		return false;
	if (expected == c->rebase_seq &&
	    now_ns - c->rebase_ns < (uint64_t)c->cfg.retry_first_ms * NS_PER_MS / 2)
		return false;
	c->tx_seq = expected;
	c->rebase_seq = expected;
	c->rebase_ns = now_ns;
	return true;
}

/* The node ended the session (UNKNOWN_SESSION, LOGOUT). Returns whether that is for good. */
static bool
session_lost(struct client *c, uint64_t now_ns)
{
	c->building = false; /* its seq and key are the old session's; requests are resent */
	if (c->cfg.relogon) {
		c->sess = SESS_LOGON;
		c->relogging = true;
		c->logon_async = true;
		c->logon_first_ns = now_ns;
		c->logon_next_ns = now_ns; /* client_tick sends it */
		c->logon_end_ns = now_ns + (uint64_t)c->cfg.give_up_ms * NS_PER_MS;
		return false;
	}
	c->sess = SESS_DOWN;
	c->logon_err = -ENOTCONN;
	c->stats.session_ended++;
	return true;
}

/* The answer to a LOGON. Returns whether it ended the session for good (a refused relogon). */
static bool
logon_reply(struct client *c, const struct wire_logon_reply *m, uint64_t now_ns)
{
	if (c->sess != SESS_LOGON || m->key_id != c->cfg.key_id ||
	    m->session_id != c->cfg.session_id)
		return false; /* a late answer to a logon that is settled */
	if (m->reason == WIRE_REASON_NONCE_REUSED) {
		/* A duplicate of our own LOGON refused as a replay, while the original may well
		 * have been accepted: the resend (a fresh nonce) settles it. */
		c->logon_reason = m->reason;
		return false;
	}
	if (m->reason != WIRE_REASON_NONE) {
		c->stats.logons_refused++;
		c->logon_reason = m->reason;
		c->sess = SESS_DOWN;
		c->logon_async = false;
		c->logon_err = -EACCES;
		if (!c->relogging)
			return false; /* client_logon returns the refusal */
		c->relogging = false;
		c->stats.session_ended++;
		return true;
	}
	/* Reason NONE came MAC'd under this LOGON's key (client_rx): the node knows it. */
	c->sess = SESS_UP;
	c->logon_async = false;
	c->logon_reason = 0;
	c->tx_seq = m->next_seq != 0 ? m->next_seq : 1;
	c->hb_ns = (uint64_t)(m->heartbeat_ms != 0 ? m->heartbeat_ms : CLIENT_HEARTBEAT_MS) *
		   NS_PER_MS;
	c->last_tx_ns = now_ns;
	c->rebase_seq = 0;
	c->stats.logons++;
	if (c->relogging)
		c->stats.relogons++;
	c->relogging = false;
	requests_due_now(c, now_ns); /* none of them reached a session the node still has */
	return false;
}

/* A frame the gateway refused or warned about. Returns whether the session ended for good. */
static bool
session_reject(struct client *c, const struct wire_session_reject *m, uint64_t now_ns)
{
	if (m->session_id != c->cfg.session_id)
		return false;
	if ((m->hdr.flags & SESSION_REJECT_F_WARN) != 0) {
		c->stats.rate_warnings++; /* nothing refused: slow down, or expect MSG_RATE */
		return false;
	}
	switch (m->reason) {
	case WIRE_REASON_SEQ_GAP:
	case WIRE_REASON_SEQ_REPEAT:
		/* Nothing in the frame was acted on: resend what is unanswered, at once. */
		if (c->sess == SESS_UP && seq_rebase(c, m->expected_seq, now_ns)) {
			c->stats.seq_resyncs++;
			requests_due_now(c, now_ns);
		}
		return false;
	case WIRE_REASON_MSG_RATE:
		/* The node keeps the refused frame's seq waiting; the requests wait for their
		 * back-off, since sending at once would only be refused again. */
		c->stats.rate_refused++;
		if (c->sess == SESS_UP)
			(void)seq_rebase(c, m->expected_seq, now_ns);
		return false;
	case WIRE_REASON_UNKNOWN_SESSION:
		return c->sess == SESS_UP && session_lost(c, now_ns);
	default:
		return false;
	}
}

/* A session message from the node: acted on, then delivered as CLIENT_EV_OTHER
 * (HEARTBEATs only counted). */
static void
session_msg(struct client *c, const struct wire_msg_hdr *h, uint64_t now_ns,
	    client_event_fn *fn, void *ctx)
{
	struct client_event ev = {.kind = CLIENT_EV_OTHER, .msg = h, .now_ns = now_ns};
	switch (h->type) {
	case WIRE_HEARTBEAT:
		c->stats.heartbeats_rx++;
		return;
	case WIRE_LOGON_REPLY:
		ev.session_ended = logon_reply(c, (const void *)h, now_ns);
		break;
	case WIRE_SESSION_REJECT:
		ev.session_ended = session_reject(c, (const void *)h, now_ns);
		break;
	case WIRE_LOGOUT: {
		const struct wire_logout *m = (const void *)h;
		if (m->session_id == c->cfg.session_id && c->sess == SESS_UP)
			ev.session_ended = session_lost(c, now_ns);
		break;
	}
	default:
		CHECK(false); /* is_session_type() */
	}
	if (fn != NULL)
		fn(ctx, &ev);
}

static bool
is_session_type(uint16_t type)
{
	return type == WIRE_LOGON_REPLY || type == WIRE_SESSION_REJECT || type == WIRE_LOGOUT ||
	       type == WIRE_HEARTBEAT;
}

/* What the node sends without a MAC, because it knows no key for it: a refused logon, and a
 * frame of a session it does not have. Anything else un-MAC'd is not the node's. */
static bool
unkeyed_ok(const struct wire_msg_hdr *h)
{
	if (h->type == WIRE_LOGON_REPLY)
		return ((const struct wire_logon_reply *)h)->reason != WIRE_REASON_NONE;
	if (h->type == WIRE_SESSION_REJECT)
		return ((const struct wire_session_reject *)h)->reason ==
		       WIRE_REASON_UNKNOWN_SESSION;
	return false;
}

static uint32_t replay_due(struct client *c, uint64_t now_ns); /* below, with the seqs */

uint32_t
client_tick(struct client *c, uint64_t now_ns, client_event_fn *fn, void *ctx)
{
	uint32_t handled = 0;
	uint64_t give_up_ns = (uint64_t)c->cfg.give_up_ms * 1000000u;
	c->clock_ns = now_ns;
	logon_due(c, now_ns);
	while (c->heap_count > 0 && handled < CLIENT_TICK_MAX) {
		uint32_t slab = c->heap[0];
		struct client_req *r = &c->reqs[slab];
		if (r->next_ns > now_ns)
			break;
		handled++;
		if (r->tries > c->cfg.retries_max || now_ns - r->first_ns >= give_up_ns) {
			heap_remove(c, slab);
			c->unanswered--;
			r->state = CLIENT_REQ_GAVE_UP;
			c->stats.gave_up++;
			if (fn != NULL) {
				struct client_event ev = {
					.kind = CLIENT_EV_GAVE_UP, .req = r, .now_ns = now_ns};
				fn(ctx, &ev);
			}
			continue;
		}
		r->tries++;
		r->next_ns = now_ns + backoff_ns(c, r->tries);
		if (r->next_ns > r->first_ns + give_up_ns)
			r->next_ns = r->first_ns + give_up_ns; /* give up on time, not later */
		heap_down(c, 0);
		/* Logged off it is not sent: the logon makes every unanswered request due. */
		if (frame_add(c, r->msg) != -ENOTCONN)
			c->stats.retransmits++;
	}
	(void)replay_due(c, now_ns);
	heartbeat_due(c, now_ns); /* after the rest: a frame built above makes it needless */
	(void)client_flush(c);
	return handled;
}

/* ---------------------------------------------------------------------------------------
 * Receiving.
 * ------------------------------------------------------------------------------------- */

static uint32_t
user_home(const struct client *c, uint64_t user)
{
	return (uint32_t)hash_fmix64(user) & c->user_mask;
}

static const struct user_track *
user_find(const struct client *c, uint64_t user)
{
	uint32_t i = user_home(c, user);
	for (uint32_t n = 0; n <= c->user_mask; n++, i = (i + 1) & c->user_mask) {
		uint32_t v = c->user_index[i];
		if (v == 0)
			return NULL;
		if (c->users[v - 1].user == user)
			return &c->users[v - 1];
	}
	return NULL;
}

uint64_t
client_user_seq(const struct client *c, uint64_t user)
{
	const struct user_track *t = user_find(c, user);
	return t != NULL ? t->newest : 0;
}

uint64_t
client_user_contig(const struct client *c, uint64_t user)
{
	const struct user_track *t = user_find(c, user);
	return t != NULL ? t->contig : 0;
}

static bool
seen_get(const struct user_track *t, uint64_t seq)
{
	uint64_t b = seq & (CLIENT_SEQ_WINDOW - 1);
	return (t->seen[b / 64] >> (b % 64) & 1u) != 0;
}

static void
seen_put(struct user_track *t, uint64_t seq, bool on)
{
	uint64_t b = seq & (CLIENT_SEQ_WINDOW - 1);
	uint64_t bit = UINT64_C(1) << (b % 64);
	t->seen[b / 64] = on ? t->seen[b / 64] | bit : t->seen[b / 64] & ~bit;
}

/* Move contig up to floor (a seq more than the window above it arrived): the seqs passed
 * that were never seen are abandoned, since the ring can no longer tell them. */
static void
window_slide(struct client *c, struct user_track *t, uint64_t floor)
{
	DCHECK(floor > t->contig);
	if (floor - t->contig >= CLIENT_SEQ_WINDOW) {
		/* The whole ring falls out: count it at once rather than seq by seq. */
		uint64_t seen = 0;
		for (uint32_t w = 0; w < SEQ_WORDS; w++) {
			seen += (uint64_t)__builtin_popcountll(t->seen[w]);
			t->seen[w] = 0;
		}
		c->stats.seq_abandoned += floor - t->contig - seen;
		t->contig = floor;
		return;
	}
	for (uint64_t s = t->contig + 1; s <= floor; s++) { /* < CLIENT_SEQ_WINDOW turns */
		if (seen_get(t, s))
			seen_put(t, s, false);
		else
			c->stats.seq_abandoned++;
	}
	t->contig = floor;
}

/*
 * Per-user egress seq: the first one seen is the baseline (contig); later ones fill the
 * ring above contig, which advances over every seq seen in a row. A seq at or below
 * contig is a repeat (a duplicate, a re-sent report, or one the window gave up on).
 */
static void
seq_note(struct client *c, uint64_t user, uint64_t seq, uint64_t now_ns,
	 struct client_event *ev)
{
	if (seq == 0 || user == UINT64_MAX)
		return; /* NAK for a user that is not resident: unsequenced */
	uint32_t i = user_home(c, user);
	struct user_track *t = NULL;
	for (uint32_t n = 0; n <= c->user_mask; n++, i = (i + 1) & c->user_mask) {
		uint32_t v = c->user_index[i];
		if (v != 0 && c->users[v - 1].user == user) {
			t = &c->users[v - 1];
			break;
		}
		if (v == 0) {
			if (c->user_count >= c->cfg.users_max)
				return; /* table full: that user is not tracked */
			t = &c->users[c->user_count++];
			memset(t, 0, sizeof(*t));
			t->user = user;
			t->contig = seq;
			t->newest = seq;
			t->replay_due_ns = DUE_NONE;
			c->user_index[i] = c->user_count;
			if (!c->cfg.seq_from_one || seq == 1)
				return;
			/* Numbered from 1: what came before the first one seen is a hole. */
			t->contig = t->newest = 0;
			break;
		}
	}
	CHECK(t != NULL); /* the index is at most half full: the probe ends */
	if (seq <= t->contig) {
		ev->seq_repeat = true;
		c->stats.seq_repeats++;
		return;
	}
	if (seq == t->contig + 1 && t->contig == t->newest) {
		t->contig = t->newest = seq; /* in order, no hole: the common case */
		return;
	}
	bool was_holed = t->contig < t->newest;
	uint64_t contig_before = t->contig;
	if (seq > t->newest) {
		if (seq - t->newest > 1) {
			ev->seq_gap = seq - t->newest - 1;
			c->stats.seq_gaps += ev->seq_gap;
		}
		t->newest = seq;
		if (seq - t->contig > CLIENT_SEQ_WINDOW)
			window_slide(c, t, seq - CLIENT_SEQ_WINDOW);
	} else if (seen_get(t, seq)) {
		ev->seq_repeat = true;
		c->stats.seq_repeats++;
		return;
	} else {
		ev->seq_fill = true;
		c->stats.seq_filled++;
	}
	seen_put(t, seq, true);
	while (t->contig < t->newest && seen_get(t, t->contig + 1)) { /* <= window turns */
		t->contig++;
		seen_put(t, t->contig, false);
	}
	DCHECK(t->newest - t->contig <= CLIENT_SEQ_WINDOW);
	bool holed = t->contig < t->newest;
	if (holed && !was_holed)
		c->users_holed++;
	else if (!holed && was_holed)
		c->users_holed--;
	/* The replay timer runs from when the oldest hole became the oldest: a new hole, or
	 * contig moved on to a younger one (which may still be in flight). */
	if (!holed)
		t->replay_due_ns = DUE_NONE;
	else if (!was_holed || t->contig != contig_before)
		t->replay_due_ns = now_ns + c->replay_after_ns;
}

/* ---------------------------------------------------------------------------------------
 * Report replay.
 * ------------------------------------------------------------------------------------- */

int
client_replay(struct client *c, uint64_t user, uint64_t from, uint64_t to)
{
	if (from == 0 || (to != 0 && to < from))
		return -EINVAL;
	if (!sendable(c))
		return -ENOTCONN; /* not tracked: nothing would send it later */
	struct wire_report_replay m;
	memset(&m, 0, sizeof(m));
	wire_hdr_init(&m.hdr, WIRE_REPORT_REPLAY, 0); /* order entry: the gateway routes it */
	m.user = user;
	m.from_seq = from;
	m.to_seq = to;
	c->stats.replay_requests++;
	return frame_add(c, &m);
}

uint32_t
client_replay_tail(struct client *c)
{
	uint32_t sent = 0;
	for (uint32_t i = 0; i < c->user_count; i++) { /* <= users_max */
		const struct user_track *t = &c->users[i];
		if (client_replay(c, t->user, t->contig + 1, 0) == -ENOTCONN)
			break; /* logged off: none of them can go */
		sent++;
	}
	(void)client_flush(c);
	return sent;
}

/* The automatic replay: users whose oldest hole is due, round-robin from where the last
 * call stopped so that none starves behind the per-call bounds. */
static uint32_t
replay_due(struct client *c, uint64_t now_ns)
{
	if (c->cfg.replay_off || c->users_holed == 0 || !sendable(c))
		return 0;
	uint32_t sent = 0;
	uint32_t visits = c->user_count < CLIENT_REPLAY_SCAN_MAX ? c->user_count
								  : CLIENT_REPLAY_SCAN_MAX;
	for (uint32_t n = 0; n < visits && sent < CLIENT_REPLAY_TICK_MAX; n++) {
		if (c->replay_cursor >= c->user_count)
			c->replay_cursor = 0;
		struct user_track *t = &c->users[c->replay_cursor++];
		if (t->contig == t->newest || t->replay_due_ns > now_ns)
			continue;
		(void)client_replay(c, t->user, t->contig + 1, t->newest);
		t->replay_due_ns = now_ns + c->replay_every_ns;
		sent++;
	}
	return sent;
}

static void
dispatch(struct client *c, const struct wire_msg_hdr *h, uint64_t now_ns, client_event_fn *fn,
	 void *ctx)
{
	if (c->sess != SESS_OFF && is_session_type(h->type)) {
		session_msg(c, h, now_ns, fn, ctx);
		return;
	}
	struct client_event ev = {.msg = h, .now_ns = now_ns};
	switch (h->type) {
	case WIRE_ACK: {
		const struct wire_ack *m = (const void *)h;
		ev.kind = CLIENT_EV_ACK;
		c->stats.acks++;
		seq_note(c, m->user, m->seq, now_ns, &ev);
		ev.req = client_find(c, m->user, m->cl_ord_id);
		if (ev.req != NULL)
			answered(c, ev.req, CLIENT_REQ_ANSWERED, 0, now_ns);
		break;
	}
	case WIRE_NAK: {
		const struct wire_nak *m = (const void *)h;
		ev.kind = CLIENT_EV_NAK;
		c->stats.naks++;
		c->stats.nak_reason[m->reason < WIRE_REASON_MAX ? m->reason : WIRE_REASON_MAX]++;
		seq_note(c, m->user, m->seq, now_ns, &ev);
		ev.req = client_find(c, m->user, m->cl_ord_id);
		if (ev.req != NULL)
			answered(c, ev.req, CLIENT_REQ_NAKED, m->reason, now_ns);
		break;
	}
	case WIRE_EXEC_REPORT: {
		const struct wire_exec_report *m = (const void *)h;
		ev.kind = CLIENT_EV_EXEC;
		c->stats.execs++;
		c->stats.exec_kind[m->exec < WIRE_EXEC_MAX ? m->exec : 0]++;
		seq_note(c, m->user, m->seq, now_ns, &ev);
		ev.req = client_find(c, m->user, m->cl_ord_id);
		if (ev.req != NULL) {
			/* A report about the request proves the node has it (the ACK may be lost). */
			answered(c, ev.req, CLIENT_REQ_ANSWERED, 0, now_ns);
			if (m->exec == WIRE_EXEC_REJECTED || m->exec == WIRE_EXEC_CANCEL_REJECTED)
				ev.req->reason = m->reason;
		}
		break;
	}
	case WIRE_ADMIN_REPLY: {
		const struct wire_admin_reply *m = (const void *)h;
		ev.kind = CLIENT_EV_ADMIN_REPLY;
		c->stats.admin_replies++;
		ev.req = client_find(c, CLIENT_TRANSFER_USER, m->req_id);
		if (ev.req != NULL)
			answered(c, ev.req,
				 m->reason == WIRE_REASON_NONE ? CLIENT_REQ_ANSWERED : CLIENT_REQ_NAKED,
				 m->reason, now_ns);
		break;
	}
	default:
		ev.kind = CLIENT_EV_OTHER;
		c->stats.other++;
		break;
	}
	if (ev.req == NULL && ev.kind != CLIENT_EV_OTHER)
		c->stats.unmatched++;
	if (fn != NULL)
		fn(ctx, &ev);
}

/* A frame to a session client: MAC'd under the session key, or one of the few the node
 * sends without (unkeyed_ok). Before the first LOGON the key is zero: MAC'd frames fail. */
static enum wire_err
session_decode(const struct client *c, const void *buf, size_t len,
	       const struct wire_msg_hdr **msgs, uint32_t *count)
{
	uint32_t sender;
	if ((wire_frame_flags(buf, len) & WIRE_FRAME_F_MAC) != 0)
		return wire_frame_decode(buf, len, &c->sess_key, msgs, WIRE_FRAME_MSGS_MAX, count,
					 &sender);
	enum wire_err e = wire_frame_decode(buf, len, NULL, msgs, WIRE_FRAME_MSGS_MAX, count,
					    &sender);
	if (e != WIRE_E_OK)
		return e;
	if (*count == 1 && unkeyed_ok(msgs[0]))
		return WIRE_E_OK;
	*count = 0;
	return WIRE_E_BAD_MAC;
}

uint32_t
client_rx(struct client *c, const void *buf, size_t len, uint64_t now_ns, client_event_fn *fn,
	  void *ctx)
{
	const struct wire_msg_hdr *msgs[WIRE_FRAME_MSGS_MAX];
	uint32_t count = 0, sender = 0;
	c->stats.frames_rx++;
	c->clock_ns = now_ns;
	enum wire_err e = c->sess == SESS_OFF
				  ? wire_frame_decode(buf, len, &c->cfg.key, msgs,
						      WIRE_FRAME_MSGS_MAX, &count, &sender)
				  : session_decode(c, buf, len, msgs, &count);
	if (e != WIRE_E_OK) {
		c->stats.decode_errors++;
		c->stats.decode_err[e]++;
		return 0;
	}
	c->stats.msgs_rx += count;
	for (uint32_t i = 0; i < count; i++)
		dispatch(c, msgs[i], now_ns, fn, ctx);
	return count;
}

/* Receive what is queued, at most CLIENT_RX_BURST datagrams. Returns messages handled. */
static uint32_t
rx_burst(struct client *c, client_event_fn *fn, void *ctx)
{
	uint32_t handled = 0;
	for (uint32_t n = 0; n < CLIENT_RX_BURST; n++) {
		ssize_t r = recv(c->fd, c->rx, WIRE_FRAME_MAX, 0);
		if (r < 0)
			break; /* EAGAIN, or ECONNREFUSED from an ICMP: nothing to read */
		if (c->cfg.drop_rx_permille != 0) {
			c->cfg.drop_seed = c->cfg.drop_seed * UINT64_C(6364136223846793005) +
					   UINT64_C(1442695040888963407);
			if ((c->cfg.drop_seed >> 33) % 1000 < c->cfg.drop_rx_permille) {
				c->stats.rx_dropped++;
				continue;
			}
		}
		handled += client_rx(c, c->rx, (size_t)r, client_now_ns(), fn, ctx);
	}
	return handled;
}

/* The session's next deadline: a relogon's resend, or the heartbeat. */
static uint64_t
session_due_ns(const struct client *c)
{
	if (c->sess == SESS_LOGON && c->logon_async)
		return c->logon_next_ns < c->logon_end_ns ? c->logon_next_ns : c->logon_end_ns;
	if (c->sess == SESS_UP)
		return c->last_tx_ns + c->hb_ns;
	return DUE_NONE;
}

uint64_t
client_wake_ns(const struct client *c)
{
	uint64_t due = client_next_due_ns(c);
	uint64_t sdue = session_due_ns(c);
	due = sdue < due ? sdue : due;
	if (c->cfg.replay_off || c->users_holed == 0 || !sendable(c))
		return due;
	/* The users replay_due will visit next, in its order and within its bound. */
	uint32_t visits = c->user_count < CLIENT_REPLAY_SCAN_MAX ? c->user_count
								  : CLIENT_REPLAY_SCAN_MAX;
	uint32_t i = c->replay_cursor;
	for (uint32_t n = 0; n < visits; n++, i++) {
		if (i >= c->user_count)
			i = 0;
		const struct user_track *t = &c->users[i];
		if (t->contig < t->newest && t->replay_due_ns < due)
			due = t->replay_due_ns;
	}
	return due;
}

uint32_t
client_poll(struct client *c, int timeout_ms, client_event_fn *fn, void *ctx)
{
	uint32_t handled = 0;
	(void)client_flush(c);
	struct pollfd p = {.fd = c->fd, .events = POLLIN};
	if (timeout_ms > 0) {
		/* Do not sleep past the next retransmit, heartbeat or LOGON resend. */
		uint64_t due = client_next_due_ns(c), now = client_now_ns();
		uint64_t sdue = session_due_ns(c);
		due = sdue < due ? sdue : due;
		if (due != UINT64_MAX) {
			uint64_t wait_ms = due > now ? (due - now + 999999) / 1000000 : 0;
			if (wait_ms < (uint64_t)timeout_ms)
				timeout_ms = (int)wait_ms;
		}
	}
	if (poll(&p, 1, timeout_ms) > 0)
		handled = rx_burst(c, fn, ctx);
	client_tick(c, client_now_ns(), fn, ctx);
	return handled;
}

/* ---------------------------------------------------------------------------------------
 * Logon, logout, key files.
 * ------------------------------------------------------------------------------------- */

int
client_logon(struct client *c, int timeout_ms)
{
	if (c->sess == SESS_OFF || timeout_ms < 0)
		return -EINVAL;
	if (c->sess == SESS_UP)
		return 0;
	uint64_t now = client_now_ns(), end = now + (uint64_t)timeout_ms * NS_PER_MS;
	c->clock_ns = now;
	c->sess = SESS_LOGON;
	c->relogging = false;
	c->logon_async = false; /* this loop resends it, not client_tick */
	c->logon_reason = 0;
	c->logon_first_ns = now;
	c->logon_next_ns = now;
	/* Bounded by the deadline; the reply, a refusal or nothing ends it. */
	while (c->sess == SESS_LOGON && (now = client_now_ns()) < end) {
		c->clock_ns = now;
		if (now >= c->logon_next_ns)
			(void)logon_send(c, now); /* a failed send waits for the resend */
		uint64_t wake = c->logon_next_ns < end ? c->logon_next_ns : end;
		int wait_ms = (int)((wake - now + NS_PER_MS - 1) / NS_PER_MS);
		struct pollfd p = {.fd = c->fd, .events = POLLIN};
		if (poll(&p, 1, wait_ms) > 0)
			(void)rx_burst(c, NULL, NULL);
	}
	if (c->sess == SESS_UP)
		return 0;
	if (c->sess == SESS_LOGON) {
		c->sess = SESS_DOWN;
		c->logon_err = -ETIMEDOUT;
		return -ETIMEDOUT;
	}
	return -EACCES;
}

int
client_logon_start(struct client *c, int timeout_ms)
{
	if (c->sess == SESS_OFF || timeout_ms < 1)
		return -EINVAL;
	if (c->sess != SESS_DOWN)
		return 0; /* up, or a logon (or relogon) pending already */
	uint64_t now = client_now_ns();
	c->clock_ns = now;
	c->sess = SESS_LOGON;
	c->relogging = false;
	c->logon_async = true;
	c->logon_reason = 0;
	c->logon_first_ns = now;
	c->logon_end_ns = now + (uint64_t)timeout_ms * NS_PER_MS;
	(void)logon_send(c, now); /* a failed send waits for the resend */
	return 0;
}

int
client_logon_status(const struct client *c)
{
	switch (c->sess) {
	case SESS_OFF:
		return -EINVAL;
	case SESS_UP:
		return 0;
	case SESS_LOGON:
		return -EINPROGRESS;
	default:
		return c->logon_err;
	}
}

uint16_t
client_logon_reason(const struct client *c)
{
	return c->logon_reason;
}

int
client_logout(struct client *c)
{
	if (c->sess != SESS_UP)
		return -ENOTCONN;
	int err = client_flush(c); /* what was built goes first, in the session */
	struct wire_logout m;
	memset(&m, 0, sizeof(m));
	wire_hdr_init(&m.hdr, WIRE_LOGOUT, 0);
	m.session_id = c->cfg.session_id;
	m.reason = WIRE_REASON_NONE; /* the client asked */
	int rc = frame_add(c, &m);
	if (rc == 0)
		rc = client_flush(c);
	c->sess = SESS_DOWN;
	c->relogging = false;
	c->logon_err = -ENOTCONN;
	return err < 0 ? err : rc;
}

bool
client_session_up(const struct client *c)
{
	return c->sess == SESS_UP;
}

uint32_t
client_session_id(const struct client *c)
{
	return c->cfg.session_id;
}

uint64_t
client_session_seq(const struct client *c)
{
	return c->tx_seq;
}

uint32_t
client_heartbeat_ms(const struct client *c)
{
	return (uint32_t)(c->hb_ns / NS_PER_MS);
}

int
client_key_file_load(const char *path, struct client_config *cfg, char *err, size_t cap)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		snprintf(err, cap, "%s: %s", path, strerror(e));
		return -e;
	}
	/* One byte more than allowed, to tell a file of exactly the limit from a larger one. */
	char *text = malloc(CLIENT_KEY_FILE_MAX + 1);
	if (text == NULL) {
		close(fd);
		snprintf(err, cap, "%s: out of memory", path);
		return -ENOMEM;
	}
	size_t len = 0;
	int rc = 0;
	while (len <= CLIENT_KEY_FILE_MAX) { /* each turn reads at least a byte, or ends */
		ssize_t r = read(fd, text + len, CLIENT_KEY_FILE_MAX + 1 - len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			rc = -errno;
			snprintf(err, cap, "%s: %s", path, strerror(errno));
			break;
		}
		if (r == 0)
			break;
		len += (size_t)r;
	}
	close(fd);
	if (rc == 0 && len > CLIENT_KEY_FILE_MAX) {
		rc = -EFBIG;
		snprintf(err, cap, "%s: larger than %d bytes", path, CLIENT_KEY_FILE_MAX);
	}
	uint64_t key_id = 0;
	uint8_t secret[AUTH_SECRET_SIZE];
	char why[160];
	if (rc == 0 && auth_client_key_parse(text, len, &key_id, secret, why, sizeof(why)) < 0) {
		rc = -EINVAL;
		snprintf(err, cap, "%s: %s", path, why);
	}
	if (rc == 0) {
		cfg->logon = true;
		cfg->key_id = key_id;
		memcpy(cfg->secret, secret, sizeof(secret));
	}
	/* The caller's cfg is the one copy of the secret left. */
	explicit_bzero(secret, sizeof(secret));
	explicit_bzero(text, len);
	free(text);
	return rc;
}
