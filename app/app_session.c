/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Client sessions at the gateway (docs/security.md). Every frame from a client reaches the
 * gateway lcore (the io lcore routes session frames there whole): a LOGON opens a session
 * (auth_logon: key, signature, timestamp window against the cluster clock, nonce, session
 * id); a session frame is proven by its MAC under the session's key, its seq, and the
 * messages-per-window budget (auth_frame), then each message by the key's permissions and
 * users (auth_check_msg) before app_gw_order routes it. Anything else from a client is
 * refused with NO_SESSION unless [sessions] allow_unauthenticated (development only).
 *
 * Refusals name their reason: a LOGON_REPLY with the reason (no MAC: no key is agreed), a
 * SESSION_REJECT naming the expected seq (MAC'd under the session key, or none for an
 * unknown session), a NAK / ADMIN_REPLY per refused message. A frame whose MAC does not
 * verify is counted and dropped unanswered: its sender is not proven.
 *
 * The key set is the main lcore's (app_keys_poll, reloading [sessions] keys_file when it
 * changes): the gateway adopts a new set at its next cycle, ending at once every session
 * whose key is gone or revoked (LOGOUT KEY_REVOKED), and says so (keys_adopted) before
 * the main lcore frees the old set. Sessions silent for three heartbeats end (LOGOUT
 * SESSION_IDLE).
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include <rte_mbuf.h>

#include "app_keys.h"
#include "app_shard_int.h"

#define EXPIRE_EVERY_NS UINT64_C(100000000) /* idle sessions looked for this often */
#define EXPIRE_SLICE 512u                     /* session slots looked at in one cycle */

/* One session's frame key as the io lcores see it: a slot of a direct-mapped table the
 * gateway writes (seqlock: seq odd while it writes) and any io lcore reads. A cache, not the
 * authority: a session whose slot another holds, or one the io lcore read mid-write, is
 * simply not proven there, and the gateway checks its MAC itself (auth_frame_proven
 * compares the key an io lcore used with the session's own, so a stale slot proves
 * nothing). Nothing is freed while the lcores run. */
struct sk_slot {
	uint32_t seq;
	uint32_t id;      /* 0: empty */
	uint64_t k0, k1;
} __attribute__((aligned(32)));

struct app_gw_sess {
	struct auth_sessions auth;
	const struct app_keyset *adopted; /* the set auth.keys points into */
	uint64_t next_expire_ns;
	uint64_t pub[AUTH_C_COUNT];       /* counters for other threads (relaxed) */
	uint64_t pub_active;
	struct sk_slot *keys;             /* published session keys, keys_mask + 1 slots */
	uint32_t keys_mask;
};

static uint32_t
sk_index(uint32_t id, uint32_t mask)
{
	return (uint32_t)((id * UINT64_C(0x9e3779b97f4a7c15)) >> 32) & mask;
}

static void
sk_write(struct sk_slot *e, uint32_t id, const struct wire_key *k)
{
	uint32_t seq = e->seq;
	__atomic_store_n(&e->seq, seq + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	__atomic_store_n(&e->id, id, __ATOMIC_RELAXED);
	__atomic_store_n(&e->k0, k->k0, __ATOMIC_RELAXED);
	__atomic_store_n(&e->k1, k->k1, __ATOMIC_RELAXED);
	__atomic_store_n(&e->seq, seq + 2, __ATOMIC_RELEASE);
}

/* A session opened or re-keyed: the io lcores may prove its frames from now on. */
static void
sk_publish(struct app_gw_sess *g, const struct auth_session *ss)
{
	sk_write(&g->keys[sk_index(ss->id, g->keys_mask)], ss->id, &ss->frame_key);
}

/* A session ended: its slot (if it holds it) empties. */
static void
sk_withdraw(struct app_gw_sess *g, uint32_t id)
{
	static const struct wire_key zero;
	struct sk_slot *e = &g->keys[sk_index(id, g->keys_mask)];
	if (e->id == id)
		sk_write(e, 0, &zero);
}

/* dp_session_key_fn: on any io lcore. */
static bool
sk_read(void *arg, uint32_t id, struct wire_key *out)
{
	const struct app_gw_sess *g = arg;
	const struct sk_slot *e = &g->keys[sk_index(id, g->keys_mask)];
	uint32_t s1 = __atomic_load_n(&e->seq, __ATOMIC_ACQUIRE);
	if ((s1 & 1) != 0)
		return false;
	uint32_t eid = __atomic_load_n(&e->id, __ATOMIC_RELAXED);
	out->k0 = __atomic_load_n(&e->k0, __ATOMIC_RELAXED);
	out->k1 = __atomic_load_n(&e->k1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	return __atomic_load_n(&e->seq, __ATOMIC_RELAXED) == s1 && eid == id && id != 0 &&
	       (out->k0 | out->k1) != 0;
}

static const struct wire_key no_mac; /* all zero: the frame goes without a MAC */

static uint64_t
peer_pack(const struct dp_addr *a)
{
	return (uint64_t)a->ip_be | (uint64_t)a->port_be << 32;
}

static struct dp_addr
peer_unpack(uint64_t p)
{
	struct dp_addr a = { .ip_be = (uint32_t)p, .port_be = (uint16_t)(p >> 32) };
	return a;
}

/* key NULL: the way answers outside a session go (allow_unauthenticated: the [keys]
 * client key of the destination, app_out.c); &no_mac: no MAC. */
static void
send_to(struct app_shard *s, const struct dp_addr *to, const struct wire_key *key,
	const struct wire_msg_hdr *msg)
{
	if (key == NULL)
		(void)app_outbox_add(&s->ob, NULL, to, DP_CLASS_CLIENT, 0, msg, NULL, 0);
	else
		(void)app_outbox_add_keyed(&s->ob, to, key, msg);
}

int
app_session_init(struct app_shard *s)
{
	const struct app_config *cfg = &s->app->cfg;
	struct app_gw_sess *g = calloc(1, sizeof(*g));
	if (g == NULL)
		return -ENOMEM;
	struct auth_config ac = {
		.sessions_max = (uint32_t)cfg->sessions_max,
		/* Every logon of a window's worth at 16 logons per session, at least 4096. */
		.nonces_max = (uint32_t)RTE_MAX(cfg->sessions_max * 16, 4096u),
		.logon_window_ns = cfg->logon_window_ms * 1000000,
		.heartbeat_ms = (uint32_t)cfg->session_heartbeat_ms,
		.msgs_per_window = (uint32_t)cfg->session_msgs_per_sec,
		.rate_window_ns = UINT64_C(1000000000),
		.warn_pct = (uint32_t)cfg->session_warn_pct,
		.logons_per_window = (uint32_t)cfg->logons_per_sec,
	};
	g->adopted = __atomic_load_n(&s->app->keys_pub, __ATOMIC_ACQUIRE);
	int rc = auth_sessions_init(&g->auth, &ac, g->adopted != NULL ? &g->adopted->ks : NULL);
	if (rc != 0) {
		free(g);
		return rc;
	}
	__atomic_store_n(&s->app->keys_adopted, g->adopted, __ATOMIC_RELEASE);
	/* Four slots per session: few sessions share one (those are proven here instead). */
	uint32_t slots = 64;
	while (slots < 4 * ac.sessions_max && slots < (UINT32_C(1) << 24))
		slots <<= 1;
	g->keys = calloc(slots, sizeof(*g->keys));
	if (g->keys == NULL) {
		auth_sessions_free(&g->auth);
		free(g);
		return -ENOMEM;
	}
	g->keys_mask = slots - 1;
	rc = dp_session_key_set(s->app->dp, sk_read, g);
	if (rc != 0) {
		free(g->keys);
		auth_sessions_free(&g->auth);
		free(g);
		return rc;
	}
	s->sess = g;
	return 0;
}

void
app_session_fini(struct app_shard *s)
{
	if (s->sess == NULL)
		return;
	auth_sessions_free(&s->sess->auth);
	free(s->sess->keys); /* every lcore has stopped */
	free(s->sess);
	s->sess = NULL;
}

/* A session ended by the node: tell the client why, under its key (before the slot goes). */
static void
ended(void *ctx, const struct auth_session *ss, uint16_t reason)
{
	struct app_shard *s = ctx;
	struct wire_logout lo;
	sk_withdraw(s->sess, ss->id);
	memset(&lo, 0, sizeof(lo));
	wire_hdr_init(&lo.hdr, WIRE_LOGOUT, 0);
	lo.session_id = ss->id;
	lo.reason = reason;
	struct dp_addr to = peer_unpack(ss->peer);
	send_to(s, &to, &ss->frame_key, &lo.hdr);
}

void
app_session_duty(struct app_shard *s)
{
	struct app_gw_sess *g = s->sess;
	const struct app_keyset *ks = __atomic_load_n(&s->app->keys_pub, __ATOMIC_ACQUIRE);
	if (ks != g->adopted) {
		uint32_t n = auth_keys_swap(&g->auth, &ks->ks, ended, s);
		g->adopted = ks;
		__atomic_store_n(&s->app->keys_adopted, ks, __ATOMIC_RELEASE);
		if (n > 0)
			APP_LOG(NOTICE, "gateway: %u sessions ended: their key was revoked or removed",
				n);
	}
	if (s->clock_ns < g->next_expire_ns)
		return;
	/* A pass over the table in slices, one a cycle: with sessions_max in the hundreds of
	 * thousands a whole pass would stall the lcore for milliseconds. */
	bool pass_done;
	(void)auth_expire_step(&g->auth, s->clock_ns, EXPIRE_SLICE, &pass_done, ended, s);
	if (pass_done)
		g->next_expire_ns = s->clock_ns + EXPIRE_EVERY_NS;
	for (uint32_t i = 0; i < AUTH_C_COUNT; i++)
		__atomic_store_n(&g->pub[i], g->auth.c[i], __ATOMIC_RELAXED);
	__atomic_store_n(&g->pub_active, g->auth.count, __ATOMIC_RELAXED);
}

static void
logon(struct app_shard *s, const struct dp_meta *meta, const struct wire_logon *l)
{
	struct app_gw_sess *g = s->sess;
	struct wire_logon_reply r;
	memset(&r, 0, sizeof(r));
	wire_hdr_init(&r.hdr, WIRE_LOGON_REPLY, 0);
	r.key_id = l->key_id;
	r.session_id = l->session_id;
	r.ts_ns = s->now;
	struct auth_session *ss = NULL;
	/* The staleness window is on the cluster clock (s->now, wall time); idleness and
	 * rates on the lcore's monotonic one. */
	r.reason = auth_logon(&g->auth, l, s->now, s->clock_ns, peer_pack(&meta->src), &ss);
	if (r.reason != 0) {
		send_to(s, &meta->src, &no_mac, &r.hdr);
		return;
	}
	sk_publish(g, ss);
	r.next_seq = ss->next_seq;
	r.heartbeat_ms = ss->heartbeat_ms;
	send_to(s, &meta->src, &ss->frame_key, &r.hdr);
}

/* A message the gateway will not route, answered the way the client matches it. */
static void
refuse_msg(struct app_shard *s, const struct dp_addr *to, const struct wire_key *key,
	   const struct wire_msg_hdr *msg, uint16_t reason)
{
	if (msg->type == WIRE_TRANSFER) {
		const struct wire_transfer *t = (const void *)msg;
		struct wire_admin_reply r;
		memset(&r, 0, sizeof(r));
		wire_hdr_init(&r.hdr, WIRE_ADMIN_REPLY, 0);
		r.req_id = t->transfer_id;
		r.reason = reason;
		send_to(s, to, key, &r.hdr);
		return;
	}
	struct wire_nak n;
	memset(&n, 0, sizeof(n));
	wire_hdr_init(&n.hdr, WIRE_NAK, 0);
	n.reason = reason;
	switch (msg->type) {
	case WIRE_NEW_ORDER:
	case WIRE_CANCEL:
	case WIRE_AMEND:
	case WIRE_CANCEL_REPLACE:
		/* Every order-entry message starts with user, cl_ord_id. */
		memcpy(&n.user, msg + 1, sizeof(n.user));
		memcpy(&n.cl_ord_id, (const uint8_t *)(msg + 1) + 8, sizeof(n.cl_ord_id));
		break;
	case WIRE_REPORT_REPLAY:
		n.user = ((const struct wire_report_replay *)(const void *)msg)->user;
		break;
	default:
		break; /* user 0: the message names none the client could match */
	}
	send_to(s, to, key, &n.hdr);
}

static void
reject(struct app_shard *s, const struct dp_addr *to, const struct wire_key *key,
       const struct wire_session_hdr *sh, uint16_t reason, uint64_t expected, uint16_t flags)
{
	struct wire_session_reject r;
	memset(&r, 0, sizeof(r));
	wire_hdr_init(&r.hdr, WIRE_SESSION_REJECT, 0);
	r.hdr.flags = flags;
	r.session_id = sh->session_id;
	r.reason = reason;
	r.seq = sh->seq;
	r.expected_seq = expected;
	send_to(s, to, key, &r.hdr);
}

static void
session_frame(struct app_shard *s, struct rte_mbuf *m, const struct dp_meta *meta,
	      const uint8_t *buf, uint32_t len)
{
	struct app_gw_sess *g = s->sess;
	const struct wire_frame_hdr *fh = rte_pktmbuf_mtod(m, const struct wire_frame_hdr *);
	uint32_t pos = 0;
	/* The io lcore decoded it: SESSION_HDR first, every message valid. */
	const struct wire_session_hdr *sh = (const void *)wire_msgs_next_decoded(buf, len, &pos);
	struct auth_session *ss = NULL;
	bool warn = false;
	/* The io lcore may have checked the MAC already (dp_meta.mac_proven, under the key
	 * it read from our published slots): auth compares that key with the session's. */
	struct dp_meta *mm = dp_meta(m);
	struct wire_key proven = {0};
	if (mm->mac_proven) {
		proven = mm->seal_key;
		memset(&mm->seal_key, 0, sizeof(mm->seal_key)); /* no key left in a freed mbuf */
	}
	uint16_t r = auth_frame_proven(&g->auth, fh, fh->length, sh,
				       (uint32_t)meta->msg_count - 1, s->clock_ns,
				       peer_pack(&meta->src), meta->mac_proven ? &proven : NULL,
				       &ss, &warn);
	if (r == WIRE_REASON_BAD_SIGNATURE)
		return; /* counted (refused_bad_mac); the sender is not proven: no answer */
	if (r == WIRE_REASON_UNKNOWN_SESSION) {
		reject(s, &meta->src, &no_mac, sh, r, 0, 0);
		return;
	}
	if (r != 0) {
		reject(s, &meta->src, &ss->frame_key, sh, r, ss->next_seq, 0);
		return;
	}
	if (warn)
		reject(s, &meta->src, &ss->frame_key, sh, WIRE_REASON_MSG_RATE, ss->next_seq,
		       WIRE_SESSION_REJECT_F_WARN);
	const struct wire_msg_hdr *msg;
	while ((msg = wire_msgs_next_decoded(buf, len, &pos)) != NULL) {
		if (msg->type == WIRE_HEARTBEAT) {
			struct wire_heartbeat hb;
			memset(&hb, 0, sizeof(hb));
			wire_hdr_init(&hb.hdr, WIRE_HEARTBEAT, 0);
			hb.session_id = ss->id;
			hb.ts_ns = s->now;
			send_to(s, &meta->src, &ss->frame_key, &hb.hdr);
			continue;
		}
		if (msg->type == WIRE_LOGOUT) {
			struct wire_logout lo;
			memset(&lo, 0, sizeof(lo));
			wire_hdr_init(&lo.hdr, WIRE_LOGOUT, 0);
			lo.session_id = ss->id;
			send_to(s, &meta->src, &ss->frame_key, &lo.hdr);
			g->auth.c[AUTH_C_LOGOUTS]++;
			sk_withdraw(g, ss->id);
			auth_session_end(&g->auth, ss);
			return; /* nothing after a LOGOUT belongs to a session */
		}
		bool routed = app_is_routed_type(msg);
		uint16_t why = auth_check_msg(&g->auth, ss, msg, routed ? app_msg_user(msg) : 0);
		if (why == 0 && !routed)
			why = WIRE_REASON_NO_PERMISSION; /* e.g. a TRANSFER not marked for routing */
		if (why == 0)
			why = app_gw_order(s, meta, msg, ss->id);
		if (why != 0)
			refuse_msg(s, &meta->src, &ss->frame_key, msg, why);
	}
}

void
app_session_frame(struct app_shard *s, struct rte_mbuf *m, const struct dp_meta *meta)
{
	const uint8_t *buf;
	uint32_t len, pos = 0;
	const struct wire_msg_hdr *msg;

	dp_rx_msgs(m, &buf, &len);
	if ((meta->frame_flags & WIRE_FRAME_F_SESSION) != 0) {
		session_frame(s, m, meta, buf, len);
		return;
	}
	while ((msg = wire_msgs_next_decoded(buf, len, &pos)) != NULL) {
		if (msg->type == WIRE_LOGON) {
			logon(s, meta, (const struct wire_logon *)(const void *)msg);
			continue;
		}
		if (!app_is_routed_type(msg))
			continue;
		if (s->app->cfg.allow_unauthenticated) {
			uint16_t why = app_gw_order(s, meta, msg, 0);
			if (why != 0)
				refuse_msg(s, &meta->src, NULL, msg, why);
			continue;
		}
		sc_add(s, SC_GW_NO_SESSION, 1);
		refuse_msg(s, &meta->src, &no_mac, msg, WIRE_REASON_NO_SESSION);
	}
}

bool
app_session_route(struct app_shard *s, uint32_t session, struct dp_addr *to,
		  const struct wire_key **key)
{
	struct auth_session *ss = auth_session_find(&s->sess->auth, session);
	if (ss == NULL)
		return false;
	*to = peer_unpack(ss->peer);
	*key = &ss->frame_key;
	return true;
}

void
app_session_stats_write(const struct app_shard *s, FILE *out)
{
	if (s->sess == NULL)
		return;
	const struct app_gw_sess *g = s->sess;
	fprintf(out, "gateway.sessions.active %" PRIu64 "\n",
		__atomic_load_n(&g->pub_active, __ATOMIC_RELAXED));
	for (uint32_t i = 0; i < AUTH_C_COUNT; i++)
		fprintf(out, "gateway.sessions.%s %" PRIu64 "\n",
			auth_counter_label((enum auth_counter)i),
			__atomic_load_n(&g->pub[i], __ATOMIC_RELAXED));
}

/* ---------------------------------------------------------------------------------------
 * The key file, on the main lcore.
 * ------------------------------------------------------------------------------------- */

static struct app_keyset *keys_retired; /* freed once the gateway adopted its successor */
static uint64_t keys_next_ns;
static char keys_last_err[512];

/* keys_source = database: a thread reads the api_keys table every keys_refresh_ms (a slow
 * or absent database never stalls the main lcore's control socket) and leaves a changed set
 * in keys_loaded for app_keys_poll to publish. */
static pthread_t keys_thread;
static bool keys_thread_on;
static int keys_stop;                   /* main → thread (atomic) */
static struct app_keyset *keys_loaded;  /* thread → main (atomic exchange) */

static void *
keys_db_loop(void *arg)
{
	struct app *app = arg;
	const struct app_keyset *first = __atomic_load_n(&app->keys_pub, __ATOMIC_ACQUIRE);
	bool have = first != NULL; /* a set was read (the digest means something) */
	uint64_t digest = have ? first->digest : 0;
	char err[512], last_err[512] = "";
	for (;;) {
		for (uint64_t slept = 0; slept < app->cfg.keys_refresh_ms; slept += 50) {
			if (__atomic_load_n(&keys_stop, __ATOMIC_ACQUIRE))
				return NULL;
			usleep(50000);
		}
		struct app_keyset *ks;
		if (app_keyset_from_db(app->cfg.db_conninfo, &ks, err, sizeof(err)) != 0) {
			if (strcmp(err, last_err) != 0)
				APP_LOG(ERR, "[sessions] keys_source = database: %s; keeping the keys in "
					"force", err);
			snprintf(last_err, sizeof(last_err), "%s", err);
			continue;
		}
		if (last_err[0] != '\0')
			APP_LOG(NOTICE, "[sessions] keys_source = database: the table answers again");
		last_err[0] = '\0';
		if (have && ks->digest == digest) {
			app_keyset_free(ks);
			continue;
		}
		digest = ks->digest;
		have = true;
		app_keyset_free(__atomic_exchange_n(&keys_loaded, ks, __ATOMIC_ACQ_REL));
	}
}

void
app_keys_stop(void)
{
	if (!keys_thread_on)
		return;
	__atomic_store_n(&keys_stop, 1, __ATOMIC_RELEASE);
	pthread_join(keys_thread, NULL);
	keys_thread_on = false;
	app_keyset_free(__atomic_exchange_n(&keys_loaded, NULL, __ATOMIC_ACQ_REL));
}

int
app_keys_start(struct app *app)
{
	if (app->cfg.keys_from_db) {
		char why[512];
		struct app_keyset *ks = NULL;
		if (app_keyset_from_db(app->cfg.db_conninfo, &ks, why, sizeof(why)) != 0)
			APP_LOG(WARNING, "[sessions] keys_source = database: %s; every logon is "
				"refused BAD_KEY until the table is read", why);
		else
			APP_LOG(INFO, "API keys: %u from the database", ks->ks.count);
		__atomic_store_n(&app->keys_pub, ks, __ATOMIC_RELEASE);
		if (pthread_create(&keys_thread, NULL, keys_db_loop, app) != 0) {
			APP_LOG(ERR, "[sessions] keys_source = database: no key thread");
			return -EINVAL;
		}
		keys_thread_on = true;
		return 0;
	}
	if (app->cfg.keys_file[0] == '\0')
		return 0;
	char why[512];
	struct app_keyset *ks;
	if (app_keyset_load(app->cfg.keys_file, &ks, why, sizeof(why)) != 0) {
		APP_LOG(ERR, "[sessions] keys_file: %s", why);
		return -EINVAL;
	}
	uint32_t revoked = 0;
	for (uint32_t i = 0; i < ks->ks.count; i++)
		revoked += ks->ks.keys[i].revoked;
	APP_LOG(INFO, "API keys: %u from %s (%u revoked)", ks->ks.count, app->cfg.keys_file,
		revoked);
	__atomic_store_n(&app->keys_pub, ks, __ATOMIC_RELEASE);
	return 0;
}

/* keys_source = database: publish what the key thread read, once the gateway has taken
 * the set before it. */
static void
keys_poll_db(struct app *app)
{
	struct app_keyset *pub = __atomic_load_n(&app->keys_pub, __ATOMIC_ACQUIRE);
	if (pub != __atomic_load_n(&app->keys_adopted, __ATOMIC_ACQUIRE))
		return;
	app_keyset_free(keys_retired);
	keys_retired = NULL;
	struct app_keyset *ks = __atomic_exchange_n(&keys_loaded, NULL, __ATOMIC_ACQ_REL);
	if (ks == NULL)
		return;
	APP_LOG(NOTICE, "API keys reloaded: %u from the database", ks->ks.count);
	keys_retired = pub;
	__atomic_store_n(&app->keys_pub, ks, __ATOMIC_RELEASE);
}

void
app_keys_poll(struct app *app, uint64_t now_ns)
{
	const char *path = app->cfg.keys_file;
	if (app->cfg.keys_from_db) {
		keys_poll_db(app);
		return;
	}
	if (path[0] == '\0' || now_ns < keys_next_ns)
		return;
	keys_next_ns = now_ns + app->cfg.keys_refresh_ms * 1000000;
	struct app_keyset *pub = __atomic_load_n(&app->keys_pub, __ATOMIC_ACQUIRE);
	if (pub != __atomic_load_n(&app->keys_adopted, __ATOMIC_ACQUIRE))
		return; /* the gateway has not taken the last set yet */
	app_keyset_free(keys_retired);
	keys_retired = NULL;
	if (pub != NULL && !app_keyset_changed(pub, path))
		return;
	char why[512];
	struct app_keyset *ks;
	if (app_keyset_load(path, &ks, why, sizeof(why)) != 0) {
		/* Said once per distinct fault; the keys in force stay. */
		if (strcmp(why, keys_last_err) != 0)
			APP_LOG(ERR, "[sessions] keys_file: %s; keeping the keys in force", why);
		snprintf(keys_last_err, sizeof(keys_last_err), "%s", why);
		return;
	}
	keys_last_err[0] = '\0';
	APP_LOG(NOTICE, "API keys reloaded: %u from %s", ks->ks.count, path);
	keys_retired = pub;
	__atomic_store_n(&app->keys_pub, ks, __ATOMIC_RELEASE);
}
