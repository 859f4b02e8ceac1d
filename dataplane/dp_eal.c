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

#include "common/check.h"
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

/* The wire class of each type (common/wire.h, the message list's class column) in the
 * dataplane's terms: the route of a type is written down once, in that list. */
static const enum dp_class class_of_wire[WIRE_CLS_COUNT] = {
	[WIRE_CLS_NONE] = DP_CLASS_NONE,
	[WIRE_CLS_SHARD] = DP_CLASS_SHARD,
	[WIRE_CLS_GATEWAY] = DP_CLASS_GATEWAY,
	[WIRE_CLS_BRIDGE] = DP_CLASS_BRIDGE,
	[WIRE_CLS_CLIENT] = DP_CLASS_CLIENT,
};

enum dp_class
dp_class_of_type(uint16_t type)
{
	enum wire_class cls = wire_type_class(type);
	DCHECK((unsigned)cls < RTE_DIM(class_of_wire));
	return class_of_wire[cls];
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

/* Summed over the io lcores (each writes its own). */
uint64_t
dp_counter_get(const struct dp *dp, enum dp_counter c)
{
	uint64_t n = 0;
	for (uint16_t k = 0; k < dp->io_count; k++)
		n += __atomic_load_n(&dp->io[k].c[c], __ATOMIC_RELAXED);
	return n;
}

uint64_t
dp_frame_err_get(const struct dp *dp, enum wire_err e)
{
	uint64_t n = 0;
	for (uint16_t k = 0; k < dp->io_count; k++)
		n += __atomic_load_n(&dp->io[k].frame_err[e], __ATOMIC_RELAXED);
	return n;
}

void
dp_stats_write(const struct dp *dp, FILE *out)
{
	/* The packet counts per io lcore read once: the totals below are their sums in the
	 * same dump (traffic keeps moving them while it is written). */
	uint64_t rxq[DP_IO_MAX], txq[DP_IO_MAX], rx_sum = 0, tx_sum = 0;
	for (uint16_t k = 0; k < dp->io_count; k++) {
		rxq[k] = __atomic_load_n(&dp->io[k].c[DP_C_RX_PKTS], __ATOMIC_RELAXED);
		txq[k] = __atomic_load_n(&dp->io[k].c[DP_C_TX_PKTS], __ATOMIC_RELAXED);
		rx_sum += rxq[k];
		tx_sum += txq[k];
	}
	for (unsigned c = 0; c < DP_C_COUNT; c++)
		fprintf(out, "dp.%s %" PRIu64 "\n", counter_labels[c],
			c == DP_C_RX_PKTS   ? rx_sum
			: c == DP_C_TX_PKTS ? tx_sum
					    : dp_counter_get(dp, (enum dp_counter)c));
	for (unsigned e = 1; e < WIRE_E_COUNT; e++) {
		char name[32];
		unsigned i;
		for (i = 0; wire_err_names[e][i] != '\0' && i + 1 < sizeof(name); i++)
			name[i] = (char)tolower((unsigned char)wire_err_names[e][i]);
		name[i] = '\0';
		fprintf(out, "dp.frame_err.%s %" PRIu64 "\n", name,
			dp_frame_err_get(dp, (enum wire_err)e));
	}
	fprintf(out, "dp.tx_csum_offload %u\n", dp->tx_csum_offload ? 1u : 0u);
	for (unsigned q = 0; q < dp->txq_count; q++)
		fprintf(out, "dp.txq.%s.full %" PRIu64 "\n", dp->txq[q].name,
			__atomic_load_n(&dp->txq[q].full, __ATOMIC_RELAXED));
	/* Per io lcore when there are several: the frames each one routed (RSS spread). */
	for (uint16_t k = 0; k < dp->io_count && dp->io_count > 1; k++)
		fprintf(out, "dp.rxq.%u.rx_pkts %" PRIu64 "\n", (unsigned)k, rxq[k]);
	/* ... and the packets each one sent on its tx queue. */
	for (uint16_t k = 0; k < dp->io_count && dp->io_count > 1; k++)
		fprintf(out, "dp.txport.%u.tx_pkts %" PRIu64 "\n", (unsigned)k, txq[k]);
	/* The ARP table is the first io lcore's; this read may catch an entry mid-update, which
	 * is harmless for a diagnostic dump. */
	for (unsigned i = 0; i < DP_ARP_MAX; i++) {
		const struct dp_arp_entry *e = &dp->arp.e[i];
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
