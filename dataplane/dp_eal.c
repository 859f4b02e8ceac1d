/* SPDX-License-Identifier: Apache-2.0 */
/*
 * EAL start and stop, the dataplane log type, labels and the message-type classification.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_log.h>

#include "dp_int.h"

int dp_logtype = RTE_LOGTYPE_USER1;

static const char *const counter_labels[] = {
#define DP_COUNTER_LABEL(name, label, help) [DP_C_##name] = label,
	DP_COUNTERS(DP_COUNTER_LABEL)
#undef DP_COUNTER_LABEL
};

static const char *const counter_helps[] = {
#define DP_COUNTER_HELP(name, label, help) [DP_C_##name] = help,
	DP_COUNTERS(DP_COUNTER_HELP)
#undef DP_COUNTER_HELP
};

static const char *const wire_err_names[] = {
#define DP_WIRE_ERR_NAME(name, text) #name,
	WIRE_ERRS(DP_WIRE_ERR_NAME)
#undef DP_WIRE_ERR_NAME
};
static_assert(RTE_DIM(wire_err_names) == WIRE_E_COUNT, "wire_err_names");

const char *
dp_counter_label(enum dp_counter c)
{
	return (unsigned)c < DP_C_COUNT ? counter_labels[c] : "?";
}

const char *
dp_counter_help(enum dp_counter c)
{
	return (unsigned)c < DP_C_COUNT ? counter_helps[c] : "?";
}

static const char *const class_names[] = {
	[DP_CLASS_NONE] = "none",
	[DP_CLASS_SHARD] = "shard",
	[DP_CLASS_GATEWAY] = "gateway",
	[DP_CLASS_BRIDGE] = "bridge",
	[DP_CLASS_CLIENT] = "client",
};

const char *
dp_class_name(enum dp_class cls)
{
	return (unsigned)cls < DP_CLASS_COUNT ? class_names[cls] : "?";
}

enum dp_class
dp_class_of_type(uint16_t type)
{
	switch (type) {
	/* Client order entry goes to the gateway role, which picks the OMS shard. */
	case WIRE_NEW_ORDER:
	case WIRE_CANCEL:
	case WIRE_AMEND:
	case WIRE_CANCEL_REPLACE:
		return DP_CLASS_GATEWAY;
	/* Answers to a client-side consumer (a gateway forwarding for a client, tests). */
	case WIRE_ACK:
	case WIRE_NAK:
	case WIRE_EXEC_REPORT:
	case WIRE_ADMIN_REPLY: /* a transfer's answer, from the OMS leader to the gateway */
		return DP_CLASS_CLIENT;
	/* ME results and events for OMS shard hdr.shard: to that shard's bridge. */
	case WIRE_ME_EVENT:
	case WIRE_ME_RESULT:
	case WIRE_OPEN_ORDERS_SNAPSHOT:
		return DP_CLASS_BRIDGE;
	/* Requests to an ME shard (from a remote bridge), persistence results, admin, Raft and
	 * forwarded ingress: to the lcore of shard hdr.shard. */
	case WIRE_SUBMIT:
	case WIRE_CANCEL_TO_ME:
	case WIRE_AMEND_TO_ME:
	case WIRE_REPLACE_TO_ME:
	case WIRE_STREAM_ACK:
	case WIRE_REPLAY_REQUEST:
	case WIRE_ORDER_QUERY:
	case WIRE_OPEN_ORDERS_QUERY:
	case WIRE_ROUTING_CONFIG:
	case WIRE_SYMBOL_CONFIG:
	case WIRE_SYMBOL_STATUS:
	case WIRE_KILL_SWITCH:
	case WIRE_TRANSFER:
	case WIRE_WHALE_PIN:
	case WIRE_USER_ADMIN:
	case WIRE_SNAPSHOT_REQUEST:
	case WIRE_REQUEST_VOTE:
	case WIRE_VOTE_REPLY:
	case WIRE_APPEND_ENTRIES:
	case WIRE_APPEND_REPLY:
	case WIRE_INSTALL_SNAPSHOT:
	case WIRE_SNAPSHOT_REPLY:
	case WIRE_TIMEOUT_NOW:
	case WIRE_INGRESS:
		return DP_CLASS_SHARD;
	/* Host-internal messages (persistence, ticks) never come off the wire. */
	default:
		return DP_CLASS_NONE;
	}
}

enum dp_class
dp_class_of_msg(const struct wire_msg_hdr *msg)
{
	if (msg->type == WIRE_TRANSFER && (msg->flags & WIRE_TRANSFER_F_ROUTE) != 0)
		return DP_CLASS_GATEWAY;
	return dp_class_of_type(msg->type);
}

int
dp_eal_init(int argc, char **argv)
{
	int ret = rte_eal_init(argc, argv);
	if (ret < 0)
		return -(rte_errno ? rte_errno : EINVAL);
	int lt = rte_log_register_type_and_pick_level("user.omsd.dp", RTE_LOG_INFO);
	if (lt >= 0)
		dp_logtype = lt;
	(void)dp_clock_ns(); /* calibrate once, on the main lcore */
	return 0;
}

void
dp_eal_cleanup(void)
{
	rte_eal_cleanup();
}

uint64_t
dp_counter_get(const struct dp *dp, enum dp_counter c)
{
	return __atomic_load_n(&dp->io.c[c], __ATOMIC_RELAXED);
}

uint64_t
dp_frame_err_get(const struct dp *dp, enum wire_err e)
{
	return __atomic_load_n(&dp->io.frame_err[e], __ATOMIC_RELAXED);
}

void
dp_stats_write(const struct dp *dp, FILE *out)
{
	for (unsigned c = 0; c < DP_C_COUNT; c++)
		fprintf(out, "dp.%s %" PRIu64 "\n", counter_labels[c],
			dp_counter_get(dp, (enum dp_counter)c));
	for (unsigned e = 1; e < WIRE_E_COUNT; e++) {
		char name[32];
		unsigned i;
		for (i = 0; wire_err_names[e][i] != '\0' && i + 1 < sizeof(name); i++)
			name[i] = (char)tolower((unsigned char)wire_err_names[e][i]);
		name[i] = '\0';
		fprintf(out, "dp.frame_err.%s %" PRIu64 "\n", name,
			dp_frame_err_get(dp, (enum wire_err)e));
	}
	for (unsigned q = 0; q < dp->txq_count; q++)
		fprintf(out, "dp.txq.%s.full %" PRIu64 "\n", dp->txq[q].name,
			__atomic_load_n(&dp->txq[q].full, __ATOMIC_RELAXED));
	/* The ARP table is the io lcore's; this read may catch an entry mid-update, which is
	 * harmless for a diagnostic dump. */
	for (unsigned i = 0; i < DP_ARP_MAX; i++) {
		const struct dp_arp_entry *e = &dp->io.arp.e[i];
		uint8_t state = __atomic_load_n(&e->state, __ATOMIC_RELAXED);
		if (state == DP_ARP_FREE)
			continue;
		char ip[16], mac[RTE_ETHER_ADDR_FMT_SIZE];
		uint32_t a = rte_be_to_cpu_32(e->ip_be);
		snprintf(ip, sizeof(ip), "%u.%u.%u.%u", a >> 24, (a >> 16) & 255, (a >> 8) & 255,
			 a & 255);
		rte_ether_format_addr(mac, sizeof(mac), &e->mac);
		fprintf(out, "dp.arp.%s %s %s\n", ip, mac,
			state == DP_ARP_STATIC	    ? "static"
			: state == DP_ARP_DYNAMIC ? "dynamic"
						  : "incomplete");
	}
}
