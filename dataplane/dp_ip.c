/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Ethernet, IPv4, UDP and ICMP over one contiguous packet. Pure functions: no mbuf, no
 * EAL, so tests/unit/dataplane feeds them crafted byte buffers.
 *
 * Every length is checked against the bytes actually present before a field is read; a
 * packet that is wrong in any way is a DROP with the counter that names why.
 */
#include <string.h>

#include <rte_byteorder.h>
#include <rte_icmp.h>

#include "dp_int.h"

uint16_t
dp_ip_csum(const struct rte_ipv4_hdr *ip)
{
	/* rte_ipv4_cksum treats the checksum field as zero; we want the sum over the header as
	 * it is, which is 0xffff (complemented: 0) for a correct header. */
	uint16_t sum = rte_raw_cksum(ip, rte_ipv4_hdr_len(ip));
	return (uint16_t)~sum;
}

static void
drop(struct dp_pkt *out, enum dp_counter c)
{
	out->action = DP_ACT_DROP;
	out->counter = c;
}

static void
icmp_input(const struct dp_host *h, uint8_t *pkt, struct rte_ipv4_hdr *ip, uint32_t l4_off,
	   uint32_t l4_len, struct dp_pkt *out)
{
	struct rte_icmp_hdr *icmp = (struct rte_icmp_hdr *)(pkt + l4_off);
	struct rte_ether_hdr *eth = (struct rte_ether_hdr *)pkt;

	if (l4_len < sizeof(*icmp) || rte_raw_cksum(icmp, l4_len) != 0xffff)
		return drop(out, DP_C_ICMP_BAD);
	if (icmp->icmp_type != RTE_IP_ICMP_ECHO_REQUEST || icmp->icmp_code != 0)
		return drop(out, DP_C_ICMP_OTHER);

	/* Answer in place: swap addresses, echo reply, fresh checksums. The payload (identifier,
	 * sequence, data) is echoed byte for byte as RFC 792 asks. */
	rte_ether_addr_copy(&eth->src_addr, &eth->dst_addr);
	rte_ether_addr_copy(&h->mac, &eth->src_addr);
	ip->dst_addr = ip->src_addr;
	ip->src_addr = h->ip_be;
	ip->time_to_live = DP_IP_TTL;
	ip->hdr_checksum = 0;
	ip->hdr_checksum = rte_ipv4_cksum(ip);
	icmp->icmp_type = RTE_IP_ICMP_ECHO_REPLY;
	icmp->icmp_cksum = 0;
	icmp->icmp_cksum = (uint16_t)~rte_raw_cksum(icmp, l4_len);
	out->action = DP_ACT_REPLY;
	out->counter = DP_C_ICMP_ECHO_REPLIED;
}

static void
udp_input(const struct dp_host *h, uint8_t *pkt, struct rte_ipv4_hdr *ip, uint32_t l4_off,
	  uint32_t l4_len, bool l4_ok, struct dp_pkt *out)
{
	struct rte_udp_hdr *udp = (struct rte_udp_hdr *)(pkt + l4_off);
	uint32_t udp_len;

	if (l4_len < sizeof(*udp))
		return drop(out, DP_C_UDP_BAD_HDR);
	udp_len = rte_be_to_cpu_16(udp->dgram_len);
	if (udp_len < sizeof(*udp) || udp_len > l4_len)
		return drop(out, DP_C_UDP_BAD_HDR);
	if (udp->dst_port != h->udp_port_be)
		return drop(out, DP_C_UDP_PORT);
	if (udp->dgram_cksum == 0) {
		out->counter = DP_C_UDP_NO_CSUM; /* RFC 768: zero means the sender did not sum */
	} else if (!l4_ok) {
		/* The pseudo-header sum uses the IPv4 total length, which we checked covers
		 * l4_len; UDP length must then equal it for the sum to be over the datagram. */
		if (udp_len != l4_len)
			return drop(out, DP_C_UDP_BAD_HDR);
		if (__rte_ipv4_udptcp_cksum(ip, udp) != 0xffff)
			return drop(out, DP_C_UDP_BAD_CSUM);
		out->counter = DP_C_COUNT;
	} else {
		out->counter = DP_C_COUNT;
	}
	out->action = DP_ACT_FRAME;
	out->payload_off = (uint16_t)(l4_off + sizeof(*udp));
	out->payload_len = (uint16_t)(udp_len - sizeof(*udp));
	out->src.ip_be = ip->src_addr;
	out->src.port_be = udp->src_port;
	out->src.reserved = 0;
	rte_ether_addr_copy(&((struct rte_ether_hdr *)pkt)->src_addr, &out->src_mac);
	/* A datagram from an on-link neighbour tells us its MAC: replies need no ARP round. */
	if (dp_host_onlink(h, ip->src_addr)) {
		out->learn = true;
		out->learn_create = true;
		out->learn_ip_be = ip->src_addr;
		rte_ether_addr_copy(&out->src_mac, &out->learn_mac);
	}
}

static void
ipv4_input(const struct dp_host *h, uint8_t *pkt, uint32_t len, bool l3_ok, bool l4_ok,
	   struct dp_pkt *out)
{
	struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(pkt + RTE_ETHER_HDR_LEN);
	uint32_t avail = len - RTE_ETHER_HDR_LEN;
	uint32_t ihl, total;

	if (avail < sizeof(*ip) || (ip->version_ihl >> 4) != 4)
		return drop(out, DP_C_IP_BAD_HDR);
	ihl = (uint32_t)(ip->version_ihl & 0x0f) * 4;
	total = rte_be_to_cpu_16(ip->total_length);
	/* Ethernet may pad short frames, so total may be below avail, never above. */
	if (ihl < sizeof(*ip) || ihl > avail || total < ihl || total > avail)
		return drop(out, DP_C_IP_BAD_HDR);
	if (!l3_ok && rte_raw_cksum(ip, ihl) != 0xffff)
		return drop(out, DP_C_IP_BAD_CSUM);
	if (ip->dst_addr != h->ip_be)
		return drop(out, DP_C_IP_NOT_US);
	if ((rte_be_to_cpu_16(ip->fragment_offset) &
	     (RTE_IPV4_HDR_MF_FLAG | RTE_IPV4_HDR_OFFSET_MASK)) != 0)
		return drop(out, DP_C_IP_FRAGMENT);

	switch (ip->next_proto_id) {
	case IPPROTO_ICMP:
		return icmp_input(h, pkt, ip, RTE_ETHER_HDR_LEN + ihl, total - ihl, out);
	case IPPROTO_UDP:
		return udp_input(h, pkt, ip, RTE_ETHER_HDR_LEN + ihl, total - ihl, l4_ok, out);
	default:
		return drop(out, DP_C_IP_PROTO);
	}
}

void
dp_pkt_input(const struct dp_host *h, uint8_t *pkt, uint32_t len, bool l3_ok, bool l4_ok,
	     struct dp_pkt *out)
{
	const struct rte_ether_hdr *eth = (const struct rte_ether_hdr *)pkt;

	memset(out, 0, sizeof(*out));
	if (len < RTE_ETHER_HDR_LEN)
		return drop(out, DP_C_RX_RUNT);
	if (!rte_is_same_ether_addr(&eth->dst_addr, &h->mac) &&
	    !rte_is_broadcast_ether_addr(&eth->dst_addr))
		return drop(out, DP_C_RX_NOT_US);

	switch (rte_be_to_cpu_16(eth->ether_type)) {
	case RTE_ETHER_TYPE_ARP:
		return dp_arp_input(h, pkt, len, out);
	case RTE_ETHER_TYPE_IPV4:
		if (rte_is_broadcast_ether_addr(&eth->dst_addr))
			return drop(out, DP_C_RX_NOT_US); /* no IP broadcast service */
		return ipv4_input(h, pkt, len, l3_ok, l4_ok, out);
	default:
		return drop(out, DP_C_RX_ETHERTYPE);
	}
}

void
dp_udp_encap(uint8_t *hdr, const struct dp_host *h, const struct rte_ether_addr *dst_mac,
	     uint32_t dst_ip_be, uint16_t dst_port_be, uint16_t payload_len, uint16_t ip_id,
	     bool csum_offload)
{
	struct rte_ether_hdr *eth = (struct rte_ether_hdr *)hdr;
	struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(eth + 1);
	struct rte_udp_hdr *udp = (struct rte_udp_hdr *)(ip + 1);

	rte_ether_addr_copy(dst_mac, &eth->dst_addr);
	rte_ether_addr_copy(&h->mac, &eth->src_addr);
	eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);

	ip->version_ihl = RTE_IPV4_VHL_DEF;
	ip->type_of_service = 0;
	ip->total_length = rte_cpu_to_be_16((uint16_t)(sizeof(*ip) + sizeof(*udp) + payload_len));
	ip->packet_id = rte_cpu_to_be_16(ip_id);
	ip->fragment_offset = rte_cpu_to_be_16(RTE_IPV4_HDR_DF_FLAG);
	ip->time_to_live = DP_IP_TTL;
	ip->next_proto_id = IPPROTO_UDP;
	ip->hdr_checksum = 0;
	ip->src_addr = h->ip_be;
	ip->dst_addr = dst_ip_be;
	udp->src_port = h->udp_port_be;
	udp->dst_port = dst_port_be;
	udp->dgram_len = rte_cpu_to_be_16((uint16_t)(sizeof(*udp) + payload_len));
	if (csum_offload) {
		/* The port sums the IP header and the datagram: the UDP field holds the
		 * pseudo-header's sum (DPDK's convention for RTE_MBUF_F_TX_UDP_CKSUM). */
		udp->dgram_cksum = rte_ipv4_phdr_cksum(ip, 0);
		return;
	}
	ip->hdr_checksum = rte_ipv4_cksum(ip);
	udp->dgram_cksum = 0;
	udp->dgram_cksum = rte_ipv4_udptcp_cksum(ip, udp);
}
