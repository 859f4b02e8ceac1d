/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libomsclient — order entry against an omsd cluster (docs/tools.md, "libomsclient").
 *
 * One `struct omsc` is one client: a UDP socket connected to one node, optionally logged on
 * with an API key (a session: every frame numbered and MAC'd under a key derived for the
 * session, docs/security.md), a bounded table of the requests sent and not yet settled,
 * and per-user tracking of the numbers the node puts on its answers. The library
 *  - sends NEW_ORDER, CANCEL, AMEND, CANCEL_REPLACE and TRANSFER requests, several to a
 *    datagram (omsc_flush sends what is queued; omsc_poll and omsc_tick flush too);
 *  - retransmits a request until the node answers it, byte for byte with the same client
 *    id (the node deduplicates by (user, cl_ord_id) and by transfer id), with exponential
 *    back-off, and gives up after retries_max retransmits or give_up_ms (OMSC_EV_GAVE_UP);
 *  - numbers: the node numbers everything it sends about one user (ACK, NAK, execution
 *    reports) with a per-user `seq`; a jump shows lost answers (seq_gap), which the library
 *    asks for again with a report replay after replay_after_ms, then every replay_every_ms
 *    while the hole stays; the re-sent answers arrive as ordinary events with seq_fill or,
 *    when seen already, seq_repeat;
 *  - sessions: logs on (blocking, or omsc_logon_start and the answer in omsc_poll), sends a
 *    heartbeat when idle, follows the node's refusals (re-numbering its frames), and with
 *    relogon logs on again when the node ends the session, then resends what is
 *    unanswered.
 *
 * Use:
 *
 *     struct omsc_config cfg;
 *     omsc_config_init(&cfg);
 *     cfg.host = "10.77.0.2";
 *     cfg.key_file = "/etc/omsd/trader.key";    // "<key_id> <secret: 64 hex digits>"
 *     struct omsc *o;
 *     int rc = omsc_open(&o, &cfg);              // 0 or -errno
 *     rc = omsc_logon(o, 5000);                  // 0, -EACCES, -ETIMEDOUT
 *     struct omsc_order ord = {.user = 1, .cl_ord_id = 1, .symbol = 1, .side = OMSC_SIDE_BUY,
 *                              .type = OMSC_ORD_LIMIT, .tif = OMSC_TIF_GTC, .px = 100,
 *                              .qty = 10};
 *     rc = omsc_new_order(o, &ord, 0);           // tracked and queued
 *     while (running)
 *             omsc_poll(o, 100, on_event, ctx);  // sends, receives, retransmits
 *     omsc_logout(o);
 *     omsc_close(o);
 *
 * Rules of the API:
 *  - Errors are negative errno values; 0 (or a count) is success. Business outcomes (a NAK,
 *    a rejected order, a refused transfer) are events with a reason, never errors.
 *  - Every request omsc_* accepted (returned 0 for) is tracked until it is settled and gets
 *    at least one answer event or exactly one OMSC_EV_GAVE_UP.
 *  - Time is CLOCK_MONOTONIC in nanoseconds (omsc_now_ns), except the node's own times in
 *    events (time_ns: cluster time) and expire_ns (cluster time: the node's wall clock).
 *  - Not thread-safe: one thread uses one handle; handles are independent. The event
 *    callback may queue requests (omsc_new_order, ...); it must not call omsc_poll,
 *    omsc_tick, omsc_logon or omsc_close on the same handle.
 *  - A handle must be one omsc_open returned and omsc_close has not freed. A programmer
 *    error the library detects (a NULL handle where it checks, omsc_close from a callback)
 *    aborts with the file and line on stderr; bad input from the network never does.
 *
 * ABI: the shared library's soname is libomsclient.so.OMSC_ABI. Within one ABI, functions
 * and enum values are only added, struct fields only added at the end (omsc_config has
 * reserved room for them, which must be zero; omsc_stats is copied by size), and no field
 * changes meaning. Anything else bumps OMSC_ABI and the soname. omsc_version() says which
 * omsd release the library comes from.
 *
 * This header needs only the C standard headers (C11 or C++).
 */
#ifndef OMSCLIENT_H
#define OMSCLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define OMSC_ABI 1                      /* libomsclient.so.1 */
#define OMSC_DEFAULT_HOST "10.77.0.2"   /* deploy/omsd.ini [node] ip */
#define OMSC_DEFAULT_PORT 7400          /* deploy/omsd.ini [node] udp_port */
#define OMSC_MAC_KEY_SIZE 16            /* bytes of a frame MAC key (SipHash-2-4) */
#define OMSC_SECRET_SIZE 32             /* bytes of an API secret */

/* ---------------------------------------------------------------------------------------
 * Values. They are the wire protocol's (common/wire.h, docs/wire.md): zero is never a
 * valid value except for OMSC_STP_NONE and OMSC_REASON_NONE.
 * ------------------------------------------------------------------------------------- */

enum omsc_side {
	OMSC_SIDE_BUY = 1,
	OMSC_SIDE_SELL = 2,
};

enum omsc_ord_type {
	OMSC_ORD_LIMIT = 1,
	OMSC_ORD_MARKET = 2, /* sell: by qty; buy: by quote_qty (a quote budget) */
};

enum omsc_tif {
	OMSC_TIF_GTC = 1,
	OMSC_TIF_IOC = 2,
	OMSC_TIF_FOK = 3,
	OMSC_TIF_GTD = 4,       /* good till expire_ns (cluster time) */
	OMSC_TIF_POST_ONLY = 5, /* GTC that is rejected if it would cross */
};

/* Self-trade prevention. */
enum omsc_stp {
	OMSC_STP_NONE = 0,
	OMSC_STP_EXPIRE_TAKER = 1,
	OMSC_STP_EXPIRE_MAKER = 2,
	OMSC_STP_EXPIRE_BOTH = 3,
};

/* Execution report kinds: pending → open | rejected, fills, cancelled, amended; the last one
 * of an order says done (omsc_event.done). */
enum omsc_exec {
	OMSC_EXEC_PENDING = 1,         /* provisional: funds reserved, sent to the book */
	OMSC_EXEC_OPEN = 2,            /* resting on the book (last_px: its price) */
	OMSC_EXEC_REJECTED = 3,        /* the book refused it (reason); final */
	OMSC_EXEC_FILL = 4,            /* one trade: last_px, last_qty, fee, liquidity */
	OMSC_EXEC_CANCELLED = 5,       /* last_qty left the book (cause) */
	OMSC_EXEC_DONE = 6,            /* the end of an order no other report ended (a market
					* buy whose budget buys no further lot); a node of an
					* earlier release sent one after every last FILL,
					* CANCELLED or AMENDED */
	OMSC_EXEC_AMENDED = 7,         /* quantity reduced in place (leaves_qty) */
	OMSC_EXEC_CANCEL_REJECTED = 8, /* a cancel, amend or replace was refused (reason) */
};

/* Why a live order stopped being live without filling (OMSC_EXEC_CANCELLED). */
enum omsc_cause {
	OMSC_CAUSE_USER = 1,         /* a cancel request */
	OMSC_CAUSE_IOC = 2,          /* IOC remainder */
	OMSC_CAUSE_FOK = 3,          /* FOK could not fill whole */
	OMSC_CAUSE_STP = 4,          /* self-trade prevention */
	OMSC_CAUSE_EXPIRED = 5,      /* GTD expiry */
	OMSC_CAUSE_HALT = 6,         /* symbol halted with cancel-on-halt */
	OMSC_CAUSE_KILL_SWITCH = 7,  /* the user's or the symbol's kill switch */
	OMSC_CAUSE_NO_LIQUIDITY = 8, /* market order remainder with nothing left to take */
	OMSC_CAUSE_REPLACED = 9,     /* the old half of a cancel-replace */
	OMSC_CAUSE_RECONCILE = 10,   /* closed by the node's reconciliation sweep */
};

/*
 * Reasons of every refusal: NAK, rejected order, refused cancel, refused transfer, refused
 * logon, refused session frame, the node's logout. omsc_reason_name() gives the name.
 */
#define OMSC_REASONS(X)                                                                    \
	X(NONE, 0)                                                                         \
	X(BAD_REQUEST, 1)                                                                  \
	X(UNKNOWN_SYMBOL, 2)                                                               \
	X(HALTED, 3)                                                                       \
	X(OFF_TICK, 4)                                                                     \
	X(OFF_LOT, 5)                                                                      \
	X(BELOW_MIN_QTY, 6)                                                                \
	X(BELOW_MIN_NOTIONAL, 7)                                                           \
	X(OUTSIDE_BAND, 8)                                                                 \
	X(POST_ONLY_WOULD_CROSS, 9)                                                        \
	X(FOK_NOT_FILLABLE, 10)                                                            \
	X(DUPLICATE_ID_MISMATCH, 11)                                                       \
	X(CAPACITY, 12)                                                                    \
	X(UNKNOWN_ORDER, 13)                                                               \
	X(NOT_OWNER, 14)                                                                   \
	X(NOT_LEADER, 15)                                                                  \
	X(BACKPRESSURE, 16)                                                                \
	X(RATE_LIMITED, 17)                                                                \
	X(INSUFFICIENT_FUNDS, 18)                                                          \
	X(PARKED_FULL, 19)                                                                 \
	X(OVERFLOW, 20)                                                                    \
	X(SYMBOL_NOT_OWNED, 21)                                                            \
	X(AMEND_NOT_DOWN, 22)                                                              \
	X(TOO_LATE, 23)                                                                    \
	X(STALE_EPOCH, 24)                                                                 \
	X(OWNED_ELSEWHERE, 25)                                                             \
	X(DB_ERROR, 26)                                                                    \
	X(CONFLICT, 27)                                                                    \
	X(DUPLICATE_REQUEST, 28)                                                           \
	X(UNKNOWN_USER, 29)                                                                \
	X(KILLED, 30)                                                                      \
	X(NOT_FOUND, 31)                                                                   \
	X(STALE_REQUEST, 32)                                                               \
	X(BAD_KEY, 33)                                                                     \
	X(BAD_SIGNATURE, 34)                                                               \
	X(STALE_LOGON, 35)                                                                 \
	X(NONCE_REUSED, 36)                                                                \
	X(UNKNOWN_SESSION, 37)                                                             \
	X(SEQ_GAP, 38)                                                                     \
	X(SEQ_REPEAT, 39)                                                                  \
	X(KEY_REVOKED, 40)                                                                 \
	X(NOT_ENTITLED, 41)                                                                \
	X(NO_PERMISSION, 42)                                                               \
	X(SESSION_IN_USE, 43)                                                              \
	X(NO_SESSION, 44)                                                                  \
	X(MSG_RATE, 45)                                                                    \
	X(SESSION_IDLE, 46)                                                                \
	X(SYMBOL_MOVING, 47)

enum omsc_reason {
#define OMSC_REASON_ENUM(name, value) OMSC_REASON_##name = value,
	OMSC_REASONS(OMSC_REASON_ENUM)
#undef OMSC_REASON_ENUM
	OMSC_REASON_COUNT = 48, /* one past the largest */
};

/* The requests the library tracks. */
enum omsc_request {
	OMSC_REQ_NEW_ORDER = 1,
	OMSC_REQ_CANCEL = 2,
	OMSC_REQ_AMEND = 3,
	OMSC_REQ_CANCEL_REPLACE = 4,
	OMSC_REQ_TRANSFER = 5,
};

/* ---------------------------------------------------------------------------------------
 * Configuration.
 * ------------------------------------------------------------------------------------- */

/*
 * Zero (omsc_config_init) means the default for every field. Strings are read by omsc_open
 * and not kept. Sessions: give key_file, or key_id and secret; without either the client
 * speaks the node's unauthenticated development path (a node with [sessions]
 * allow_unauthenticated), with mac_key when the node has a [keys] client key.
 */
struct omsc_config {
	const char *host;          /* node IPv4 address (dotted quad), NULL: OMSC_DEFAULT_HOST */
	const char *bind_host;     /* local IPv4 address, NULL: any */
	uint16_t port;             /* node UDP port, 0: OMSC_DEFAULT_PORT */
	uint16_t bind_port;        /* local UDP port, 0: ephemeral */
	uint32_t session_id;       /* frame sender id; 0 with a key: random, non-zero */
	const char *key_file;      /* API key file, the first line "<key_id> <secret: 64 hex
				    * digits> [...]" (a line of the node's key file); read by
				    * omsc_open. NULL: key_id and secret (not both) */
	uint64_t key_id;           /* API key id (without key_file); 0: no session */
	uint8_t secret[OMSC_SECRET_SIZE]; /* API secret with key_id; omsc_open copies it:
					   * wipe yours afterwards */
	uint8_t mac_key[OMSC_MAC_KEY_SIZE]; /* without a session: the frame MAC key, the 16
					     * bytes of its 32 hex digits in order
					     * (omsc_key_parse_hex); all zero: no MAC */
	bool relogon;              /* log on again when the node ends the session */
	bool replay_off;           /* no automatic report replay (omsc_replay still works) */
	bool seq_from_one;         /* each user's answers are numbered from 1 in this run (new
				    * users): a first seq above 1 leaves a hole to ask for */
	uint8_t reserved0;
	uint32_t heartbeat_ms;     /* asked for in the logon, 0: the node's default */
	uint32_t logon_retry_ms;   /* an unanswered LOGON goes again (fresh nonce), 0: 500 */
	uint32_t frame_max;        /* bytes per datagram (128..9000), 0: 1472 */
	uint32_t requests_max;     /* requests tracked at once (resting orders included), 0:
				    * 1024 */
	uint32_t users_max;        /* users whose answer numbers are tracked, 0: 1024 */
	uint32_t retry_first_ms;   /* first retransmit after this, 0: 200 */
	uint32_t retry_cap_ms;     /* back-off doubles up to this, 0: 2000 */
	uint32_t retries_max;      /* retransmits per request, 0: 8 */
	uint32_t give_up_ms;       /* unanswered this long after the first send: gave up; also
				    * bounds a relogon; 0: 10000 */
	uint32_t replay_after_ms;  /* a hole in a user's numbers open this long is asked for,
				    * 0: 100 */
	uint32_t replay_every_ms;  /* ... and again this often while it stays, 0: 300 */
	uint32_t reserved1;
	uint64_t reserved[8];      /* room for later fields: zero */
};

/* ---------------------------------------------------------------------------------------
 * Requests.
 * ------------------------------------------------------------------------------------- */

struct omsc_order {
	uint64_t user;       /* account */
	uint64_t cl_ord_id;  /* the client's id: unique per user, increasing (the node forgets
			      * old ids and refuses reused ones STALE_REQUEST) */
	uint32_t symbol;     /* instrument id */
	uint8_t side;        /* enum omsc_side */
	uint8_t type;        /* enum omsc_ord_type */
	uint8_t tif;         /* enum omsc_tif, 0: GTC for a limit order, IOC for a market one */
	uint8_t stp;         /* enum omsc_stp */
	int64_t px;          /* limit price, quote minor units per base unit; 0 for market */
	int64_t qty;         /* base minor units; 0 for a market buy by quote_qty */
	int64_t quote_qty;   /* market buy: the quote budget, fees included; else 0 */
	uint64_t expire_ns;  /* GTD: cluster time (ns since the epoch) of expiry; else 0 */
};

#define OMSC_TRANSFER_DIRECT 0x1 /* omsc_transfer.flags: straight to OMS shard `shard` */

/* A deposit (amount > 0) or a withdrawal (amount < 0), idempotent on (user, transfer_id). */
struct omsc_transfer {
	uint64_t user;        /* account */
	uint64_t transfer_id; /* unique per user */
	uint32_t asset;       /* asset id */
	uint16_t shard;       /* with OMSC_TRANSFER_DIRECT: the OMS shard; else 0 */
	uint16_t flags;       /* OMSC_TRANSFER_*; 0: the gateway routes it to the user's owner
			       * shard, like an order */
	int64_t amount;       /* minor units, not 0 */
};

/* ---------------------------------------------------------------------------------------
 * Events: what omsc_poll and omsc_tick deliver, one callback each.
 * ------------------------------------------------------------------------------------- */

enum omsc_event_kind {
	OMSC_EV_ACK = 1,     /* the node admitted a request (provisional: funds reserved) */
	OMSC_EV_NAK,         /* the node refused a request before the book (reason) */
	OMSC_EV_EXEC,        /* an execution report about an order (exec) */
	OMSC_EV_ADMIN_REPLY, /* a transfer's answer: reason NONE and value, or a refusal */
	OMSC_EV_GAVE_UP,     /* a request got no answer in retries_max sends or give_up_ms */
	OMSC_EV_SESSION,     /* the session changed (session says how) */
};

enum omsc_session_event {
	OMSC_SESSION_LOGON = 1,     /* the answer to a LOGON: reason NONE logged on (a relogon
				     * too), else refused */
	OMSC_SESSION_LOGON_TIMEOUT, /* omsc_logon_start's logon, or a relogon, got no answer */
	OMSC_SESSION_REJECT,        /* the node refused a whole frame (reason SEQ_GAP,
				     * SEQ_REPEAT, MSG_RATE: the library resends;
				     * UNKNOWN_SESSION: the session is gone) or, with
				     * warning, only warned of the message rate */
	OMSC_SESSION_LOGOUT,        /* the node ended the session (reason KEY_REVOKED,
				     * SESSION_IDLE, ...) */
};

/*
 * One event. Which fields are set depends on kind (said per field); the others are zero.
 * Valid during the callback only.
 *
 * A request is settled, and forgotten after its event, by: a NAK, a GAVE_UP, a transfer's
 * ADMIN_REPLY, a NEW_ORDER's or CANCEL_REPLACE's last report (done: so an order's reports
 * all carry its tag until it is done), any request's CANCEL_REJECTED, and a CANCEL's
 * or AMEND's ACK (their effect is reported on the target order, under the target's
 * cl_ord_id; a CANCEL_REJECTED after the ACK arrives with matched false).
 */
struct omsc_event {
	uint8_t kind;           /* enum omsc_event_kind */
	uint8_t exec;           /* EXEC: enum omsc_exec */
	uint8_t side;           /* EXEC: enum omsc_side */
	uint8_t liquidity;      /* EXEC fills: 1 maker, 2 taker */
	uint8_t cause;          /* EXEC CANCELLED: enum omsc_cause */
	uint8_t session;        /* SESSION: enum omsc_session_event */
	uint16_t reason;        /* NAK, EXEC REJECTED / CANCEL_REJECTED, ADMIN_REPLY, SESSION:
				 * enum omsc_reason (OMSC_REASON_NONE: accepted) */
	uint32_t symbol;        /* EXEC */
	uint16_t owner_shard;   /* NAK NOT_OWNER: the shard that owns the user */
	uint8_t request;        /* matched, GAVE_UP: enum omsc_request of that request */
	bool matched;           /* the event answers a request this handle tracks */
	uint64_t user;          /* ACK, NAK, EXEC; ADMIN_REPLY and GAVE_UP when matched */
	uint64_t cl_ord_id;     /* ACK, NAK, EXEC: the request's or order's id; GAVE_UP of an
				 * order request */
	uint64_t transfer_id;   /* ADMIN_REPLY; GAVE_UP of a transfer */
	uint64_t order_id;      /* ACK, EXEC: the node's order id, oms shard << 48 | user seq */
	uint16_t order_shard;   /* ... its OMS shard (order_id >> 48) */
	bool done;              /* EXEC: the order's last report (nothing of it is live, its
				 * reservation released): a REJECTED, the last FILL, CANCELLED
				 * or AMENDED, or a DONE */
	uint8_t reserved0;
	uint32_t leader_node;   /* NAK NOT_LEADER, ADMIN_REPLY: the leader's node id, 0 */
	uint64_t order_seq;     /* ... its per-user number (the low 48 bits of order_id) */
	uint64_t seq;           /* ACK, NAK, EXEC: the user's answer number (0: a NAK for a
				 * user that is not resident: not numbered) */
	uint64_t time_ns;       /* ACK, EXEC: cluster time */
	int64_t last_px;        /* EXEC: FILL price; OPEN: the order's price */
	int64_t last_qty;       /* EXEC: FILL quantity; CANCELLED: quantity cancelled */
	int64_t cum_qty;        /* EXEC: filled so far */
	int64_t leaves_qty;     /* EXEC: still live */
	int64_t fee;            /* EXEC FILL: fee of this fill, quote minor units */
	uint64_t value;         /* ADMIN_REPLY: the new balance of the asset */
	uint64_t route_epoch;   /* NAK: the refusing shard's routing epoch */
	uint64_t seq_gap;       /* answer numbers of this user missing just before this one
				 * (asked for again automatically unless replay_off) */
	bool seq_fill;          /* this answer fills a hole (a replay or a late one) */
	bool seq_repeat;        /* this answer was seen already (a replay or a duplicate) */
	bool session_ended;     /* SESSION: the session is over for good (no relogon; or a
				 * relogon refused or unanswered) */
	bool warning;           /* SESSION REJECT: only a warning, nothing was refused */
	uint32_t session_id;    /* SESSION */
	uint32_t tries;         /* matched, GAVE_UP: sends of the request so far */
	uint64_t tag;           /* matched, GAVE_UP: the tag given with the request */
	uint64_t first_send_ns; /* matched, GAVE_UP: the request's first send (omsc_now_ns) */
	uint64_t session_seq;   /* SESSION REJECT: the refused frame's number */
	uint64_t expected_seq;  /* SESSION REJECT: the number the node expects next */
	uint64_t now_ns;        /* when it was handled (omsc_now_ns) */
};

/* Called once per event; ctx is omsc_poll's or omsc_tick's. */
typedef void(omsc_event_fn)(void *ctx, const struct omsc_event *ev);

/* What omsc_request_get tells about a tracked request. */
struct omsc_request_info {
	uint64_t tag;           /* the caller's */
	uint64_t first_send_ns; /* first send (omsc_now_ns) */
	uint64_t answer_ns;     /* first answer, 0: none yet */
	uint32_t tries;         /* sends, the first included */
	uint8_t request;        /* enum omsc_request */
	bool answered;          /* an answer came: no more retransmits */
	uint16_t reason;        /* the refusal's reason once answered, else 0 */
};

/* Counters since omsc_open (and two gauges). */
struct omsc_stats {
	uint64_t frames_tx;       /* datagrams sent */
	uint64_t msgs_tx;         /* messages sent, retransmits included */
	uint64_t retransmits;     /* requests sent again */
	uint64_t send_errors;     /* datagrams the socket refused */
	uint64_t frames_rx;       /* datagrams received */
	uint64_t msgs_rx;         /* messages decoded */
	uint64_t decode_errors;   /* datagrams refused (malformed, or a wrong MAC) */
	uint64_t acks;            /* ACKs received */
	uint64_t naks;            /* NAKs received */
	uint64_t execs;           /* execution reports received */
	uint64_t admin_replies;   /* transfer answers received */
	uint64_t other;           /* messages of other types */
	uint64_t unmatched;       /* answers that named no tracked request */
	uint64_t seq_gaps;        /* answer numbers found missing (sum of the gaps) */
	uint64_t seq_filled;      /* ... of those, received later: gaps - filled are missing */
	uint64_t seq_repeats;     /* answers received again */
	uint64_t seq_abandoned;   /* missing numbers more than 1024 below a newer one: never
				   * asked for again */
	uint64_t replay_requests; /* report replays sent: automatic, tail and omsc_replay */
	uint64_t gave_up;         /* requests given up */
	uint64_t table_full;      /* requests refused -ENOSPC */
	uint64_t logons_sent;     /* LOGONs sent, resends included */
	uint64_t logons;          /* logons accepted, relogons included */
	uint64_t logons_refused;  /* logons refused */
	uint64_t relogons;        /* logons accepted after the node ended the session */
	uint64_t session_ended;   /* sessions ended for good */
	uint64_t seq_resyncs;     /* frame numbers taken from the node's SEQ_GAP / SEQ_REPEAT */
	uint64_t rate_refused;    /* frames refused MSG_RATE */
	uint64_t rate_warnings;   /* message-rate warnings */
	uint64_t heartbeats_tx;   /* heartbeats sent */
	uint64_t heartbeats_rx;   /* heartbeats received */
	uint64_t tracked;         /* gauge: requests tracked now */
	uint64_t unanswered;      /* gauge: ... of those, not answered yet */
};

struct omsc;

/* ---------------------------------------------------------------------------------------
 * Library.
 * ------------------------------------------------------------------------------------- */

/* The omsd release the library was built from, e.g. "0.1.0". Never NULL. */
const char *omsc_version(void);
/* The ABI the library implements: OMSC_ABI of the header it was built with. A program can
 * check omsc_abi() == OMSC_ABI at start. */
int omsc_abi(void);
/* CLOCK_MONOTONIC in nanoseconds: the clock of every *_ns field but time_ns/expire_ns. */
uint64_t omsc_now_ns(void);
/* Names for printing: "INSUFFICIENT_FUNDS" (omsc_reason; "?" when unknown), "fill"
 * (omsc_exec; "?"), "replaced" (omsc_cause; "-"), "buy" (omsc_side; "?"). Never NULL,
 * static. */
const char *omsc_reason_name(uint16_t reason);
const char *omsc_exec_name(uint8_t exec);
const char *omsc_cause_name(uint8_t cause);
const char *omsc_side_name(uint8_t side);

/* Read 32 hex digits (either case) into a frame MAC key (omsc_config.mac_key): 0, or
 * -EINVAL (NULL, another length, a non-hex digit) with key untouched. */
int omsc_key_parse_hex(const char *hex, uint8_t key[OMSC_MAC_KEY_SIZE]);
/*
 * Read an API key file into cfg->key_id and cfg->secret (so cfg->key_file can stay NULL):
 * the first key line "<key_id> <secret: 64 hex digits> [...]", at most 64 KiB. 0, or -errno
 * with "path: what" in err (cap bytes, may be 0): -EINVAL no valid key line, -EFBIG too
 * large, or the error of opening or reading it. Wipe cfg->secret when done with it.
 */
int omsc_key_file_load(const char *path, struct omsc_config *cfg, char *err, size_t cap);

/* ---------------------------------------------------------------------------------------
 * A client.
 * ------------------------------------------------------------------------------------- */

/* Zero cfg: every field its default. */
void omsc_config_init(struct omsc_config *cfg);
/*
 * Open a client: size its tables, open the UDP socket (non-blocking, connected to
 * host:port) and read cfg->key_file if set. Nothing is sent. 0 with *out set, or -errno:
 * -EINVAL (an address that does not parse, a size out of range, reserved fields not zero,
 * a key file without a key line, key_file and key_id both, a session key with a mac_key
 * as well), -EFBIG (a key file over 64 KiB), -ENOMEM, the
 * socket's or the key file's error. The secret is copied; the handle wipes its copy.
 */
int omsc_open(struct omsc **out, const struct omsc_config *cfg);
/* Close the socket and free the handle; NULL is ignored. Does not log out (omsc_logout). */
void omsc_close(struct omsc *o);
/* The socket, for poll/epoll (readable: call omsc_poll with timeout 0). Do not read it. */
int omsc_fd(const struct omsc *o);
/* The local UDP port (0 if unknown). */
uint16_t omsc_local_port(const struct omsc *o);
/* The session id: the frames' sender id (chosen at random when configured 0 with a key). */
uint32_t omsc_session_id(const struct omsc *o);

/* ---------------------------------------------------------------------------------------
 * Sessions (clients opened with an API key).
 * ------------------------------------------------------------------------------------- */

/*
 * Log on and wait up to timeout_ms (>= 0) for the answer, resending the LOGON with a fresh
 * nonce every logon_retry_ms. Messages other than the answer that arrive meanwhile are not
 * delivered. 0 (logged on, or already; requests queued before go now), -EACCES (refused:
 * omsc_logon_reason), -ETIMEDOUT (no answer), -EINVAL (no API key configured, timeout
 * negative), -EBUSY (called from an event callback).
 */
int omsc_logon(struct omsc *o, int timeout_ms);
/*
 * Start a logon without waiting: send the LOGON now; omsc_poll / omsc_tick resend it and
 * take the answer, delivered as OMSC_EV_SESSION LOGON (or LOGON_TIMEOUT after timeout_ms).
 * omsc_logon_status tells how it stands. 0 (started; or already logged on, or already
 * logging on), -EINVAL (no API key, timeout_ms < 1), -EBUSY (from a callback).
 */
int omsc_logon_start(struct omsc *o, int timeout_ms);
/*
 * 0 logged on; -EINPROGRESS a logon (or a relogon) waits for its answer; -EACCES the last
 * logon was refused (omsc_logon_reason); -ETIMEDOUT the last got no answer; -ENOTCONN not
 * logged on otherwise (never tried, logged out, or ended by the node); -EINVAL no API key
 * configured.
 */
int omsc_logon_status(const struct omsc *o);
/* The reason of the last refused logon, OMSC_REASON_NONE if none. */
uint16_t omsc_logon_reason(const struct omsc *o);
/* Send what is queued, then LOGOUT; the session is over (no relogon). Unanswered requests
 * stay tracked (and give up in time unless a new logon sends them). 0, -ENOTCONN (not
 * logged on) or the socket's error. */
int omsc_logout(struct omsc *o);
/* Whether the session is up (logged on). */
bool omsc_session_up(const struct omsc *o);
/* The heartbeat interval the node agreed to in the last logon, 0 before one. */
uint32_t omsc_heartbeat_ms(const struct omsc *o);

/* ---------------------------------------------------------------------------------------
 * Order entry. Each request is checked as the node would check its fields (enums in range,
 * reserved zero), tracked under (user, id) with the caller's tag, and queued in the
 * datagram being built (sent by omsc_flush, omsc_poll, omsc_tick, or when full). With a key
 * and not logged on it is tracked and sent once the session is up. A socket error while
 * sending is not the request's failure: the retransmits deal with it.
 * Each returns 0 (tracked), -EINVAL (a field the node's decoder would refuse, such as an
 * enum out of range; user UINT64_MAX, which the library keeps for itself), -EEXIST
 * (that (user, id) is tracked already), -ENOSPC (the request table is full: settle or
 * release some).
 * ------------------------------------------------------------------------------------- */

/* A new order. */
int omsc_new_order(struct omsc *o, const struct omsc_order *ord, uint64_t tag);
/* Cancel the user's order orig_cl_ord_id; this request's own id is cl_ord_id. */
int omsc_cancel(struct omsc *o, uint64_t user, uint64_t cl_ord_id, uint64_t orig_cl_ord_id,
		uint64_t tag);
/* Reduce order orig_cl_ord_id's total quantity to qty in place, keeping its priority. */
int omsc_amend(struct omsc *o, uint64_t user, uint64_t cl_ord_id, uint64_t orig_cl_ord_id,
	       int64_t qty, uint64_t tag);
/* Cancel order orig_cl_ord_id and enter a new one, cl_ord_id, at px for qty (new priority);
 * the new order's reports carry cl_ord_id. */
int omsc_cancel_replace(struct omsc *o, uint64_t user, uint64_t cl_ord_id,
			uint64_t orig_cl_ord_id, int64_t px, int64_t qty, uint64_t tag);
/* A deposit or withdrawal, answered by OMSC_EV_ADMIN_REPLY. Tracked by transfer_id alone:
 * -EEXIST when that transfer id is tracked for any user. */
int omsc_transfer(struct omsc *o, const struct omsc_transfer *t, uint64_t tag);
/* Send the datagram being built, if any. 0 or the socket's -errno (the requests in it are
 * retransmitted in time). */
int omsc_flush(struct omsc *o);

/*
 * Ask the node again for user's answers numbered from_seq..to_seq (to_seq 0: up to the
 * newest it keeps; it keeps a bounded recent window): they arrive as ordinary events, each
 * with seq_fill or seq_repeat. Queued like a request but not tracked. 0, -EINVAL (from_seq
 * 0, to_seq below it), -ENOTCONN (a key and not logged on).
 */
int omsc_replay(struct omsc *o, uint64_t user, uint64_t from_seq, uint64_t to_seq);
/* For every user seen, ask for everything after the last number received without a hole
 * (the answers never seen at all, e.g. a final report lost with nothing after it to show
 * the hole). Flushes. Returns the requests sent. */
int omsc_replay_tail(struct omsc *o);

/* ---------------------------------------------------------------------------------------
 * Running: call omsc_poll in a loop, or omsc_tick when omsc_fd is readable or
 * omsc_timeout_ms has passed.
 * ------------------------------------------------------------------------------------- */

/*
 * Flush, wait up to timeout_ms (0: not at all; -1 is not allowed) for datagrams but no
 * longer than the next retransmit or heartbeat, drain at most 64 datagrams, deliver an
 * event per answer, then run omsc_tick. fn may be NULL (events are still handled). Returns
 * the events delivered, or -EINVAL, -EBUSY (from a callback).
 */
int omsc_poll(struct omsc *o, int timeout_ms, omsc_event_fn *fn, void *ctx);
/*
 * The timers, without receiving: retransmit what is due (at most 256), give up on what is
 * exhausted (OMSC_EV_GAVE_UP), send the due report replays and heartbeats, resend a
 * pending LOGON, then flush. Returns the events delivered, or -EBUSY (from a callback).
 */
int omsc_tick(struct omsc *o, omsc_event_fn *fn, void *ctx);
/* Milliseconds until omsc_tick has work (0: now), for poll/epoll timeouts; -1: no timer
 * pending (only a datagram can bring work). */
int omsc_timeout_ms(const struct omsc *o);

/* ---------------------------------------------------------------------------------------
 * The request table and the answer numbers.
 * ------------------------------------------------------------------------------------- */

/* A tracked request: (user, cl_ord_id) for order requests, (any user, transfer_id) for
 * transfers (transfer true). 0 with *out filled, or -ENOENT (not tracked, or settled). */
int omsc_request_get(struct omsc *o, uint64_t user, uint64_t id, bool transfer,
		     struct omsc_request_info *out);
/* Forget a tracked request before it settles (e.g. a resting order the caller stops
 * following): no more retransmits, its later events arrive with matched false. 0 or
 * -ENOENT. */
int omsc_release(struct omsc *o, uint64_t user, uint64_t id, bool transfer);
/* Requests tracked; of those, not answered yet. */
uint32_t omsc_tracked(const struct omsc *o);
uint32_t omsc_unanswered(const struct omsc *o);
/* The newest answer number received for user, and the one up to which every one was
 * received (or abandoned); 0 when none. */
uint64_t omsc_user_seq(const struct omsc *o, uint64_t user);
uint64_t omsc_user_contig(const struct omsc *o, uint64_t user);
/* Copy the counters into out, at most out_size bytes (pass sizeof(struct omsc_stats): a
 * program built against an older header gets the fields it knows). Returns the size of
 * the library's struct omsc_stats. */
size_t omsc_stats(const struct omsc *o, struct omsc_stats *out, size_t out_size);

#ifdef __cplusplus
}
#endif

#endif
