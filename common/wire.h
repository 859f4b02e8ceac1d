/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The omsd wire schema: every message that crosses a boundary — client order entry, OMS↔ME,
 * persistence, admin and Raft — in one place.
 *
 * Rules (STYLE.md §4):
 *  - Little-endian, fixed layout, explicitly sized fields; padding is written out as
 *    `reserved` fields that must be zero (decoders reject non-zero reserved bytes).
 *  - No #pragma pack: every struct is naturally aligned and its size is asserted below.
 *  - The message list is one X-macro, so the type enum, the name table and the size table
 *    cannot drift apart.
 *  - Versions are major.minor (docs/wire.md, "Versions"): a layout change bumps
 *    WIRE_VERSION_MAJOR; a minor only appends fields to fixed-size messages, which a node of
 *    the minor before skips. Nodes talk when the majors are equal and the minors at most
 *    one apart, so a cluster upgrades one node at a time (docs/upgrade.md).
 *
 * Framing (ARCHITECTURE.md §8): a UDP datagram carries one frame:
 *
 *   wire_frame_hdr | msg | msg | ... | [MAC, 16 bytes, when WIRE_FRAME_F_MAC]
 *
 * and each msg is `wire_msg_hdr` followed by its body. A few messages (Raft AppendEntries and
 * InstallSnapshot, admin snapshot blobs) have a fixed part followed by a variable tail whose
 * length is carried in the fixed part; everything else is exactly its struct size.
 *
 * The same message encoding is the payload of a Raft log entry: an entry is a sequence of
 * messages (wire_msgs_next walks it), so the services apply exactly what came off the wire.
 */
#ifndef OMSD_COMMON_WIRE_H
#define OMSD_COMMON_WIRE_H

#include <assert.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define WIRE_MAGIC UINT32_C(0x44534d4f) /* "OMSD" little-endian */
/* The frame header's version_major: every layout change bumps it (nodes of different majors
 * never talk). 4: wire_recent carries a transfer's asset and amount; 5: the user state
 * carries cl_ord_floor; REPORT_REPLAY (type 8); SUBMIT and the modifies carry sent_ns; 6: the
 * user state carries egress_seq; REBIND_TO_ME (type 27), events MOVED and ADOPTED; 7: the user
 * state carries the rate-limit bucket (rl_tokens, rl_tokens_ns). Minor 7.0 is byte for byte
 * the 7 of the releases before minors (its version_minor and reserved bytes were the zero high
 * half of a 32-bit length), so the first upgrade to 7.0 is itself a rolling one. */
#define WIRE_VERSION_MAJOR 7
/* Test builds only (meson -Dwire_minor_bump=N): this build says it is N minors newer than
 * the release and appends what WIRE_EXTS lists, so a rolling upgrade can be tested with a
 * real second binary (tests/e2e/test_rolling_upgrade.sh). 0 in every release. */
#ifndef WIRE_MINOR_BUMP
#define WIRE_MINOR_BUMP 0
#endif
#define WIRE_VERSION_MINOR_RELEASE 0 /* the minor of this source tree */
#define WIRE_VERSION_MINOR (WIRE_VERSION_MINOR_RELEASE + WIRE_MINOR_BUMP) /* what we send */
#define WIRE_MINOR_WINDOW 1 /* a peer's minor may differ from ours by at most this much */
#define WIRE_MSG_EXT_MAX 64 /* bytes the minors of a major may append to one message type;
			     * more is a new type or a new major */
#define WIRE_FRAME_F_MAC 0x01     /* a 16-byte SipHash-2-4-128 tag follows the last message */
#define WIRE_FRAME_F_SESSION 0x02 /* a client session's frame: SESSION_HDR first, MAC under the
				   * session's key (checked by the gateway, not the decoder) */
#define WIRE_MAC_SIZE 16
#define WIRE_FRAME_MAX 9000       /* jumbo frame payload; ordinary ports use ~1472 */
#define WIRE_FRAME_MSGS_MAX 256   /* messages in one frame */
#define WIRE_BALANCES_MAX 16      /* assets carried in one user's state */
#define WIRE_RECENT_MAX 16        /* request ids carried with a user's state (idempotency) */
#define WIRE_OPEN_ORDERS_MAX 16   /* orders in one OpenOrdersSnapshot part */
#define WIRE_ROUTE_SHARDS_MAX 32  /* OMS shards in a routing config */
#define WIRE_ROUTE_PINS_MAX 48    /* whale pins carried in a routing config */
#define WIRE_TAIL_MAX 8192        /* largest variable tail (entries, snapshot chunk) */

/* ---------------------------------------------------------------------------------------
 * Enumerations. Zero is never a valid value for an enum carried on the wire, so an all-zero
 * (uninitialised) field is always caught by the decoder.
 * ------------------------------------------------------------------------------------- */

enum wire_side {
	WIRE_SIDE_BUY = 1,
	WIRE_SIDE_SELL = 2,
};

enum wire_ord_type {
	WIRE_ORD_LIMIT = 1,
	WIRE_ORD_MARKET = 2, /* sell: by base qty; buy: by quote budget */
};

enum wire_tif {
	WIRE_TIF_GTC = 1,
	WIRE_TIF_IOC = 2,
	WIRE_TIF_FOK = 3,
	WIRE_TIF_GTD = 4,       /* expires at expire_ns, cluster time */
	WIRE_TIF_POST_ONLY = 5, /* GTC that is rejected if it would cross */
};

/* Self-trade prevention, by user. Zero means none (the only enum where zero is valid). */
enum wire_stp {
	WIRE_STP_NONE = 0,
	WIRE_STP_EXPIRE_TAKER = 1,
	WIRE_STP_EXPIRE_MAKER = 2,
	WIRE_STP_EXPIRE_BOTH = 3,
};

/* Reasons for every NAK (gateway/OMS refusal) and reject (ME refusal). One list so a client
 * never has to ask which layer said no. */
#define WIRE_REASONS(X)                                                                    \
	X(NONE, 0)                                                                         \
	X(BAD_REQUEST, 1)            /* a field out of range in a well-formed frame */     \
	X(UNKNOWN_SYMBOL, 2)                                                               \
	X(HALTED, 3)                                                                       \
	X(OFF_TICK, 4)                                                                     \
	X(OFF_LOT, 5)                                                                      \
	X(BELOW_MIN_QTY, 6)                                                                \
	X(BELOW_MIN_NOTIONAL, 7)                                                           \
	X(OUTSIDE_BAND, 8)                                                                 \
	X(POST_ONLY_WOULD_CROSS, 9)                                                        \
	X(FOK_NOT_FILLABLE, 10)                                                            \
	X(DUPLICATE_ID_MISMATCH, 11) /* known orderId, different content */               \
	X(CAPACITY, 12)              /* a preallocated pool is exhausted */                \
	X(UNKNOWN_ORDER, 13)                                                               \
	X(NOT_OWNER, 14)             /* user routed to the wrong OMS shard */              \
	X(NOT_LEADER, 15)            /* sent to a follower; leader hint attached */        \
	X(BACKPRESSURE, 16)          /* in-flight cap reached; nothing was debited */      \
	X(RATE_LIMITED, 17)                                                                \
	X(INSUFFICIENT_FUNDS, 18)                                                          \
	X(PARKED_FULL, 19)           /* too many orders waiting for hydration */           \
	X(OVERFLOW, 20)              /* arithmetic would overflow */                       \
	X(SYMBOL_NOT_OWNED, 21)      /* ME shard does not own the symbol */                \
	X(AMEND_NOT_DOWN, 22)        /* amend must reduce quantity */                      \
	X(TOO_LATE, 23)              /* the order is already final */                      \
	X(STALE_EPOCH, 24)           /* routing or fencing epoch is older than ours */     \
	X(OWNED_ELSEWHERE, 25)       /* database owner claim held by another shard */      \
	X(DB_ERROR, 26)              /* persistence failed; retry */                       \
	X(CONFLICT, 27)              /* version-checked flush lost to a newer write */     \
	X(DUPLICATE_REQUEST, 28)     /* clientOrderId seen; original outcome attached */   \
	X(UNKNOWN_USER, 29)                                                                \
	X(KILLED, 30)                /* kill-switch active for the user or symbol */       \
	X(NOT_FOUND, 31)                                                                   \
	X(STALE_REQUEST, 32)         /* id at or below the forgotten high-water mark */   \
	X(BAD_KEY, 33)               /* LOGON: key id unknown */                           \
	X(BAD_SIGNATURE, 34)         /* LOGON: HMAC does not verify */                     \
	X(STALE_LOGON, 35)           /* LOGON: timestamp outside the window */             \
	X(NONCE_REUSED, 36)          /* LOGON: nonce already seen with this key */         \
	X(UNKNOWN_SESSION, 37)       /* no such session at this gateway */                 \
	X(SEQ_GAP, 38)               /* session frame seq above the expected one */        \
	X(SEQ_REPEAT, 39)            /* session frame seq below the expected one */        \
	X(KEY_REVOKED, 40)           /* the session's API key was revoked */               \
	X(NOT_ENTITLED, 41)          /* the session may not act for this user */           \
	X(NO_PERMISSION, 42)         /* the session's key lacks trade/transfer/read */     \
	X(SESSION_IN_USE, 43)        /* session id held by another key */                  \
	X(NO_SESSION, 44)            /* client traffic outside a session */                \
	X(MSG_RATE, 45)              /* session over its messages per window */            \
	X(SESSION_IDLE, 46)          /* no frame for three heartbeats */                   \
	X(SYMBOL_MOVING, 47)         /* the symbol's book is moving to another ME shard */ \
	X(MAX, 48)

enum wire_reason {
#define WIRE_REASON_ENUM(name, value) WIRE_REASON_##name = value,
	WIRE_REASONS(WIRE_REASON_ENUM)
#undef WIRE_REASON_ENUM
};

/* Why a live order stopped being live without filling. */
enum wire_cause {
	WIRE_CAUSE_USER = 1,        /* a cancel request */
	WIRE_CAUSE_IOC = 2,         /* IOC remainder */
	WIRE_CAUSE_FOK = 3,         /* FOK could not fill whole (never touched the book) */
	WIRE_CAUSE_STP = 4,         /* self-trade prevention */
	WIRE_CAUSE_EXPIRED = 5,     /* GTD expiry on cluster time */
	WIRE_CAUSE_HALT = 6,        /* symbol halted with cancel-on-halt */
	WIRE_CAUSE_KILL_SWITCH = 7, /* per-user or per-symbol kill-switch */
	WIRE_CAUSE_NO_LIQUIDITY = 8,/* market order remainder with nothing left to take */
	WIRE_CAUSE_REPLACED = 9,    /* the old half of a cancel-replace */
	WIRE_CAUSE_RECONCILE = 10,  /* closed by the OMS reconciliation sweep */
	WIRE_CAUSE_MAX = 11,
};

/* Lifecycle events in an ME event stream (and client execution reports). */
enum wire_event {
	WIRE_EV_ACCEPTED = 1,  /* the ME took the order (it may fill at once) */
	WIRE_EV_REJECTED = 2,  /* refused; reason set; terminal */
	WIRE_EV_RESTED = 3,    /* remainder rests on the book; qty = resting qty */
	WIRE_EV_FILL = 4,      /* one trade leg; px, qty, contra set */
	WIRE_EV_CANCELLED = 5, /* qty left the book or was never booked; cause set */
	WIRE_EV_DONE = 6,      /* terminal: nothing of the order is live any more */
	WIRE_EV_AMENDED = 7,   /* quantity reduced in place; qty = new leaves */
	WIRE_EV_CANCEL_REJECTED = 8, /* a cancel/amend/replace request was refused; reason */
	WIRE_EV_MOVED = 9,     /* REBIND_TO_ME: the live order's events go to another OMS shard
				* from here on (old stream); qty = cum, leaves_qty = leaves */
	WIRE_EV_ADOPTED = 10,  /* REBIND_TO_ME: a live order now reports to this OMS shard (new
				* stream), with what the old owner knew of it (wire_me_event) */
	WIRE_EV_MAX = 11,
};

/* hdr.flags of an ME_EVENT (docs/me-contract.md "Event sequences"). */
#define WIRE_EV_F_ENTERED 0x0001 /* the first event of an order the ME took: it was accepted
				  * (RESTED, FILL, CANCELLED or DONE; an ME of an earlier
				  * release sent an ACCEPTED event of its own first) */
#define WIRE_EV_F_DONE 0x0002	 /* and the order is done: nothing of it is live, no DONE
				  * follows (FILL, CANCELLED, AMENDED; an ME of an earlier
				  * release sent a DONE event of its own after it) */

/* Client execution report kinds (pending → open | rejected, fills, cancelled; the last one
 * says done: WIRE_REPORT_F_DONE). */
enum wire_exec {
	WIRE_EXEC_PENDING = 1,  /* provisional ack: reserved and sent to the ME */
	WIRE_EXEC_OPEN = 2,     /* resting on the book */
	WIRE_EXEC_REJECTED = 3, /* ME refused; reservation released */
	WIRE_EXEC_FILL = 4,
	WIRE_EXEC_CANCELLED = 5,
	WIRE_EXEC_DONE = 6,     /* the end of an order no other report ended (a market buy
				 * whose budget buys no further lot); an earlier release sent
				 * one after every order's last FILL, CANCELLED or AMENDED */
	WIRE_EXEC_AMENDED = 7,
	WIRE_EXEC_CANCEL_REJECTED = 8,
	WIRE_EXEC_MAX = 9,
};

/* hdr.flags of an EXEC_REPORT (docs/wire.md "Execution reports"). */
#define WIRE_REPORT_F_DONE 0x0001 /* the order's last report: nothing of it is live, its
				   * reservation is released, no report of it follows (on a
				   * FILL, CANCELLED, AMENDED, REJECTED or DONE) */

enum wire_symbol_status {
	WIRE_SYM_TRADING = 1,
	WIRE_SYM_HALTED = 2,
};

enum wire_shard_state {
	WIRE_SHARD_RECEIVING = 1, /* joined; HRW does not route new users to it yet */
	WIRE_SHARD_ACTIVE = 2,
};

enum wire_kill_scope {
	WIRE_KILL_USER = 1,
	WIRE_KILL_SYMBOL = 2,
};

enum wire_hydrate_status {
	WIRE_HYD_OK = 1,        /* row read and claimed for this shard */
	WIRE_HYD_NEW = 2,       /* an account never written back (version 0), claimed */
	WIRE_HYD_OWNED = 3,     /* another shard holds the claim; owner_shard set */
	WIRE_HYD_ERROR = 4,     /* database unavailable; the shard may ask again */
	WIRE_HYD_UNKNOWN = 5,   /* no such account: refused UNKNOWN_USER, nothing created */
};

enum wire_flush_status {
	WIRE_FLUSH_OK = 1,       /* written (or our own write found already there) */
	WIRE_FLUSH_CONFLICT = 2, /* version moved under us: a foreign write; alarm */
	WIRE_FLUSH_ERROR = 3,    /* transient failure; will be retried */
};

/* Where a service's egress message goes (the host routes by this, the service never asks
 * whether it is leader). */
enum wire_dest {
	WIRE_DEST_CLIENT = 1,    /* Ack, Nak, ExecReport → the user's session */
	WIRE_DEST_ME = 2,        /* OMS → bridge → ME shard */
	WIRE_DEST_OMS = 3,       /* ME events/results → bridge of that OMS shard */
	WIRE_DEST_PERSIST = 4,   /* HydrateRequest, BeginDehydrate → persister */
	WIRE_DEST_ADMIN = 5,     /* replies to admin commands */
};

/* ---------------------------------------------------------------------------------------
 * Identifiers.
 * ------------------------------------------------------------------------------------- */

/* 128-bit orderId {oms_shard, user, user_seq} (seed: omsClusterId:userId:userSeqNo). It is
 * derivable on replay and never repeats, because user_seq is part of the user's persisted
 * state and moves with the user between shards. user_seq has 48 bits, oms_shard 16. */
struct wire_oid {
	uint64_t user;      /* account id */
	uint64_t shard_seq; /* oms_shard << 48 | user_seq */
};
static_assert(sizeof(struct wire_oid) == 16, "wire_oid");

#define WIRE_USER_SEQ_MAX ((UINT64_C(1) << 48) - 1)

static inline struct wire_oid
wire_oid_make(uint16_t oms_shard, uint64_t user, uint64_t user_seq)
{
	struct wire_oid oid = {
		.user = user,
		.shard_seq = (uint64_t)oms_shard << 48 | (user_seq & WIRE_USER_SEQ_MAX),
	};
	return oid;
}

static inline uint16_t
wire_oid_shard(struct wire_oid oid)
{
	return (uint16_t)(oid.shard_seq >> 48);
}

static inline uint64_t
wire_oid_seq(struct wire_oid oid)
{
	return oid.shard_seq & WIRE_USER_SEQ_MAX;
}

static inline int
wire_oid_eq(struct wire_oid a, struct wire_oid b)
{
	return a.user == b.user && a.shard_seq == b.shard_seq;
}

/* ---------------------------------------------------------------------------------------
 * Frame and message headers.
 * ------------------------------------------------------------------------------------- */

struct wire_frame_hdr {
	uint32_t magic;        /* WIRE_MAGIC */
	uint8_t version_major; /* WIRE_VERSION_MAJOR: another major is refused */
	uint8_t flags;         /* WIRE_FRAME_F_* */
	uint16_t msg_count;    /* messages that follow, 1..WIRE_FRAME_MSGS_MAX */
	uint32_t sender_id;    /* node id for peers, session id for clients */
	uint16_t length;       /* whole frame in bytes, header and MAC included */
	uint8_t version_minor; /* the sender's WIRE_VERSION_MINOR: within WIRE_MINOR_WINDOW of
				* ours, or the frame is refused */
	uint8_t reserved;      /* zero */
};
static_assert(sizeof(struct wire_frame_hdr) == 16, "wire_frame_hdr");
static_assert(offsetof(struct wire_frame_hdr, version_major) == 4, "version_major: byte 4");
static_assert(offsetof(struct wire_frame_hdr, length) == 12, "length: bytes 12-13");
static_assert(offsetof(struct wire_frame_hdr, version_minor) == 14, "version_minor: byte 14");
static_assert(WIRE_FRAME_MAX <= UINT16_MAX, "a frame's length fits its 16 bits");
static_assert(WIRE_VERSION_MINOR <= UINT8_MAX, "version_minor is one byte");

struct wire_msg_hdr {
	uint16_t type;   /* enum wire_type */
	uint16_t length; /* whole message in bytes, this header included */
	uint16_t shard;  /* destination shard (routing); 0 where not applicable */
	uint16_t flags;  /* per-type flags; unknown bits must be zero */
};
static_assert(sizeof(struct wire_msg_hdr) == 8, "wire_msg_hdr");

/* ---------------------------------------------------------------------------------------
 * Client order entry (client ↔ gateway ↔ OMS shard).
 * ------------------------------------------------------------------------------------- */

struct wire_new_order {
	struct wire_msg_hdr hdr;
	uint64_t user;          /* account */
	uint64_t cl_ord_id;     /* client's id, unique per user within the dedup window */
	uint32_t symbol;        /* instrument id */
	uint8_t side;           /* enum wire_side */
	uint8_t ord_type;       /* enum wire_ord_type */
	uint8_t tif;            /* enum wire_tif */
	uint8_t stp;            /* enum wire_stp */
	int64_t px;             /* limit price, quote minor units per base_unit; 0 for market */
	int64_t qty;            /* base minor units; 0 for a market buy by quote */
	int64_t quote_qty;      /* market buy: quote budget incl. fees; else 0 */
	uint64_t expire_ns;     /* GTD: cluster time of expiry; else 0 */
	uint64_t route_epoch;   /* routing epoch the gateway used (0 from raw clients) */
};
static_assert(sizeof(struct wire_new_order) == 72, "wire_new_order");

struct wire_cancel {
	struct wire_msg_hdr hdr;
	uint64_t user;
	uint64_t cl_ord_id;      /* this request's id */
	uint64_t orig_cl_ord_id; /* the order to cancel */
	uint64_t route_epoch;
};
static_assert(sizeof(struct wire_cancel) == 40, "wire_cancel");

/* Amend-down: reduce quantity in place, keeping priority. */
struct wire_amend {
	struct wire_msg_hdr hdr;
	uint64_t user;
	uint64_t cl_ord_id;
	uint64_t orig_cl_ord_id;
	int64_t qty;             /* new total quantity (must be below the current one) */
	uint64_t route_epoch;
};
static_assert(sizeof(struct wire_amend) == 48, "wire_amend");

/* Cancel-replace: the old order is cancelled and a new one (new id, new priority) entered. */
struct wire_cancel_replace {
	struct wire_msg_hdr hdr;
	uint64_t user;
	uint64_t cl_ord_id;      /* id of the replacement order */
	uint64_t orig_cl_ord_id; /* order being replaced */
	int64_t px;
	int64_t qty;
	uint64_t route_epoch;
};
static_assert(sizeof(struct wire_cancel_replace) == 56, "wire_cancel_replace");

/* Provisional ack: funds reserved, order on its way to the ME. */
struct wire_ack {
	struct wire_msg_hdr hdr;
	uint64_t user;
	uint64_t cl_ord_id;
	struct wire_oid oid;
	uint64_t seq;       /* per-user egress sequence */
	uint64_t time_ns;   /* cluster time of admission */
};
static_assert(sizeof(struct wire_ack) == 56, "wire_ack");

struct wire_nak {
	struct wire_msg_hdr hdr;
	uint64_t user;
	uint64_t cl_ord_id;
	uint16_t reason;      /* enum wire_reason */
	uint16_t owner_shard; /* NOT_OWNER: the shard this shard computes as owner */
	uint32_t leader_node; /* NOT_LEADER: node id of the leader if known, else 0 */
	uint64_t route_epoch; /* the refusing shard's routing epoch */
	uint64_t seq;         /* per-user egress sequence, 0 when the user is not resident */
};
static_assert(sizeof(struct wire_nak) == 48, "wire_nak");

struct wire_exec_report {
	struct wire_msg_hdr hdr;
	uint64_t user;
	uint64_t cl_ord_id;
	struct wire_oid oid;
	uint64_t seq;        /* per-user egress sequence */
	uint64_t time_ns;    /* cluster time */
	uint32_t symbol;
	uint8_t exec;        /* enum wire_exec */
	uint8_t side;        /* enum wire_side */
	uint8_t liquidity;   /* fills: 1 maker, 2 taker; else 0 */
	uint8_t cause;       /* enum wire_cause for CANCELLED; else 0 */
	uint16_t reason;     /* enum wire_reason for REJECTED / CANCEL_REJECTED */
	uint16_t reserved0;
	uint32_t reserved1;
	int64_t last_px;     /* fill price */
	int64_t last_qty;    /* fill qty */
	int64_t cum_qty;     /* filled so far */
	int64_t leaves_qty;  /* still live */
	int64_t fee;         /* fee of this fill, quote minor units */
};
static_assert(sizeof(struct wire_exec_report) == 112, "wire_exec_report");

/* For clients: is r its order's last report? WIRE_REPORT_F_DONE; and from a node of an
 * earlier release, which did not set it, a DONE or a REJECTED. */
static inline bool
wire_report_final(const struct wire_exec_report *r)
{
	return (r->hdr.flags & WIRE_REPORT_F_DONE) != 0 || r->exec == WIRE_EXEC_DONE ||
	       r->exec == WIRE_EXEC_REJECTED;
}

/* A client asks again for its user's numbered answers (ACK, NAK with a seq, EXEC_REPORT)
 * with per-user seq in [from_seq, to_seq] (docs/appliance.md, "Report replay"): the
 * gateway passes it to a member of the user's OMS shard, which re-sends what it still keeps
 * (its newest REPORT_RING), in seq order, at most WIRE_REPLAY_MAX per request; the client
 * asks again from the first seq still missing. Nothing is proposed; no answer of its own. */
struct wire_report_replay {
	struct wire_msg_hdr hdr;
	uint64_t user;
	uint64_t from_seq;  /* first seq wanted, >= 1 */
	uint64_t to_seq;    /* last seq wanted (inclusive); 0: up to the newest kept */
};
static_assert(sizeof(struct wire_report_replay) == 32, "wire_report_replay");
#define WIRE_REPLAY_MAX 256 /* answers re-sent for one REPORT_REPLAY */

/* ---------------------------------------------------------------------------------------
 * Client sessions (docs/security.md). A client logs on with an API key: LOGON in a frame
 * of its own, no MAC (the HMAC in the message is the proof), sender_id = the session id the
 * client chose. The gateway checks the key, the signature, the timestamp window and the
 * nonce, and answers LOGON_REPLY under the session's frame key (derived from the secret,
 * so the answer also proves the node knows it). Every later frame of the session has
 * WIRE_FRAME_F_SESSION, starts with SESSION_HDR {session id, inbound seq} and carries a
 * MAC under the session key; nodes answer with frames MAC'd under the same key.
 * ------------------------------------------------------------------------------------- */

#define WIRE_LOGON_SIG_SIZE 32 /* HMAC-SHA256 */

struct wire_logon {
	struct wire_msg_hdr hdr;
	uint64_t key_id;       /* API key id, non-zero */
	uint64_t ts_ns;        /* client wall clock, ns since the UNIX epoch */
	uint64_t nonce;        /* random; a nonce is refused if seen again within the window */
	uint32_t session_id;   /* client-chosen, non-zero: the sender_id of its frames */
	uint32_t heartbeat_ms; /* the client's heartbeat interval; 0: the node's default */
	uint8_t sig[WIRE_LOGON_SIG_SIZE]; /* HMAC-SHA256(secret, the fields above, canonical) */
};
static_assert(sizeof(struct wire_logon) == 72, "wire_logon");

struct wire_logon_reply {
	struct wire_msg_hdr hdr;
	uint64_t key_id;
	uint32_t session_id;
	uint16_t reason;       /* 0: logged on (MAC'd under the session key); else why not */
	uint16_t reserved0;
	uint64_t next_seq;     /* inbound seq expected next (1 after a logon) */
	uint64_t ts_ns;        /* the node's wall clock */
	uint32_t heartbeat_ms; /* agreed interval; three missed end the session */
	uint32_t reserved1;
};
static_assert(sizeof(struct wire_logon_reply) == 48, "wire_logon_reply");

/* First message of every session frame (and only there). */
struct wire_session_hdr {
	struct wire_msg_hdr hdr;
	uint32_t session_id; /* equals the frame's sender_id */
	uint32_t reserved;
	uint64_t seq;        /* inbound frame sequence: 1, 2, 3, ... with no gap or repeat */
};
static_assert(sizeof(struct wire_session_hdr) == 24, "wire_session_hdr");

/* A session frame the gateway refused whole (nothing in it was acted on); with
 * WIRE_SESSION_REJECT_F_WARN in hdr.flags only a warning (MSG_RATE: the session used
 * warn_pct of its messages per window; the frame was accepted). */
#define WIRE_SESSION_REJECT_F_WARN 0x0001
struct wire_session_reject {
	struct wire_msg_hdr hdr;
	uint32_t session_id;
	uint16_t reason;       /* UNKNOWN_SESSION, SEQ_GAP, SEQ_REPEAT, NO_SESSION, MSG_RATE */
	uint16_t reserved;
	uint64_t seq;          /* the refused frame's seq (0: not a session frame) */
	uint64_t expected_seq; /* the seq the session expects next (0: no such session) */
};
static_assert(sizeof(struct wire_session_reject) == 32, "wire_session_reject");

/* Either side ends a session; the node says why (0: the client asked). */
struct wire_logout {
	struct wire_msg_hdr hdr;
	uint32_t session_id;
	uint16_t reason;
	uint16_t reserved;
};
static_assert(sizeof(struct wire_logout) == 16, "wire_logout");

/* Keeps an idle session alive; the gateway answers with its own. */
struct wire_heartbeat {
	struct wire_msg_hdr hdr;
	uint32_t session_id;
	uint32_t reserved;
	uint64_t ts_ns; /* sender's wall clock */
};
static_assert(sizeof(struct wire_heartbeat) == 24, "wire_heartbeat");

/* ---------------------------------------------------------------------------------------
 * OMS ↔ ME (through the bridge).
 * ------------------------------------------------------------------------------------- */

/* An order entering a book. Idempotent: the ME dedups on oid. */
struct wire_submit {
	struct wire_msg_hdr hdr;
	struct wire_oid oid;
	uint32_t symbol;
	uint8_t side;
	uint8_t ord_type;
	uint8_t tif;
	uint8_t stp;
	int64_t px;
	int64_t qty;        /* base qty; 0 for a market buy */
	int64_t quote_qty;  /* market buy: notional budget (fees excluded); else 0 */
	uint64_t expire_ns; /* GTD */
	uint64_t sent_ns;   /* the sender's cluster time when built (0: unstamped): the ME
			       drops a request older than half its dedup window, which is what
			       keeps a deposed leader's late re-send from executing twice */
};
static_assert(sizeof(struct wire_submit) == 72, "wire_submit");

/* Cancel / amend-down / cancel-replace of a live order. req is the request's own id (a
 * user_seq of its own) so the ME dedups requests as it dedups orders. For a replace, req is
 * also the replacement order's id. */
struct wire_modify {
	struct wire_msg_hdr hdr;
	struct wire_oid req;    /* request id (replace: the new order's id) */
	struct wire_oid target; /* the live order */
	uint32_t symbol;
	uint32_t reserved;
	int64_t px;             /* replace: new price */
	int64_t qty;            /* amend: new total qty; replace: new qty; cancel: 0 */
	uint64_t sent_ns;       /* as wire_submit.sent_ns */
};
static_assert(sizeof(struct wire_modify) == 72, "wire_modify");

/* One lifecycle event in the stream of OMS shard `hdr.shard`, sequence `seq` (1, 2, ...). */
struct wire_me_event {
	struct wire_msg_hdr hdr;
	uint64_t seq;          /* per-stream sequence number */
	uint64_t time_ns;      /* ME cluster time */
	struct wire_oid oid;   /* the order this event is about */
	struct wire_oid contra;/* fills: the other side's order; replace: the old order */
	uint64_t contra_user;  /* fills: the other side's user (for STP audits) */
	uint64_t trade_id;     /* fills: per-symbol trade number */
	uint32_t symbol;
	uint8_t event;         /* enum wire_event */
	uint8_t side;          /* side of oid */
	uint8_t liquidity;     /* fills: 1 maker, 2 taker */
	uint8_t cause;         /* enum wire_cause */
	uint16_t reason;       /* enum wire_reason for REJECTED / CANCEL_REJECTED */
	uint16_t me_shard;     /* the ME shard that emitted it, whose stream seq counts in;
				* 0 from a build before live symbol moves (the symbol's map
				* entry names the stream then) */
	uint32_t reserved1;
	int64_t px;            /* fill price / rested price */
	int64_t qty;           /* fill qty, rested qty, cancelled qty, amended leaves */
	int64_t leaves_qty;    /* remaining live qty after this event */
	int64_t notional;      /* fills: exact quote amount of this fill */
};
static_assert(sizeof(struct wire_me_event) == 120, "wire_me_event");

/* For readers of an ME stream: does event e say its order entered a book (the order's first
 * event, WIRE_EV_F_ENTERED; an earlier ME's ACCEPTED), or that nothing of it is live any more
 * (WIRE_EV_F_DONE, or a DONE event)? */
static inline bool
wire_ev_entered(const struct wire_me_event *e)
{
	return e->event == WIRE_EV_ACCEPTED || (e->hdr.flags & WIRE_EV_F_ENTERED) != 0;
}

static inline bool
wire_ev_done(const struct wire_me_event *e)
{
	return e->event == WIRE_EV_DONE || (e->hdr.flags & WIRE_EV_F_DONE) != 0;
}
/* ADOPTED carries the order as the ME holds it (px, qty = cum, leaves_qty; liquidity =
 * ord_type, cause = tif, reason = stp) and, unchanged from the REBIND_TO_ME, what only the
 * old OMS owner knew: contra.user = cl_ord_id, contra.shard_seq = the order's total qty,
 * contra_user = its remaining reservation, trade_id = its cumulative maker notional,
 * notional = its cumulative taker notional (docs/fencing.md "Moving a user with open
 * orders"). */

/* OMS → ME: move a live order's event stream to another OMS shard, part of a user's move
 * with open orders. The ME re-binds the order when it is live and bound to from_shard's
 * stream: MOVED on that stream, then ADOPTED on to_shard's (carrying the fields below);
 * anything else (finished, already moved, stale by sent_ns) changes nothing and answers
 * nothing. The OMS re-sends it (the bridge's re-drive) until its MOVED arrives. */
struct wire_rebind {
	struct wire_msg_hdr hdr;
	struct wire_oid oid;      /* the live order (also the request's id) */
	uint64_t sent_ns;         /* as wire_submit.sent_ns */
	uint16_t from_shard;      /* the OMS shard whose stream holds the order (the sender) */
	uint16_t to_shard;        /* the OMS shard taking it over */
	uint32_t symbol;
	uint64_t cl_ord_id;       /* the old owner's fields, handed over in ADOPTED */
	int64_t qty;              /* the order's total qty */
	int64_t reserved;         /* its remaining reservation */
	int64_t notional_maker;   /* cumulative maker notional */
	int64_t notional_taker;   /* cumulative taker notional */
};
static_assert(sizeof(struct wire_rebind) == 80, "wire_rebind");

/* Unsequenced answer to a duplicate submit or a status query: the order's current state. */
struct wire_me_result {
	struct wire_msg_hdr hdr;
	struct wire_oid oid;
	uint8_t known;         /* 0: the ME has no record of oid */
	uint8_t final;         /* 1: terminal (its DONE event is in the stream) */
	uint16_t reason;       /* reject reason if it was rejected */
	uint32_t symbol;
	int64_t cum_qty;
	int64_t leaves_qty;
	uint64_t last_seq;     /* last stream seq that concerns this order */
};
static_assert(sizeof(struct wire_me_result) == 56, "wire_me_result");

/* OMS shard `stream` has applied its stream through seq; the ME may drop events <= seq.
 * hdr.shard is the destination ME shard. */
struct wire_stream_ack {
	struct wire_msg_hdr hdr;
	uint64_t seq;
	uint16_t stream;       /* the OMS shard whose stream this acknowledges */
	uint8_t reserved[6];
};
static_assert(sizeof(struct wire_stream_ack) == 24, "wire_stream_ack");

/* Re-send the stream of OMS shard `stream` from from_seq on (hdr.shard: the ME shard). */
struct wire_replay_request {
	struct wire_msg_hdr hdr;
	uint64_t from_seq;
	uint16_t stream;
	uint8_t reserved[6];
};
static_assert(sizeof(struct wire_replay_request) == 24, "wire_replay_request");

struct wire_order_query {
	struct wire_msg_hdr hdr;
	struct wire_oid oid;
};
static_assert(sizeof(struct wire_order_query) == 24, "wire_order_query");

/* Ask the ME for a user's open orders (reconciliation); hdr.shard is the ME shard. */
struct wire_open_orders_query {
	struct wire_msg_hdr hdr;
	uint64_t user;
	uint64_t req_id;       /* echoed in the snapshot */
	uint16_t oms_shard;    /* the asking shard: as_of_seq refers to its stream */
	uint8_t reserved[6];
};
static_assert(sizeof(struct wire_open_orders_query) == 32, "wire_open_orders_query");

struct wire_open_order {
	struct wire_oid oid;
	uint32_t symbol;
	uint8_t side;
	uint8_t reserved[3];
	int64_t px;
	int64_t leaves_qty;
};
static_assert(sizeof(struct wire_open_order) == 40, "wire_open_order");

/* A user's open orders on one ME shard as of stream sequence as_of_seq of the OMS shard
 * hdr.shard. Sent in parts of up to WIRE_OPEN_ORDERS_MAX; `last` marks the final part. */
struct wire_open_orders_snapshot {
	struct wire_msg_hdr hdr;
	uint64_t user;
	uint64_t req_id;
	uint64_t as_of_seq;
	uint16_t me_shard;     /* the answering ME shard */
	uint8_t part;          /* 0, 1, ... */
	uint8_t last;          /* 1 on the final part */
	uint32_t count;        /* valid entries in orders[] */
	struct wire_open_order orders[WIRE_OPEN_ORDERS_MAX];
};
static_assert(sizeof(struct wire_open_orders_snapshot) == 680, "wire_open_orders_snapshot");

/* ---------------------------------------------------------------------------------------
 * Persistence (OMS shard ↔ persister ↔ PostgreSQL).
 * ------------------------------------------------------------------------------------- */

struct wire_balance {
	uint32_t asset;    /* asset id; 0 marks an unused slot */
	uint32_t reserved;
	int64_t total;     /* minor units; never negative */
};
static_assert(sizeof(struct wire_balance) == 16, "wire_balance");

enum wire_recent_kind {
	WIRE_RECENT_ORDER = 1,    /* a client request by clientOrderId (order or modify) */
	WIRE_RECENT_TRANSFER = 2, /* a deposit or withdrawal by transfer_id */
};

/* One request the user made recently and what became of it. Carried with the user's state,
 * so the idempotency window moves with the user between OMS shards: a re-send that reaches
 * the new owner is answered with the original outcome, not applied again (found by
 * sim-system: a deposit applied twice across a routing change). A transfer entry also says
 * what the transfer was (asset, amount) and the total its reply carried: a flush writes it
 * to the transfers table (docs/persist.md), where it answers a retry for the transfer's
 * lifetime. The first 24 bytes are the version-3 layout (asset and amount were reserved
 * zeros there), so a stored version-3 entry reads as a transfer of unknown content. */
struct wire_recent {
	uint64_t id;        /* clientOrderId or transfer_id; 0 marks an unused slot */
	uint64_t user_seq;  /* orders: the orderId's whole second word it got (oms_shard << 48
			     * | user_seq, as wire_oid.shard_seq), so a duplicate answered on
			     * another shard repeats the original orderId; 0 if refused.
			     * transfers: the balance total the original ADMIN_REPLY carried */
	uint16_t reason;    /* original outcome: WIRE_REASON_NONE or the refusal */
	uint8_t kind;       /* enum wire_recent_kind */
	uint8_t reserved;
	uint32_t asset;     /* transfers: the asset (0: unknown, a version-3 entry); orders: 0 */
	int64_t amount;     /* transfers: the amount (0: unknown); orders: 0 */
};
static_assert(sizeof(struct wire_recent) == 32, "wire_recent");
static_assert(offsetof(struct wire_recent, asset) == 20, "version-3 prefix kept");

/* The flushed (quiescent) part of a user's state: what the database row holds. */
struct wire_user_state {
	uint64_t user;
	uint64_t version;   /* database row version this state was read at / is based on */
	uint64_t user_seq;  /* last orderId sequence used */
	uint64_t xfer_id_max; /* the highest transfer_id ever recorded for the user (0: none):
			       * a larger id cannot have been applied before, so it needs no
			       * lookup in the transfers table (docs/oms.md) */
	uint64_t cl_ord_floor; /* the highest clientOrderId whose outcome the user's window has
				* forgotten (0: none): a request at or below it that the window
				* does not hold is refused STALE_REQUEST, never executed */
	uint64_t egress_seq;   /* the last per-user report sequence number sent (0: none): a
				* re-hydrated or moved user continues its sequence from it */
	int64_t rl_tokens;     /* the rate-limit bucket at rl_tokens_ns, nano-requests (the
				* hydrating OMS clamps it to its tier's burst) */
	uint64_t rl_tokens_ns; /* cluster time of rl_tokens (0: nothing saved, a full bucket):
				* a re-hydrated or moved user refills from it, not from full */
	uint8_t tier;       /* rate-limit tier */
	uint8_t reserved0[3];
	uint32_t balance_count;
	struct wire_balance balances[WIRE_BALANCES_MAX];
	uint32_t recent_count;                     /* valid entries in recent[], oldest first */
	uint32_t reserved1;
	struct wire_recent recent[WIRE_RECENT_MAX];
};
static_assert(sizeof(struct wire_user_state) ==
		      80 + 16 * WIRE_BALANCES_MAX + 32 * WIRE_RECENT_MAX,
	      "wire_user_state");

struct wire_hydrate_request {
	struct wire_msg_hdr hdr;
	uint64_t user;
	uint64_t epoch;     /* the shard's fencing epoch for this user */
};
static_assert(sizeof(struct wire_hydrate_request) == 24, "wire_hydrate_request");

struct wire_hydrate_user {
	struct wire_msg_hdr hdr;
	uint64_t epoch;
	uint8_t status;       /* enum wire_hydrate_status */
	uint8_t reserved0;
	uint16_t owner_shard; /* OWNED: who holds the claim */
	uint32_t reserved1;
	struct wire_user_state state;
};
static_assert(sizeof(struct wire_hydrate_user) == 24 + sizeof(struct wire_user_state),
	      "wire_hydrate_user");

struct wire_begin_dehydrate {
	struct wire_msg_hdr hdr;
	uint64_t epoch;
	struct wire_user_state state; /* version = the expected row version for the CAS */
};
static_assert(sizeof(struct wire_begin_dehydrate) == 16 + sizeof(struct wire_user_state),
	      "wire_begin_dehydrate");

struct wire_flush_complete {
	struct wire_msg_hdr hdr;
	uint64_t user;
	uint64_t epoch;
	uint64_t version;   /* row version after the write */
	uint8_t status;     /* enum wire_flush_status */
	uint8_t reserved[7];
};
static_assert(sizeof(struct wire_flush_complete) == 40, "wire_flush_complete");

/* Release of the owner claim a flush kept (docs/fencing.md). The OMS emits RELEASE_CLAIM
 * when it drops an actor (its FlushComplete applied), and re-emits it from state until the
 * persister's RELEASE_DONE is applied. The flush itself keeps the claim, so no other shard
 * can hydrate the user while this shard might still serve it. */
struct wire_release_claim {
	struct wire_msg_hdr hdr;
	uint64_t user;
	uint64_t epoch;     /* the epoch of the flush that dropped the actor */
	uint8_t status;     /* RELEASE_DONE: enum wire_flush_status; RELEASE_CLAIM: 0 */
	uint8_t handoff;    /* RELEASE_CLAIM of a move with adopted orders: 1 hands the claim to
			       to_shard instead of freeing it (docs/fencing.md) */
	uint16_t to_shard;  /* handoff: the shard the user moved to; else 0 */
	uint8_t reserved[4];
};
static_assert(sizeof(struct wire_release_claim) == 32, "wire_release_claim");

enum wire_transfer_found_status {
	WIRE_XFER_FOUND = 1,     /* the transfer is recorded; rec holds its original outcome */
	WIRE_XFER_NOT_FOUND = 2, /* no such transfer was ever applied for the user */
	WIRE_XFER_ERROR = 3,     /* database unavailable; nothing is known */
};

/* OMS → persister: is (user, transfer_id) in the transfers table? Sent for a transfer whose
 * id is not in the resident window (docs/oms.md, "Transfers for their lifetime"); the
 * transfer waits for the answer, which re-enters the shard through its log. A read: no
 * fencing needed (every transfer this shard applied and has not seen flushed is pinned in
 * its window, and earlier owners flushed theirs before this shard could claim the user). */
struct wire_transfer_lookup {
	struct wire_msg_hdr hdr;
	uint64_t user;
	uint64_t transfer_id;
	uint64_t epoch;     /* names this lookup (a fresh epoch of the shard), echoed back, so
			     * a late answer never settles a later lookup of the same id */
};
static_assert(sizeof(struct wire_transfer_lookup) == 32, "wire_transfer_lookup");

/* Persister → OMS: the answer to TRANSFER_LOOKUP (hdr.shard: the asking OMS shard). */
struct wire_transfer_found {
	struct wire_msg_hdr hdr;
	uint64_t user;
	uint64_t transfer_id;
	uint64_t epoch;          /* the lookup's */
	uint8_t status;          /* enum wire_transfer_found_status */
	uint8_t reserved[7];
	struct wire_recent rec;  /* FOUND: kind TRANSFER, the original outcome; else zero */
};
static_assert(sizeof(struct wire_transfer_found) == 72, "wire_transfer_found");

/* ---------------------------------------------------------------------------------------
 * Admin (each becomes an entry in the target shard's log).
 * ------------------------------------------------------------------------------------- */

struct wire_route_shard {
	uint16_t shard;
	uint8_t state;      /* enum wire_shard_state */
	uint8_t reserved;
};
static_assert(sizeof(struct wire_route_shard) == 4, "wire_route_shard");

struct wire_route_pin {
	uint64_t user;
	uint16_t shard;
	uint8_t reserved[6];
};
static_assert(sizeof(struct wire_route_pin) == 16, "wire_route_pin");

/* The one atomically-versioned routing config: membership and whale pins move together. */
struct wire_routing_config {
	struct wire_msg_hdr hdr;
	uint64_t epoch;
	uint32_t shard_count;
	uint32_t pin_count;
	struct wire_route_shard shards[WIRE_ROUTE_SHARDS_MAX];
	struct wire_route_pin pins[WIRE_ROUTE_PINS_MAX];
};
static_assert(sizeof(struct wire_routing_config) == 24 + 4 * WIRE_ROUTE_SHARDS_MAX +
						      16 * WIRE_ROUTE_PINS_MAX,
	      "wire_routing_config");

struct wire_symbol_config {
	struct wire_msg_hdr hdr;
	uint32_t symbol;
	uint32_t base_asset;
	uint32_t quote_asset;
	uint16_t me_shard;      /* owning ME shard (versioned map entry) */
	uint8_t status;         /* enum wire_symbol_status */
	uint8_t reserved0;
	int64_t tick;           /* price increment, > 0 */
	int64_t lot;            /* qty increment, > 0 */
	int64_t min_qty;
	int64_t min_notional;   /* quote minor units */
	int64_t base_unit;      /* notional = px * qty / base_unit; tick*lot % base_unit == 0 */
	int64_t ref_px;         /* band reference until the first trade */
	uint32_t band_bps;      /* max distance from reference; 0 = no band */
	int16_t maker_fee_bps;  /* OMS fee schedule; may be negative (rebate) */
	int16_t taker_fee_bps;
	uint64_t map_version;   /* symbol→shard map version */
};
static_assert(sizeof(struct wire_symbol_config) == 88, "wire_symbol_config");

/* Admin (ME shards): one step of a live symbol move (docs/me.md "Moving a symbol with its
 * book"). The source shard may first journal the book's changes (WATCH) while the book is
 * copied as it trades, then freezes the book (OUT); the chunks carry it into the target's
 * log (BOOK_CHUNK), the target opens it once what it installed matches (IN), the source
 * drops its frozen copy (DONE); ABORT undoes either side before IN. Each step is
 * idempotent on move_id, so a driver that lost its answer sends it again. */
enum wire_move_phase {
	WIRE_MOVE_OUT = 1,   /* source: freeze the book, count and hash it */
	WIRE_MOVE_IN = 2,    /* target: the installed book matches count and hash: own it, open */
	WIRE_MOVE_DONE = 3,  /* source: drop the frozen book (it lives on the target now) */
	WIRE_MOVE_ABORT = 4, /* source: unfreeze; target: drop what was installed */
	WIRE_MOVE_WATCH = 5, /* source: journal the orderIds of the symbol's book changes from
			      * here, for the difference read after OUT */
};

struct wire_symbol_move {
	struct wire_msg_hdr hdr;
	uint64_t move_id;       /* the move (nonzero), the same in every step */
	uint32_t symbol;
	uint16_t peer;          /* OUT/DONE/ABORT at the source: the target; IN/ABORT at the
				 * target: the source */
	uint8_t phase;          /* enum wire_move_phase */
	uint8_t status;         /* IN: the status to open with (enum wire_symbol_status) */
	uint64_t hash;          /* IN: the book's hash as the source computed it at OUT */
	uint32_t count;         /* IN: resting orders the book had at OUT */
	uint8_t killed;         /* IN: the symbol's kill-switch */
	uint8_t reserved[3];
	uint64_t trade_seq;     /* IN: the symbol's trade number to go on from */
	int64_t last_px;        /* IN: last trade price (the band reference) */
};
static_assert(sizeof(struct wire_symbol_move) == 56, "wire_symbol_move");

/* What a BOOK_CHUNK does with one order (wire_book_order.op). A move copies the book while it
 * still trades (ADDs), then, once it is frozen, the difference (docs/me.md). */
enum wire_book_op {
	WIRE_BOOK_ADD = 0,      /* append it to the tail of its price level */
	WIRE_BOOK_UPDATE = 1,   /* an installed order's leaves, cum and stream changed */
	WIRE_BOOK_REMOVE = 2,   /* an installed order is no longer on the book */
};

/* One resting order of a moving book, as the source holds it. */
struct wire_book_order {
	struct wire_oid oid;    /* the order */
	int64_t px;             /* limit price */
	int64_t leaves;         /* live qty */
	int64_t cum;            /* filled qty */
	uint64_t expire_ns;     /* GTD expiry (cluster time), else 0 */
	uint32_t fp;            /* the submit's dedup fingerprint */
	uint16_t stream;        /* the OMS shard whose stream carries its events */
	uint8_t side;           /* enum wire_side */
	uint8_t ord_type;       /* enum wire_ord_type */
	uint8_t tif;            /* enum wire_tif */
	uint8_t stp;            /* enum wire_stp */
	uint8_t op;             /* enum wire_book_op */
	uint8_t reserved[5];
};
static_assert(sizeof(struct wire_book_order) == 64, "wire_book_order");

/* Admin (target ME shard): orders [seq-th chunk] of a moving book, best level first and
 * in time priority within a level; chunk 0 opens the install (tail: count orders). */
struct wire_book_chunk {
	struct wire_msg_hdr hdr;
	uint64_t move_id;
	uint32_t symbol;
	uint32_t seq;           /* 0, 1, ...: the target takes them in order, once */
	uint16_t source;        /* the source ME shard */
	uint16_t count;         /* orders in the tail */
	uint16_t tail_len;      /* count * sizeof(struct wire_book_order) */
	uint16_t reserved;
};
static_assert(sizeof(struct wire_book_chunk) == 32, "wire_book_chunk");

struct wire_symbol_status_msg {
	struct wire_msg_hdr hdr;
	uint32_t symbol;
	uint8_t status;         /* enum wire_symbol_status */
	uint8_t cancel_resting; /* halt: also cancel resting orders (cause HALT) */
	uint16_t reserved;
};
static_assert(sizeof(struct wire_symbol_status_msg) == 16, "wire_symbol_status_msg");

struct wire_kill_switch {
	struct wire_msg_hdr hdr;
	uint64_t id;            /* user or symbol */
	uint8_t scope;          /* enum wire_kill_scope */
	uint8_t engage;         /* 1: cancel all and block new; 0: release */
	uint8_t reserved[6];
};
static_assert(sizeof(struct wire_kill_switch) == 24, "wire_kill_switch");

/* Deposit (amount > 0) or withdrawal (amount < 0), idempotent on (user, transfer_id).
 * With WIRE_TRANSFER_F_ROUTE a client sends it to a gateway, which routes it to the user's
 * owner shard like an order (hdr.shard is then ignored); without, it goes straight to the
 * OMS shard hdr.shard (treasury/admin path). */
#define WIRE_TRANSFER_F_ROUTE 0x0001
struct wire_transfer {
	struct wire_msg_hdr hdr;
	uint64_t user;
	uint64_t transfer_id;
	uint32_t asset;
	uint32_t reserved;
	int64_t amount;
};
static_assert(sizeof(struct wire_transfer) == 40, "wire_transfer");

/* Admin: pin or unpin one whale (bumps the routing epoch). */
struct wire_whale_pin {
	struct wire_msg_hdr hdr;
	uint64_t user;
	uint16_t shard;         /* pin target; ignored for unpin (hdr.flags bit 0 = unpin) */
	uint8_t reserved[6];
};
static_assert(sizeof(struct wire_whale_pin) == 24, "wire_whale_pin");

/* Admin: user-level operation on an OMS shard (evict / migrate). */
struct wire_user_admin {
	struct wire_msg_hdr hdr;
	uint64_t user;
	uint8_t op;             /* 1 evict when flat, 2 migrate (quiesce + flush + evict) */
	uint8_t reserved[7];
};
static_assert(sizeof(struct wire_user_admin) == 24, "wire_user_admin");

struct wire_snapshot_request {
	struct wire_msg_hdr hdr;
	uint64_t req_id;
};
static_assert(sizeof(struct wire_snapshot_request) == 16, "wire_snapshot_request");

/* Cluster time passes; no other effect. An idle leader appends one at a fixed cadence. */
struct wire_tick {
	struct wire_msg_hdr hdr;
};
static_assert(sizeof(struct wire_tick) == 8, "wire_tick");

struct wire_admin_reply {
	struct wire_msg_hdr hdr;
	uint64_t req_id;
	uint16_t reason;        /* WIRE_REASON_NONE on success */
	uint16_t reserved0;
	uint32_t leader_node;   /* NOT_LEADER hint */
	uint64_t value;         /* command-specific result (e.g. new epoch, snapshot index) */
};
static_assert(sizeof(struct wire_admin_reply) == 32, "wire_admin_reply");

/* ---------------------------------------------------------------------------------------
 * Raft (between members of one shard; hdr.shard names the shard).
 * ------------------------------------------------------------------------------------- */

#define WIRE_VOTE_F_PRE 0x0001      /* hdr.flags: pre-vote (Raft thesis §9.6) */
#define WIRE_VOTE_F_TRANSFER 0x0002 /* hdr.flags: leadership transfer, ignore lease */

struct wire_request_vote {
	struct wire_msg_hdr hdr;
	uint64_t term;
	uint64_t last_index;
	uint64_t last_term;
	uint32_t candidate;
	uint32_t reserved;
};
static_assert(sizeof(struct wire_request_vote) == 40, "wire_request_vote");

struct wire_vote_reply {
	struct wire_msg_hdr hdr;
	uint64_t term;
	uint32_t voter;
	uint8_t granted;
	uint8_t reserved[3];
};
static_assert(sizeof(struct wire_vote_reply) == 24, "wire_vote_reply");

/* Followed by tail_len bytes: entry_count entries, each a wire_entry_hdr + data. */
struct wire_append_entries {
	struct wire_msg_hdr hdr;
	uint64_t term;
	uint64_t prev_index;
	uint64_t prev_term;
	uint64_t commit;
	uint64_t seq;            /* the leader's per-follower message number, echoed in the reply */
	uint32_t leader;
	uint16_t entry_count;
	uint16_t tail_len;
};
static_assert(sizeof(struct wire_append_entries) == 56, "wire_append_entries");

/* One log entry inside an AppendEntries tail. Its data is a sequence of wire messages. */
struct wire_entry_hdr {
	uint64_t term;
	uint64_t time_ns;   /* cluster time stamped by the leader */
	uint32_t data_len;
	uint16_t kind;      /* consensus entry kind (normal, tick, config, noop) */
	uint16_t reserved;
};
static_assert(sizeof(struct wire_entry_hdr) == 24, "wire_entry_hdr");

/* match_index is what counts towards commitment (in disk mode: durable); recv_index is
 * what the follower holds in memory that matches this leader's log, so the leader neither
 * re-sends entries that are only waiting for the follower's disk nor waits for them. seq
 * names the AppendEntries answered, so a rejection of a message sent before the leader
 * went back (the network reorders) is recognised as stale. */
struct wire_append_reply {
	struct wire_msg_hdr hdr;
	uint64_t term;
	uint64_t match_index;    /* success: highest index known replicated (counted) */
	uint64_t recv_index;     /* highest index held matching the leader, >= match_index */
	uint64_t conflict_index; /* failure: first index of conflict_term (fast back-up) */
	uint64_t conflict_term;
	uint64_t seq;            /* the AppendEntries answered (its seq), 0 when unsolicited */
	uint32_t follower;
	uint8_t success;
	uint8_t reserved[3];
};
static_assert(sizeof(struct wire_append_reply) == 64, "wire_append_reply");

/* Followed by tail_len bytes of snapshot at byte offset `offset`. */
struct wire_install_snapshot {
	struct wire_msg_hdr hdr;
	uint64_t term;
	uint64_t last_index;
	uint64_t last_term;
	uint64_t last_time_ns;
	uint64_t offset;
	uint64_t total_len;
	uint32_t leader;
	uint16_t done;           /* 1 on the last chunk */
	uint16_t tail_len;
};
static_assert(sizeof(struct wire_install_snapshot) == 64, "wire_install_snapshot");

struct wire_snapshot_reply {
	struct wire_msg_hdr hdr;
	uint64_t term;
	uint64_t last_index;
	uint64_t next_offset;    /* bytes received so far */
	uint32_t follower;
	uint8_t done;
	uint8_t gap;             /* 1: the chunk was beyond next_offset (one before it is
				  * missing) or the follower lost its place: send from there */
	uint8_t reserved[2];
};
static_assert(sizeof(struct wire_snapshot_reply) == 40, "wire_snapshot_reply");

struct wire_timeout_now {
	struct wire_msg_hdr hdr;
	uint64_t term;
	uint32_t leader;
	uint32_t reserved;
};
static_assert(sizeof(struct wire_timeout_now) == 24, "wire_timeout_now");

/* A client payload forwarded to the leader of shard hdr.shard (gateway → shard), or answered
 * by a follower with NAK NOT_LEADER. Tail: the wrapped messages. */
struct wire_ingress {
	struct wire_msg_hdr hdr;
	uint32_t origin;         /* session or node that sent it (egress goes back there) */
	uint16_t tail_len;
	uint16_t reserved;
};
static_assert(sizeof(struct wire_ingress) == 16, "wire_ingress");

/* ---------------------------------------------------------------------------------------
 * Admin forwarding between nodes (docs/appliance.md "Control socket"): a node's control
 * socket sends a mutation for a shard it does not lead to that shard's leader, which
 * proposes the whole FORWARDED_ADMIN as one entry (the host hands the service the wrapped
 * message and records (origin, fwd_id) on every member, so a re-send is answered, never
 * applied twice) and answers FORWARDED_REPLY once it applied. Between nodes only: both are
 * refused from any address that is not a configured peer's (the cluster key covers them).
 * ------------------------------------------------------------------------------------- */

/* hdr.flags of FORWARDED_ADMIN: what the leader completes from its replica before
 * proposing (same meaning as the control socket's APP_CMD_ROUTE_MERGE, _SCALE, _FILL). */
#define WIRE_FWD_F_ROUTE_MERGE 0x0001 /* ROUTING_CONFIG: epoch = applied + 1, pins kept */
#define WIRE_FWD_F_ROUTE_SCALE 0x0002 /* ROUTING_CONFIG: shards[0] joins the applied set */
#define WIRE_FWD_F_SYMBOL_FILL 0x0004 /* SYMBOL_CONFIG: the book fields from the replica */
#define WIRE_FWD_F_ALL 0x0007

/* Tail: exactly one admin message (wire_type_is_admin), one MEMBER_CHANGE or one
 * LEADER_TRANSFER. hdr.shard: the target shard. */
struct wire_fwd_admin {
	struct wire_msg_hdr hdr;
	uint64_t fwd_id;         /* the origin's id of this command; (origin, fwd_id) is unique */
	uint32_t origin;         /* node that forwarded it: the answer goes there */
	uint16_t reply_shard;    /* shard whose lcore on origin waits for the answer */
	uint16_t tail_len;       /* bytes of the wrapped admin message */
};
static_assert(sizeof(struct wire_fwd_admin) == 24, "wire_fwd_admin");

enum wire_fwd_status {
	WIRE_FWD_OK = 1,         /* committed and applied; reason NONE */
	WIRE_FWD_REJECTED = 2,   /* committed, and the service refused it (reason) */
	WIRE_FWD_NOT_LEADER = 3, /* not proposed: this member does not lead (leader: hint) */
	WIRE_FWD_BUSY = 4,       /* not proposed: backpressure, a transfer, state not current */
	WIRE_FWD_FAILED = 5,     /* not proposed: the message is wrong for this shard */
	WIRE_FWD_MAX = 6,
};

/* hdr.shard: the origin's reply_shard. Tail: the admin message as it was proposed (a
 * SYMBOL_CONFIG the leader filled) or nothing. */
struct wire_fwd_reply {
	struct wire_msg_hdr hdr;
	uint64_t fwd_id;         /* the command answered */
	uint64_t value;          /* the ADMIN_REPLY's value */
	uint64_t index;          /* log index of the entry (OK, REJECTED) */
	uint64_t term;           /* its term */
	uint32_t leader;         /* NOT_LEADER: the leader this member knows, 0 none */
	uint16_t shard;          /* the target shard that answered */
	uint8_t status;          /* enum wire_fwd_status */
	uint8_t reserved0;
	uint16_t reason;         /* REJECTED: enum wire_reason */
	uint16_t tail_len;
	uint32_t reserved1;
};
static_assert(sizeof(struct wire_fwd_reply) == 56, "wire_fwd_reply");

/* A membership change (thesis §4.1; docs/cluster-ops.md) forwarded to the shard's leader as
 * the tail of a FORWARDED_ADMIN, and nowhere else: it is not a service message. The leader
 * calls cns_member_change(op, node) instead of proposing anything, so it never reaches a
 * log as a service entry (the configuration entry is consensus's own), and answers
 * FORWARDED_REPLY once that configuration entry commits (value: its index). Its class is
 * NONE: never taken off the wire alone. hdr.shard: the target shard. */
enum wire_member_op {
	WIRE_MEMBER_ADD = 1,     /* add node as a learner (CNS_MEMBER_ADD) */
	WIRE_MEMBER_PROMOTE = 2, /* a caught-up learner becomes a voter (CNS_MEMBER_PROMOTE) */
	WIRE_MEMBER_REMOVE = 3,  /* remove a learner or a voter (CNS_MEMBER_REMOVE) */
};

struct wire_member_change {
	struct wire_msg_hdr hdr;
	uint32_t node;           /* the member changed, non-zero */
	uint8_t op;              /* enum wire_member_op */
	uint8_t reserved[3];
};
static_assert(sizeof(struct wire_member_change) == 16, "wire_member_change");
static_assert(offsetof(struct wire_member_change, op) == 12, "wire_member_change.op");

/* A leadership transfer (thesis §3.10; `omsctl transfer-leader`) forwarded to the shard's
 * leader as the tail of a FORWARDED_ADMIN, and nowhere else: like MEMBER_CHANGE it is not a
 * service message. The leader calls cns_transfer(node) instead of proposing anything and
 * answers FORWARDED_REPLY OK (value: the term node leads in) once it sees node leading; a
 * leader that is node answers OK at once (already so). A transfer consensus abandoned is
 * answered BUSY: nothing changed. Its class is NONE: never taken off the wire alone.
 * hdr.shard: the target shard. */
struct wire_leader_transfer {
	struct wire_msg_hdr hdr;
	uint32_t node;           /* the voter that is to lead, non-zero */
	uint32_t reserved;
};
static_assert(sizeof(struct wire_leader_transfer) == 16, "wire_leader_transfer");
static_assert(offsetof(struct wire_leader_transfer, node) == 8, "wire_leader_transfer.node");

/* ---------------------------------------------------------------------------------------
 * The message list: X(NAME, value, struct, has_tail, class, admin).
 *   has_tail: the struct is followed by `tail_len` bytes (field named tail_len in the
 *             struct).
 *   class:    who takes the message off the wire (enum wire_class without its prefix); the
 *             dataplane routes by it, so the route of a type is written down once, here.
 *   admin:    1 for the operator's commands that an OMS or ME leader proposes as they are.
 * Neither class nor admin is on the wire: they do not change the frame version.
 * ------------------------------------------------------------------------------------- */

/* Who takes a message type off the wire. */
enum wire_class {
	WIRE_CLS_NONE = 0,    /* host-internal (persistence, ticks): never accepted off the wire */
	WIRE_CLS_SHARD = 1,   /* Raft, admin, ME-bound requests, ingress: shard hdr.shard's lcore */
	WIRE_CLS_GATEWAY = 2, /* client order entry: the gateway, which picks the OMS shard */
	WIRE_CLS_BRIDGE = 3,  /* ME results and events for OMS shard hdr.shard: its bridge */
	WIRE_CLS_CLIENT = 4,  /* acks, NAKs, reports, admin replies: a client-side consumer */
	WIRE_CLS_COUNT,
};

#define WIRE_TYPES(X)                                                                      \
	X(NEW_ORDER, 1, wire_new_order, 0, GATEWAY, 0)                                    \
	X(CANCEL, 2, wire_cancel, 0, GATEWAY, 0)                                          \
	X(AMEND, 3, wire_amend, 0, GATEWAY, 0)                                            \
	X(CANCEL_REPLACE, 4, wire_cancel_replace, 0, GATEWAY, 0)                          \
	X(ACK, 5, wire_ack, 0, CLIENT, 0)                                                 \
	X(NAK, 6, wire_nak, 0, CLIENT, 0)                                                 \
	X(EXEC_REPORT, 7, wire_exec_report, 0, CLIENT, 0)                                 \
	X(REPORT_REPLAY, 8, wire_report_replay, 0, GATEWAY, 0)                            \
	X(LOGON, 9, wire_logon, 0, GATEWAY, 0)                                            \
	X(LOGON_REPLY, 10, wire_logon_reply, 0, CLIENT, 0)                                \
	X(SESSION_HDR, 11, wire_session_hdr, 0, GATEWAY, 0)                               \
	X(SESSION_REJECT, 12, wire_session_reject, 0, CLIENT, 0)                          \
	X(LOGOUT, 13, wire_logout, 0, GATEWAY, 0)                                         \
	X(HEARTBEAT, 14, wire_heartbeat, 0, GATEWAY, 0)                                   \
	X(SUBMIT, 16, wire_submit, 0, SHARD, 0)                                           \
	X(CANCEL_TO_ME, 17, wire_modify, 0, SHARD, 0)                                     \
	X(AMEND_TO_ME, 18, wire_modify, 0, SHARD, 0)                                      \
	X(REPLACE_TO_ME, 19, wire_modify, 0, SHARD, 0)                                    \
	X(ME_EVENT, 20, wire_me_event, 0, BRIDGE, 0)                                      \
	X(ME_RESULT, 21, wire_me_result, 0, BRIDGE, 0)                                    \
	X(STREAM_ACK, 22, wire_stream_ack, 0, SHARD, 0)                                   \
	X(REPLAY_REQUEST, 23, wire_replay_request, 0, SHARD, 0)                           \
	X(ORDER_QUERY, 24, wire_order_query, 0, SHARD, 0)                                 \
	X(OPEN_ORDERS_QUERY, 25, wire_open_orders_query, 0, SHARD, 0)                     \
	X(OPEN_ORDERS_SNAPSHOT, 26, wire_open_orders_snapshot, 0, BRIDGE, 0)              \
	X(REBIND_TO_ME, 27, wire_rebind, 0, SHARD, 0)                                     \
	X(HYDRATE_REQUEST, 32, wire_hydrate_request, 0, NONE, 0)                          \
	X(HYDRATE_USER, 33, wire_hydrate_user, 0, NONE, 0)                                \
	X(BEGIN_DEHYDRATE, 34, wire_begin_dehydrate, 0, NONE, 0)                          \
	X(FLUSH_COMPLETE, 35, wire_flush_complete, 0, NONE, 0)                            \
	X(RELEASE_CLAIM, 36, wire_release_claim, 0, NONE, 0)                              \
	X(RELEASE_DONE, 37, wire_release_claim, 0, NONE, 0)                               \
	X(TRANSFER_LOOKUP, 38, wire_transfer_lookup, 0, NONE, 0)                          \
	X(TRANSFER_FOUND, 39, wire_transfer_found, 0, NONE, 0)                            \
	X(ROUTING_CONFIG, 48, wire_routing_config, 0, SHARD, 1)                           \
	X(SYMBOL_CONFIG, 49, wire_symbol_config, 0, SHARD, 1)                             \
	X(SYMBOL_STATUS, 50, wire_symbol_status_msg, 0, SHARD, 1)                         \
	X(KILL_SWITCH, 51, wire_kill_switch, 0, SHARD, 1)                                 \
	X(TRANSFER, 52, wire_transfer, 0, SHARD, 1)                                       \
	X(WHALE_PIN, 53, wire_whale_pin, 0, SHARD, 1)                                     \
	X(USER_ADMIN, 54, wire_user_admin, 0, SHARD, 1)                                   \
	X(SNAPSHOT_REQUEST, 55, wire_snapshot_request, 0, SHARD, 1)                       \
	X(TICK, 56, wire_tick, 0, NONE, 0)                                                \
	X(ADMIN_REPLY, 57, wire_admin_reply, 0, CLIENT, 0)                                \
	X(SYMBOL_MOVE, 58, wire_symbol_move, 0, SHARD, 1)                                 \
	X(BOOK_CHUNK, 59, wire_book_chunk, 1, SHARD, 1)                                   \
	X(REQUEST_VOTE, 64, wire_request_vote, 0, SHARD, 0)                               \
	X(VOTE_REPLY, 65, wire_vote_reply, 0, SHARD, 0)                                   \
	X(APPEND_ENTRIES, 66, wire_append_entries, 1, SHARD, 0)                           \
	X(APPEND_REPLY, 67, wire_append_reply, 0, SHARD, 0)                               \
	X(INSTALL_SNAPSHOT, 68, wire_install_snapshot, 1, SHARD, 0)                       \
	X(SNAPSHOT_REPLY, 69, wire_snapshot_reply, 0, SHARD, 0)                           \
	X(TIMEOUT_NOW, 70, wire_timeout_now, 0, SHARD, 0)                                 \
	X(INGRESS, 71, wire_ingress, 1, SHARD, 0)                                         \
	X(FORWARDED_ADMIN, 72, wire_fwd_admin, 1, SHARD, 0)                               \
	X(FORWARDED_REPLY, 73, wire_fwd_reply, 1, SHARD, 0)                               \
	X(MEMBER_CHANGE, 74, wire_member_change, 0, NONE, 0)                              \
	X(LEADER_TRANSFER, 75, wire_leader_transfer, 0, NONE, 0)

enum wire_type {
#define WIRE_TYPE_ENUM(name, value, st, tail, cls, admin) WIRE_##name = value,
	WIRE_TYPES(WIRE_TYPE_ENUM)
#undef WIRE_TYPE_ENUM
	WIRE_TYPE_LIMIT = 76, /* one past the largest value */
};

/* Every message fits a frame's 16-bit length field with its tail. */
#define WIRE_TYPE_SIZE_ASSERT(name, value, st, tail, cls, admin)                           \
	static_assert(sizeof(struct st) % 8 == 0, #st " is a multiple of 8");              \
	static_assert(sizeof(struct st) + (tail ? WIRE_TAIL_MAX : 0) <= UINT16_MAX, #st);
WIRE_TYPES(WIRE_TYPE_SIZE_ASSERT)
#undef WIRE_TYPE_SIZE_ASSERT

/* Whether a type has a tail (its has_tail column), as constants for the assertions below. */
enum {
#define WIRE_TYPE_TAIL_ENUM(name, value, st, tail, cls, admin) WIRE_HAS_TAIL_##name = tail,
	WIRE_TYPES(WIRE_TYPE_TAIL_ENUM)
#undef WIRE_TYPE_TAIL_ENUM
};

/* ---------------------------------------------------------------------------------------
 * Minors (docs/wire.md, "Versions"). Within a major the structs above never change. A minor
 * may append fields after the struct of a fixed-size message (one without a tail), in 8-byte
 * steps, at most WIRE_MSG_EXT_MAX bytes per type over all minors of the major: the message's
 * length grows, and a node of the minor before reads its own struct and skips the rest.
 * Types with a tail never grow: their end is the tail's, and hosts size frames by their
 * struct (a minor that needs more there adds a type, sent once every peer knows it).
 *
 * WIRE_EXTS lists what this build appends: X(NAME, bytes, since_minor). A deterministic
 * service never reads an appended field (me and oms apply through wire_msg_known), so the
 * replicas of two minors applying the same log compute the same state. So far the only
 * entries are the test build's zero-valued field, checked like a reserved field.
 * ------------------------------------------------------------------------------------- */
#if WIRE_MINOR_BUMP > 0
/* Test builds: one 8-byte zero-valued field after SUBMIT (bridge → ME shard, proposed into
 * the ME log) and after ME_EVENT (ME shard → bridge, proposed into the OMS log): on every
 * order both cross between nodes and are applied from a log by every replica. */
#define WIRE_EXTS(X)                                                                       \
	X(SUBMIT, 8, WIRE_VERSION_MINOR_RELEASE + 1)                                       \
	X(ME_EVENT, 8, WIRE_VERSION_MINOR_RELEASE + 1)
#else
#define WIRE_EXTS(X)
#endif

#define WIRE_EXT_ASSERT(name, bytes, since)                                                \
	static_assert((bytes) > 0, #name ": appends something");                           \
	static_assert((bytes) % 8 == 0, #name ": appended in 8-byte steps");                \
	static_assert((bytes) <= WIRE_MSG_EXT_MAX, #name ": at most WIRE_MSG_EXT_MAX");     \
	static_assert(!WIRE_HAS_TAIL_##name, #name ": a type with a tail never grows");      \
	static_assert((since) > 0, #name ": minor 0 is the struct itself");
WIRE_EXTS(WIRE_EXT_ASSERT)
#undef WIRE_EXT_ASSERT

/* Room for the fixed part of any message type: wire_msg_known's scratch. */
union wire_msg_any {
	struct wire_msg_hdr hdr;
#define WIRE_TYPE_MEMBER(name, value, st, tail, cls, admin) struct st as_##value;
	WIRE_TYPES(WIRE_TYPE_MEMBER)
#undef WIRE_TYPE_MEMBER
};

/* ---------------------------------------------------------------------------------------
 * Codec.
 * ------------------------------------------------------------------------------------- */

/* Every way a frame or message can be wrong. Counted per cause by the dataplane. */
#define WIRE_ERRS(X)                                                                       \
	X(OK, "ok")                                                                        \
	X(TRUNCATED, "shorter than its header or declared length")                         \
	X(BAD_MAGIC, "bad magic")                                                          \
	X(BAD_VERSION, "unsupported version")                                              \
	X(BAD_FLAGS, "unknown frame flags")                                                \
	X(BAD_LENGTH, "declared length does not match")                                    \
	X(BAD_COUNT, "message count zero, over the limit or not matching")                 \
	X(BAD_TYPE, "unknown message type")                                                \
	X(BAD_MSG_LENGTH, "message length wrong for its type")                             \
	X(BAD_ENUM, "enum field out of range")                                             \
	X(BAD_RESERVED, "reserved field not zero")                                         \
	X(BAD_VALUE, "field value out of range")                                           \
	X(BAD_MAC, "MAC missing or wrong")                                                 \
	X(TRAILING, "bytes after the last message")

enum wire_err {
#define WIRE_ERR_ENUM(name, text) WIRE_E_##name,
	WIRE_ERRS(WIRE_ERR_ENUM)
#undef WIRE_ERR_ENUM
	WIRE_E_COUNT,
};

/* A 128-bit SipHash key; a zero key means "no MAC". */
struct wire_key {
	uint64_t k0;
	uint64_t k1;
};

const char *wire_type_name(uint16_t type);      /* "NEW_ORDER", or "?" */
const char *wire_err_text(enum wire_err err);
const char *wire_reason_name(uint16_t reason);   /* "NOT_OWNER", or "?" */
/* Fixed size of a message type (tail excluded), 0 for an unknown type. Inline: the apply
 * paths check every committed message's length against it. */
extern const uint16_t wire_type_sizes[WIRE_TYPE_LIMIT]; /* the size column, by type */
static inline uint16_t
wire_type_size(uint16_t type)
{
	return type < WIRE_TYPE_LIMIT ? wire_type_sizes[type] : 0;
}
/* Bytes this build writes for a message of a fixed type: its struct plus the fields this
 * minor appends (WIRE_EXTS); the struct alone for a type with a tail; 0 when unknown. A host
 * that sizes frames by messages should use this, not sizeof. */
uint16_t wire_type_size_sent(uint16_t type);
/* Who takes a type off the wire (its class column); WIRE_CLS_NONE for an unknown type. */
enum wire_class wire_type_class(uint16_t type);
/* An operator's command a leader proposes as is (the admin column); false when unknown. */
bool wire_type_is_admin(uint16_t type);

/*
 * Parse a key written as 32 hex digits (either case): the key's 16 bytes in order, k0 and k1
 * their little-endian halves. Returns 0, or -EINVAL (NULL, another length, a non-hex digit)
 * with key untouched. An all-zero key parses: whether it is allowed is the caller's rule.
 */
int wire_key_parse_hex(const char *hex, struct wire_key *key);
/* Exactly 2n hex digits (either case) into n bytes: 0, or -EINVAL (out may be partly
 * written). wire_key_parse_hex and the API secrets of auth/ read with it. */
int wire_hex_decode(const char *hex, uint8_t *out, size_t n);

/*
 * Validate one message at `buf` with at most `avail` readable bytes: header, length for its
 * type (tail included), every enum and reserved field. Never reads past buf + avail.
 * Returns WIRE_E_OK and sets *msg_len, or the first error found.
 * Its writer's minor is not known (a log entry's data, messages wrapped in INGRESS or
 * FORWARDED_*): a fixed-size message may be longer than its struct by what some minor of
 * the major appended (at most WIRE_MSG_EXT_MAX bytes, in 8-byte steps), never shorter; the
 * fields this minor appends must hold what they may. *msg_len is the whole length.
 */
enum wire_err wire_msg_check(const void *buf, size_t avail, uint16_t *msg_len);

/*
 * The message as this build's deterministic services read it. A fixed-size message longer
 * than its struct (fields a newer minor appended, or this build's own WIRE_EXTS) is copied
 * into scratch, without the appended bytes, with hdr.length = its struct size; any other
 * message is returned as it is. The services (me_apply, oms_apply) take every committed
 * message through it, so a service behaves identically whether the appended bytes are there
 * or not, and replicas of two minors agree. msg must be valid (wire_msg_check).
 */
const struct wire_msg_hdr *wire_msg_known(const struct wire_msg_hdr *msg,
					  union wire_msg_any *scratch);

/*
 * Decode a frame: check the header, the MAC (when key is non-NULL and non-zero the frame must
 * carry a valid one; with no key a MAC-flagged frame is refused), and every message.
 * Versions: the major must be ours and the minor within WIRE_MINOR_WINDOW of ours, else
 * BAD_VERSION. A frame of our minor or of the minor before holds messages of exactly the
 * length that minor writes; one of the minor after may append to each fixed-size message
 * (docs/wire.md, "Versions"): the pointers returned cover the whole message.
 * On success fills msgs[] with pointers into buf (at most msgs_max) and *count.
 * The whole frame is refused on the first error: one bad message poisons the frame, since a
 * sender that wrote one wrong message cannot be trusted for the rest.
 */
enum wire_err wire_frame_decode(const void *buf, size_t len, const struct wire_key *key,
				const struct wire_msg_hdr **msgs, uint32_t msgs_max,
				uint32_t *count, uint32_t *sender_id);
/*
 * wire_frame_decode for a caller that computed the MAC itself — many frames' at once with
 * wire_siphash128_multi over their first len − WIRE_MAC_SIZE bytes under key (the io lcore:
 * a burst's frames), compared with wire_frame_tag_ok: mac_ok is that result, used where
 * wire_frame_decode would compute it (a frame that must carry a MAC and does). Everything
 * else is wire_frame_decode's, and so are the errors.
 */
enum wire_err wire_frame_decode_checked(const void *buf, size_t len, const struct wire_key *key,
					bool mac_ok, const struct wire_msg_hdr **msgs,
					uint32_t msgs_max, uint32_t *count, uint32_t *sender_id);
/* The frame's last WIRE_MAC_SIZE bytes equal tag (constant time); false for a frame too
 * short to carry one. */
bool wire_frame_tag_ok(const void *buf, size_t len, const uint8_t tag[WIRE_MAC_SIZE]);
/*
 * The same for a client session's frame (WIRE_FRAME_F_SESSION, which wire_frame_decode
 * refuses): flags exactly MAC|SESSION, SESSION_HDR first and nowhere else, its session id
 * the sender_id. The MAC is NOT checked: the key is the session's, which only the gateway
 * knows; it must call wire_frame_mac_ok before acting on anything in the frame.
 */
enum wire_err wire_session_frame_decode(const void *buf, size_t len,
					const struct wire_msg_hdr **msgs, uint32_t msgs_max,
					uint32_t *count, uint32_t *sender_id);
/* The flags byte of a frame at buf (0 when shorter than a header). */
uint8_t wire_frame_flags(const void *buf, size_t len);
/* The version_minor byte of a frame at buf (0 when shorter than a header): which minor the
 * sender runs, for a host that counts its peers by minor. */
uint8_t wire_frame_minor(const void *buf, size_t len);
/* True when the frame's trailing tag is SipHash-2-4-128 of the rest under key (constant
 * time). The frame must have been decoded already (length and MAC flag checked). */
bool wire_frame_mac_ok(const void *buf, size_t len, const struct wire_key *key);

/* Frame builder over caller memory. */
struct wire_builder {
	uint8_t *buf;       /* frame memory */
	uint32_t cap;       /* its size */
	uint32_t len;       /* bytes written so far */
	uint16_t count;     /* messages written */
};

void wire_builder_init(struct wire_builder *b, void *buf, uint32_t cap, uint32_t sender_id);
/* Is there surely room in b for msg and a tail of tail_len bytes? A test a host may make
 * before wire_builder_add / _add_tail, which then cannot refuse it for room: it counts the
 * message's length and its type's size both, and the most any minor appends
 * (WIRE_MSG_EXT_MAX). False says only "not surely": the add itself decides then. */
static inline bool
wire_builder_room(const struct wire_builder *b, const struct wire_msg_hdr *msg, uint32_t tail_len)
{
	uint32_t most = (uint32_t)msg->length + wire_type_size(msg->type) + tail_len + 7u +
			WIRE_MSG_EXT_MAX + WIRE_MAC_SIZE;
	return b->count < WIRE_FRAME_MSGS_MAX && most <= b->cap - b->len;
}
/* The builder writes every message as this minor does: its struct (and tail), then zeroes
 * for the fields this minor appends (WIRE_EXTS); bytes a newer minor appended to a message
 * handed to it are not copied. */
/* Append a message (hdr.length must be set). Returns 0, or -ENOSPC when it does not fit. */
int wire_builder_add(struct wire_builder *b, const void *msg);
/* Bytes the builder writes for a message of a type without a tail that this minor does not
 * grow (WIRE_EXTS): its struct; 0 for the others and for an unknown type. */
extern const uint16_t wire_type_plain_sizes[WIRE_TYPE_LIMIT];
/* wire_builder_add in line for a message of a plain type (wire_type_plain_sizes): true when
 * it was appended (the same bytes wire_builder_add writes), false when the type is not plain
 * or the frame has no room for it, and nothing was written (wire_builder_add then says
 * which). The hosts' egress adds most messages this way: no call, no table of tails. */
static inline bool
wire_builder_add_plain(struct wire_builder *b, const struct wire_msg_hdr *msg)
{
	uint32_t total = msg->type < WIRE_TYPE_LIMIT ? wire_type_plain_sizes[msg->type] : 0;
	if (total == 0 || b->count >= WIRE_FRAME_MSGS_MAX ||
	    b->len + total + WIRE_MAC_SIZE > b->cap)
		return false;
	uint8_t *dst = b->buf + b->len;
	__builtin_memcpy(dst, msg, total);
	((struct wire_msg_hdr *)dst)->length = (uint16_t)total; /* not a newer minor's */
	b->len += total;
	b->count++;
	return true;
}
/* Append a fixed message plus its tail. -ENOSPC if it does not fit. */
int wire_builder_add_tail(struct wire_builder *b, const void *msg, const void *tail,
			  uint16_t tail_len);
/* Seal the frame (length, count, MAC with key if non-NULL). Returns the frame length. */
uint32_t wire_builder_finish(struct wire_builder *b, const struct wire_key *key);
/* wire_builder_finish in two steps, for a frame whose MAC another lcore writes (app_seal.c):
 * finish_unsealed writes the header as finish does — MAC flag and room for the MAC when mac
 * — and returns the frame length; wire_frame_seal then writes the MAC of a frame of that
 * length (its first len − WIRE_MAC_SIZE bytes, under key, a set key). The two make the
 * bytes wire_builder_finish makes. */
uint32_t wire_builder_finish_unsealed(struct wire_builder *b, bool mac);
void wire_frame_seal(uint8_t *frame, uint32_t len, const struct wire_key *key);
/* wire_frame_seal of n frames, each under its own key (wire_siphash128_multi). */
void wire_frames_seal(uint8_t *const frames[], const uint32_t lens[],
		      const struct wire_key *const keys[], uint32_t n);
/* Mark the frame being built as a session frame (its first message must be SESSION_HDR;
 * finish it with the session key). */
void wire_builder_session(struct wire_builder *b);

/* Walk a buffer of concatenated messages (a log entry's data). Returns the next message or
 * NULL at the end; sets *err on a malformed one (and returns NULL). */
const struct wire_msg_hdr *wire_msgs_next(const uint8_t *buf, uint32_t len, uint32_t *pos,
					  enum wire_err *err);
/* The same over messages already checked: a frame wire_frame_decode or
 * wire_session_frame_decode took (the io lcore decodes every frame it routes), or one this
 * process built with wire_builder. Only the framing is walked — each message's length, 8-byte
 * multiple, within the buffer — not every field again (a DCHECK build checks each in full).
 * NULL at the end, or where the framing does not hold. */
const struct wire_msg_hdr *wire_msgs_next_decoded(const uint8_t *buf, uint32_t len,
						  uint32_t *pos);

/* Initialise a message header for a fixed-size type. */
static inline void
wire_hdr_init(struct wire_msg_hdr *hdr, enum wire_type type, uint16_t shard)
{
	hdr->type = (uint16_t)type;
	hdr->length = wire_type_size((uint16_t)type);
	hdr->shard = shard;
	hdr->flags = 0;
}

/* SipHash-2-4 with a 128-bit output (Aumasson & Bernstein), used as the frame MAC. */
void wire_siphash128(const struct wire_key *key, const void *data, size_t len, uint8_t out[16]);
/* out[i] = wire_siphash128(keys[i], data[i], lens[i]) for i < n, the same bytes; with AVX2
 * four buffers go through the rounds at once (their common full blocks), about a third of
 * the instructions a byte. */
void wire_siphash128_multi(const struct wire_key *const keys[], const void *const data[],
			   const size_t lens[], uint8_t *const out[], uint32_t n);

#endif
