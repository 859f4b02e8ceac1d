/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ARP (RFC 826): answer requests for our address, learn neighbours, resolve next hops.
 * The table is a fixed open-addressing array owned by the io lcore; static entries come
 * from the configuration (peers) and never change.
 */
#include <errno.h>
#include <string.h>

#include <rte_byteorder.h>

#include "dp_int.h"

void
dp_arp_input(const struct dp_host *h, uint8_t *pkt, uint32_t len, struct dp_pkt *out)
{
	struct rte_ether_hdr *eth = (struct rte_ether_hdr *)pkt;
	struct rte_arp_hdr *arp = (struct rte_arp_hdr *)(eth + 1);
	struct rte_arp_ipv4 *a = &arp->arp_data;
	uint32_t sip, tip;
	uint16_t op;

	out->action = DP_ACT_DROP;
	if (len < RTE_ETHER_HDR_LEN + sizeof(*arp) ||
	    arp->arp_hardware != rte_cpu_to_be_16(RTE_ARP_HRD_ETHER) ||
	    arp->arp_protocol != rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4) ||
	    arp->arp_hlen != RTE_ETHER_ADDR_LEN || arp->arp_plen != sizeof(uint32_t)) {
		out->counter = DP_C_ARP_BAD;
		return;
	}
	op = rte_be_to_cpu_16(arp->arp_opcode);
	if (op != RTE_ARP_OP_REQUEST && op != RTE_ARP_OP_REPLY) {
		out->counter = DP_C_ARP_BAD;
		return;
	}
	sip = a->arp_sip;
	tip = a->arp_tip;

	/* RFC 826 merge: a sender on our subnet is learned when the packet is for us, and
	 * refreshed (never created) otherwise, so gratuitous ARP updates a moved peer. */
	if (sip != 0 && dp_host_onlink(h, sip) && !rte_is_zero_ether_addr(&a->arp_sha) &&
	    !rte_is_multicast_ether_addr(&a->arp_sha)) {
		out->learn = true;
		out->learn_create = tip == h->ip_be;
		out->learn_ip_be = sip;
		rte_ether_addr_copy(&a->arp_sha, &out->learn_mac);
	}
	if (tip != h->ip_be) {
		out->counter = DP_C_ARP_NOT_US;
		return;
	}
	if (op == RTE_ARP_OP_REPLY) {
		out->counter = DP_C_ARP_REPLY_RX;
		return;
	}

	/* Reply in place. arping probes with sender 0.0.0.0 (duplicate address detection)
	 * still get an answer, sent to the requester's MAC. */
	arp->arp_opcode = rte_cpu_to_be_16(RTE_ARP_OP_REPLY);
	rte_ether_addr_copy(&a->arp_sha, &a->arp_tha);
	a->arp_tip = sip;
	rte_ether_addr_copy(&h->mac, &a->arp_sha);
	a->arp_sip = h->ip_be;
	rte_ether_addr_copy(&eth->src_addr, &eth->dst_addr);
	rte_ether_addr_copy(&h->mac, &eth->src_addr);
	out->action = DP_ACT_REPLY;
	out->counter = DP_C_ARP_REPLIED;
}

void
dp_arp_request_build(uint8_t *buf, const struct dp_host *h, uint32_t target_ip_be)
{
	struct rte_ether_hdr *eth = (struct rte_ether_hdr *)buf;
	struct rte_arp_hdr *arp = (struct rte_arp_hdr *)(eth + 1);

	memset(buf, 0, DP_ARP_FRAME_LEN);
	memset(&eth->dst_addr, 0xff, sizeof(eth->dst_addr));
	rte_ether_addr_copy(&h->mac, &eth->src_addr);
	eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_ARP);
	arp->arp_hardware = rte_cpu_to_be_16(RTE_ARP_HRD_ETHER);
	arp->arp_protocol = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
	arp->arp_hlen = RTE_ETHER_ADDR_LEN;
	arp->arp_plen = sizeof(uint32_t);
	arp->arp_opcode = rte_cpu_to_be_16(RTE_ARP_OP_REQUEST);
	rte_ether_addr_copy(&h->mac, &arp->arp_data.arp_sha);
	arp->arp_data.arp_sip = h->ip_be;
	arp->arp_data.arp_tip = target_ip_be;
}

/* ---------------------------------------------------------------------------------------
 * Table.
 * ------------------------------------------------------------------------------------- */

static uint32_t
slot_of(uint32_t ip_be)
{
	/* Fibonacci hashing of the address; the table size is a power of two. */
	static_assert((DP_ARP_MAX & (DP_ARP_MAX - 1)) == 0, "DP_ARP_MAX power of two");
	return (uint32_t)((ip_be * UINT32_C(2654435761)) >> 8) & (DP_ARP_MAX - 1);
}

/* The writer's side of an entry's seqlock: odd while it changes (dp_arp_peek retries). */
static inline void
write_begin(struct dp_arp_entry *e)
{
	__atomic_store_n(&e->seq, e->seq + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
}

static inline void
write_end(struct dp_arp_entry *e)
{
	__atomic_store_n(&e->seq, e->seq + 1, __ATOMIC_RELEASE);
}

void
dp_arp_table_init(struct dp_arp_table *t, uint64_t timeout_ns)
{
	memset(t, 0, sizeof(*t));
	t->timeout_ns = timeout_ns;
}

/* The entry for ip, or NULL. */
static struct dp_arp_entry *
find(struct dp_arp_table *t, uint32_t ip_be)
{
	uint32_t s = slot_of(ip_be);

	for (uint32_t i = 0; i < DP_ARP_PROBE_MAX; i++) {
		struct dp_arp_entry *e = &t->e[(s + i) & (DP_ARP_MAX - 1)];
		if (e->state != DP_ARP_FREE && e->ip_be == ip_be)
			return e;
	}
	return NULL;
}

/* A slot for a new entry: a free one in the probe window, else the oldest non-static. */
static struct dp_arp_entry *
claim(struct dp_arp_table *t, uint32_t ip_be)
{
	uint32_t s = slot_of(ip_be);
	struct dp_arp_entry *victim = NULL;

	for (uint32_t i = 0; i < DP_ARP_PROBE_MAX; i++) {
		struct dp_arp_entry *e = &t->e[(s + i) & (DP_ARP_MAX - 1)];
		if (e->state == DP_ARP_FREE)
			return e;
		if (e->state != DP_ARP_STATIC &&
		    (victim == NULL || e->updated_ns < victim->updated_ns))
			victim = e;
	}
	return victim;
}

int
dp_arp_static_add(struct dp_arp_table *t, uint32_t ip_be, const struct rte_ether_addr *mac)
{
	struct dp_arp_entry *e = find(t, ip_be);

	if (e == NULL)
		e = claim(t, ip_be);
	if (e == NULL)
		return -ENOSPC;
	write_begin(e);
	e->ip_be = ip_be;
	e->state = DP_ARP_STATIC;
	rte_ether_addr_copy(mac, &e->mac);
	write_end(e);
	return 0;
}

bool
dp_arp_learn(struct dp_arp_table *t, uint32_t ip_be, const struct rte_ether_addr *mac,
	     bool create, uint64_t now_ns)
{
	struct dp_arp_entry *e = find(t, ip_be);

	if (e == NULL) {
		if (!create || (e = claim(t, ip_be)) == NULL)
			return false;
		write_begin(e);
		e->ip_be = ip_be;
		e->requested_ns = 0;
	} else if (e->state == DP_ARP_STATIC) {
		return false;
	} else if (e->state == DP_ARP_DYNAMIC && rte_is_same_ether_addr(&e->mac, mac) &&
		   now_ns - e->updated_ns < t->timeout_ns / 4) {
		return false; /* fresh enough: do not count every datagram as learning */
	} else {
		write_begin(e);
	}
	e->state = DP_ARP_DYNAMIC;
	rte_ether_addr_copy(mac, &e->mac);
	e->updated_ns = now_ns;
	write_end(e);
	return true;
}

int
dp_arp_resolve(struct dp_arp_table *t, uint32_t ip_be, uint64_t now_ns,
	       struct rte_ether_addr *mac, bool *request)
{
	struct dp_arp_entry *e = find(t, ip_be);

	*request = false;
	if (e != NULL && (e->state == DP_ARP_STATIC ||
			  (e->state == DP_ARP_DYNAMIC && now_ns - e->updated_ns < t->timeout_ns))) {
		rte_ether_addr_copy(&e->mac, mac);
		return 0;
	}
	if (e == NULL) {
		e = claim(t, ip_be);
		if (e == NULL)
			return -ENOENT;
		write_begin(e);
		e->ip_be = ip_be;
		e->state = DP_ARP_INCOMPLETE;
		e->updated_ns = now_ns;
		e->requested_ns = 0;
		write_end(e);
	}
	/* A stale dynamic entry is still used while we ask again: the neighbour most likely
	 * has not moved, and dropping traffic on every timeout would be worse. */
	if (e->requested_ns == 0 || now_ns - e->requested_ns >= DP_ARP_RETRY_NS) {
		e->requested_ns = now_ns;
		*request = true;
	}
	if (e->state == DP_ARP_DYNAMIC) {
		rte_ether_addr_copy(&e->mac, mac);
		return 0;
	}
	return -ENOENT;
}

int
dp_arp_peek(const struct dp_arp_table *t, uint32_t ip_be, uint64_t now_ns,
	    struct rte_ether_addr *mac)
{
	uint32_t s = slot_of(ip_be);

	for (uint32_t i = 0; i < DP_ARP_PROBE_MAX; i++) {
		const struct dp_arp_entry *e = &t->e[(s + i) & (DP_ARP_MAX - 1)];
		for (int tries = 0; tries < 4; tries++) {
			uint32_t seq = __atomic_load_n(&e->seq, __ATOMIC_ACQUIRE);
			if (seq & 1)
				continue; /* the writer is in it */
			uint32_t ip = e->ip_be;
			uint8_t state = e->state;
			uint64_t updated = e->updated_ns;
			struct rte_ether_addr m = e->mac;
			__atomic_thread_fence(__ATOMIC_ACQUIRE);
			if (__atomic_load_n(&e->seq, __ATOMIC_RELAXED) != seq)
				continue;
			if (state == DP_ARP_FREE || ip != ip_be)
				break; /* not this slot: the next in the window */
			if (state == DP_ARP_STATIC ||
			    (state == DP_ARP_DYNAMIC && now_ns - updated < t->timeout_ns)) {
				*mac = m;
				return 0;
			}
			return -ENOENT;
		}
	}
	return -ENOENT;
}
