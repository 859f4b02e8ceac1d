/* SPDX-License-Identifier: Apache-2.0 */
/* Client sessions: keys, LOGON signature, session table and rules (auth.h). */
#include "auth.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nettle/hmac.h>

#include "common/check.h"

static const char *const counter_labels[AUTH_C_COUNT] = {
#define AUTH_C_LABEL(name, label, help) [AUTH_C_##name] = label,
	AUTH_COUNTERS(AUTH_C_LABEL)
#undef AUTH_C_LABEL
};
static const char *const counter_helps[AUTH_C_COUNT] = {
#define AUTH_C_HELP(name, label, help) [AUTH_C_##name] = help,
	AUTH_COUNTERS(AUTH_C_HELP)
#undef AUTH_C_HELP
};

const char *
auth_counter_label(enum auth_counter c)
{
	return (unsigned)c < AUTH_C_COUNT ? counter_labels[c] : "?";
}

const char *
auth_counter_help(enum auth_counter c)
{
	return (unsigned)c < AUTH_C_COUNT ? counter_helps[c] : "?";
}

/* ---------------------------------------------------------------------------------------
 * Key files.
 * ------------------------------------------------------------------------------------- */

/* One line's whitespace-separated words (at most max), NUL-terminated in place. */
static uint32_t
split_words(char *line, char **words, uint32_t max)
{
	uint32_t n = 0;
	char *p = line;
	while (*p != '\0') {
		while (*p == ' ' || *p == '\t' || *p == '\r')
			p++;
		if (*p == '\0')
			break;
		if (n == max)
			return max + 1;
		words[n++] = p;
		while (*p != '\0' && *p != ' ' && *p != '\t' && *p != '\r')
			p++;
		if (*p != '\0')
			*p++ = '\0';
	}
	return n;
}

static bool
parse_secret(const char *s, uint8_t out[AUTH_SECRET_SIZE])
{
	if (wire_hex_decode(s, out, AUTH_SECRET_SIZE) != 0)
		return false;
	uint8_t any = 0;
	for (int i = 0; i < AUTH_SECRET_SIZE; i++)
		any |= out[i];
	return any != 0;
}

/* A decimal u64 (no sign, no blanks, no overflow), the whole string. */
static bool
parse_u64(const char *s, uint64_t *out)
{
	uint64_t v = 0;
	if (*s == '\0')
		return false;
	for (; *s != '\0'; s++) {
		if (*s < '0' || *s > '9')
			return false;
		uint64_t d = (uint64_t)(*s - '0');
		if (v > (UINT64_MAX - d) / 10)
			return false;
		v = v * 10 + d;
	}
	*out = v;
	return true;
}

static bool
parse_perms(char *s, uint32_t *out)
{
	uint32_t p = 0;
	if (strcmp(s, "all") == 0) {
		*out = AUTH_P_ALL;
		return true;
	}
	for (char *save = NULL, *w = strtok_r(s, ",", &save); w != NULL;
	     w = strtok_r(NULL, ",", &save)) {
		if (strcmp(w, "trade") == 0)
			p |= AUTH_P_TRADE;
		else if (strcmp(w, "transfer") == 0)
			p |= AUTH_P_TRANSFER;
		else if (strcmp(w, "read") == 0)
			p |= AUTH_P_READ;
		else
			return false;
	}
	*out = p;
	return p != 0;
}

static bool
parse_users(char *s, struct auth_key *k)
{
	if (strcmp(s, "*") == 0) {
		k->all_users = true;
		return true;
	}
	for (char *save = NULL, *w = strtok_r(s, ",", &save); w != NULL;
	     w = strtok_r(NULL, ",", &save)) {
		if (k->range_count == AUTH_RANGES_MAX)
			return false;
		struct auth_range r;
		char *dash = strchr(w, '-');
		if (dash != NULL)
			*dash = '\0';
		if (!parse_u64(w, &r.lo) || r.lo == 0)
			return false;
		r.hi = r.lo;
		if (dash != NULL && (!parse_u64(dash + 1, &r.hi) || r.hi < r.lo))
			return false;
		k->ranges[k->range_count++] = r;
	}
	return k->range_count > 0;
}

static int
key_cmp(const void *a, const void *b)
{
	uint64_t x = ((const struct auth_key *)a)->key_id, y = ((const struct auth_key *)b)->key_id;
	return x < y ? -1 : x > y;
}

#define LINE_MAX_LEN 1024

/* Copy the next line of text (without its newline) into buf; false at the end. A line
 * longer than the buffer is reported by *too_long. */
static bool
next_line(const char *text, size_t len, size_t *pos, char *buf, size_t cap, bool *too_long)
{
	if (*pos >= len)
		return false;
	size_t start = *pos, end = start;
	while (end < len && text[end] != '\n')
		end++;
	*pos = end < len ? end + 1 : end;
	*too_long = end - start >= cap;
	size_t n = *too_long ? cap - 1 : end - start;
	memcpy(buf, text + start, n);
	buf[n] = '\0';
	/* A NUL inside the line ends it early: treat as garbage below. */
	if (memchr(text + start, '\0', end - start) != NULL)
		*too_long = true;
	char *hash = strchr(buf, '#');
	if (hash != NULL)
		*hash = '\0';
	return true;
}

int
auth_keys_parse(const char *text, size_t len, const char *file, struct auth_keys *out,
		char *err, size_t err_cap)
{
	char line[LINE_MAX_LEN];
	size_t pos = 0;
	uint32_t lineno = 0;
	bool too_long;

	out->count = 0;
	while (next_line(text, len, &pos, line, sizeof(line), &too_long)) {
		char *w[6];
		lineno++;
		if (too_long) {
			snprintf(err, err_cap, "%s:%u: line too long or not text", file, lineno);
			return -1;
		}
		uint32_t n = split_words(line, w, 5);
		if (n == 0)
			continue;
		if (n < 4 || n > 5 || (n == 5 && strcmp(w[4], "revoked") != 0)) {
			snprintf(err, err_cap,
				 "%s:%u: want <key_id> <secret> <perms> <users> [revoked]", file,
				 lineno);
			return -1;
		}
		if (out->count == out->cap) {
			snprintf(err, err_cap, "%s:%u: more than %u keys", file, lineno, out->cap);
			return -1;
		}
		struct auth_key *k = &out->keys[out->count];
		memset(k, 0, sizeof(*k));
		if (!parse_u64(w[0], &k->key_id) || k->key_id == 0) {
			snprintf(err, err_cap, "%s:%u: key_id: a decimal number above 0", file,
				 lineno);
			return -1;
		}
		if (!parse_secret(w[1], k->secret)) {
			snprintf(err, err_cap, "%s:%u: secret: must be %d hex digits, not all zero",
				 file, lineno, 2 * AUTH_SECRET_SIZE);
			return -1;
		}
		if (!parse_perms(w[2], &k->perms)) {
			snprintf(err, err_cap, "%s:%u: perms: trade,transfer,read or all", file,
				 lineno);
			return -1;
		}
		if (!parse_users(w[3], k)) {
			snprintf(err, err_cap,
				 "%s:%u: users: '*' or up to %d ranges like 1-1000,5000", file,
				 lineno, AUTH_RANGES_MAX);
			return -1;
		}
		k->revoked = n == 5;
		for (uint32_t i = 0; i < out->count; i++) {
			if (out->keys[i].key_id == k->key_id) {
				snprintf(err, err_cap, "%s:%u: key_id %llu given twice", file,
					 lineno, (unsigned long long)k->key_id);
				return -1;
			}
		}
		out->count++;
	}
	qsort(out->keys, out->count, sizeof(out->keys[0]), key_cmp);
	return 0;
}

int
auth_client_key_parse(const char *text, size_t len, uint64_t *key_id,
		      uint8_t secret[AUTH_SECRET_SIZE], char *err, size_t err_cap)
{
	char line[LINE_MAX_LEN];
	size_t pos = 0;
	uint32_t lineno = 0;
	bool too_long;

	while (next_line(text, len, &pos, line, sizeof(line), &too_long)) {
		char *w[6];
		lineno++;
		if (too_long) {
			snprintf(err, err_cap, "line %u: too long or not text", lineno);
			return -1;
		}
		uint32_t n = split_words(line, w, 5);
		if (n == 0)
			continue;
		if (n < 2 || n > 5 || !parse_u64(w[0], key_id) || *key_id == 0 ||
		    !parse_secret(w[1], secret)) {
			snprintf(err, err_cap, "line %u: want <key_id> <secret: %d hex digits>",
				 lineno, 2 * AUTH_SECRET_SIZE);
			return -1;
		}
		return 0;
	}
	snprintf(err, err_cap, "no key line");
	return -1;
}

const struct auth_key *
auth_keys_find(const struct auth_keys *ks, uint64_t key_id)
{
	if (ks == NULL)
		return NULL;
	uint32_t lo = 0, hi = ks->count;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (ks->keys[mid].key_id < key_id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < ks->count && ks->keys[lo].key_id == key_id ? &ks->keys[lo] : NULL;
}

bool
auth_key_entitled(const struct auth_key *k, uint64_t user)
{
	if (k->all_users)
		return true;
	for (uint32_t i = 0; i < k->range_count; i++)
		if (user >= k->ranges[i].lo && user <= k->ranges[i].hi)
			return true;
	return false;
}

/* ---------------------------------------------------------------------------------------
 * Signature and session key.
 * ------------------------------------------------------------------------------------- */

#define SIGNED_LEN 48

static void
put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void
put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void
signed_bytes(const char *label, const struct wire_logon *m, uint8_t out[SIGNED_LEN])
{
	memset(out, 0, 16);
	memcpy(out, label, strlen(label)); /* labels are at most 16 bytes */
	put64(out + 16, m->key_id);
	put64(out + 24, m->ts_ns);
	put64(out + 32, m->nonce);
	put32(out + 40, m->session_id);
	put32(out + 44, m->heartbeat_ms);
}

static void
hmac(const uint8_t secret[AUTH_SECRET_SIZE], const char *label, const struct wire_logon *m,
     uint8_t out[SHA256_DIGEST_SIZE])
{
	uint8_t msg[SIGNED_LEN];
	struct hmac_sha256_ctx ctx;
	signed_bytes(label, m, msg);
	hmac_sha256_set_key(&ctx, AUTH_SECRET_SIZE, secret);
	hmac_sha256_update(&ctx, sizeof(msg), msg);
	hmac_sha256_digest(&ctx, SHA256_DIGEST_SIZE, out);
}

static_assert(WIRE_LOGON_SIG_SIZE == SHA256_DIGEST_SIZE, "sig is one HMAC-SHA256");

void
auth_logon_sign(const uint8_t secret[AUTH_SECRET_SIZE], struct wire_logon *m)
{
	hmac(secret, "OMSD-LOGON-1", m, m->sig);
}

bool
auth_logon_verify(const uint8_t secret[AUTH_SECRET_SIZE], const struct wire_logon *m)
{
	uint8_t want[SHA256_DIGEST_SIZE];
	uint8_t diff = 0;
	hmac(secret, "OMSD-LOGON-1", m, want);
	for (int i = 0; i < SHA256_DIGEST_SIZE; i++)
		diff |= (uint8_t)(want[i] ^ m->sig[i]);
	return diff == 0;
}

void
auth_session_key(const uint8_t secret[AUTH_SECRET_SIZE], const struct wire_logon *m,
		 struct wire_key *out)
{
	uint8_t d[SHA256_DIGEST_SIZE];
	hmac(secret, "OMSD-SESSION-1", m, d);
	out->k0 = out->k1 = 0;
	for (int i = 7; i >= 0; i--) {
		out->k0 = out->k0 << 8 | d[i];
		out->k1 = out->k1 << 8 | d[8 + i];
	}
	if ((out->k0 | out->k1) == 0)
		out->k0 = 1; /* a zero key means "no MAC"; 2^-128 */
}

uint32_t
auth_perm_needed(uint16_t type)
{
	switch (type) {
	case WIRE_NEW_ORDER:
	case WIRE_CANCEL:
	case WIRE_AMEND:
	case WIRE_CANCEL_REPLACE:
		return AUTH_P_TRADE;
	case WIRE_TRANSFER:
		return AUTH_P_TRANSFER;
	case WIRE_REPORT_REPLAY:
		return AUTH_P_READ;
	case WIRE_HEARTBEAT:
	case WIRE_LOGOUT:
		return 0;
	default:
		return UINT32_MAX;
	}
}

/* ---------------------------------------------------------------------------------------
 * Session table.
 * ------------------------------------------------------------------------------------- */

static uint32_t
pow2_at_least(uint32_t n)
{
	uint32_t p = 1;
	while (p < n && p < (1u << 30))
		p <<= 1;
	return p;
}

int
auth_sessions_init(struct auth_sessions *t, const struct auth_config *cfg,
		   const struct auth_keys *keys)
{
	memset(t, 0, sizeof(*t));
	t->cfg = *cfg;
	if (t->cfg.heartbeat_ms == 0)
		t->cfg.heartbeat_ms = 1000;
	if (t->cfg.rate_window_ns == 0)
		t->cfg.rate_window_ns = UINT64_C(1000000000);
	uint32_t slots = pow2_at_least(cfg->sessions_max < 2 ? 4 : cfg->sessions_max * 2);
	uint32_t nonces = pow2_at_least(cfg->nonces_max < 64 ? 64 : cfg->nonces_max);
	t->slots = calloc(slots, sizeof(t->slots[0]));
	t->nonces = calloc(nonces, sizeof(t->nonces[0]));
	if (t->slots == NULL || t->nonces == NULL) {
		auth_sessions_free(t);
		return -ENOMEM;
	}
	t->mask = slots - 1;
	t->nonce_mask = nonces - 1;
	t->keys = keys;
	return 0;
}

void
auth_sessions_free(struct auth_sessions *t)
{
	free(t->slots);
	free(t->nonces);
	t->slots = NULL;
	t->nonces = NULL;
}

/* A free slot for id (the table is kept at most half full). */
static struct auth_session *
slot_for(struct auth_sessions *t, uint32_t id)
{
	for (uint32_t i = auth_mix32(id) & t->mask;; i = (i + 1) & t->mask)
		if (t->slots[i].id == 0)
			return &t->slots[i];
}

void
auth_session_end(struct auth_sessions *t, struct auth_session *s)
{
	/* Backward-shift deletion keeps every probe chain unbroken. */
	uint32_t hole = (uint32_t)(s - t->slots);
	DCHECK(s->id != 0 && t->count > 0);
	t->count--;
	for (uint32_t i = (hole + 1) & t->mask;; i = (i + 1) & t->mask) {
		struct auth_session *x = &t->slots[i];
		if (x->id == 0)
			break;
		uint32_t home = auth_mix32(x->id) & t->mask;
		/* x may move to the hole when the hole lies on its probe path home..i. */
		if (((i - home) & t->mask) >= ((i - hole) & t->mask)) {
			t->slots[hole] = *x;
			hole = i;
		}
	}
	memset(&t->slots[hole], 0, sizeof(t->slots[hole]));
}

/* Look up (and when absent, remember) a nonce. Returns 0, NONCE_REUSED or CAPACITY. */
static uint16_t
nonce_check(struct auth_sessions *t, uint64_t key_id, uint64_t nonce, uint64_t wall_ns)
{
	struct auth_nonce *free_slot = NULL;
	uint32_t i = auth_mix32(key_id * UINT64_C(0x9e3779b97f4a7c15) ^ nonce) & t->nonce_mask;
	for (uint32_t n = 0; n < AUTH_NONCE_PROBES; n++, i = (i + 1) & t->nonce_mask) {
		struct auth_nonce *e = &t->nonces[i];
		bool live = e->key_id != 0 && e->expire_ns > wall_ns;
		if (live && e->key_id == key_id && e->nonce == nonce)
			return WIRE_REASON_NONCE_REUSED;
		if (!live && free_slot == NULL)
			free_slot = e;
	}
	if (free_slot == NULL)
		return WIRE_REASON_CAPACITY;
	free_slot->key_id = key_id;
	free_slot->nonce = nonce;
	/* Remembered until a logon with it is stale anyway (ts + window), measured from the
	 * later of the node's clock and the logon's timestamp. */
	free_slot->expire_ns = wall_ns + 2 * t->cfg.logon_window_ns;
	return 0;
}

static uint16_t
refuse(struct auth_sessions *t, enum auth_counter c, uint16_t reason)
{
	t->c[c]++;
	return reason;
}

uint16_t
auth_logon(struct auth_sessions *t, const struct wire_logon *m, uint64_t wall_ns,
	   uint64_t mono_ns, uint64_t peer, struct auth_session **out)
{
	*out = NULL;
	if (t->cfg.logons_per_window != 0) {
		if (mono_ns - t->logon_window_ns >= t->cfg.rate_window_ns) {
			t->logon_window_ns = mono_ns;
			t->logon_count = 0;
		}
		if (t->logon_count >= t->cfg.logons_per_window)
			return refuse(t, AUTH_C_REF_LOGON_RATE, WIRE_REASON_MSG_RATE);
		t->logon_count++;
	}
	const struct auth_key *k = auth_keys_find(t->keys, m->key_id);
	if (k == NULL)
		return refuse(t, AUTH_C_REF_BAD_KEY, WIRE_REASON_BAD_KEY);
	if (!auth_logon_verify(k->secret, m))
		return refuse(t, AUTH_C_REF_BAD_SIGNATURE, WIRE_REASON_BAD_SIGNATURE);
	/* Only a proven holder of the secret learns that the key is revoked. */
	if (k->revoked)
		return refuse(t, AUTH_C_REF_REVOKED, WIRE_REASON_KEY_REVOKED);
	uint64_t skew = m->ts_ns > wall_ns ? m->ts_ns - wall_ns : wall_ns - m->ts_ns;
	if (skew > t->cfg.logon_window_ns)
		return refuse(t, AUTH_C_REF_STALE, WIRE_REASON_STALE_LOGON);
	struct auth_session *s = auth_session_find(t, m->session_id);
	if (s != NULL && s->key_id != m->key_id)
		return refuse(t, AUTH_C_REF_IN_USE, WIRE_REASON_SESSION_IN_USE);
	if (s == NULL && t->count >= t->cfg.sessions_max)
		return refuse(t, AUTH_C_REF_FULL, WIRE_REASON_CAPACITY);
	uint16_t r = nonce_check(t, m->key_id, m->nonce, wall_ns);
	if (r == WIRE_REASON_NONCE_REUSED)
		return refuse(t, AUTH_C_REF_NONCE, r);
	if (r != 0)
		return refuse(t, AUTH_C_REF_FULL, r);
	if (s != NULL) {
		t->c[AUTH_C_LOGONS_REPLACED]++;
	} else {
		s = slot_for(t, m->session_id);
		t->count++;
	}
	memset(s, 0, sizeof(*s));
	s->id = m->session_id;
	s->key_id = k->key_id;
	s->key = k;
	uint32_t hb = m->heartbeat_ms != 0 ? m->heartbeat_ms : t->cfg.heartbeat_ms;
	s->heartbeat_ms = hb < AUTH_HEARTBEAT_MIN_MS   ? AUTH_HEARTBEAT_MIN_MS
			  : hb > AUTH_HEARTBEAT_MAX_MS ? AUTH_HEARTBEAT_MAX_MS
						       : hb;
	auth_session_key(k->secret, m, &s->frame_key);
	s->next_seq = 1;
	s->last_rx_ns = mono_ns;
	s->logon_ns = mono_ns;
	s->rate_start_ns = mono_ns;
	s->peer = peer;
	t->c[AUTH_C_LOGONS]++;
	*out = s;
	return 0;
}

uint16_t
auth_frame(struct auth_sessions *t, const void *frame, size_t len,
	   const struct wire_session_hdr *sh, uint32_t msgs, uint64_t mono_ns, uint64_t peer,
	   struct auth_session **out, bool *warn)
{
	return auth_frame_proven(t, frame, len, sh, msgs, mono_ns, peer, NULL, out, warn);
}

uint16_t
auth_frame_proven(struct auth_sessions *t, const void *frame, size_t len,
		  const struct wire_session_hdr *sh, uint32_t msgs, uint64_t mono_ns,
		  uint64_t peer, const struct wire_key *proven, struct auth_session **out,
		  bool *warn)
{
	*warn = false;
	struct auth_session *s = auth_session_find(t, sh->session_id);
	*out = NULL;
	if (s == NULL)
		return refuse(t, AUTH_C_REF_UNKNOWN_SESSION, WIRE_REASON_UNKNOWN_SESSION);
	/* Proven elsewhere under exactly this session's key: the same check, already made. */
	bool same = proven != NULL && proven->k0 == s->frame_key.k0 &&
		    proven->k1 == s->frame_key.k1;
	if (same)
		t->c[AUTH_C_MAC_PROVEN]++;
	else if (!wire_frame_mac_ok(frame, len, &s->frame_key))
		return refuse(t, AUTH_C_REF_BAD_MAC, WIRE_REASON_BAD_SIGNATURE);
	*out = s;
	if (sh->seq > s->next_seq)
		return refuse(t, AUTH_C_REF_SEQ_GAP, WIRE_REASON_SEQ_GAP);
	if (sh->seq < s->next_seq)
		return refuse(t, AUTH_C_REF_SEQ_REPEAT, WIRE_REASON_SEQ_REPEAT);
	/* A proven frame keeps the session alive even when it is refused for its rate. */
	s->last_rx_ns = mono_ns;
	s->peer = peer;
	if (t->cfg.msgs_per_window != 0) {
		if (mono_ns - s->rate_start_ns >= t->cfg.rate_window_ns) {
			s->rate_start_ns = mono_ns;
			s->rate_msgs = 0;
			s->rate_warned = false;
		}
		if (s->rate_msgs + msgs > t->cfg.msgs_per_window)
			return refuse(t, AUTH_C_REF_RATE, WIRE_REASON_MSG_RATE);
		s->rate_msgs += msgs;
		uint64_t warn_at = (uint64_t)t->cfg.msgs_per_window * t->cfg.warn_pct / 100;
		if (!s->rate_warned && t->cfg.warn_pct != 0 && s->rate_msgs >= warn_at) {
			s->rate_warned = true;
			*warn = true;
			t->c[AUTH_C_RATE_WARNED]++;
		}
	}
	/* A refused frame leaves the seq where it was: the client sends that seq again. */
	s->next_seq++;
	t->c[AUTH_C_FRAMES]++;
	return 0;
}

uint16_t
auth_check_msg(struct auth_sessions *t, const struct auth_session *s,
	       const struct wire_msg_hdr *msg, uint64_t user)
{
	uint32_t need = auth_perm_needed(msg->type);
	if (need == 0)
		return 0;
	if (need == UINT32_MAX || (s->key->perms & need) != need)
		return refuse(t, AUTH_C_REF_NO_PERMISSION, WIRE_REASON_NO_PERMISSION);
	if (!auth_key_entitled(s->key, user))
		return refuse(t, AUTH_C_REF_NOT_ENTITLED, WIRE_REASON_NOT_ENTITLED);
	return 0;
}

uint32_t
auth_keys_swap(struct auth_sessions *t, const struct auth_keys *keys, auth_end_fn *fn,
	       void *ctx)
{
	uint32_t ended = 0;
	t->keys = keys;
	for (uint32_t i = 0; i <= t->mask;) {
		struct auth_session *s = &t->slots[i];
		if (s->id != 0) {
			const struct auth_key *k = auth_keys_find(keys, s->key_id);
			if (k == NULL || k->revoked) {
				if (fn != NULL)
					fn(ctx, s, WIRE_REASON_KEY_REVOKED);
				t->c[AUTH_C_ENDED_REVOKED]++;
				auth_session_end(t, s);
				ended++;
				continue; /* the shift may have moved another session here */
			}
			s->key = k;
		}
		i++;
	}
	return ended;
}

/* End the idle sessions in slots [from, to); a deletion shifts a later session into the
 * hole, which is then looked at again. */
static uint32_t
expire_range(struct auth_sessions *t, uint64_t mono_ns, uint32_t from, uint32_t to,
	     auth_end_fn *fn, void *ctx)
{
	uint32_t ended = 0;
	for (uint32_t i = from; i < to;) {
		struct auth_session *s = &t->slots[i];
		uint64_t idle_ns = (uint64_t)s->heartbeat_ms * AUTH_IDLE_BEATS * 1000000u;
		if (s->id != 0 && mono_ns > s->last_rx_ns && mono_ns - s->last_rx_ns > idle_ns) {
			if (fn != NULL)
				fn(ctx, s, WIRE_REASON_SESSION_IDLE);
			t->c[AUTH_C_ENDED_IDLE]++;
			auth_session_end(t, s);
			ended++;
			continue;
		}
		i++;
	}
	return ended;
}

uint32_t
auth_expire(struct auth_sessions *t, uint64_t mono_ns, auth_end_fn *fn, void *ctx)
{
	return expire_range(t, mono_ns, 0, t->mask + 1, fn, ctx);
}

uint32_t
auth_expire_step(struct auth_sessions *t, uint64_t mono_ns, uint32_t max, bool *pass_done,
		 auth_end_fn *fn, void *ctx)
{
	CHECK(max >= 1);
	uint32_t from = t->expire_at <= t->mask ? t->expire_at : 0;
	uint32_t to = t->mask + 1 - from > max ? from + max : t->mask + 1;
	uint32_t ended = expire_range(t, mono_ns, from, to, fn, ctx);
	*pass_done = to == t->mask + 1;
	t->expire_at = *pass_done ? 0 : to;
	return ended;
}
