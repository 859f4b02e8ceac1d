/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Client sessions (docs/security.md): API keys, the LOGON signature, the per-session frame
 * key, and the session table a gateway keeps — the logon rules (key, signature, timestamp
 * window, nonce), the inbound frame rules (MAC under the session key, sequence without gap
 * or repeat, messages per window) and the entitlement rules (users, permissions).
 *
 * No clock, no I/O, no allocation after auth_sessions_init: time comes in as arguments (the
 * wall clock for the logon window, a monotonic one for idleness and rate windows), so the
 * rules are unit-tested and fuzzed without a node. HMAC-SHA256 is nettle's.
 *
 * The signed bytes of a LOGON (all integers little-endian, 48 bytes):
 *   "OMSD-LOGON-1" + 4 zero bytes | key_id u64 | ts_ns u64 | nonce u64 | session_id u32 |
 *   heartbeat_ms u32
 * sig = HMAC-SHA256(secret, those bytes). The session's frame key is the first 16 bytes of
 * HMAC-SHA256(secret, the same bytes with "OMSD-SESSION-1" + 2 zero bytes as the label),
 * read as k0, k1 little-endian: both ends derive it, it never crosses the wire.
 */
#ifndef OMSD_AUTH_AUTH_H
#define OMSD_AUTH_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/hash.h"
#include "common/wire.h"

#define AUTH_SECRET_SIZE 32    /* bytes of an API secret (64 hex digits) */
#define AUTH_RANGES_MAX 16     /* user ranges one key may act for */
#define AUTH_NONCE_PROBES 16   /* slots searched per nonce lookup */
#define AUTH_HEARTBEAT_MIN_MS 100
#define AUTH_HEARTBEAT_MAX_MS 60000
#define AUTH_IDLE_BEATS 3      /* heartbeats without a frame that end a session */

enum auth_perm {
	AUTH_P_TRADE = 1,    /* NEW_ORDER, CANCEL, AMEND, CANCEL_REPLACE */
	AUTH_P_TRANSFER = 2, /* TRANSFER (deposits, withdrawals) */
	AUTH_P_READ = 4,     /* REPORT_REPLAY */
	AUTH_P_ALL = 7,
};

struct auth_range {
	uint64_t lo, hi; /* inclusive */
};

struct auth_key {
	uint64_t key_id;
	uint8_t secret[AUTH_SECRET_SIZE];
	uint32_t perms;       /* enum auth_perm bits */
	uint32_t range_count; /* user ranges; all_users instead when 0 */
	bool all_users;       /* "*": any user (an operator's or a market maker's key) */
	bool revoked;         /* kept so its sessions end and its logons get KEY_REVOKED */
	struct auth_range ranges[AUTH_RANGES_MAX];
};

/* A key set, sorted by key_id (auth_keys_parse). */
struct auth_keys {
	struct auth_key *keys;
	uint32_t count;
	uint32_t cap;
};

/*
 * Parse a key file. One key per line, '#' starts a comment:
 *   <key_id> <secret: 64 hex digits> <perms: trade,transfer,read | all> <users> [revoked]
 * users: '*' or ranges "1-1000,5000". The keys array is sized by the caller (cap); returns
 * 0, or -1 with "file:line: what" in err. Duplicate ids are an error.
 */
int auth_keys_parse(const char *text, size_t len, const char *file, struct auth_keys *out,
		    char *err, size_t err_cap);
const struct auth_key *auth_keys_find(const struct auth_keys *ks, uint64_t key_id);
bool auth_key_entitled(const struct auth_key *k, uint64_t user);
/* A client's key file: the first key line of the same format (perms and users optional). */
int auth_client_key_parse(const char *text, size_t len, uint64_t *key_id,
			  uint8_t secret[AUTH_SECRET_SIZE], char *err, size_t err_cap);

void auth_logon_sign(const uint8_t secret[AUTH_SECRET_SIZE], struct wire_logon *m);
bool auth_logon_verify(const uint8_t secret[AUTH_SECRET_SIZE], const struct wire_logon *m);
void auth_session_key(const uint8_t secret[AUTH_SECRET_SIZE], const struct wire_logon *m,
		      struct wire_key *out);
/* The permission a client message needs (0: none beyond a session, e.g. HEARTBEAT), or
 * UINT32_MAX for a type no session may send. */
uint32_t auth_perm_needed(uint16_t type);

struct auth_session {
	uint32_t id;            /* 0: free slot */
	uint32_t heartbeat_ms;  /* agreed */
	uint64_t key_id;
	const struct auth_key *key; /* into the current key set (re-resolved on a swap) */
	struct wire_key frame_key;
	uint64_t next_seq;      /* inbound seq expected */
	uint64_t last_rx_ns;    /* monotonic: last accepted frame */
	uint64_t rate_start_ns; /* current messaging window */
	uint32_t rate_msgs;     /* messages in it */
	bool rate_warned;       /* the warning for this window was sent */
	uint64_t peer;          /* the caller's: where answers go (updated by auth_frame) */
	uint64_t logon_ns;      /* monotonic */
};

struct auth_nonce {
	uint64_t key_id;  /* 0: free */
	uint64_t nonce;
	uint64_t expire_ns; /* wall clock: forgettable after (its logon is stale by then) */
};

struct auth_config {
	uint32_t sessions_max;     /* rounded up to a power of two */
	uint32_t nonces_max;       /* remembered nonces, rounded up to a power of two */
	uint64_t logon_window_ns;  /* |node wall clock - LOGON ts| allowed */
	uint32_t heartbeat_ms;     /* default when the client asks for 0 */
	uint32_t msgs_per_window;  /* messages per session per rate window, 0: no limit */
	uint64_t rate_window_ns;   /* the window (1 s by default) */
	uint32_t warn_pct;         /* warn once a window at this % of msgs_per_window */
	uint32_t logons_per_window; /* LOGONs looked at per rate window, all sessions together,
				     * 0: no limit (each costs an HMAC before it is proven) */
};

#define AUTH_COUNTERS(X)                                                                   \
	X(LOGONS, "logons", "sessions opened")                                             \
	X(LOGONS_REPLACED, "logons_replaced", "logons that replaced the key's own session")   \
	X(LOGOUTS, "logouts", "sessions ended by the client")                              \
	X(ENDED_IDLE, "ended_idle", "sessions ended after three silent heartbeats")        \
	X(ENDED_REVOKED, "ended_revoked", "sessions ended because their key was revoked")  \
	X(REF_BAD_KEY, "refused_bad_key", "LOGONs naming an unknown key id")               \
	X(REF_BAD_SIGNATURE, "refused_bad_signature", "LOGONs whose HMAC did not verify")  \
	X(REF_STALE, "refused_stale_logon", "LOGONs outside the timestamp window")         \
	X(REF_NONCE, "refused_nonce_reused", "LOGONs repeating a remembered nonce")        \
	X(REF_REVOKED, "refused_key_revoked", "LOGONs with a revoked key")                 \
	X(REF_IN_USE, "refused_session_in_use", "LOGONs for a session id another key holds") \
	X(REF_FULL, "refused_full", "LOGONs refused: session or nonce table full")         \
	X(REF_LOGON_RATE, "refused_logon_rate",                                            \
	  "LOGONs refused unverified: over logons_per_window")                             \
	X(REF_UNKNOWN_SESSION, "refused_unknown_session", "session frames of no session")  \
	X(REF_BAD_MAC, "refused_bad_mac", "session frames whose MAC did not verify")       \
	X(REF_SEQ_GAP, "refused_seq_gap", "session frames above the expected seq")         \
	X(REF_SEQ_REPEAT, "refused_seq_repeat", "session frames below the expected seq")   \
	X(REF_RATE, "refused_msg_rate", "session frames over the messages per window")     \
	X(RATE_WARNED, "rate_warned", "warnings sent at warn_pct of the messages per window") \
	X(REF_NOT_ENTITLED, "refused_not_entitled", "messages for a user outside the key's") \
	X(REF_NO_PERMISSION, "refused_no_permission", "messages outside the key's permissions") \
	X(FRAMES, "frames", "session frames accepted")                                     \
	X(MAC_PROVEN, "mac_proven", "session frames whose MAC an io lcore checked")

enum auth_counter {
#define AUTH_C_ENUM(name, label, help) AUTH_C_##name,
	AUTH_COUNTERS(AUTH_C_ENUM)
#undef AUTH_C_ENUM
	AUTH_C_COUNT,
};

struct auth_sessions {
	struct auth_config cfg;
	struct auth_session *slots; /* open addressing by id, linear probing */
	uint32_t mask;
	uint32_t count;
	struct auth_nonce *nonces;
	uint32_t nonce_mask;
	const struct auth_keys *keys;
	uint64_t logon_window_ns; /* start of the current logon window (mono) */
	uint32_t logon_count;     /* LOGONs looked at in it */
	uint32_t expire_at;       /* auth_expire_step: the slot its next slice begins at */
	uint64_t c[AUTH_C_COUNT];
};

/* Returns 0 or -ENOMEM. Memory is owned by the table (auth_sessions_free). */
int auth_sessions_init(struct auth_sessions *t, const struct auth_config *cfg,
		       const struct auth_keys *keys);
void auth_sessions_free(struct auth_sessions *t);
const char *auth_counter_label(enum auth_counter c);
const char *auth_counter_help(enum auth_counter c);

/*
 * A LOGON. Checks, in order: the gateway's logon budget (MSG_RATE, before any HMAC is
 * computed: a flood of forged LOGONs costs one counter each), the key (BAD_KEY,
 * KEY_REVOKED), the signature (BAD_SIGNATURE),
 * the timestamp against wall_ns (STALE_LOGON), the nonce (NONCE_REUSED), the session id
 * (SESSION_IN_USE when another key holds it; the same key's session is replaced), room
 * (CAPACITY). Returns 0 with *out the new session (next_seq 1), or the refusal's reason.
 */
uint16_t auth_logon(struct auth_sessions *t, const struct wire_logon *m, uint64_t wall_ns,
		    uint64_t mono_ns, uint64_t peer, struct auth_session **out);

/*
 * A session frame (decoded with wire_session_frame_decode; msgs[0] its SESSION_HDR). Finds
 * the session (UNKNOWN_SESSION), checks the MAC under its key (BAD_SIGNATURE: not answered,
 * the sender is not proven), the seq (SEQ_GAP / SEQ_REPEAT, *out set so the refusal can
 * name the expected seq) and the messaging window (MSG_RATE). On 0 the seq advances, the
 * peer is recorded and *warn says whether to send this window's warning.
 */
uint16_t auth_frame(struct auth_sessions *t, const void *frame, size_t len,
		    const struct wire_session_hdr *sh, uint32_t msgs, uint64_t mono_ns,
		    uint64_t peer, struct auth_session **out, bool *warn);
/* auth_frame for a frame whose MAC was already checked under the key proven (an io lcore
 * did, docs/security.md "Session MACs on the io lcores"): when that is the session's key
 * now, the MAC is not checked again (counted mac_proven); any other key, or NULL, and it is
 * checked here. */
uint16_t auth_frame_proven(struct auth_sessions *t, const void *frame, size_t len,
			   const struct wire_session_hdr *sh, uint32_t msgs, uint64_t mono_ns,
			   uint64_t peer, const struct wire_key *proven,
			   struct auth_session **out, bool *warn);

/* Whether the session may send msg: 0, NO_PERMISSION or NOT_ENTITLED. */
uint16_t auth_check_msg(struct auth_sessions *t, const struct auth_session *s,
			const struct wire_msg_hdr *msg, uint64_t user);

/* The table's hash of a session id (or of a nonce's key and value). */
static inline uint32_t
auth_mix32(uint64_t x)
{
	return (uint32_t)hash_fmix64(x);
}
/* The session of id, or NULL. Inline: the gateway asks it for every answer it sends to a
 * logged-on client. */
static inline struct auth_session *
auth_session_find(struct auth_sessions *t, uint32_t id)
{
	if (id == 0)
		return NULL;
	for (uint32_t i = auth_mix32(id) & t->mask, n = 0; n <= t->mask;
	     i = (i + 1) & t->mask, n++) {
		if (t->slots[i].id == id)
			return &t->slots[i];
		if (t->slots[i].id == 0)
			return NULL;
	}
	return NULL;
}
/* End a session (LOGOUT from the client, or the caller's reason). */
void auth_session_end(struct auth_sessions *t, struct auth_session *s);

typedef void(auth_end_fn)(void *ctx, const struct auth_session *s, uint16_t reason);
/* Adopt a new key set: every session re-resolves its key; those whose key is gone or
 * revoked end (KEY_REVOKED, fn called before the slot is freed). Returns sessions ended. */
uint32_t auth_keys_swap(struct auth_sessions *t, const struct auth_keys *keys,
			auth_end_fn *fn, void *ctx);
/* End sessions silent for AUTH_IDLE_BEATS heartbeats (SESSION_IDLE). Returns the count. */
uint32_t auth_expire(struct auth_sessions *t, uint64_t mono_ns, auth_end_fn *fn, void *ctx);
/* auth_expire in slices, for a poll loop that must not stall on a large table: looks at up
 * to max slots (max >= 1) from where the last slice stopped, and sets *pass_done when this
 * one reached the table's end (the next starts a new pass at slot 0). A session a deletion
 * shifts across the cursor is looked at in the next pass instead. Returns the count. */
uint32_t auth_expire_step(struct auth_sessions *t, uint64_t mono_ns, uint32_t max,
			  bool *pass_done, auth_end_fn *fn, void *ctx);

#endif
