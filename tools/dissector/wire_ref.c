/* SPDX-License-Identifier: Apache-2.0 */
/*
 * wire_ref — the reference the dissector test (test_dissector.sh) compares omsd.lua with.
 * It is compiled against common/wire.h, so its offsets are the C compiler's, not the
 * generator's: where the two disagree, the test fails.
 *
 *   wire_ref dump FILE [--key HEX32]
 *       decode every UDP payload with wire_frame_decode and print one line per message:
 *       "<frame> <TYPE> <name>=<value> ..." (header fields, and the body fields of the
 *       client order-entry and transfer messages that omspcap writes); exit 1 on a frame
 *       that does not decode.
 *   wire_ref all FILE [--key HEX32]
 *       write a capture with one frame per message type in WIRE_TYPES (the fixed part
 *       filled with a byte pattern; INGRESS carries a NEW_ORDER, APPEND_ENTRIES one entry
 *       holding a TICK; the other tails are empty), then print "<frame> <TYPE> <length>"
 *       for each. The frames need not pass wire_frame_decode (enums hold pattern bytes):
 *       they exercise the dissector's layout of every struct.
 */
#include <inttypes.h>
#include <pcap/pcap.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/wire.h"

#define ETH_HDR 14
#define IP_HDR 20
#define UDP_HDR 8
#define PORT 7400

static int
usage(void)
{
	fputs("usage: wire_ref dump FILE [--key HEX32]\n"
	      "       wire_ref all FILE [--key HEX32]\n",
	      stderr);
	return 2;
}

/* The UDP payload of an Ethernet II / IPv4 / UDP packet; -1 for anything else. */
static int
udp_payload(const struct pcap_pkthdr *ph, const u_char *pkt, uint32_t *off, uint32_t *len)
{
	if (ph->caplen < ETH_HDR + IP_HDR + UDP_HDR || pkt[12] != 0x08 || pkt[13] != 0x00)
		return -1;
	uint32_t ihl = (uint32_t)(pkt[ETH_HDR] & 0x0f) * 4;
	if ((pkt[ETH_HDR] >> 4) != 4 || ihl < IP_HDR || pkt[ETH_HDR + 9] != 17)
		return -1;
	const u_char *udp = pkt + ETH_HDR + ihl;
	if (ETH_HDR + ihl + UDP_HDR > ph->caplen)
		return -1;
	uint32_t udp_len = (uint32_t)(udp[4] << 8 | udp[5]);
	if (udp_len < UDP_HDR || ETH_HDR + ihl + udp_len > ph->caplen)
		return -1;
	*off = ETH_HDR + ihl + UDP_HDR;
	*len = udp_len - UDP_HDR;
	return 0;
}

static void
print_msg(uint64_t frame, const struct wire_msg_hdr *h)
{
	printf("%" PRIu64 " %s length=%u shard=%u flags=%u", frame, wire_type_name(h->type),
	       h->length, h->shard, h->flags);
	switch (h->type) {
	case WIRE_NEW_ORDER: {
		const struct wire_new_order *m = (const void *)h;
		printf(" user=%" PRIu64 " cl_ord_id=%" PRIu64 " symbol=%u side=%u ord_type=%u"
		       " tif=%u stp=%u px=%" PRId64 " qty=%" PRId64 " quote_qty=%" PRId64
		       " expire_ns=%" PRIu64 " route_epoch=%" PRIu64,
		       m->user, m->cl_ord_id, m->symbol, m->side, m->ord_type, m->tif, m->stp,
		       m->px, m->qty, m->quote_qty, m->expire_ns, m->route_epoch);
		break;
	}
	case WIRE_CANCEL: {
		const struct wire_cancel *m = (const void *)h;
		printf(" user=%" PRIu64 " cl_ord_id=%" PRIu64 " orig_cl_ord_id=%" PRIu64
		       " route_epoch=%" PRIu64,
		       m->user, m->cl_ord_id, m->orig_cl_ord_id, m->route_epoch);
		break;
	}
	case WIRE_AMEND: {
		const struct wire_amend *m = (const void *)h;
		printf(" user=%" PRIu64 " cl_ord_id=%" PRIu64 " orig_cl_ord_id=%" PRIu64
		       " qty=%" PRId64 " route_epoch=%" PRIu64,
		       m->user, m->cl_ord_id, m->orig_cl_ord_id, m->qty, m->route_epoch);
		break;
	}
	case WIRE_CANCEL_REPLACE: {
		const struct wire_cancel_replace *m = (const void *)h;
		printf(" user=%" PRIu64 " cl_ord_id=%" PRIu64 " orig_cl_ord_id=%" PRIu64
		       " px=%" PRId64 " qty=%" PRId64 " route_epoch=%" PRIu64,
		       m->user, m->cl_ord_id, m->orig_cl_ord_id, m->px, m->qty, m->route_epoch);
		break;
	}
	case WIRE_TRANSFER: {
		const struct wire_transfer *m = (const void *)h;
		printf(" user=%" PRIu64 " transfer_id=%" PRIu64 " asset=%u amount=%" PRId64,
		       m->user, m->transfer_id, m->asset, m->amount);
		break;
	}
	default:
		break;
	}
	printf("\n");
}

static int
dump(const char *file, const struct wire_key *key)
{
	char errbuf[PCAP_ERRBUF_SIZE];
	pcap_t *pd = pcap_open_offline(file, errbuf);
	if (pd == NULL) {
		fprintf(stderr, "wire_ref: %s\n", errbuf);
		return 1;
	}
	static uint64_t payload[WIRE_FRAME_MAX / 8 + 1];
	struct pcap_pkthdr *ph;
	const u_char *pkt;
	uint64_t frame = 0;
	int rc, status = 0;
	while ((rc = pcap_next_ex(pd, &ph, &pkt)) == 1) {
		uint32_t off, len;
		frame++;
		if (udp_payload(ph, pkt, &off, &len) != 0 || len > sizeof(payload))
			continue;
		memcpy(payload, pkt + off, len);
		const struct wire_msg_hdr *m[WIRE_FRAME_MSGS_MAX];
		uint32_t count = 0, sender = 0;
		enum wire_err e = wire_frame_decode(payload, len, key, m, WIRE_FRAME_MSGS_MAX,
						    &count, &sender);
		if (e != WIRE_E_OK) {
			printf("%" PRIu64 " error %s\n", frame, wire_err_text(e));
			status = 1;
			continue;
		}
		for (uint32_t i = 0; i < count; i++)
			print_msg(frame, m[i]);
	}
	if (rc == PCAP_ERROR) {
		fprintf(stderr, "wire_ref: %s: %s\n", file, pcap_geterr(pd));
		status = 1;
	}
	pcap_close(pd);
	return status;
}

/* Ethernet/IPv4/UDP around payload (UDP checksum 0: none; the IPv4 checksum is left 0 too,
 * tshark does not verify it unless asked). */
static void
write_packet(pcap_dumper_t *dumper, uint64_t n, const uint8_t *payload, uint32_t len)
{
	static uint8_t pkt[ETH_HDR + IP_HDR + UDP_HDR + WIRE_FRAME_MAX];
	static const uint8_t ip_src[4] = {10, 77, 0, 1}, ip_dst[4] = {10, 77, 0, 2};
	uint32_t ip_len = IP_HDR + UDP_HDR + len, udp_len = UDP_HDR + len;
	memset(pkt, 0, ETH_HDR + IP_HDR + UDP_HDR);
	memcpy(pkt, "\x02\x00\x00\x00\x00\x02\x02\x00\x00\x00\x00\x01\x08\x00", ETH_HDR);
	uint8_t *ip = pkt + ETH_HDR, *udp = ip + IP_HDR;
	ip[0] = 0x45;
	ip[2] = (uint8_t)(ip_len >> 8);
	ip[3] = (uint8_t)ip_len;
	ip[8] = 64;
	ip[9] = 17;
	memcpy(ip + 12, ip_src, 4);
	memcpy(ip + 16, ip_dst, 4);
	udp[0] = (uint8_t)(40000 >> 8);
	udp[1] = (uint8_t)(40000 & 0xff);
	udp[2] = (uint8_t)(PORT >> 8);
	udp[3] = (uint8_t)(PORT & 0xff);
	udp[4] = (uint8_t)(udp_len >> 8);
	udp[5] = (uint8_t)udp_len;
	memcpy(udp + UDP_HDR, payload, len);
	struct pcap_pkthdr ph = {
		.ts = {.tv_sec = 1767225600, .tv_usec = (suseconds_t)n},
		.caplen = ETH_HDR + ip_len,
		.len = ETH_HDR + ip_len,
	};
	pcap_dump((u_char *)dumper, &ph, pkt);
}

struct type_row {
	const char *name;
	uint16_t value;
	uint16_t size;
	uint8_t tail;
};

static const struct type_row type_rows[] = {
#define WIRE_REF_ROW(name, value, st, tail, cls, admin)                                    \
	{#name, value, (uint16_t)sizeof(struct st), tail},
	WIRE_TYPES(WIRE_REF_ROW)
#undef WIRE_REF_ROW
};

static int
all(const char *file, const struct wire_key *key)
{
	pcap_t *dead = pcap_open_dead(DLT_EN10MB, 65535);
	pcap_dumper_t *dumper = dead != NULL ? pcap_dump_open(dead, file) : NULL;
	if (dumper == NULL) {
		fprintf(stderr, "wire_ref: cannot write %s\n", file);
		if (dead != NULL)
			pcap_close(dead);
		return 1;
	}
	static uint64_t frame_buf[WIRE_FRAME_MAX / 8];
	static uint64_t msg_buf[WIRE_FRAME_MAX / 8];
	uint8_t *msg = (uint8_t *)msg_buf;
	uint64_t n = 0;
	for (size_t i = 0; i < sizeof(type_rows) / sizeof(type_rows[0]); i++) {
		const struct type_row *r = &type_rows[i];
		uint16_t tail_len = 0;
		if (r->tail) {
			memset(msg, 0, r->size);
		} else {
			for (uint16_t b = 0; b < r->size; b++)
				msg[b] = (uint8_t)(r->value * 31u + b * 7u + 1u);
		}
		struct wire_msg_hdr *h = (struct wire_msg_hdr *)msg_buf;
		h->type = r->value;
		h->length = r->size;
		h->shard = 3;
		h->flags = 0;
		if (r->value == WIRE_INGRESS) {
			struct wire_ingress *g = (struct wire_ingress *)msg_buf;
			struct wire_new_order *o = (struct wire_new_order *)(g + 1);
			memset(o, 0, sizeof(*o));
			wire_hdr_init(&o->hdr, WIRE_NEW_ORDER, 0);
			o->user = 77;
			o->cl_ord_id = 5;
			o->symbol = 1;
			o->side = WIRE_SIDE_SELL;
			o->ord_type = WIRE_ORD_LIMIT;
			o->tif = WIRE_TIF_IOC;
			o->px = -12345;
			o->qty = 9;
			g->origin = 42;
			tail_len = g->tail_len = (uint16_t)sizeof(*o);
		} else if (r->value == WIRE_APPEND_ENTRIES) {
			struct wire_append_entries *a = (struct wire_append_entries *)msg_buf;
			struct wire_entry_hdr *e = (struct wire_entry_hdr *)(a + 1);
			struct wire_tick *t = (struct wire_tick *)(e + 1);
			memset(e, 0, sizeof(*e));
			e->term = 3;
			e->time_ns = 1000;
			e->data_len = (uint32_t)sizeof(*t);
			wire_hdr_init(&t->hdr, WIRE_TICK, 0);
			a->term = 3;
			a->entry_count = 1;
			tail_len = a->tail_len = (uint16_t)(sizeof(*e) + sizeof(*t));
		}
		struct wire_builder b;
		wire_builder_init(&b, frame_buf, sizeof(frame_buf), 9);
		if (wire_builder_add_tail(&b, msg, msg + r->size, tail_len) != 0) {
			fprintf(stderr, "wire_ref: %s does not fit a frame\n", r->name);
			return 1;
		}
		uint32_t len = wire_builder_finish(&b, key);
		const struct wire_msg_hdr *added =
			(const struct wire_msg_hdr *)((uint8_t *)frame_buf + sizeof(struct wire_frame_hdr));
		write_packet(dumper, ++n, (const uint8_t *)frame_buf, len);
		printf("%" PRIu64 " %s %u\n", n, r->name, added->length);
	}
	pcap_dump_close(dumper);
	pcap_close(dead);
	return 0;
}

int
main(int argc, char **argv)
{
	struct wire_key key = {0, 0};
	if (argc < 3)
		return usage();
	for (int i = 3; i < argc; i++) {
		if (strcmp(argv[i], "--key") == 0 && i + 1 < argc) {
			if (wire_key_parse_hex(argv[++i], &key) < 0)
				return usage();
		} else {
			return usage();
		}
	}
	if (strcmp(argv[1], "dump") == 0)
		return dump(argv[2], &key);
	if (strcmp(argv[1], "all") == 0)
		return all(argv[2], &key);
	return usage();
}
