/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Goal: the dataplane parsers answer ARP and ICMP echo correctly, hand valid UDP to the
 * frame path, and drop every malformed packet with the counter that names why.
 * Method: craft Ethernet frames in plain byte buffers (no EAL, no mbuf), run dp_pkt_input,
 * check the verdict, the counter and the rewritten bytes (checksums re-verified).
 */
#include <string.h>

#include <criterion/criterion.h>
#include <rte_byteorder.h>
#include <rte_icmp.h>

#include "dataplane/dp_int.h"

static struct dp_host host;
static const struct rte_ether_addr peer_mac = { { 0x02, 0, 0, 0, 0, 0x01 } };
static uint32_t peer_ip;
static uint8_t pkt[2048];

static void
setup(void)
{
	struct rte_ether_addr mac = { { 0x02, 0, 0, 0, 0, 0x02 } };
	host.ip_be = rte_cpu_to_be_32(RTE_IPV4(10, 0, 0, 2));
	host.mask_be = rte_cpu_to_be_32(0xffffff00);
	host.mac = mac;
	host.udp_port_be = rte_cpu_to_be_16(7400);
	peer_ip = rte_cpu_to_be_32(RTE_IPV4(10, 0, 0, 1));
	memset(pkt, 0, sizeof(pkt));
}

static struct rte_ipv4_hdr *
ip_of(void)
{
	return (struct rte_ipv4_hdr *)(pkt + RTE_ETHER_HDR_LEN);
}

/* An Ethernet + IPv4 header for proto with l4_len bytes of L4 after it. Returns the length. */
static uint32_t
build_ip(uint8_t proto, uint32_t l4_len)
{
	struct rte_ether_hdr *eth = (struct rte_ether_hdr *)pkt;
	struct rte_ipv4_hdr *ip = ip_of();
	eth->dst_addr = host.mac;
	eth->src_addr = peer_mac;
	eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
	memset(ip, 0, sizeof(*ip));
	ip->version_ihl = RTE_IPV4_VHL_DEF;
	ip->total_length = rte_cpu_to_be_16((uint16_t)(sizeof(*ip) + l4_len));
	ip->time_to_live = 64;
	ip->next_proto_id = proto;
	ip->src_addr = peer_ip;
	ip->dst_addr = host.ip_be;
	ip->hdr_checksum = 0;
	ip->hdr_checksum = rte_ipv4_cksum(ip);
	return (uint32_t)(RTE_ETHER_HDR_LEN + sizeof(*ip) + l4_len);
}

static uint32_t
build_udp(const void *payload, uint16_t len)
{
	uint32_t n = build_ip(IPPROTO_UDP, sizeof(struct rte_udp_hdr) + len);
	struct rte_udp_hdr *udp = (struct rte_udp_hdr *)(ip_of() + 1);
	udp->src_port = rte_cpu_to_be_16(9000);
	udp->dst_port = host.udp_port_be;
	udp->dgram_len = rte_cpu_to_be_16((uint16_t)(sizeof(*udp) + len));
	memcpy(udp + 1, payload, len);
	udp->dgram_cksum = 0;
	udp->dgram_cksum = rte_ipv4_udptcp_cksum(ip_of(), udp);
	return n;
}

static uint32_t
build_icmp(uint8_t type, uint16_t data_len)
{
	uint32_t n = build_ip(IPPROTO_ICMP, sizeof(struct rte_icmp_hdr) + data_len);
	struct rte_icmp_hdr *icmp = (struct rte_icmp_hdr *)(ip_of() + 1);
	icmp->icmp_type = type;
	icmp->icmp_ident = rte_cpu_to_be_16(0x1234);
	icmp->icmp_seq_nb = rte_cpu_to_be_16(7);
	for (uint16_t i = 0; i < data_len; i++)
		((uint8_t *)(icmp + 1))[i] = (uint8_t)i;
	icmp->icmp_cksum = 0;
	icmp->icmp_cksum = (uint16_t)~rte_raw_cksum(icmp, sizeof(*icmp) + data_len);
	return n;
}

static uint32_t
build_arp(uint16_t op, uint32_t sip, uint32_t tip)
{
	struct rte_ether_hdr *eth = (struct rte_ether_hdr *)pkt;
	struct rte_arp_hdr *arp = (struct rte_arp_hdr *)(eth + 1);
	memset(&eth->dst_addr, 0xff, sizeof(eth->dst_addr));
	eth->src_addr = peer_mac;
	eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_ARP);
	arp->arp_hardware = rte_cpu_to_be_16(RTE_ARP_HRD_ETHER);
	arp->arp_protocol = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
	arp->arp_hlen = 6;
	arp->arp_plen = 4;
	arp->arp_opcode = rte_cpu_to_be_16(op);
	arp->arp_data.arp_sha = peer_mac;
	arp->arp_data.arp_sip = sip;
	arp->arp_data.arp_tip = tip;
	return 60;
}

static struct dp_pkt
run(uint32_t len)
{
	struct dp_pkt p;
	dp_pkt_input(&host, pkt, len, false, false, &p);
	return p;
}

TestSuite(dp_parse, .init = setup);

/* Goal: an ARP request for our address is answered in place, and the asker is learned. */
Test(dp_parse, arp_request_answered)
{
	struct dp_pkt p = run(build_arp(RTE_ARP_OP_REQUEST, peer_ip, host.ip_be));
	struct rte_ether_hdr *eth = (struct rte_ether_hdr *)pkt;
	struct rte_arp_hdr *arp = (struct rte_arp_hdr *)(eth + 1);

	cr_assert_eq(p.action, DP_ACT_REPLY);
	cr_assert_eq(p.counter, DP_C_ARP_REPLIED);
	cr_assert_eq(rte_be_to_cpu_16(arp->arp_opcode), RTE_ARP_OP_REPLY);
	cr_assert(rte_is_same_ether_addr(&eth->dst_addr, &peer_mac));
	cr_assert(rte_is_same_ether_addr(&eth->src_addr, &host.mac));
	cr_assert(rte_is_same_ether_addr(&arp->arp_data.arp_sha, &host.mac));
	cr_assert_eq(arp->arp_data.arp_sip, host.ip_be);
	cr_assert_eq(arp->arp_data.arp_tip, peer_ip);
	cr_assert(p.learn && p.learn_create);
	cr_assert_eq(p.learn_ip_be, peer_ip);
}

/* Goal: ARP for someone else is not answered and only refreshes an existing entry. */
Test(dp_parse, arp_other_target)
{
	struct dp_pkt p = run(build_arp(RTE_ARP_OP_REQUEST, peer_ip,
					rte_cpu_to_be_32(RTE_IPV4(10, 0, 0, 3))));
	cr_assert_eq(p.action, DP_ACT_DROP);
	cr_assert_eq(p.counter, DP_C_ARP_NOT_US);
	cr_assert(p.learn && !p.learn_create);
}

Test(dp_parse, arp_reply_learned)
{
	struct dp_pkt p = run(build_arp(RTE_ARP_OP_REPLY, peer_ip, host.ip_be));
	cr_assert_eq(p.action, DP_ACT_DROP);
	cr_assert_eq(p.counter, DP_C_ARP_REPLY_RX);
	cr_assert(p.learn && p.learn_create);
}

Test(dp_parse, arp_malformed)
{
	build_arp(RTE_ARP_OP_REQUEST, peer_ip, host.ip_be);
	((struct rte_arp_hdr *)(pkt + RTE_ETHER_HDR_LEN))->arp_hlen = 8;
	cr_assert_eq(run(60).counter, DP_C_ARP_BAD);
	build_arp(9, peer_ip, host.ip_be);
	cr_assert_eq(run(60).counter, DP_C_ARP_BAD);
	build_arp(RTE_ARP_OP_REQUEST, peer_ip, host.ip_be);
	cr_assert_eq(run(RTE_ETHER_HDR_LEN + 10).counter, DP_C_ARP_BAD);
}

/* Goal: ICMP echo is answered with the payload intact and both checksums right. */
Test(dp_parse, icmp_echo_answered)
{
	uint32_t n = build_icmp(RTE_IP_ICMP_ECHO_REQUEST, 57); /* odd length on purpose */
	struct dp_pkt p = run(n);
	struct rte_icmp_hdr *icmp = (struct rte_icmp_hdr *)(ip_of() + 1);

	cr_assert_eq(p.action, DP_ACT_REPLY);
	cr_assert_eq(p.counter, DP_C_ICMP_ECHO_REPLIED);
	cr_assert_eq(icmp->icmp_type, RTE_IP_ICMP_ECHO_REPLY);
	cr_assert_eq(rte_be_to_cpu_16(icmp->icmp_seq_nb), 7);
	cr_assert_eq(((uint8_t *)(icmp + 1))[56], 56);
	cr_assert_eq(rte_raw_cksum(icmp, sizeof(*icmp) + 57), 0xffff);
	cr_assert_eq(rte_raw_cksum(ip_of(), sizeof(struct rte_ipv4_hdr)), 0xffff);
	cr_assert_eq(ip_of()->dst_addr, peer_ip);
	cr_assert_eq(ip_of()->src_addr, host.ip_be);
	cr_assert(rte_is_same_ether_addr(&((struct rte_ether_hdr *)pkt)->dst_addr, &peer_mac));
}

Test(dp_parse, icmp_bad_and_other)
{
	uint32_t n = build_icmp(RTE_IP_ICMP_ECHO_REQUEST, 8);
	((struct rte_icmp_hdr *)(ip_of() + 1))->icmp_cksum ^= 1;
	cr_assert_eq(run(n).counter, DP_C_ICMP_BAD);
	n = build_icmp(13, 8); /* timestamp request */
	cr_assert_eq(run(n).counter, DP_C_ICMP_OTHER);
}

/* Goal: a valid datagram to our port is a FRAME with its payload and source. */
Test(dp_parse, udp_frame)
{
	const char msg[] = "0123456789abcdef";
	uint32_t n = build_udp(msg, 16);
	struct dp_pkt p = run(n);

	cr_assert_eq(p.action, DP_ACT_FRAME);
	cr_assert_eq(p.payload_off, 42);
	cr_assert_eq(p.payload_len, 16);
	cr_assert_eq(memcmp(pkt + p.payload_off, msg, 16), 0);
	cr_assert_eq(p.src.ip_be, peer_ip);
	cr_assert_eq(rte_be_to_cpu_16(p.src.port_be), 9000);
	cr_assert(rte_is_same_ether_addr(&p.src_mac, &peer_mac));
	cr_assert(p.learn && p.learn_create); /* on-link sender */
}

/* Ethernet pads short frames: trailing bytes beyond the IPv4 total length are ignored. */
Test(dp_parse, udp_padded_frame)
{
	uint32_t n = build_udp("ab", 2);
	cr_assert_lt(n, 60u);
	struct dp_pkt p = run(60);
	cr_assert_eq(p.action, DP_ACT_FRAME);
	cr_assert_eq(p.payload_len, 2);
}

Test(dp_parse, udp_errors)
{
	uint32_t n = build_udp("abcdefgh", 8);
	struct rte_udp_hdr *udp = (struct rte_udp_hdr *)(ip_of() + 1);

	udp->dgram_cksum ^= 0x0100;
	cr_assert_eq(run(n).counter, DP_C_UDP_BAD_CSUM);

	n = build_udp("abcdefgh", 8);
	udp->dgram_cksum = 0; /* RFC 768: no checksum */
	struct dp_pkt p = run(n);
	cr_assert_eq(p.action, DP_ACT_FRAME);
	cr_assert_eq(p.counter, DP_C_UDP_NO_CSUM);

	n = build_udp("abcdefgh", 8);
	udp->dst_port = rte_cpu_to_be_16(7401);
	cr_assert_eq(run(n).counter, DP_C_UDP_PORT);

	n = build_udp("abcdefgh", 8);
	udp->dgram_len = rte_cpu_to_be_16(200);
	cr_assert_eq(run(n).counter, DP_C_UDP_BAD_HDR);

	n = build_udp("abcdefgh", 8);
	udp->dgram_len = rte_cpu_to_be_16(4);
	cr_assert_eq(run(n).counter, DP_C_UDP_BAD_HDR);
}

Test(dp_parse, ip_errors)
{
	uint32_t n = build_udp("abcdefgh", 8);
	ip_of()->version_ihl = 0x65;
	cr_assert_eq(run(n).counter, DP_C_IP_BAD_HDR);

	n = build_udp("abcdefgh", 8);
	ip_of()->version_ihl = 0x44;
	cr_assert_eq(run(n).counter, DP_C_IP_BAD_HDR);

	n = build_udp("abcdefgh", 8);
	cr_assert_eq(run(n - 1).counter, DP_C_IP_BAD_HDR); /* total length beyond the frame */

	n = build_udp("abcdefgh", 8);
	ip_of()->hdr_checksum ^= 0x0101;
	cr_assert_eq(run(n).counter, DP_C_IP_BAD_CSUM);

	n = build_udp("abcdefgh", 8);
	ip_of()->dst_addr = rte_cpu_to_be_32(RTE_IPV4(10, 0, 0, 9));
	ip_of()->hdr_checksum = 0;
	ip_of()->hdr_checksum = rte_ipv4_cksum(ip_of());
	cr_assert_eq(run(n).counter, DP_C_IP_NOT_US);

	n = build_udp("abcdefgh", 8);
	ip_of()->fragment_offset = rte_cpu_to_be_16(RTE_IPV4_HDR_MF_FLAG);
	ip_of()->hdr_checksum = 0;
	ip_of()->hdr_checksum = rte_ipv4_cksum(ip_of());
	cr_assert_eq(run(n).counter, DP_C_IP_FRAGMENT);

	n = build_ip(253, 8);
	cr_assert_eq(run(n).counter, DP_C_IP_PROTO);

	/* Hardware said the header checksum is good: software does not re-check it. */
	n = build_udp("abcdefgh", 8);
	ip_of()->hdr_checksum ^= 0x0101;
	struct dp_pkt p;
	dp_pkt_input(&host, pkt, n, true, false, &p);
	cr_assert_eq(p.action, DP_ACT_FRAME);
}

Test(dp_parse, ethernet_errors)
{
	struct rte_ether_hdr *eth = (struct rte_ether_hdr *)pkt;
	uint32_t n = build_udp("abcdefgh", 8);

	cr_assert_eq(run(10).counter, DP_C_RX_RUNT);
	eth->dst_addr.addr_bytes[5] = 0x77;
	cr_assert_eq(run(n).counter, DP_C_RX_NOT_US);
	memset(&eth->dst_addr, 0xff, 6); /* IPv4 to broadcast: no service */
	cr_assert_eq(run(n).counter, DP_C_RX_NOT_US);
	eth->dst_addr = host.mac;
	eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV6);
	cr_assert_eq(run(n).counter, DP_C_RX_ETHERTYPE);
}

/* The host as the peer that sends to it: its address and MAC. */
static struct dp_host
peer_host(void)
{
	struct dp_host peer = host;
	peer.ip_be = peer_ip;
	peer.mac = peer_mac;
	return peer;
}

/* Goal: what dp_udp_encap writes is what dp_pkt_input accepts on the other side. */
Test(dp_parse, encap_round_trip)
{
	struct dp_host peer = peer_host();
	uint8_t *payload = pkt + DP_HDRS_LEN;
	for (int i = 0; i < 101; i++)
		payload[i] = (uint8_t)(i * 3);
	dp_udp_encap(pkt, &peer, &host.mac, host.ip_be, host.udp_port_be, 101, 42, false);

	struct dp_pkt p = run(DP_HDRS_LEN + 101);
	cr_assert_eq(p.action, DP_ACT_FRAME);
	cr_assert_eq(p.payload_len, 101);
	cr_assert_eq(p.src.ip_be, peer_ip);
	cr_assert_eq(p.src.port_be, host.udp_port_be);
	cr_assert_eq(payload[100], (uint8_t)300);
	cr_assert_eq(rte_be_to_cpu_16(ip_of()->fragment_offset), RTE_IPV4_HDR_DF_FLAG);
}

/* Goal: with the checksums offloaded, what dp_udp_encap leaves is what a port completes
 * into a datagram the other side accepts: the IP header's sum from scratch, the UDP sum
 * over the datagram seeded with the field (the pseudo-header's sum, DPDK's convention);
 * a field left 0 or complemented would make a sum the receiver refuses.
 * Method: encap with offload, check the IP field is 0, complete both sums as a port does,
 * parse; then the same with the seed zeroed: refused as a bad UDP checksum. */
Test(dp_parse, encap_offload_completed_by_the_port)
{
	struct dp_host peer = peer_host();
	uint8_t *payload = pkt + DP_HDRS_LEN;
	for (int i = 0; i < 77; i++)
		payload[i] = (uint8_t)(i * 7 + 1);
	for (int wrong = 0; wrong < 2; wrong++) {
		dp_udp_encap(pkt, &peer, &host.mac, host.ip_be, host.udp_port_be, 77, 9, true);
		struct rte_ipv4_hdr *ip = ip_of();
		struct rte_udp_hdr *udp = (struct rte_udp_hdr *)(ip + 1);
		cr_assert_eq(ip->hdr_checksum, 0);
		if (wrong)
			udp->dgram_cksum = 0;
		/* The port: */
		ip->hdr_checksum = rte_ipv4_cksum(ip);
		uint16_t sum = (uint16_t)~rte_raw_cksum(udp, sizeof(*udp) + 77);
		udp->dgram_cksum = sum == 0 ? 0xffff : sum;
		struct dp_pkt p = run(DP_HDRS_LEN + 77);
		if (!wrong) {
			cr_assert_eq(p.action, DP_ACT_FRAME);
			cr_assert_eq(p.payload_len, 77);
			cr_assert_eq(p.src.ip_be, peer_ip);
		} else {
			cr_assert_eq(p.action, DP_ACT_DROP);
			cr_assert_eq(p.counter, DP_C_UDP_BAD_CSUM);
		}
	}
}

Test(dp_parse, arp_request_build)
{
	dp_arp_request_build(pkt, &host, peer_ip);
	struct rte_ether_hdr *eth = (struct rte_ether_hdr *)pkt;
	struct rte_arp_hdr *arp = (struct rte_arp_hdr *)(eth + 1);
	cr_assert(rte_is_broadcast_ether_addr(&eth->dst_addr));
	cr_assert_eq(rte_be_to_cpu_16(arp->arp_opcode), RTE_ARP_OP_REQUEST);
	cr_assert_eq(arp->arp_data.arp_tip, peer_ip);
	cr_assert_eq(arp->arp_data.arp_sip, host.ip_be);
}
