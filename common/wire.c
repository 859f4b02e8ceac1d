/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Frame and message codec. Every length, count, enum and reserved field is checked before
 * anything else looks at a message; nothing here reads past the buffer it was given.
 */
#include "wire.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "check.h"

#ifdef __AVX2__
#include <immintrin.h> /* the compiler's intrinsics: four SipHash lanes at once */
#endif

/* ---------------------------------------------------------------------------------------
 * Tables generated from the X-macro lists.
 * ------------------------------------------------------------------------------------- */

static const char *const type_names[WIRE_TYPE_LIMIT] = {
#define WIRE_TYPE_NAME(name, value, st, tail, cls, admin) [value] = #name,
	WIRE_TYPES(WIRE_TYPE_NAME)
#undef WIRE_TYPE_NAME
};

const uint16_t wire_type_sizes[WIRE_TYPE_LIMIT] = {
#define WIRE_TYPE_SIZE(name, value, st, tail, cls, admin) [value] = (uint16_t)sizeof(struct st),
	WIRE_TYPES(WIRE_TYPE_SIZE)
#undef WIRE_TYPE_SIZE
};

/* What this minor appends after each type's struct (WIRE_EXTS, the entries since minors up
 * to ours), and what the minor before appended: the exact lengths of the frames of both. */
static const uint8_t type_exts[WIRE_TYPE_LIMIT] = {
	[0] = 0, /* unknown; the list is empty in a release */
#define WIRE_EXT_OWN(name, bytes, since)                                                   \
	[WIRE_##name] = (since) <= WIRE_VERSION_MINOR ? (bytes) : 0,
	WIRE_EXTS(WIRE_EXT_OWN)
#undef WIRE_EXT_OWN
};

static const uint8_t type_exts_prev[WIRE_TYPE_LIMIT] = {
	[0] = 0,
#define WIRE_EXT_PREV(name, bytes, since)                                                  \
	[WIRE_##name] = (since) < WIRE_VERSION_MINOR ? (bytes) : 0,
	WIRE_EXTS(WIRE_EXT_PREV)
#undef WIRE_EXT_PREV
};

static const uint8_t type_tails[WIRE_TYPE_LIMIT] = {
#define WIRE_TYPE_TAIL(name, value, st, tail, cls, admin) [value] = tail,
	WIRE_TYPES(WIRE_TYPE_TAIL)
#undef WIRE_TYPE_TAIL
};

/* The struct (a multiple of 8: WIRE_TYPE_SIZE_ASSERT) of each type without a tail; 0 for a
 * type with one, and for a type WIRE_EXTS grows (only in a build of a newer minor, the
 * version tests'): those take wire_builder_add's own path. The later initializer of a type
 * overrides its first, on purpose. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Woverride-init"
const uint16_t wire_type_plain_sizes[WIRE_TYPE_LIMIT] = {
#define WIRE_TYPE_PLAIN(name, value, st, tail, cls, admin)                                 \
	[value] = (tail) ? 0 : (uint16_t)sizeof(struct st),
	WIRE_TYPES(WIRE_TYPE_PLAIN)
#undef WIRE_TYPE_PLAIN
#define WIRE_EXT_PLAIN(name, bytes, since) [WIRE_##name] = 0,
	WIRE_EXTS(WIRE_EXT_PLAIN)
#undef WIRE_EXT_PLAIN
};
#pragma GCC diagnostic pop

/* Unlisted values stay 0: WIRE_CLS_NONE and not admin. */
static const uint8_t type_classes[WIRE_TYPE_LIMIT] = {
#define WIRE_TYPE_CLASS(name, value, st, tail, cls, admin) [value] = WIRE_CLS_##cls,
	WIRE_TYPES(WIRE_TYPE_CLASS)
#undef WIRE_TYPE_CLASS
};

static const bool type_admin[WIRE_TYPE_LIMIT] = {
#define WIRE_TYPE_ADMIN(name, value, st, tail, cls, admin) [value] = admin,
	WIRE_TYPES(WIRE_TYPE_ADMIN)
#undef WIRE_TYPE_ADMIN
};

static const char *const err_texts[WIRE_E_COUNT] = {
#define WIRE_ERR_TEXT(name, text) [WIRE_E_##name] = text,
	WIRE_ERRS(WIRE_ERR_TEXT)
#undef WIRE_ERR_TEXT
};

static const char *const reason_names[WIRE_REASON_MAX + 1] = {
#define WIRE_REASON_NAME(name, value) [value] = #name,
	WIRE_REASONS(WIRE_REASON_NAME)
#undef WIRE_REASON_NAME
};

const char *
wire_type_name(uint16_t type)
{
	if (type >= WIRE_TYPE_LIMIT || type_names[type] == NULL)
		return "?";
	return type_names[type];
}

uint16_t
wire_type_size_sent(uint16_t type)
{
	uint16_t size = wire_type_size(type);
	return size == 0 ? 0 : (uint16_t)(size + type_exts[type]);
}

enum wire_class
wire_type_class(uint16_t type)
{
	if (type >= WIRE_TYPE_LIMIT)
		return WIRE_CLS_NONE;
	return (enum wire_class)type_classes[type];
}

bool
wire_type_is_admin(uint16_t type)
{
	return type < WIRE_TYPE_LIMIT && type_admin[type];
}

const char *
wire_err_text(enum wire_err err)
{
	if ((unsigned)err >= WIRE_E_COUNT)
		return "?";
	return err_texts[err];
}

const char *
wire_reason_name(uint16_t reason)
{
	if (reason >= WIRE_REASON_MAX || reason_names[reason] == NULL)
		return "?";
	return reason_names[reason];
}

/* ---------------------------------------------------------------------------------------
 * Per-type field checks.
 * ------------------------------------------------------------------------------------- */

static bool
zero(const void *p, size_t n)
{
	const uint8_t *b = p;
	for (size_t i = 0; i < n; i++)
		if (b[i] != 0)
			return false;
	return true;
}

static bool
in_range(unsigned v, unsigned lo, unsigned hi)
{
	return v >= lo && v <= hi;
}

#define RESERVED(field) zero(&(field), sizeof(field))

static bool
side_ok(uint8_t side)
{
	return in_range(side, WIRE_SIDE_BUY, WIRE_SIDE_SELL);
}

static bool
order_enums_ok(uint8_t side, uint8_t ord_type, uint8_t tif, uint8_t stp)
{
	return side_ok(side) && in_range(ord_type, WIRE_ORD_LIMIT, WIRE_ORD_MARKET) &&
	       in_range(tif, WIRE_TIF_GTC, WIRE_TIF_POST_ONLY) && stp <= WIRE_STP_EXPIRE_BOTH;
}

static bool
reason_ok(uint16_t reason)
{
	return reason < WIRE_REASON_MAX;
}

/* The enums an execution report and an ME event share: the kind (exec or event) in range, a
 * side (none only on a refused cancel/amend of an order the ME no longer knows), liquidity
 * (0, 1 maker, 2 taker), cause and reason. */
static bool
event_enums_ok(bool kind_ok, bool cancel_rejected, uint8_t side, uint8_t liquidity,
	       uint8_t cause, uint16_t reason)
{
	bool side_valid = side_ok(side) || (cancel_rejected && side == 0);
	return kind_ok && side_valid && liquidity <= 2 && cause < WIRE_CAUSE_MAX &&
	       reason_ok(reason);
}

/* One wire_recent entry: reserved bytes zero; a used one has a valid kind and reason, and
 * only a transfer names an asset or an amount. */
static bool
recent_ok(const struct wire_recent *r, bool used, enum wire_err *err)
{
	if (!RESERVED(r->reserved)) {
		*err = WIRE_E_BAD_RESERVED;
		return false;
	}
	if (!used)
		return true;
	if (!in_range(r->kind, WIRE_RECENT_ORDER, WIRE_RECENT_TRANSFER) || !reason_ok(r->reason)) {
		*err = WIRE_E_BAD_ENUM;
		return false;
	}
	if (r->kind == WIRE_RECENT_ORDER && (r->asset != 0 || r->amount != 0)) {
		*err = WIRE_E_BAD_VALUE;
		return false;
	}
	return true;
}

static bool
user_state_ok(const struct wire_user_state *s, enum wire_err *err)
{
	if (!RESERVED(s->reserved0)) {
		*err = WIRE_E_BAD_RESERVED;
		return false;
	}
	if (s->balance_count > WIRE_BALANCES_MAX) {
		*err = WIRE_E_BAD_COUNT;
		return false;
	}
	for (uint32_t i = 0; i < WIRE_BALANCES_MAX; i++) {
		if (!RESERVED(s->balances[i].reserved)) {
			*err = WIRE_E_BAD_RESERVED;
			return false;
		}
	}
	if (!RESERVED(s->reserved1)) {
		*err = WIRE_E_BAD_RESERVED;
		return false;
	}
	if (s->recent_count > WIRE_RECENT_MAX) {
		*err = WIRE_E_BAD_COUNT;
		return false;
	}
	for (uint32_t i = 0; i < WIRE_RECENT_MAX; i++) {
		const struct wire_recent *r = &s->recent[i];
		if (!recent_ok(r, i < s->recent_count, err))
			return false;
	}
	return true;
}

/* Walk the entries in an AppendEntries tail: entry_count × (wire_entry_hdr + data), data
 * lengths multiples of 8 (entry data is a sequence of messages), summing to tail_len. */
static enum wire_err
entries_check(const uint8_t *tail, uint32_t tail_len, uint32_t count)
{
	uint32_t pos = 0;
	for (uint32_t i = 0; i < count; i++) {
		struct wire_entry_hdr e;
		if (tail_len - pos < sizeof(e))
			return WIRE_E_BAD_COUNT;
		memcpy(&e, tail + pos, sizeof(e));
		if (e.reserved != 0)
			return WIRE_E_BAD_RESERVED;
		if (e.data_len % 8 != 0)
			return WIRE_E_BAD_LENGTH;
		pos += (uint32_t)sizeof(e);
		if (e.data_len > tail_len - pos)
			return WIRE_E_BAD_LENGTH;
		pos += e.data_len;
	}
	return pos == tail_len ? WIRE_E_OK : WIRE_E_TRAILING;
}

static uint32_t
align8(uint32_t n)
{
	return (n + 7u) & ~7u;
}

static enum wire_err body_check(const struct wire_msg_hdr *h, int depth);

/* Messages wrapped in an INGRESS tail: each must be valid, no nested INGRESS. */
static enum wire_err
inner_check(const uint8_t *tail, uint32_t tail_len)
{
	uint32_t pos = 0;
	if (tail_len == 0)
		return WIRE_E_BAD_COUNT;
	while (pos < tail_len) {
		uint16_t mlen;
		enum wire_err err = wire_msg_check(tail + pos, tail_len - pos, &mlen);
		if (err != WIRE_E_OK)
			return err;
		const struct wire_msg_hdr *h = (const struct wire_msg_hdr *)(tail + pos);
		if (h->type == WIRE_INGRESS || h->type == WIRE_SESSION_HDR)
			return WIRE_E_BAD_TYPE;
		pos += mlen;
	}
	return WIRE_E_OK;
}

/* A message that only ever travels to a shard's leader as the tail of a FORWARDED_ADMIN:
 * the leader acts on it with consensus (cns_member_change, cns_transfer) and never proposes
 * it, so no log and no answer holds one. */
static bool
fwd_leader_only(uint16_t type)
{
	return type == WIRE_MEMBER_CHANGE || type == WIRE_LEADER_TRANSFER;
}

/* The tail of FORWARDED_ADMIN (required; an admin message, a MEMBER_CHANGE or a
 * LEADER_TRANSFER) or FORWARDED_REPLY (optional; an admin message): one message, valid,
 * filling the tail exactly. */
static enum wire_err
fwd_inner_check(const uint8_t *tail, uint32_t tail_len, bool required)
{
	if (tail_len == 0)
		return required ? WIRE_E_BAD_COUNT : WIRE_E_OK;
	uint16_t mlen;
	enum wire_err err = wire_msg_check(tail, tail_len, &mlen);
	if (err != WIRE_E_OK)
		return err;
	uint16_t type = ((const struct wire_msg_hdr *)tail)->type;
	if (!wire_type_is_admin(type) && !(required && fwd_leader_only(type)))
		return WIRE_E_BAD_TYPE;
	return mlen == tail_len ? WIRE_E_OK : WIRE_E_BAD_COUNT;
}

/* Field checks for a message whose length has already been verified for its type. */
static enum wire_err
body_check(const struct wire_msg_hdr *h, int depth)
{
	(void)depth;
	uint16_t allowed_flags = 0;
	bool ok = true;
	enum wire_err err = WIRE_E_BAD_ENUM;

	switch ((enum wire_type)h->type) {
	case WIRE_NEW_ORDER: {
		const struct wire_new_order *m = (const void *)h;
		ok = order_enums_ok(m->side, m->ord_type, m->tif, m->stp);
		break;
	}
	case WIRE_CANCEL:
	case WIRE_AMEND:
	case WIRE_CANCEL_REPLACE:
	case WIRE_REPORT_REPLAY:
	case WIRE_ACK:
	case WIRE_ORDER_QUERY:
	case WIRE_HYDRATE_REQUEST:
	case WIRE_TICK:
	case WIRE_SNAPSHOT_REQUEST:
		break;
	case WIRE_NAK: {
		const struct wire_nak *m = (const void *)h;
		ok = reason_ok(m->reason);
		break;
	}
	case WIRE_LOGON: {
		const struct wire_logon *m = (const void *)h;
		if (m->key_id == 0 || m->session_id == 0)
			return WIRE_E_BAD_VALUE;
		break;
	}
	case WIRE_LOGON_REPLY: {
		const struct wire_logon_reply *m = (const void *)h;
		if (!RESERVED(m->reserved0) || !RESERVED(m->reserved1))
			return WIRE_E_BAD_RESERVED;
		ok = reason_ok(m->reason);
		break;
	}
	case WIRE_SESSION_HDR: {
		const struct wire_session_hdr *m = (const void *)h;
		if (!RESERVED(m->reserved))
			return WIRE_E_BAD_RESERVED;
		if (m->session_id == 0 || m->seq == 0)
			return WIRE_E_BAD_VALUE;
		break;
	}
	case WIRE_SESSION_REJECT: {
		const struct wire_session_reject *m = (const void *)h;
		if (!RESERVED(m->reserved))
			return WIRE_E_BAD_RESERVED;
		ok = m->reason != 0 && reason_ok(m->reason);
		allowed_flags = WIRE_SESSION_REJECT_F_WARN;
		break;
	}
	case WIRE_LOGOUT: {
		const struct wire_logout *m = (const void *)h;
		if (!RESERVED(m->reserved))
			return WIRE_E_BAD_RESERVED;
		ok = reason_ok(m->reason);
		break;
	}
	case WIRE_HEARTBEAT: {
		const struct wire_heartbeat *m = (const void *)h;
		if (!RESERVED(m->reserved))
			return WIRE_E_BAD_RESERVED;
		break;
	}
	case WIRE_EXEC_REPORT: {
		const struct wire_exec_report *m = (const void *)h;
		ok = event_enums_ok(in_range(m->exec, WIRE_EXEC_PENDING, WIRE_EXEC_MAX - 1),
				    m->exec == WIRE_EXEC_CANCEL_REJECTED, m->side, m->liquidity,
				    m->cause, m->reason);
		if (ok && (!RESERVED(m->reserved0) || !RESERVED(m->reserved1)))
			return WIRE_E_BAD_RESERVED;
		/* The end rides on the report that leaves nothing live. */
		if (m->exec == WIRE_EXEC_FILL || m->exec == WIRE_EXEC_CANCELLED ||
		    m->exec == WIRE_EXEC_AMENDED || m->exec == WIRE_EXEC_REJECTED ||
		    m->exec == WIRE_EXEC_DONE)
			allowed_flags = WIRE_REPORT_F_DONE;
		break;
	}
	case WIRE_SUBMIT: {
		const struct wire_submit *m = (const void *)h;
		ok = order_enums_ok(m->side, m->ord_type, m->tif, m->stp);
		break;
	}
	case WIRE_CANCEL_TO_ME:
	case WIRE_AMEND_TO_ME:
	case WIRE_REPLACE_TO_ME: {
		const struct wire_modify *m = (const void *)h;
		if (!RESERVED(m->reserved))
			return WIRE_E_BAD_RESERVED;
		break;
	}
	case WIRE_REBIND_TO_ME: {
		const struct wire_rebind *m = (const void *)h;
		ok = m->from_shard != m->to_shard && m->qty > 0 && m->reserved >= 0 &&
		     m->notional_maker >= 0 && m->notional_taker >= 0;
		break;
	}
	case WIRE_ME_EVENT: {
		const struct wire_me_event *m = (const void *)h;
		if (m->event == WIRE_EV_ADOPTED) {
			/* ord_type, tif and stp ride in liquidity, cause and reason. */
			ok = side_ok(m->side) &&
			     order_enums_ok(m->side, m->liquidity, m->cause, (uint8_t)m->reason) &&
			     m->reason <= UINT8_MAX;
			if (ok && !RESERVED(m->reserved1))
				return WIRE_E_BAD_RESERVED;
			break;
		}
		ok = event_enums_ok(in_range(m->event, WIRE_EV_ACCEPTED, WIRE_EV_MAX - 1),
				    m->event == WIRE_EV_CANCEL_REJECTED, m->side, m->liquidity,
				    m->cause, m->reason);
		if (ok && !RESERVED(m->reserved1))
			return WIRE_E_BAD_RESERVED;
		/* Acceptance rides on the order's first event when that is one an accepted
		 * order can have first; the end on the event that leaves nothing live. */
		if (m->event == WIRE_EV_RESTED || m->event == WIRE_EV_FILL ||
		    m->event == WIRE_EV_CANCELLED || m->event == WIRE_EV_DONE)
			allowed_flags = WIRE_EV_F_ENTERED;
		if (m->event == WIRE_EV_FILL || m->event == WIRE_EV_CANCELLED ||
		    m->event == WIRE_EV_AMENDED)
			allowed_flags |= WIRE_EV_F_DONE;
		break;
	}
	case WIRE_ME_RESULT: {
		const struct wire_me_result *m = (const void *)h;
		ok = m->known <= 1 && m->final <= 1 && reason_ok(m->reason);
		break;
	}
	case WIRE_STREAM_ACK: {
		const struct wire_stream_ack *m = (const void *)h;
		if (!RESERVED(m->reserved))
			return WIRE_E_BAD_RESERVED;
		break;
	}
	case WIRE_REPLAY_REQUEST: {
		const struct wire_replay_request *m = (const void *)h;
		if (!RESERVED(m->reserved))
			return WIRE_E_BAD_RESERVED;
		break;
	}
	case WIRE_OPEN_ORDERS_QUERY: {
		const struct wire_open_orders_query *m = (const void *)h;
		if (!RESERVED(m->reserved))
			return WIRE_E_BAD_RESERVED;
		break;
	}
	case WIRE_OPEN_ORDERS_SNAPSHOT: {
		const struct wire_open_orders_snapshot *m = (const void *)h;
		if (m->count > WIRE_OPEN_ORDERS_MAX)
			return WIRE_E_BAD_COUNT;
		ok = m->last <= 1;
		for (uint32_t i = 0; ok && i < m->count; i++) {
			ok = side_ok(m->orders[i].side);
			if (ok && !RESERVED(m->orders[i].reserved))
				return WIRE_E_BAD_RESERVED;
		}
		break;
	}
	case WIRE_HYDRATE_USER: {
		const struct wire_hydrate_user *m = (const void *)h;
		if (!RESERVED(m->reserved0) || !RESERVED(m->reserved1))
			return WIRE_E_BAD_RESERVED;
		ok = in_range(m->status, WIRE_HYD_OK, WIRE_HYD_UNKNOWN);
		if (ok && !user_state_ok(&m->state, &err))
			return err;
		break;
	}
	case WIRE_BEGIN_DEHYDRATE: {
		const struct wire_begin_dehydrate *m = (const void *)h;
		if (!user_state_ok(&m->state, &err))
			return err;
		break;
	}
	case WIRE_FLUSH_COMPLETE: {
		const struct wire_flush_complete *m = (const void *)h;
		if (!RESERVED(m->reserved))
			return WIRE_E_BAD_RESERVED;
		ok = in_range(m->status, WIRE_FLUSH_OK, WIRE_FLUSH_ERROR);
		break;
	}
	case WIRE_RELEASE_CLAIM:
	case WIRE_RELEASE_DONE: {
		const struct wire_release_claim *m = (const void *)h;
		if (!RESERVED(m->reserved))
			return WIRE_E_BAD_RESERVED;
		ok = h->type == WIRE_RELEASE_CLAIM ? m->status == 0
						   : in_range(m->status, WIRE_FLUSH_OK, WIRE_FLUSH_ERROR);
		ok = ok && m->handoff <= 1 && (m->handoff == 1 || m->to_shard == 0);
		break;
	}
	case WIRE_TRANSFER_LOOKUP:
		break;
	case WIRE_TRANSFER_FOUND: {
		const struct wire_transfer_found *m = (const void *)h;
		if (!RESERVED(m->reserved))
			return WIRE_E_BAD_RESERVED;
		ok = in_range(m->status, WIRE_XFER_FOUND, WIRE_XFER_ERROR);
		if (ok && m->status != WIRE_XFER_FOUND && !RESERVED(m->rec))
			return WIRE_E_BAD_RESERVED;
		if (!ok || m->status != WIRE_XFER_FOUND)
			break;
		if (!recent_ok(&m->rec, true, &err))
			return err;
		if (m->rec.kind != WIRE_RECENT_TRANSFER || m->rec.id != m->transfer_id)
			return WIRE_E_BAD_VALUE;
		break;
	}
	case WIRE_ROUTING_CONFIG: {
		const struct wire_routing_config *m = (const void *)h;
		if (m->shard_count > WIRE_ROUTE_SHARDS_MAX || m->pin_count > WIRE_ROUTE_PINS_MAX)
			return WIRE_E_BAD_COUNT;
		for (uint32_t i = 0; i < WIRE_ROUTE_SHARDS_MAX; i++) {
			if (!RESERVED(m->shards[i].reserved))
				return WIRE_E_BAD_RESERVED;
			if (i < m->shard_count && !in_range(m->shards[i].state, WIRE_SHARD_RECEIVING,
							     WIRE_SHARD_ACTIVE))
				return WIRE_E_BAD_ENUM;
		}
		for (uint32_t i = 0; i < WIRE_ROUTE_PINS_MAX; i++)
			if (!RESERVED(m->pins[i].reserved))
				return WIRE_E_BAD_RESERVED;
		break;
	}
	case WIRE_SYMBOL_CONFIG: {
		const struct wire_symbol_config *m = (const void *)h;
		if (!RESERVED(m->reserved0))
			return WIRE_E_BAD_RESERVED;
		ok = in_range(m->status, WIRE_SYM_TRADING, WIRE_SYM_HALTED);
		break;
	}
	case WIRE_SYMBOL_MOVE: {
		const struct wire_symbol_move *m = (const void *)h;
		if (!RESERVED(m->reserved))
			return WIRE_E_BAD_RESERVED;
		if (m->move_id == 0 || m->symbol == 0)
			return WIRE_E_BAD_VALUE;
		ok = in_range(m->phase, WIRE_MOVE_OUT, WIRE_MOVE_WATCH) && m->killed <= 1 &&
		     (m->status == 0 || in_range(m->status, WIRE_SYM_TRADING, WIRE_SYM_HALTED));
		break;
	}
	case WIRE_BOOK_CHUNK: {
		const struct wire_book_chunk *m = (const void *)h;
		if (m->reserved != 0)
			return WIRE_E_BAD_RESERVED;
		if (m->move_id == 0 || m->symbol == 0)
			return WIRE_E_BAD_VALUE;
		if ((uint32_t)m->count * sizeof(struct wire_book_order) != m->tail_len)
			return WIRE_E_BAD_COUNT;
		break;
	}
	case WIRE_SYMBOL_STATUS: {
		const struct wire_symbol_status_msg *m = (const void *)h;
		if (!RESERVED(m->reserved))
			return WIRE_E_BAD_RESERVED;
		ok = in_range(m->status, WIRE_SYM_TRADING, WIRE_SYM_HALTED) && m->cancel_resting <= 1;
		break;
	}
	case WIRE_KILL_SWITCH: {
		const struct wire_kill_switch *m = (const void *)h;
		if (!RESERVED(m->reserved))
			return WIRE_E_BAD_RESERVED;
		ok = in_range(m->scope, WIRE_KILL_USER, WIRE_KILL_SYMBOL) && m->engage <= 1;
		break;
	}
	case WIRE_TRANSFER: {
		const struct wire_transfer *m = (const void *)h;
		if (!RESERVED(m->reserved))
			return WIRE_E_BAD_RESERVED;
		allowed_flags = WIRE_TRANSFER_F_ROUTE;
		break;
	}
	case WIRE_WHALE_PIN: {
		const struct wire_whale_pin *m = (const void *)h;
		if (!RESERVED(m->reserved))
			return WIRE_E_BAD_RESERVED;
		allowed_flags = 0x1;
		break;
	}
	case WIRE_USER_ADMIN: {
		const struct wire_user_admin *m = (const void *)h;
		if (!RESERVED(m->reserved))
			return WIRE_E_BAD_RESERVED;
		ok = in_range(m->op, 1, 2);
		break;
	}
	case WIRE_ADMIN_REPLY: {
		const struct wire_admin_reply *m = (const void *)h;
		if (!RESERVED(m->reserved0))
			return WIRE_E_BAD_RESERVED;
		ok = reason_ok(m->reason);
		break;
	}
	case WIRE_REQUEST_VOTE: {
		const struct wire_request_vote *m = (const void *)h;
		if (!RESERVED(m->reserved))
			return WIRE_E_BAD_RESERVED;
		allowed_flags = WIRE_VOTE_F_PRE | WIRE_VOTE_F_TRANSFER;
		break;
	}
	case WIRE_VOTE_REPLY: {
		const struct wire_vote_reply *m = (const void *)h;
		if (!RESERVED(m->reserved))
			return WIRE_E_BAD_RESERVED;
		ok = m->granted <= 1;
		allowed_flags = WIRE_VOTE_F_PRE;
		break;
	}
	case WIRE_APPEND_ENTRIES: {
		const struct wire_append_entries *m = (const void *)h;
		err = entries_check((const uint8_t *)(m + 1), m->tail_len, m->entry_count);
		if (err != WIRE_E_OK)
			return err;
		break;
	}
	case WIRE_APPEND_REPLY: {
		const struct wire_append_reply *m = (const void *)h;
		if (!RESERVED(m->reserved))
			return WIRE_E_BAD_RESERVED;
		ok = m->success <= 1 && m->recv_index >= m->match_index;
		break;
	}
	case WIRE_INSTALL_SNAPSHOT: {
		const struct wire_install_snapshot *m = (const void *)h;
		ok = m->done <= 1;
		if (ok && m->offset + m->tail_len < m->offset)
			return WIRE_E_BAD_VALUE;
		break;
	}
	case WIRE_SNAPSHOT_REPLY: {
		const struct wire_snapshot_reply *m = (const void *)h;
		if (!RESERVED(m->reserved))
			return WIRE_E_BAD_RESERVED;
		ok = m->done <= 1 && m->gap <= 1;
		break;
	}
	case WIRE_TIMEOUT_NOW: {
		const struct wire_timeout_now *m = (const void *)h;
		if (!RESERVED(m->reserved))
			return WIRE_E_BAD_RESERVED;
		break;
	}
	case WIRE_INGRESS: {
		const struct wire_ingress *m = (const void *)h;
		if (!RESERVED(m->reserved))
			return WIRE_E_BAD_RESERVED;
		return inner_check((const uint8_t *)(m + 1), m->tail_len);
	}
	case WIRE_FORWARDED_ADMIN: {
		const struct wire_fwd_admin *m = (const void *)h;
		if ((h->flags & ~WIRE_FWD_F_ALL) != 0)
			return WIRE_E_BAD_RESERVED;
		if (m->origin == 0)
			return WIRE_E_BAD_VALUE;
		return fwd_inner_check((const uint8_t *)(m + 1), m->tail_len, true);
	}
	case WIRE_MEMBER_CHANGE: {
		const struct wire_member_change *m = (const void *)h;
		if (!RESERVED(m->reserved))
			return WIRE_E_BAD_RESERVED;
		if (m->node == 0)
			return WIRE_E_BAD_VALUE;
		ok = in_range(m->op, WIRE_MEMBER_ADD, WIRE_MEMBER_REMOVE);
		break;
	}
	case WIRE_LEADER_TRANSFER: {
		const struct wire_leader_transfer *m = (const void *)h;
		if (!RESERVED(m->reserved))
			return WIRE_E_BAD_RESERVED;
		if (m->node == 0)
			return WIRE_E_BAD_VALUE;
		break;
	}
	case WIRE_FORWARDED_REPLY: {
		const struct wire_fwd_reply *m = (const void *)h;
		if (!RESERVED(m->reserved0) || !RESERVED(m->reserved1))
			return WIRE_E_BAD_RESERVED;
		if (!in_range(m->status, WIRE_FWD_OK, WIRE_FWD_MAX - 1) || !reason_ok(m->reason))
			return WIRE_E_BAD_ENUM;
		if (h->flags != 0)
			return WIRE_E_BAD_RESERVED;
		return fwd_inner_check((const uint8_t *)(m + 1), m->tail_len, false);
	}
	case WIRE_TYPE_LIMIT:
	default:
		return WIRE_E_BAD_TYPE;
	}
	if (!ok)
		return WIRE_E_BAD_ENUM;
	if ((h->flags & ~allowed_flags) != 0)
		return WIRE_E_BAD_RESERVED;
	return WIRE_E_OK;
}

/* The tail length of a message with a tail (read only after the fixed part is in bounds). */
static uint16_t
tail_len_of(const struct wire_msg_hdr *h)
{
	switch (h->type) {
	case WIRE_APPEND_ENTRIES:
		return ((const struct wire_append_entries *)h)->tail_len;
	case WIRE_INSTALL_SNAPSHOT:
		return ((const struct wire_install_snapshot *)h)->tail_len;
	case WIRE_INGRESS:
		return ((const struct wire_ingress *)h)->tail_len;
	case WIRE_FORWARDED_ADMIN:
		return ((const struct wire_fwd_admin *)h)->tail_len;
	case WIRE_FORWARDED_REPLY:
		return ((const struct wire_fwd_reply *)h)->tail_len;
	case WIRE_BOOK_CHUNK:
		return ((const struct wire_book_chunk *)h)->tail_len;
	default:
		return 0;
	}
}

/* How long a fixed-size message may be, by what is known of its writer's minor
 * (docs/wire.md, "Versions"). */
enum ext_rule {
	EXT_SAME,  /* a frame of our minor: exactly our struct plus what we append */
	EXT_PREV,  /* a frame of the minor before: exactly what that minor writes */
	EXT_NEWER, /* a frame of the minor after: at least what we write */
	EXT_ANY,   /* writer unknown (log entries, wrapped messages): any minor of the major */
};

/* The ext_len bytes after a fixed-size message's struct, under rule. */
static enum wire_err
ext_check(const struct wire_msg_hdr *h, uint32_t ext_len, enum ext_rule rule)
{
	uint32_t own = type_exts[h->type];
	bool ok;

	if (ext_len % 8 != 0 || ext_len > WIRE_MSG_EXT_MAX)
		return WIRE_E_BAD_MSG_LENGTH;
	switch (rule) {
	case EXT_SAME:
		ok = ext_len == own;
		break;
	case EXT_PREV:
		ok = ext_len == type_exts_prev[h->type];
		break;
	case EXT_NEWER:
		/* A minor only appends: the one after ours writes all we write, maybe more. */
		ok = ext_len >= own;
		break;
	case EXT_ANY:
	default:
		ok = true;
		break;
	}
	if (!ok)
		return WIRE_E_BAD_MSG_LENGTH;
	/* The fields we append and know are zero-valued (so far only the test build's): held
	 * to it like reserved fields, as far as the message carries them. */
	uint32_t known = ext_len < own ? ext_len : own;
	if (!zero((const uint8_t *)h + wire_type_sizes[h->type], known))
		return WIRE_E_BAD_RESERVED;
	return WIRE_E_OK;
}

static enum wire_err
msg_check(const void *buf, size_t avail, enum ext_rule rule, uint16_t *msg_len)
{
	const struct wire_msg_hdr *h = buf;

	DCHECK(((uintptr_t)buf & 7u) == 0);
	if (avail < sizeof(*h))
		return WIRE_E_TRUNCATED;
	if (h->type >= WIRE_TYPE_LIMIT || wire_type_sizes[h->type] == 0)
		return WIRE_E_BAD_TYPE;
	uint32_t fixed = wire_type_sizes[h->type];
	if (h->length < fixed)
		return WIRE_E_BAD_MSG_LENGTH;
	if (h->length > avail)
		return WIRE_E_TRUNCATED;
	if (type_tails[h->type]) {
		uint16_t tail = tail_len_of(h);
		if (tail > WIRE_TAIL_MAX)
			return WIRE_E_BAD_VALUE;
		/* The tail is padded with zeroes so the next message stays 8-byte aligned. A type
		 * with a tail never grows in a minor: its length is exact under every rule. */
		if (h->length != align8(fixed + tail))
			return WIRE_E_BAD_MSG_LENGTH;
		if (!zero((const uint8_t *)buf + fixed + tail, h->length - fixed - tail))
			return WIRE_E_BAD_RESERVED;
	} else {
		enum wire_err err = ext_check(h, h->length - fixed, rule);
		if (err != WIRE_E_OK)
			return err;
	}
	enum wire_err err = body_check(h, 0);
	if (err != WIRE_E_OK)
		return err;
	*msg_len = h->length;
	return WIRE_E_OK;
}

enum wire_err
wire_msg_check(const void *buf, size_t avail, uint16_t *msg_len)
{
	return msg_check(buf, avail, EXT_ANY, msg_len);
}

const struct wire_msg_hdr *
wire_msg_known(const struct wire_msg_hdr *msg, union wire_msg_any *scratch)
{
	CHECK(msg != NULL);
	CHECK(scratch != NULL);
	uint16_t size = wire_type_size(msg->type);
	if (size == 0 || type_tails[msg->type] || msg->length <= size)
		return msg;
	/* Only the decoder's bound lets a message be longer than its struct. */
	DCHECK(msg->length - size <= WIRE_MSG_EXT_MAX);
	static_assert(sizeof(*scratch) <= UINT16_MAX, "any struct fits hdr.length");
	DCHECK(size <= sizeof(*scratch));
	memcpy(scratch, msg, size);
	scratch->hdr.length = size;
	return &scratch->hdr;
}

/* ---------------------------------------------------------------------------------------
 * Frames.
 * ------------------------------------------------------------------------------------- */

static bool
key_set(const struct wire_key *key)
{
	return key != NULL && (key->k0 | key->k1) != 0;
}

/* Constant-time tag comparison: timing must not reveal how many bytes matched. Two words
 * XORed and ORed, no branch on either (the frame's tag need not be aligned). */
static bool
tag_equal(const uint8_t *a, const uint8_t *b)
{
	static_assert(WIRE_MAC_SIZE == 16, "two words");
	uint64_t a0, a1, b0, b1;
	memcpy(&a0, a, 8);
	memcpy(&a1, a + 8, 8);
	memcpy(&b0, b, 8);
	memcpy(&b1, b + 8, 8);
	return ((a0 ^ b0) | (a1 ^ b1)) == 0;
}

enum frame_mac { MAC_COMPUTE, MAC_GOOD, MAC_BAD }; /* MAC_GOOD/BAD: the caller's own check */

/* The decoders: session = a client session's frame, whose MAC the caller checks. */
static enum wire_err
frame_decode(const void *buf, size_t len, const struct wire_key *key, bool session,
	     enum frame_mac mac, const struct wire_msg_hdr **msgs, uint32_t msgs_max,
	     uint32_t *count, uint32_t *sender_id)
{
	const uint8_t *p = buf;
	struct wire_frame_hdr fh;

	CHECK(msgs != NULL && count != NULL);
	*count = 0;
	if (len < sizeof(fh))
		return WIRE_E_TRUNCATED;
	memcpy(&fh, p, sizeof(fh));
	if (fh.magic != WIRE_MAGIC)
		return WIRE_E_BAD_MAGIC;
	/* Versions (docs/wire.md): the same major, a minor at most one away. */
	if (fh.version_major != WIRE_VERSION_MAJOR)
		return WIRE_E_BAD_VERSION;
	enum ext_rule rule;
	if (fh.version_minor == WIRE_VERSION_MINOR)
		rule = EXT_SAME;
	else if (fh.version_minor + WIRE_MINOR_WINDOW == WIRE_VERSION_MINOR)
		rule = EXT_PREV;
	else if (fh.version_minor == WIRE_VERSION_MINOR + WIRE_MINOR_WINDOW)
		rule = EXT_NEWER;
	else
		return WIRE_E_BAD_VERSION;
	if (fh.reserved != 0)
		return WIRE_E_BAD_RESERVED;
	if (session ? fh.flags != (WIRE_FRAME_F_MAC | WIRE_FRAME_F_SESSION)
		    : (fh.flags & ~WIRE_FRAME_F_MAC) != 0)
		return WIRE_E_BAD_FLAGS;
	if (fh.length != len || fh.length > WIRE_FRAME_MAX)
		return WIRE_E_BAD_LENGTH;
	if (fh.msg_count == 0 || fh.msg_count > WIRE_FRAME_MSGS_MAX || fh.msg_count > msgs_max)
		return WIRE_E_BAD_COUNT;

	size_t body_end = len;
	bool has_mac = (fh.flags & WIRE_FRAME_F_MAC) != 0;
	if (!session && has_mac != key_set(key))
		return WIRE_E_BAD_MAC;
	if (has_mac) {
		if (len < sizeof(fh) + WIRE_MAC_SIZE)
			return WIRE_E_TRUNCATED;
		body_end = len - WIRE_MAC_SIZE;
		if (!session && (mac == MAC_COMPUTE ? !wire_frame_mac_ok(p, len, key)
						    : mac == MAC_BAD))
			return WIRE_E_BAD_MAC;
	}

	size_t pos = sizeof(fh);
	for (uint32_t i = 0; i < fh.msg_count; i++) {
		uint16_t mlen;
		if (pos >= body_end)
			return WIRE_E_BAD_COUNT;
		enum wire_err err = msg_check(p + pos, body_end - pos, rule, &mlen);
		if (err != WIRE_E_OK)
			return err;
		msgs[i] = (const struct wire_msg_hdr *)(p + pos);
		/* SESSION_HDR opens a session frame and appears nowhere else. */
		if ((msgs[i]->type == WIRE_SESSION_HDR) != (session && i == 0))
			return WIRE_E_BAD_TYPE;
		pos += mlen;
	}
	if (pos != body_end)
		return WIRE_E_TRAILING;
	if (session && ((const struct wire_session_hdr *)msgs[0])->session_id != fh.sender_id)
		return WIRE_E_BAD_VALUE;
	*count = fh.msg_count;
	if (sender_id != NULL)
		*sender_id = fh.sender_id;
	return WIRE_E_OK;
}

enum wire_err
wire_frame_decode(const void *buf, size_t len, const struct wire_key *key,
		  const struct wire_msg_hdr **msgs, uint32_t msgs_max, uint32_t *count,
		  uint32_t *sender_id)
{
	return frame_decode(buf, len, key, false, MAC_COMPUTE, msgs, msgs_max, count, sender_id);
}

enum wire_err
wire_frame_decode_checked(const void *buf, size_t len, const struct wire_key *key, bool mac_ok,
			  const struct wire_msg_hdr **msgs, uint32_t msgs_max, uint32_t *count,
			  uint32_t *sender_id)
{
	return frame_decode(buf, len, key, false, mac_ok ? MAC_GOOD : MAC_BAD, msgs, msgs_max,
			    count, sender_id);
}

bool
wire_frame_tag_ok(const void *buf, size_t len, const uint8_t tag[WIRE_MAC_SIZE])
{
	return len >= sizeof(struct wire_frame_hdr) + WIRE_MAC_SIZE &&
	       tag_equal(tag, (const uint8_t *)buf + len - WIRE_MAC_SIZE);
}

enum wire_err
wire_session_frame_decode(const void *buf, size_t len, const struct wire_msg_hdr **msgs,
			  uint32_t msgs_max, uint32_t *count, uint32_t *sender_id)
{
	return frame_decode(buf, len, NULL, true, MAC_COMPUTE, msgs, msgs_max, count, sender_id);
}

uint8_t
wire_frame_flags(const void *buf, size_t len)
{
	if (len < sizeof(struct wire_frame_hdr))
		return 0;
	return ((const uint8_t *)buf)[offsetof(struct wire_frame_hdr, flags)];
}

uint8_t
wire_frame_minor(const void *buf, size_t len)
{
	if (len < sizeof(struct wire_frame_hdr))
		return 0;
	return ((const uint8_t *)buf)[offsetof(struct wire_frame_hdr, version_minor)];
}

bool
wire_frame_mac_ok(const void *buf, size_t len, const struct wire_key *key)
{
	if (!key_set(key) || len < sizeof(struct wire_frame_hdr) + WIRE_MAC_SIZE)
		return false;
	uint8_t tag[WIRE_MAC_SIZE];
	wire_siphash128(key, buf, len - WIRE_MAC_SIZE, tag);
	return tag_equal(tag, (const uint8_t *)buf + len - WIRE_MAC_SIZE);
}

void
wire_builder_init(struct wire_builder *b, void *buf, uint32_t cap, uint32_t sender_id)
{
	CHECK(cap >= sizeof(struct wire_frame_hdr) + WIRE_MAC_SIZE);
	CHECK(((uintptr_t)buf & 7u) == 0);
	struct wire_frame_hdr fh = {
		.magic = WIRE_MAGIC,
		.version_major = WIRE_VERSION_MAJOR,
		.version_minor = WIRE_VERSION_MINOR,
		.sender_id = sender_id,
	};
	b->buf = buf;
	b->cap = cap;
	b->len = sizeof(fh);
	b->count = 0;
	memcpy(b->buf, &fh, sizeof(fh));
}

int
wire_builder_add_tail(struct wire_builder *b, const void *msg, const void *tail,
		      uint16_t tail_len)
{
	const struct wire_msg_hdr *h = msg;
	uint16_t fixed = wire_type_size(h->type);
	CHECK(fixed != 0);
	CHECK(tail_len == 0 || type_tails[h->type]);
	/* The struct, the tail padded to 8, then the fields this minor appends (WIRE_EXTS),
	 * zero-valued; what a newer minor appended to msg is not copied. */
	uint32_t total = align8((uint32_t)fixed + tail_len) + type_exts[h->type];
	/* Keep room for the MAC so finish() never fails. */
	if (b->count >= WIRE_FRAME_MSGS_MAX || b->len + total + WIRE_MAC_SIZE > b->cap)
		return -ENOSPC;
	uint8_t *dst = b->buf + b->len;
	memcpy(dst, msg, fixed);
	((struct wire_msg_hdr *)dst)->length = (uint16_t)total;
	if (tail_len > 0)
		memcpy(dst + fixed, tail, tail_len);
	/* The tail's padding to 8 and the fields this minor appends: none for most messages. */
	uint32_t pad = total - fixed - tail_len;
	if (pad != 0)
		memset(dst + fixed + tail_len, 0, pad);
	b->len += total;
	b->count++;
	return 0;
}

int
wire_builder_add(struct wire_builder *b, const void *msg)
{
	const struct wire_msg_hdr *h = msg;
	if (wire_builder_add_plain(b, h))
		return 0;
	if (type_tails[h->type] && h->length > wire_type_size(h->type)) {
		/* A message with its tail already behind it in memory. */
		uint16_t fixed = wire_type_size(h->type);
		return wire_builder_add_tail(b, msg, (const uint8_t *)msg + fixed,
					     tail_len_of(h));
	}
	return wire_builder_add_tail(b, msg, NULL, 0);
}

void
wire_builder_session(struct wire_builder *b)
{
	((struct wire_frame_hdr *)b->buf)->flags |= WIRE_FRAME_F_SESSION;
}

uint32_t
wire_builder_finish(struct wire_builder *b, const struct wire_key *key)
{
	struct wire_frame_hdr *fh = (struct wire_frame_hdr *)b->buf;
	CHECK(b->count > 0);
	fh->msg_count = b->count;
	if (key_set(key)) {
		fh->flags |= WIRE_FRAME_F_MAC;
		CHECK(b->len + WIRE_MAC_SIZE <= UINT16_MAX);
		fh->length = (uint16_t)(b->len + WIRE_MAC_SIZE);
		wire_siphash128(key, b->buf, b->len, b->buf + b->len);
		b->len += WIRE_MAC_SIZE;
	} else {
		CHECK(b->len <= UINT16_MAX);
		fh->length = (uint16_t)b->len;
	}
	return b->len;
}

uint32_t
wire_builder_finish_unsealed(struct wire_builder *b, bool mac)
{
	struct wire_frame_hdr *fh = (struct wire_frame_hdr *)b->buf;
	CHECK(b->count > 0);
	fh->msg_count = b->count;
	if (mac) {
		fh->flags |= WIRE_FRAME_F_MAC;
		CHECK(b->len + WIRE_MAC_SIZE <= UINT16_MAX);
		/* wire_builder_add kept room for it. */
		b->len += WIRE_MAC_SIZE;
	}
	CHECK(b->len <= UINT16_MAX && b->len <= b->cap);
	fh->length = (uint16_t)b->len;
	return b->len;
}

void
wire_frame_seal(uint8_t *frame, uint32_t len, const struct wire_key *key)
{
	CHECK(key_set(key));
	CHECK(len >= sizeof(struct wire_frame_hdr) + WIRE_MAC_SIZE);
	DCHECK(((const struct wire_frame_hdr *)frame)->length == len);
	DCHECK(((const struct wire_frame_hdr *)frame)->flags & WIRE_FRAME_F_MAC);
	wire_siphash128(key, frame, len - WIRE_MAC_SIZE, frame + len - WIRE_MAC_SIZE);
}

void
wire_frames_seal(uint8_t *const frames[], const uint32_t lens[], const struct wire_key *const keys[],
		 uint32_t n)
{
	enum { GROUP = 64 }; /* wire_siphash128_multi sorts up to 64 by length */
	for (uint32_t i = 0; i < n; i += GROUP) {
		uint32_t g = n - i < GROUP ? n - i : GROUP;
		const void *data[GROUP];
		size_t len[GROUP];
		uint8_t *out[GROUP];
		for (uint32_t j = 0; j < g; j++) {
			const uint8_t *f = frames[i + j];
			uint32_t fl = lens[i + j];
			CHECK(key_set(keys[i + j]));
			CHECK(fl >= sizeof(struct wire_frame_hdr) + WIRE_MAC_SIZE);
			DCHECK(((const struct wire_frame_hdr *)(const void *)f)->length == fl);
			DCHECK(((const struct wire_frame_hdr *)(const void *)f)->flags & WIRE_FRAME_F_MAC);
			data[j] = f;
			len[j] = fl - WIRE_MAC_SIZE;
			out[j] = frames[i + j] + fl - WIRE_MAC_SIZE;
		}
		wire_siphash128_multi(keys + i, data, len, out, g);
	}
}

const struct wire_msg_hdr *
wire_msgs_next_decoded(const uint8_t *buf, uint32_t len, uint32_t *pos)
{
	if (*pos >= len || len - *pos < sizeof(struct wire_msg_hdr))
		return NULL;
	const struct wire_msg_hdr *h = (const struct wire_msg_hdr *)(buf + *pos);
	if (h->length < sizeof(*h) || (h->length & 7u) != 0 || h->length > len - *pos)
		return NULL;
#ifdef OMSD_DCHECK
	uint16_t checked = 0;
	DCHECK(wire_msg_check(h, len - *pos, &checked) == WIRE_E_OK && checked == h->length);
#endif
	*pos += h->length;
	return h;
}

const struct wire_msg_hdr *
wire_msgs_next(const uint8_t *buf, uint32_t len, uint32_t *pos, enum wire_err *err)
{
	*err = WIRE_E_OK;
	if (*pos >= len)
		return NULL;
	uint16_t mlen;
	enum wire_err e = wire_msg_check(buf + *pos, len - *pos, &mlen);
	if (e != WIRE_E_OK) {
		*err = e;
		return NULL;
	}
	const struct wire_msg_hdr *h = (const struct wire_msg_hdr *)(buf + *pos);
	*pos += mlen;
	return h;
}

/* ---------------------------------------------------------------------------------------
 * SipHash-2-4, 128-bit output (Aumasson & Bernstein, "SipHash: a fast short-input PRF").
 * ------------------------------------------------------------------------------------- */

static inline uint64_t
rotl64(uint64_t x, unsigned b)
{
	return (x << b) | (x >> (64 - b));
}

static inline uint64_t
load64_le(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, sizeof(v));
	return v; /* little-endian hosts only; asserted in wire_siphash128 */
}

#define SIPROUND                                                                           \
	do {                                                                               \
		v0 += v1;                                                                  \
		v1 = rotl64(v1, 13);                                                       \
		v1 ^= v0;                                                                  \
		v0 = rotl64(v0, 32);                                                       \
		v2 += v3;                                                                  \
		v3 = rotl64(v3, 16);                                                       \
		v3 ^= v2;                                                                  \
		v0 += v3;                                                                  \
		v3 = rotl64(v3, 21);                                                       \
		v3 ^= v0;                                                                  \
		v2 += v1;                                                                  \
		v1 = rotl64(v1, 17);                                                       \
		v1 ^= v2;                                                                  \
		v2 = rotl64(v2, 32);                                                       \
	} while (0)

#define SIP_C0 UINT64_C(0x736f6d6570736575)
#define SIP_C1 UINT64_C(0x646f72616e646f6d)
#define SIP_C2 UINT64_C(0x6c7967656e657261)
#define SIP_C3 UINT64_C(0x7465646279746573)

/* The last block: the bytes after the full blocks, the length in the top byte. */
static inline uint64_t
sip_last(const uint8_t *in, size_t len)
{
	size_t full = len & ~(size_t)7;
	uint64_t b = (uint64_t)len << 56;
	for (size_t i = 0; i < (len & 7); i++)
		b |= (uint64_t)in[full + i] << (8 * i);
	return b;
}

/* The full blocks of in from byte `from` (a multiple of 8) to its last, into the state. */
static inline void
sip_blocks(uint64_t st[4], const uint8_t *in, size_t from, size_t len)
{
	uint64_t v0 = st[0], v1 = st[1], v2 = st[2], v3 = st[3];
	size_t full = len & ~(size_t)7;
	for (size_t i = from; i < full; i += 8) {
		uint64_t m = load64_le(in + i);
		v3 ^= m;
		SIPROUND;
		SIPROUND;
		v0 ^= m;
	}
	st[0] = v0;
	st[1] = v1;
	st[2] = v2;
	st[3] = v3;
}

void
wire_siphash128(const struct wire_key *key, const void *data, size_t len, uint8_t out[16])
{
	static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "wire format is little-endian");
	const uint8_t *in = data;
	/* v1 ^ 0xee: the 128-bit output. */
	uint64_t st[4] = {SIP_C0 ^ key->k0, SIP_C1 ^ key->k1 ^ 0xee, SIP_C2 ^ key->k0,
			  SIP_C3 ^ key->k1};
	sip_blocks(st, in, 0, len);
	uint64_t v0 = st[0], v1 = st[1], v2 = st[2], v3 = st[3];
	uint64_t b = sip_last(in, len);
	v3 ^= b;
	SIPROUND;
	SIPROUND;
	v0 ^= b;
	v2 ^= 0xee;
	for (int r = 0; r < 4; r++)
		SIPROUND;
	uint64_t h0 = v0 ^ v1 ^ v2 ^ v3;
	v1 ^= 0xdd;
	for (int r = 0; r < 4; r++)
		SIPROUND;
	uint64_t h1 = v0 ^ v1 ^ v2 ^ v3;
	memcpy(out, &h0, 8);
	memcpy(out + 8, &h1, 8);
}

#ifdef __AVX2__
/* Four SipHash states in the four 64-bit lanes of a ymm register each: lane l is buffer l. */
static inline __m256i
rotl4(__m256i x, int b)
{
	return _mm256_or_si256(_mm256_slli_epi64(x, b), _mm256_srli_epi64(x, 64 - b));
}

#define SIPROUND4                                                                          \
	do {                                                                               \
		v0 = _mm256_add_epi64(v0, v1);                                             \
		v1 = rotl4(v1, 13);                                                        \
		v1 = _mm256_xor_si256(v1, v0);                                             \
		v0 = _mm256_shuffle_epi32(v0, 0xb1); /* rotl 32 */                         \
		v2 = _mm256_add_epi64(v2, v3);                                             \
		v3 = _mm256_shuffle_epi8(v3, rot16); /* rotl 16 */                         \
		v3 = _mm256_xor_si256(v3, v2);                                             \
		v0 = _mm256_add_epi64(v0, v3);                                             \
		v3 = rotl4(v3, 21);                                                        \
		v3 = _mm256_xor_si256(v3, v0);                                             \
		v2 = _mm256_add_epi64(v2, v1);                                             \
		v1 = rotl4(v1, 17);                                                        \
		v1 = _mm256_xor_si256(v1, v2);                                             \
		v2 = _mm256_shuffle_epi32(v2, 0xb1);                                       \
	} while (0)

#define SIPBLOCK4(m)                                                                       \
	do {                                                                               \
		v3 = _mm256_xor_si256(v3, (m));                                            \
		SIPROUND4;                                                                 \
		SIPROUND4;                                                                 \
		v0 = _mm256_xor_si256(v0, (m));                                            \
	} while (0)

/* The four buffers' common full blocks in the lanes, each one's remaining blocks alone, then
 * the last block and the finalisation of all four in the lanes. */
static void
siphash128_x4(const struct wire_key *const k[4], const uint8_t *const d[4], const size_t len[4],
	      uint8_t *const out[4])
{
	const __m256i rot16 = _mm256_setr_epi8(6, 7, 0, 1, 2, 3, 4, 5, 14, 15, 8, 9, 10, 11, 12, 13,
					       6, 7, 0, 1, 2, 3, 4, 5, 14, 15, 8, 9, 10, 11, 12, 13);
	const __m256i k0 = _mm256_setr_epi64x((long long)k[0]->k0, (long long)k[1]->k0,
					      (long long)k[2]->k0, (long long)k[3]->k0);
	const __m256i k1 = _mm256_setr_epi64x((long long)k[0]->k1, (long long)k[1]->k1,
					      (long long)k[2]->k1, (long long)k[3]->k1);
	__m256i v0 = _mm256_xor_si256(_mm256_set1_epi64x((long long)SIP_C0), k0);
	__m256i v1 = _mm256_xor_si256(_mm256_set1_epi64x((long long)(SIP_C1 ^ 0xee)), k1);
	__m256i v2 = _mm256_xor_si256(_mm256_set1_epi64x((long long)SIP_C2), k0);
	__m256i v3 = _mm256_xor_si256(_mm256_set1_epi64x((long long)SIP_C3), k1);
	size_t common = len[0];
	for (int l = 1; l < 4; l++)
		if (len[l] < common)
			common = len[l];
	common &= ~(size_t)7;
	size_t off = 0;
	for (; off + 32 <= common; off += 32) {
		/* Four blocks of each buffer, transposed: m_j holds block j of all four. */
		__m256i a = _mm256_loadu_si256((const __m256i *)(const void *)(d[0] + off));
		__m256i b = _mm256_loadu_si256((const __m256i *)(const void *)(d[1] + off));
		__m256i c = _mm256_loadu_si256((const __m256i *)(const void *)(d[2] + off));
		__m256i e = _mm256_loadu_si256((const __m256i *)(const void *)(d[3] + off));
		__m256i ab0 = _mm256_unpacklo_epi64(a, b), ab1 = _mm256_unpackhi_epi64(a, b);
		__m256i ce0 = _mm256_unpacklo_epi64(c, e), ce1 = _mm256_unpackhi_epi64(c, e);
		__m256i m0 = _mm256_permute2x128_si256(ab0, ce0, 0x20);
		__m256i m1 = _mm256_permute2x128_si256(ab1, ce1, 0x20);
		__m256i m2 = _mm256_permute2x128_si256(ab0, ce0, 0x31);
		__m256i m3 = _mm256_permute2x128_si256(ab1, ce1, 0x31);
		SIPBLOCK4(m0);
		SIPBLOCK4(m1);
		SIPBLOCK4(m2);
		SIPBLOCK4(m3);
	}
	for (; off < common; off += 8) {
		__m256i m = _mm256_setr_epi64x((long long)load64_le(d[0] + off),
					       (long long)load64_le(d[1] + off),
					       (long long)load64_le(d[2] + off),
					       (long long)load64_le(d[3] + off));
		SIPBLOCK4(m);
	}
	/* Each lane's own remaining blocks alone, then the last block and the finalisation
	 * of all four in the lanes again. */
	uint64_t s[4][4], b[4];
	_mm256_storeu_si256((__m256i *)(void *)s[0], v0);
	_mm256_storeu_si256((__m256i *)(void *)s[1], v1);
	_mm256_storeu_si256((__m256i *)(void *)s[2], v2);
	_mm256_storeu_si256((__m256i *)(void *)s[3], v3);
	for (int l = 0; l < 4; l++) {
		uint64_t st[4] = {s[0][l], s[1][l], s[2][l], s[3][l]};
		sip_blocks(st, d[l], off, len[l]);
		for (int j = 0; j < 4; j++)
			s[j][l] = st[j];
		b[l] = sip_last(d[l], len[l]);
	}
	v0 = _mm256_loadu_si256((const __m256i *)(const void *)s[0]);
	v1 = _mm256_loadu_si256((const __m256i *)(const void *)s[1]);
	v2 = _mm256_loadu_si256((const __m256i *)(const void *)s[2]);
	v3 = _mm256_loadu_si256((const __m256i *)(const void *)s[3]);
	__m256i last = _mm256_loadu_si256((const __m256i *)(const void *)b);
	SIPBLOCK4(last);
	v2 = _mm256_xor_si256(v2, _mm256_set1_epi64x(0xee));
	for (int r = 0; r < 4; r++)
		SIPROUND4;
	__m256i h0 = _mm256_xor_si256(_mm256_xor_si256(v0, v1), _mm256_xor_si256(v2, v3));
	v1 = _mm256_xor_si256(v1, _mm256_set1_epi64x(0xdd));
	for (int r = 0; r < 4; r++)
		SIPROUND4;
	__m256i h1 = _mm256_xor_si256(_mm256_xor_si256(v0, v1), _mm256_xor_si256(v2, v3));
	uint64_t o0[4], o1[4];
	_mm256_storeu_si256((__m256i *)(void *)o0, h0);
	_mm256_storeu_si256((__m256i *)(void *)o1, h1);
	for (int l = 0; l < 4; l++) {
		memcpy(out[l], &o0[l], 8);
		memcpy(out[l] + 8, &o1[l], 8);
	}
}
#endif

void
wire_siphash128_multi(const struct wire_key *const keys[], const void *const data[],
		      const size_t lens[], uint8_t *const out[], uint32_t n)
{
	uint32_t i = 0;
#ifdef __AVX2__
	/* Groups of four buffers of near lengths (the lanes share only the shortest's blocks):
	 * the buffers by length, up to 64 at a time; a last group of two or three fills its idle
	 * lanes with its first buffer (their MACs go to a scratch tag): the lanes cost the same
	 * whether used or not. */
	enum { SORT_MAX = 64 };
	while (n - i >= 2) {
		uint32_t g = n - i < SORT_MAX ? n - i : SORT_MAX;
		uint8_t by[SORT_MAX]; /* i + by[j]: the j-th shortest */
		for (uint32_t j = 0; j < g; j++) {
			uint32_t at = j;
			while (at > 0 && lens[i + by[at - 1]] > lens[i + j]) {
				by[at] = by[at - 1];
				at--;
			}
			by[at] = (uint8_t)j;
		}
		uint32_t j = 0;
		for (; g - j >= 2; j += g - j >= 4 ? 4 : g - j) {
			const struct wire_key *k[4];
			const uint8_t *d[4];
			size_t l[4];
			uint8_t scratch[16];
			uint8_t *o[4];
			for (uint32_t q = 0; q < 4; q++) {
				uint32_t at = i + by[j + q < g ? j + q : j];
				k[q] = keys[at];
				d[q] = data[at];
				l[q] = lens[at];
				o[q] = j + q < g ? out[at] : scratch;
			}
			siphash128_x4(k, d, l, o);
		}
		if (j < g) {
			uint32_t at = i + by[j];
			wire_siphash128(keys[at], data[at], lens[at], out[at]);
		}
		i += g;
	}
#endif
	for (; i < n; i++)
		wire_siphash128(keys[i], data[i], lens[i], out[i]);
}

/* ---------------------------------------------------------------------------------------
 * Keys in text.
 * ------------------------------------------------------------------------------------- */

static int
hex_digit(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

int
wire_hex_decode(const char *hex, uint8_t *out, size_t n)
{
	if (hex == NULL || strnlen(hex, 2 * n + 1) != 2 * n)
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		int hi = hex_digit(hex[2 * i]);
		int lo = hex_digit(hex[2 * i + 1]);
		if (hi < 0 || lo < 0)
			return -EINVAL;
		out[i] = (uint8_t)(hi << 4 | lo);
	}
	return 0;
}

int
wire_key_parse_hex(const char *hex, struct wire_key *key)
{
	uint8_t b[16];

	if (wire_hex_decode(hex, b, sizeof(b)) != 0)
		return -EINVAL;
	/* The key's 16 bytes in order; k0/k1 are their little-endian halves (SipHash). */
	memcpy(&key->k0, b, 8);
	memcpy(&key->k1, b + 8, 8);
	return 0;
}
