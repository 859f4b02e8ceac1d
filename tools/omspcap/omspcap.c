/* SPDX-License-Identifier: Apache-2.0 */
/*
 * omspcap — seeded order-flow captures for replay through net_pcap (rx_pcap) and for
 * tshark (docs/tools.md).
 *
 *   omspcap gen --out FILE --count N --seed S [--src-ip A] [--dst-ip A] [--src-mac M]
 *               [--dst-mac M] [--src-port N] [--dst-port N] [--users N] [--symbols N]
 *               [--mid P] [--session N] [--key HEX32] [--gap-us N] [--multi PCT]
 *               [--transfer-shard N] [--fund-first 0|1] [--open-max N]
 *               [--key-file PATH [--logon-ts-ns N]]
 *   omspcap show FILE [--key HEX32 | --key-file PATH [--logon-from PCAP]] [--verbose]
 *   omspcap send FILE --to A [--port N] [--src-port N] [--rate R]
 *                [--key HEX32 | --key-file PATH] [--idle-ms N] [--drain-ms N]
 *
 * gen writes N wire messages as Ethernet/IPv4/UDP frames (DLT_EN10MB) with correct IPv4 and
 * UDP checksums; about --multi percent of frames carry several messages. The flow per user:
 * a deposit first (both assets; with --fund-first 1 every user's before any order), then
 * limit orders near a mid, cancels and amends of the
 * user's own live orders, some IOC and market orders. Same seed, same bytes (timestamps
 * included: they start at a fixed epoch and advance by --gap-us).
 * With --key-file (an API key, docs/security.md) the capture is a logged-on session: its
 * first frame is a LOGON signed with the key (timestamp --logon-ts-ns, default the time of
 * generation: replay it within the node's [sessions] logon_window_ms; the nonce comes from
 * the seed), every later frame a session frame numbered from 1 and MAC'd under the session
 * key, and the deposits are routed by the gateway (WIRE_TRANSFER_F_ROUTE).
 * show decodes every UDP payload with wire_frame_decode and prints counts per message type
 * and per decode error; the last line is
 *   show: frames=N msgs=N decode_errors=N non_udp=N
 * and the exit status is 1 when a frame did not decode. Session frames are decoded with the
 * session decoder, and their MACs checked when --key-file names the LOGON's key.
 * send replays the UDP payloads of a capture from a kernel UDP socket to one node, paced at
 * --rate frames per second, and counts the answers; a logged-on session's frames are sent
 * again from the one a SEQ_GAP reject names (docs/tools.md).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <pcap/pcap.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "auth/auth.h"
#include "common/prng.h"
#include "common/wire.h"
#include "tools/omspcap/omspcap.h"

#define ETH_HDR 14
#define IP_HDR 20
#define UDP_HDR 8
#define PAYLOAD_MAX 1472 /* a 1500-byte MTU */
#define USERS_MAX 100000
#define LIVE_MAX 64      /* live orders remembered per user (cancel/amend targets) */
#define MSG_SIZE 72      /* largest message generated (wire_new_order) */
#define ASSET_BASE 1     /* asset ids funded by the deposits */
#define ASSET_QUOTE 2
#define START_SEC 1767225600u /* 2026-01-01T00:00:00Z: fixed, so the file is reproducible */

struct opts {
	const char *out;
	uint64_t count;
	uint64_t seed;
	uint32_t src_ip, dst_ip;        /* network order */
	uint8_t src_mac[6], dst_mac[6];
	uint16_t src_port, dst_port;
	uint32_t users, symbols;
	int64_t mid;
	uint32_t session;
	struct wire_key key;
	uint32_t gap_us;
	uint32_t multi_pct;
	uint16_t transfer_shard;        /* hdr.shard of TRANSFER (the node routes it by shard) */
	bool logon;                     /* --key-file: a logged-on session */
	uint64_t key_id;
	uint8_t secret[AUTH_SECRET_SIZE];
	uint64_t logon_ts_ns;           /* 0: the time of generation */
	bool fund_first;                /* every user's deposits before any order */
	uint32_t open_max;              /* cancel whenever a user has this many live; 0 = off */
};

struct user_state {
	uint64_t next_id;               /* next cl_ord_id */
	uint64_t live[LIVE_MAX];        /* cl_ord_ids of orders that may still be live */
	uint32_t live_count;
	bool funded;
};

static int
usage(void)
{
	fputs("usage: omspcap gen --out FILE --count N --seed S [--src-ip A] [--dst-ip A]\n"
	      "                   [--src-mac M] [--dst-mac M] [--src-port N] [--dst-port N]\n"
	      "                   [--users N] [--symbols N] [--mid P] [--session N]\n"
	      "                   [--key HEX32] [--gap-us N] [--multi PCT] [--transfer-shard N]\n"
	      "                   [--fund-first 0|1] [--open-max N]\n"
	      "                   [--key-file PATH [--logon-ts-ns N]]\n"
	      "       omspcap show FILE [--key HEX32 | --key-file PATH [--logon-from PCAP]]\n"
	      "                   [--verbose]\n"
	      "       omspcap send FILE --to A [--port N] [--src-port N] [--rate R]\n"
	      "                   [--key HEX32 | --key-file PATH] [--idle-ms N] [--drain-ms N]\n",
	      stderr);
	return 2;
}

static int
parse_mac(const char *s, uint8_t mac[6])
{
	unsigned v[6];
	if (sscanf(s, "%x:%x:%x:%x:%x:%x", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5]) != 6)
		return -1;
	for (int i = 0; i < 6; i++) {
		if (v[i] > 255)
			return -1;
		mac[i] = (uint8_t)v[i];
	}
	return 0;
}

/* An API key file (docs/security.md): its first key line. 0, or -1 said on stderr. */
static int
key_file_read(const char *path, uint64_t *key_id, uint8_t secret[AUTH_SECRET_SIZE])
{
	static char text[1 << 16];
	FILE *f = fopen(path, "r");
	size_t n = f != NULL ? fread(text, 1, sizeof(text), f) : 0;
	if (f != NULL)
		fclose(f);
	char err[256];
	if (f == NULL || auth_client_key_parse(text, n, key_id, secret, err, sizeof(err)) != 0) {
		fprintf(stderr, "omspcap: %s: %s\n", path, f == NULL ? strerror(errno) : err);
		return -1;
	}
	return 0;
}

/* A capture's LOGON under key_id (an un-MAC'd frame holding one): its session's frame key
 * into *key. False when the frame is no such LOGON. */
static bool
logon_key(const void *payload, uint32_t len, uint64_t key_id,
	  const uint8_t secret[AUTH_SECRET_SIZE], struct wire_key *key)
{
	const struct wire_msg_hdr *m[WIRE_FRAME_MSGS_MAX];
	uint32_t count = 0, sender = 0;
	if (wire_frame_decode(payload, len, NULL, m, WIRE_FRAME_MSGS_MAX, &count, &sender) !=
		    WIRE_E_OK ||
	    m[0]->type != WIRE_LOGON)
		return false;
	const struct wire_logon *l = (const void *)m[0];
	if (l->key_id != key_id)
		return false;
	auth_session_key(secret, l, key);
	return true;
}

static int
parse_u64(const char *s, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 0);
	if (errno != 0 || end == s || *end != '\0' || s[0] == '-')
		return -1;
	*out = v;
	return 0;
}

/* RFC 1071 one's-complement sum. */
static uint32_t
csum_add(uint32_t sum, const uint8_t *p, size_t n)
{
	for (size_t i = 0; i + 1 < n; i += 2)
		sum += (uint32_t)(p[i] << 8 | p[i + 1]);
	if (n & 1)
		sum += (uint32_t)(p[n - 1] << 8);
	return sum;
}

static uint16_t
csum_fold(uint32_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

/* Wrap payload into Ethernet/IPv4/UDP at pkt. Returns the frame length. */
static uint32_t
encapsulate(const struct opts *o, uint8_t *pkt, const void *payload, uint32_t len,
	    uint16_t ip_id)
{
	uint8_t *eth = pkt, *ip = pkt + ETH_HDR, *udp = ip + IP_HDR;
	memcpy(eth, o->dst_mac, 6);
	memcpy(eth + 6, o->src_mac, 6);
	eth[12] = 0x08;
	eth[13] = 0x00;
	uint16_t ip_len = (uint16_t)(IP_HDR + UDP_HDR + len);
	uint16_t udp_len = (uint16_t)(UDP_HDR + len);
	memset(ip, 0, IP_HDR);
	ip[0] = 0x45;
	ip[2] = (uint8_t)(ip_len >> 8);
	ip[3] = (uint8_t)ip_len;
	ip[4] = (uint8_t)(ip_id >> 8);
	ip[5] = (uint8_t)ip_id;
	ip[6] = 0x40; /* don't fragment */
	ip[8] = 64;   /* ttl */
	ip[9] = 17;   /* UDP */
	memcpy(ip + 12, &o->src_ip, 4);
	memcpy(ip + 16, &o->dst_ip, 4);
	uint16_t ipc = csum_fold(csum_add(0, ip, IP_HDR));
	ip[10] = (uint8_t)(ipc >> 8);
	ip[11] = (uint8_t)ipc;
	udp[0] = (uint8_t)(o->src_port >> 8);
	udp[1] = (uint8_t)o->src_port;
	udp[2] = (uint8_t)(o->dst_port >> 8);
	udp[3] = (uint8_t)o->dst_port;
	udp[4] = (uint8_t)(udp_len >> 8);
	udp[5] = (uint8_t)udp_len;
	udp[6] = 0;
	udp[7] = 0;
	memcpy(udp + UDP_HDR, payload, len);
	/* The UDP checksum covers the pseudo-header, the header and the payload. */
	uint8_t pseudo[12];
	memcpy(pseudo, ip + 12, 8);
	pseudo[8] = 0;
	pseudo[9] = 17;
	pseudo[10] = (uint8_t)(udp_len >> 8);
	pseudo[11] = (uint8_t)udp_len;
	uint32_t sum = csum_add(0, pseudo, sizeof(pseudo));
	uint16_t uc = csum_fold(csum_add(sum, udp, udp_len));
	if (uc == 0)
		uc = 0xffff; /* zero means "no checksum" in UDP over IPv4 */
	udp[6] = (uint8_t)(uc >> 8);
	udp[7] = (uint8_t)uc;
	return ETH_HDR + ip_len;
}

/* The next message of the seeded flow into msg. */
static void
next_message(const struct opts *o, struct prng *p, struct user_state *users, uint32_t *fund_next,
	     uint64_t *msg)
{
	memset(msg, 0, MSG_SIZE);
	/* --fund-first: the users in order until all are funded, then the random flow. */
	uint32_t ui = o->fund_first && *fund_next < o->users ? *fund_next
							       : (uint32_t)prng_below(p, o->users);
	struct user_state *u = &users[ui];
	uint64_t user = 1000 + ui;
	if (!u->funded) {
		/* Deposits first: base then quote, so the user can trade both sides. */
		struct wire_transfer *t = (void *)msg;
		wire_hdr_init(&t->hdr, WIRE_TRANSFER, o->transfer_shard);
		t->user = user;
		/* Unique across users (the user's index above bit 32): a gateway routing the
		 * deposits matches their ADMIN_REPLYs by transfer id alone. */
		t->transfer_id = (uint64_t)(ui + 1) << 32 | u->next_id++;
		t->asset = u->next_id == 2 ? ASSET_BASE : ASSET_QUOTE;
		t->amount = t->asset == ASSET_BASE ? 1000000 : 1000000000;
		u->funded = u->next_id > 2;
		if (u->funded && ui == *fund_next)
			(*fund_next)++;
		return;
	}
	uint64_t roll = prng_below(p, 100);
	/* --open-max: a user at the bound cancels first, so its open orders stay under the
	 * node's per-user limit (the OMS keeps 64 order records per user). */
	if (u->live_count > 0 && (roll < 15 || (o->open_max > 0 && u->live_count >= o->open_max))) {
		/* Cancel one of the user's own orders. */
		uint32_t k = (uint32_t)prng_below(p, u->live_count);
		struct wire_cancel *c = (void *)msg;
		wire_hdr_init(&c->hdr, WIRE_CANCEL, 0);
		c->user = user;
		c->cl_ord_id = u->next_id++;
		c->orig_cl_ord_id = u->live[k];
		u->live[k] = u->live[--u->live_count];
		return;
	}
	if (u->live_count > 0 && roll < 20) {
		struct wire_amend *a = (void *)msg;
		wire_hdr_init(&a->hdr, WIRE_AMEND, 0);
		a->user = user;
		a->cl_ord_id = u->next_id++;
		a->orig_cl_ord_id = u->live[prng_below(p, u->live_count)];
		a->qty = prng_range(p, 1, 5);
		return;
	}
	if (u->live_count > 0 && roll < 23) {
		uint32_t k = (uint32_t)prng_below(p, u->live_count);
		struct wire_cancel_replace *r = (void *)msg;
		wire_hdr_init(&r->hdr, WIRE_CANCEL_REPLACE, 0);
		r->user = user;
		r->cl_ord_id = u->next_id++;
		r->orig_cl_ord_id = u->live[k];
		r->px = o->mid + prng_range(p, -10, 10);
		r->qty = prng_range(p, 1, 20);
		u->live[k] = r->cl_ord_id;
		return;
	}
	struct wire_new_order *n = (void *)msg;
	wire_hdr_init(&n->hdr, WIRE_NEW_ORDER, 0);
	n->user = user;
	n->cl_ord_id = u->next_id++;
	n->symbol = 1 + (uint32_t)prng_below(p, o->symbols);
	n->side = prng_chance(p, 1, 2) ? WIRE_SIDE_BUY : WIRE_SIDE_SELL;
	if (roll < 28) {
		n->ord_type = WIRE_ORD_MARKET;
		n->tif = WIRE_TIF_IOC;
		if (n->side == WIRE_SIDE_BUY)
			n->quote_qty = o->mid * prng_range(p, 1, 10);
		else
			n->qty = prng_range(p, 1, 10);
		return;
	}
	n->ord_type = WIRE_ORD_LIMIT;
	n->tif = roll < 35 ? WIRE_TIF_IOC : roll < 38 ? WIRE_TIF_POST_ONLY : WIRE_TIF_GTC;
	/* Buyers bid below the mid and sellers ask above it, with some overlap so trades. */
	int64_t off = prng_range(p, -3, 20);
	n->px = n->side == WIRE_SIDE_BUY ? o->mid - off : o->mid + off;
	if (n->px < 1)
		n->px = 1;
	n->qty = prng_range(p, 1, 20);
	if (n->tif != WIRE_TIF_IOC) {
		if (u->live_count == LIVE_MAX)
			u->live[prng_below(p, LIVE_MAX)] = n->cl_ord_id;
		else
			u->live[u->live_count++] = n->cl_ord_id;
	}
}

/* Open a session frame being built: mark it and put its SESSION_HDR (seq) first. */
static int
session_hdr_add(struct wire_builder *b, uint32_t session, uint64_t seq)
{
	struct wire_session_hdr sh;
	memset(&sh, 0, sizeof(sh));
	wire_hdr_init(&sh.hdr, WIRE_SESSION_HDR, 0);
	sh.session_id = session;
	sh.seq = seq;
	wire_builder_session(b);
	return wire_builder_add(b, &sh);
}

static int
gen(int argc, char **argv)
{
	struct opts o = {
		.count = 1000,
		.seed = 1,
		.src_mac = {0x02, 0x00, 0x00, 0x00, 0x00, 0x01},
		/* DPDK net_pcap's first port is 02:70:63:61:70:00 ("\x02pcap\0"), so a capture
		 * replays through rx_pcap as is; with [port] mac set, pass --dst-mac. */
		.dst_mac = {0x02, 0x70, 0x63, 0x61, 0x70, 0x00},
		.src_port = 40000,
		.dst_port = 7400,
		.users = 16,
		.symbols = 1,
		.mid = 10000,
		.session = 1,
		.gap_us = 10,
		.multi_pct = 30,
	};
	inet_pton(AF_INET, "10.77.0.1", &o.src_ip);
	inet_pton(AF_INET, "10.77.0.2", &o.dst_ip);
	for (int i = 2; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		uint64_t x = 0;
		if (v == NULL)
			return usage();
		i++;
		bool num = parse_u64(v, &x) == 0;
		if (strcmp(a, "--out") == 0)
			o.out = v;
		else if (strcmp(a, "--count") == 0 && num && x > 0)
			o.count = x;
		else if (strcmp(a, "--seed") == 0 && num)
			o.seed = x;
		else if (strcmp(a, "--src-ip") == 0 && inet_pton(AF_INET, v, &o.src_ip) == 1)
			;
		else if (strcmp(a, "--dst-ip") == 0 && inet_pton(AF_INET, v, &o.dst_ip) == 1)
			;
		else if (strcmp(a, "--src-mac") == 0 && parse_mac(v, o.src_mac) == 0)
			;
		else if (strcmp(a, "--dst-mac") == 0 && parse_mac(v, o.dst_mac) == 0)
			;
		else if (strcmp(a, "--src-port") == 0 && num && x > 0 && x <= UINT16_MAX)
			o.src_port = (uint16_t)x;
		else if (strcmp(a, "--dst-port") == 0 && num && x > 0 && x <= UINT16_MAX)
			o.dst_port = (uint16_t)x;
		else if (strcmp(a, "--users") == 0 && num && x > 0 && x <= USERS_MAX)
			o.users = (uint32_t)x;
		else if (strcmp(a, "--symbols") == 0 && num && x > 0 && x <= 1000000)
			o.symbols = (uint32_t)x;
		else if (strcmp(a, "--mid") == 0 && num && x >= 100 && x <= INT32_MAX)
			o.mid = (int64_t)x;
		else if (strcmp(a, "--session") == 0 && num && x <= UINT32_MAX)
			o.session = (uint32_t)x;
		else if (strcmp(a, "--key") == 0 && wire_key_parse_hex(v, &o.key) == 0)
			;
		else if (strcmp(a, "--gap-us") == 0 && num && x <= 1000000)
			o.gap_us = (uint32_t)x;
		else if (strcmp(a, "--multi") == 0 && num && x <= 100)
			o.multi_pct = (uint32_t)x;
		else if (strcmp(a, "--transfer-shard") == 0 && num && x <= UINT16_MAX)
			o.transfer_shard = (uint16_t)x;
		else if (strcmp(a, "--fund-first") == 0 && num && x <= 1)
			o.fund_first = x == 1;
		else if (strcmp(a, "--open-max") == 0 && num && x <= LIVE_MAX)
			o.open_max = (uint32_t)x;
		else if (strcmp(a, "--key-file") == 0) {
			if (key_file_read(v, &o.key_id, o.secret) != 0)
				return 2;
			o.logon = true;
		} else if (strcmp(a, "--logon-ts-ns") == 0 && num && x > 0)
			o.logon_ts_ns = x;
		else {
			fprintf(stderr, "omspcap: bad option %s %s\n", a, v);
			return usage();
		}
	}
	if (o.out == NULL || (o.logon && (o.key.k0 | o.key.k1) != 0) ||
	    (o.logon && o.session == 0))
		return usage(); /* a session has its own MAC key, and an id above 0 */

	struct user_state *users = calloc(o.users, sizeof(*users));
	pcap_t *pd = pcap_open_dead(DLT_EN10MB, 65535);
	pcap_dumper_t *dump = pd != NULL ? pcap_dump_open(pd, o.out) : NULL;
	if (users == NULL || dump == NULL) {
		fprintf(stderr, "omspcap: cannot write %s: %s\n", o.out,
			pd != NULL ? pcap_geterr(pd) : "pcap_open_dead failed");
		free(users);
		if (pd != NULL)
			pcap_close(pd);
		return 1;
	}
	for (uint32_t i = 0; i < o.users; i++)
		users[i].next_id = 1;
	struct prng p;
	prng_seed(&p, o.seed);
	static uint64_t frame[PAYLOAD_MAX / 8];
	static uint8_t pkt[ETH_HDR + IP_HDR + UDP_HDR + PAYLOAD_MAX];
	uint64_t msg[MSG_SIZE / 8];
	uint64_t written = 0, frames = 0, t_us = 0;
	uint32_t fund_next = 0;
	uint64_t per_type[WIRE_TYPE_LIMIT] = {0};
	bool held = false; /* msg holds a message that did not fit the last frame's class */
	uint64_t seq = 1;  /* --key-file: the next session frame's */
	struct wire_key frame_key = o.key;
	if (o.logon) {
		struct wire_logon l;
		memset(&l, 0, sizeof(l));
		wire_hdr_init(&l.hdr, WIRE_LOGON, 0);
		l.key_id = o.key_id;
		if (o.logon_ts_ns == 0) {
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			o.logon_ts_ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
		}
		l.ts_ns = o.logon_ts_ns;
		l.nonce = prng_next(&p);
		l.session_id = o.session;
		auth_logon_sign(o.secret, &l);
		auth_session_key(o.secret, &l, &frame_key);
		struct wire_builder b;
		wire_builder_init(&b, frame, PAYLOAD_MAX, o.session);
		(void)wire_builder_add(&b, &l);
		uint32_t len = wire_builder_finish(&b, NULL);
		uint32_t n = encapsulate(&o, pkt, frame, len, (uint16_t)frames);
		struct pcap_pkthdr ph = { .ts = {.tv_sec = (time_t)START_SEC}, .caplen = n, .len = n };
		pcap_dump((u_char *)dump, &ph, pkt);
		frames++;
		per_type[WIRE_LOGON]++;
	}
	while (written < o.count) {
		/* Several messages per frame sometimes (a client batching its burst). */
		uint64_t want = prng_chance(&p, o.multi_pct, 100) ? (uint64_t)prng_range(&p, 2, 8) : 1;
		if (want > o.count - written)
			want = o.count - written;
		struct wire_builder b;
		wire_builder_init(&b, frame, PAYLOAD_MAX, o.session);
		if (o.logon)
			(void)session_hdr_add(&b, o.session, seq++);
		bool first_transfer = false;
		for (uint64_t k = 0; k < want; k++) {
			if (!held)
				next_message(&o, &p, users, &fund_next, msg);
			held = false;
			struct wire_msg_hdr *h = (void *)msg;
			if (o.logon && h->type == WIRE_TRANSFER) {
				/* In a session everything goes through the gateway. */
				h->flags |= WIRE_TRANSFER_F_ROUTE;
				h->shard = 0;
			}
			/* The node refuses frames that mix order entry (gateway) with TRANSFER
			 * (routed by hdr.shard): such a message starts the next frame. */
			bool transfer = h->type == WIRE_TRANSFER;
			if (k == 0)
				first_transfer = transfer;
			if (transfer != first_transfer || wire_builder_add(&b, msg) < 0) {
				held = true;
				break;
			}
			per_type[h->type]++;
			written++;
		}
		uint32_t len = wire_builder_finish(&b, &frame_key);
		uint32_t n = encapsulate(&o, pkt, frame, len, (uint16_t)frames);
		t_us += o.gap_us;
		struct pcap_pkthdr ph = {
			.ts = {.tv_sec = (time_t)(START_SEC + t_us / 1000000),
			       .tv_usec = (suseconds_t)(t_us % 1000000)},
			.caplen = n,
			.len = n,
		};
		pcap_dump((u_char *)dump, &ph, pkt);
		frames++;
	}
	pcap_dump_close(dump);
	pcap_close(pd);
	free(users);
	printf("gen: file=%s frames=%" PRIu64 " msgs=%" PRIu64, o.out, frames, written);
	for (uint16_t t = 0; t < WIRE_TYPE_LIMIT; t++)
		if (per_type[t] != 0)
			printf(" %s=%" PRIu64, wire_type_name(t), per_type[t]);
	printf("\n");
	return 0;
}

/* The UDP payload of an Ethernet II / IPv4 / UDP packet: 0 with *off and *len set, or -1. */
static int
udp_payload(const struct pcap_pkthdr *ph, const u_char *pkt, uint32_t *off, uint32_t *len)
{
	if (ph->caplen < ETH_HDR + IP_HDR + UDP_HDR || pkt[12] != 0x08 || pkt[13] != 0x00 ||
	    (pkt[ETH_HDR] >> 4) != 4 || pkt[ETH_HDR + 9] != 17)
		return -1;
	uint32_t ihl = (uint32_t)(pkt[ETH_HDR] & 0x0f) * 4;
	const u_char *udp = pkt + ETH_HDR + ihl;
	if (ihl < IP_HDR || ETH_HDR + ihl + UDP_HDR > ph->caplen)
		return -1;
	uint32_t udp_len = (uint32_t)(udp[4] << 8 | udp[5]);
	if (udp_len < UDP_HDR || ETH_HDR + ihl + udp_len > ph->caplen ||
	    udp_len - UDP_HDR > WIRE_FRAME_MAX)
		return -1;
	*off = ETH_HDR + ihl + UDP_HDR;
	*len = udp_len - UDP_HDR;
	return 0;
}

/* Messages the node's gateway takes (routed as one class). */
static bool
is_order_entry(uint16_t type)
{
	return wire_type_class(type) == WIRE_CLS_GATEWAY;
}

/* The session key of the first LOGON under api's key in a capture: 0, or -1. */
static int
logon_find(const char *file, struct omspcap_api_key *api)
{
	char errbuf[PCAP_ERRBUF_SIZE];
	pcap_t *pd = pcap_open_offline(file, errbuf);
	if (pd == NULL)
		return -1;
	static uint64_t payload[WIRE_FRAME_MAX / 8 + 1];
	struct pcap_pkthdr *ph;
	const u_char *pkt;
	int rc = -1;
	while (rc != 0 && pcap_next_ex(pd, &ph, &pkt) == 1) {
		uint32_t off, len;
		if (udp_payload(ph, pkt, &off, &len) != 0)
			continue;
		memcpy(payload, pkt + off, len);
		if (logon_key(payload, len, api->key_id, api->secret, &api->session_key))
			rc = 0;
	}
	pcap_close(pd);
	return rc;
}

static int
show(int argc, char **argv)
{
	const char *file = NULL;
	struct wire_key key = {0, 0};
	bool verbose = false;
	struct omspcap_api_key api = {0};
	const char *logon_from = NULL;
	for (int i = 2; i < argc; i++) {
		if (strcmp(argv[i], "--key") == 0 && i + 1 < argc) {
			if (wire_key_parse_hex(argv[++i], &key) < 0)
				return usage();
		} else if (strcmp(argv[i], "--key-file") == 0 && i + 1 < argc) {
			if (key_file_read(argv[++i], &api.key_id, api.secret) != 0)
				return 2;
		} else if (strcmp(argv[i], "--logon-from") == 0 && i + 1 < argc) {
			logon_from = argv[++i];
		} else if (strcmp(argv[i], "--verbose") == 0) {
			verbose = true;
		} else if (argv[i][0] != '-' && file == NULL) {
			file = argv[i];
		} else {
			return usage();
		}
	}
	if (file == NULL)
		return usage();
	if (logon_from != NULL && (api.key_id == 0 || logon_find(logon_from, &api) != 0)) {
		fprintf(stderr, "omspcap: --logon-from %s: no LOGON under the --key-file key\n",
			logon_from);
		return 2;
	}
	return omspcap_show_file(file, &key, &api, verbose, NULL);
}

int
omspcap_show_file(const char *file, const struct wire_key *key,
		  const struct omspcap_api_key *api, bool verbose,
		  struct omspcap_show_counts *counts)
{
	/* The session key of the capture's LOGON (or the one given). */
	struct wire_key skey = api != NULL ? api->session_key : (struct wire_key){0, 0};
	char errbuf[PCAP_ERRBUF_SIZE];
	pcap_t *pd = pcap_open_offline(file, errbuf);
	if (pd == NULL) {
		fprintf(stderr, "omspcap: %s\n", errbuf);
		return 1;
	}
	if (pcap_datalink(pd) != DLT_EN10MB) {
		fprintf(stderr, "omspcap: %s: not an Ethernet capture\n", file);
		pcap_close(pd);
		return 1;
	}
	uint64_t frames = 0, msgs = 0, errors = 0, non_udp = 0, mixed = 0;
	uint64_t per_reason[WIRE_REASON_MAX] = {0}, per_exec[WIRE_EXEC_MAX] = {0};
	uint64_t finals = 0; /* reports that end their order (wire_report_final) */
	uint64_t per_type[WIRE_TYPE_LIMIT] = {0}, per_err[WIRE_E_COUNT] = {0};
	static uint64_t payload[WIRE_FRAME_MAX / 8 + 1];
	struct pcap_pkthdr *ph;
	const u_char *pkt;
	int rc;
	while ((rc = pcap_next_ex(pd, &ph, &pkt)) == 1) {
		/* Ethernet II, IPv4, UDP. Anything else is counted and skipped. */
		uint32_t off, len;
		if (udp_payload(ph, pkt, &off, &len) != 0) {
			non_udp++;
			continue;
		}
		frames++;
		memcpy(payload, pkt + off, len); /* aligned copy for the decoder */
		const struct wire_msg_hdr *m[WIRE_FRAME_MSGS_MAX];
		uint32_t count = 0, sender = 0;
		enum wire_err e;
		bool keyed = api != NULL && api->key_id != 0;
		if (keyed)
			(void)logon_key(payload, len, api->key_id, api->secret, &skey);
		if (wire_frame_flags(payload, len) & WIRE_FRAME_F_SESSION) {
			e = wire_session_frame_decode(payload, len, m, WIRE_FRAME_MSGS_MAX, &count,
						      &sender);
			if (e == WIRE_E_OK && keyed && !wire_frame_mac_ok(payload, len, &skey))
				e = WIRE_E_BAD_MAC;
		} else {
			/* A LOGON goes without a MAC whatever the shared key; a node's answers to a
			 * session under the session's key. */
			bool session_answer = (skey.k0 | skey.k1) != 0 &&
					      (wire_frame_flags(payload, len) & WIRE_FRAME_F_MAC);
			e = wire_frame_decode(payload, len, session_answer ? &skey : key, m,
					      WIRE_FRAME_MSGS_MAX, &count, &sender);
			if (e == WIRE_E_BAD_MAC)
				e = wire_frame_decode(payload, len, NULL, m, WIRE_FRAME_MSGS_MAX,
						      &count, &sender) == WIRE_E_OK &&
						    m[0]->type == WIRE_LOGON
					    ? WIRE_E_OK
					    : WIRE_E_BAD_MAC;
		}
		if (e != WIRE_E_OK) {
			errors++;
			per_err[e]++;
			if (verbose)
				printf("frame %" PRIu64 ": %s\n", frames, wire_err_text(e));
			continue;
		}
		msgs += count;
		bool order_entry = is_order_entry(m[0]->type);
		/* A session frame goes whole to the gateway: it cannot be mixed. */
		bool whole = (wire_frame_flags(payload, len) & WIRE_FRAME_F_SESSION) != 0;
		for (uint32_t i = 1; i < count && !whole; i++) {
			if (is_order_entry(m[i]->type) != order_entry || m[i]->shard != m[0]->shard) {
				mixed++;
				break;
			}
		}
		for (uint32_t i = 0; i < count; i++) {
			per_type[m[i]->type]++;
			if (m[i]->type == WIRE_NAK)
				per_reason[((const struct wire_nak *)m[i])->reason]++;
			if (m[i]->type == WIRE_EXEC_REPORT) {
				const struct wire_exec_report *r = (const void *)m[i];
				per_exec[r->exec]++;
				finals += wire_report_final(r);
			}
			if (verbose)
				printf("frame %" PRIu64 " sender %u: %s\n", frames, sender,
				       wire_type_name(m[i]->type));
		}
	}
	if (rc == PCAP_ERROR)
		fprintf(stderr, "omspcap: %s: %s\n", file, pcap_geterr(pd));
	pcap_close(pd);
	for (uint16_t t = 0; t < WIRE_TYPE_LIMIT; t++)
		if (per_type[t] != 0)
			printf("type %-16s %" PRIu64 "\n", wire_type_name(t), per_type[t]);
	for (uint16_t r = 0; r < WIRE_REASON_MAX; r++)
		if (per_reason[r] != 0)
			printf("nak   %-16s %" PRIu64 "\n", wire_reason_name(r), per_reason[r]);
	static const char *const exec_names[WIRE_EXEC_MAX] = {
		"?", "pending", "open", "rejected", "fill", "cancelled", "done", "amended",
		"cancel_rejected",
	};
	for (int x = 0; x < WIRE_EXEC_MAX; x++)
		if (per_exec[x] != 0)
			printf("exec  %-16s %" PRIu64 "\n", exec_names[x], per_exec[x]);
	if (finals != 0)
		printf("exec  %-16s %" PRIu64 " (the order's last report)\n", "final", finals);
	if (mixed != 0)
		printf("mixed frames (order entry with other classes or shards) %" PRIu64 "\n",
		       mixed);
	for (int e = 1; e < WIRE_E_COUNT; e++)
		if (per_err[e] != 0)
			printf("error %-40s %" PRIu64 "\n", wire_err_text((enum wire_err)e), per_err[e]);
	printf("show: frames=%" PRIu64 " msgs=%" PRIu64 " decode_errors=%" PRIu64
	       " non_udp=%" PRIu64 "\n",
	       frames, msgs, errors, non_udp);
	if (counts != NULL)
		*counts = (struct omspcap_show_counts){.frames = frames, .msgs = msgs,
						       .errors = errors, .non_udp = non_udp,
						       .read_error = rc == PCAP_ERROR};
	return errors != 0 || rc == PCAP_ERROR ? 1 : 0;
}

static uint64_t
mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

struct answers {
	struct wire_key key;
	uint64_t frames, msgs, errors;
	uint64_t per_type[WIRE_TYPE_LIMIT];
	uint64_t per_reason[WIRE_REASON_MAX];
	uint64_t rewind_seq; /* a SEQ_GAP / SEQ_REPEAT reject's expected seq, not yet acted on */
	bool rewind_repeat;  /* ... and it was a SEQ_REPEAT */
};

/* Read every answer waiting on fd (non-blocking). Returns how many frames were read. */
static uint64_t
answers_read(int fd, struct answers *a)
{
	static uint64_t buf[WIRE_FRAME_MAX / 8 + 1];
	uint64_t n = 0;
	for (;;) {
		ssize_t len = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (len < 0)
			return n;
		n++;
		a->frames++;
		const struct wire_msg_hdr *m[WIRE_FRAME_MSGS_MAX];
		uint32_t count = 0, sender = 0;
		if (wire_frame_decode(buf, (uint32_t)len, &a->key, m, WIRE_FRAME_MSGS_MAX, &count,
				      &sender) != WIRE_E_OK) {
			a->errors++;
			continue;
		}
		a->msgs += count;
		for (uint32_t i = 0; i < count; i++) {
			a->per_type[m[i]->type]++;
			if (m[i]->type == WIRE_NAK) {
				uint16_t r = ((const struct wire_nak *)m[i])->reason;
				if (r < WIRE_REASON_MAX)
					a->per_reason[r]++;
			}
			if (m[i]->type == WIRE_SESSION_REJECT) {
				const struct wire_session_reject *j = (const void *)m[i];
				if ((j->hdr.flags & WIRE_SESSION_REJECT_F_WARN) == 0 &&
				    (j->reason == WIRE_REASON_SEQ_GAP ||
				     j->reason == WIRE_REASON_SEQ_REPEAT)) {
					a->rewind_seq = j->expected_seq;
					a->rewind_repeat = j->reason == WIRE_REASON_SEQ_REPEAT;
				}
			}
		}
	}
}

/* Wait for an answer until deadline_ns (monotonic), reading whatever arrives. */
static uint64_t
answers_wait(int fd, struct answers *a, uint64_t deadline_ns)
{
	uint64_t now = mono_ns();
	if (deadline_ns > now) {
		uint64_t d = deadline_ns - now;
		struct timespec ts = {.tv_sec = (time_t)(d / 1000000000u),
				      .tv_nsec = (long)(d % 1000000000u)};
		struct pollfd p = {.fd = fd, .events = POLLIN};
		ppoll(&p, 1, &ts, NULL);
	}
	return answers_read(fd, a);
}

/* A frame of the capture, kept for sending again. */
struct sframe {
	size_t off;       /* in the payload buffer */
	uint32_t len;
	uint64_t seq;     /* its session seq; 0: not a session frame */
};

/* Echoes of one SEQ_GAP (the frames already on their way) name the same seq for about a
 * round trip: not a reason to go back again within this. */
#define REWIND_ECHO_NS (20 * 1000000ull)
#define PROBES 3                         /* heartbeats probing for a lost last frame */
#define PROBE_GAP_NS (100 * 1000000ull)  /* ... this far apart */

/* The session seq of a frame (its first message a SESSION_HDR), else 0. */
static uint64_t
frame_seq(const uint8_t *p, uint32_t len)
{
	struct wire_frame_hdr fh;
	struct wire_session_hdr sh;
	if (len < sizeof(fh) + sizeof(sh))
		return 0;
	memcpy(&fh, p, sizeof(fh));
	memcpy(&sh, p + sizeof(fh), sizeof(sh));
	if ((fh.flags & WIRE_FRAME_F_SESSION) == 0 || sh.hdr.type != WIRE_SESSION_HDR)
		return 0;
	return sh.seq;
}

/* A session frame of session `session` carrying one HEARTBEAT, numbered seq, MAC'd under the
 * session key: the length, or 0. */
static uint32_t
probe_frame(uint8_t *buf, const struct wire_key *key, uint32_t session, uint64_t seq)
{
	struct wire_builder b;
	wire_builder_init(&b, buf, PAYLOAD_MAX, session);
	struct wire_heartbeat hb;
	memset(&hb, 0, sizeof(hb));
	wire_hdr_init(&hb.hdr, WIRE_HEARTBEAT, 0);
	hb.session_id = session;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	hb.ts_ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	if (session_hdr_add(&b, session, seq) != 0 || wire_builder_add(&b, &hb) != 0)
		return 0;
	return wire_builder_finish(&b, key);
}

/* The index of the frame with session seq `seq` (seqs ascend by one from the first session
 * frame), or n when there is none. */
static uint64_t
seq_find(const struct sframe *f, uint64_t n, uint64_t seq)
{
	uint64_t first = 0;
	while (first < n && f[first].seq == 0)
		first++;
	if (first == n || seq < f[first].seq)
		return n;
	uint64_t k = first + (seq - f[first].seq);
	return k < n && f[k].seq == seq ? k : n;
}

static int
send_cmd(int argc, char **argv)
{
	const char *file = NULL, *to = NULL;
	uint64_t port = 7400, src_port = 0, rate = 0, idle_ms = 1000, drain_ms = 30000;
	struct omspcap_api_key api = {0};
	struct answers *a = calloc(1, sizeof(*a));
	if (a == NULL)
		return 1;
	for (int i = 2; i < argc; i++) {
		const char *k = argv[i];
		if (k[0] != '-' && file == NULL) {
			file = k;
			continue;
		}
		if (i + 1 >= argc)
			goto bad;
		const char *v = argv[++i];
		uint64_t x = 0;
		bool num = parse_u64(v, &x) == 0;
		if (strcmp(k, "--to") == 0)
			to = v;
		else if (strcmp(k, "--port") == 0 && num && x > 0 && x <= UINT16_MAX)
			port = x;
		else if (strcmp(k, "--src-port") == 0 && num && x <= UINT16_MAX)
			src_port = x;
		else if (strcmp(k, "--rate") == 0 && num && x <= 10000000)
			rate = x;
		else if (strcmp(k, "--key") == 0 && wire_key_parse_hex(v, &a->key) == 0)
			;
		else if (strcmp(k, "--key-file") == 0) {
			if (key_file_read(v, &api.key_id, api.secret) != 0) {
				free(a);
				return 2;
			}
		} else if (strcmp(k, "--idle-ms") == 0 && num && x > 0 && x <= 600000)
			idle_ms = x;
		else if (strcmp(k, "--drain-ms") == 0 && num && x <= 3600000)
			drain_ms = x;
		else
			goto bad;
	}
	struct sockaddr_in dst = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	if (file == NULL || to == NULL || inet_pton(AF_INET, to, &dst.sin_addr) != 1)
		goto bad;
	char errbuf[PCAP_ERRBUF_SIZE];
	pcap_t *pd = pcap_open_offline(file, errbuf);
	if (pd == NULL) {
		fprintf(stderr, "omspcap: %s\n", errbuf);
		free(a);
		return 1;
	}
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr_in src = {.sin_family = AF_INET, .sin_port = htons((uint16_t)src_port)};
	int rcvbuf = 8 << 20;
	if (fd < 0 || bind(fd, (const struct sockaddr *)&src, sizeof(src)) != 0) {
		fprintf(stderr, "omspcap: socket: %s\n", strerror(errno));
		pcap_close(pd);
		free(a);
		return 1;
	}
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
	/* The payloads, in order, with each session frame's seq (0: not a session frame). */
	struct sframe *fr = NULL;
	uint8_t *data = NULL;
	uint64_t frames = 0, cap = 0, non_udp = 0;
	size_t used = 0, data_cap = 0;
	struct pcap_pkthdr *ph;
	const u_char *pkt;
	int rc;
	while ((rc = pcap_next_ex(pd, &ph, &pkt)) == 1) {
		uint32_t off, len;
		if (udp_payload(ph, pkt, &off, &len) != 0) {
			non_udp++;
			continue;
		}
		/* A logged-on capture: the node answers under the session key of its LOGON. */
		if (api.key_id != 0) {
			static uint64_t pl[WIRE_FRAME_MAX / 8 + 1];
			memcpy(pl, pkt + off, len);
			(void)logon_key(pl, len, api.key_id, api.secret, &a->key);
		}
		if (frames == cap) {
			cap = cap ? 2 * cap : 4096;
			struct sframe *n = realloc(fr, cap * sizeof(*fr));
			if (n == NULL) {
				rc = -ENOMEM;
				break;
			}
			fr = n;
		}
		if (used + len > data_cap) {
			data_cap = data_cap ? 2 * data_cap : (size_t)1 << 20;
			while (used + len > data_cap)
				data_cap *= 2;
			uint8_t *n = realloc(data, data_cap);
			if (n == NULL) {
				rc = -ENOMEM;
				break;
			}
			data = n;
		}
		memcpy(data + used, pkt + off, len);
		fr[frames] = (struct sframe){.off = used, .len = len, .seq = frame_seq(pkt + off, len)};
		used += len;
		frames++;
	}
	if (rc == PCAP_ERROR)
		fprintf(stderr, "omspcap: %s: %s\n", file, pcap_geterr(pd));
	pcap_close(pd);
	if (rc == -ENOMEM) {
		fprintf(stderr, "omspcap: %s: out of memory holding the capture\n", file);
		free(fr);
		free(data);
		close(fd);
		free(a);
		return 1;
	}

	/* Frame after frame at --rate (every send paced, re-sends included), answers read while
	 * waiting. A session refuses every frame after a lost one (SEQ_GAP, naming the seq it
	 * expects): as a client does, send again from that frame. The frames sent before the
	 * first reject came back are refused naming the same seq: those echoes are not taken
	 * again within REWIND_ECHO_NS. An echo taken late sends frames the node has: it refuses
	 * them SEQ_REPEAT naming the seq it expects, and the send skips ahead to that frame. Then
	 * drain: until no answer came for idle_ms (at most drain_ms), sending again if a late
	 * reject asks for it. A lost last frame leaves no later frame to draw its SEQ_GAP: once
	 * everything is sent, a HEARTBEAT numbered one past the capture's last frame probes for
	 * it (up to PROBES times, PROBE_GAP_NS apart, again after every pass). */
	uint64_t sent = 0, send_errors = 0, resent = 0, rewinds = 0, skipped = 0, next = 0;
	uint64_t sends = 0;
	uint64_t last_rewind = 0, last_rewind_ns = 0;
	uint64_t start = mono_ns(), gap = rate > 0 ? 1000000000u / rate : 0;
	uint64_t sent_ns = 0, drain_end = 0, last_answer = 0, probes = 0, last_probe = 0;
	uint32_t probes_left = PROBES, session = 0;
	uint64_t last_seq = 0;
	for (uint64_t k = 0; k < frames; k++) {
		if (fr[k].seq != 0) {
			struct wire_frame_hdr fh;
			memcpy(&fh, data + fr[k].off, sizeof(fh));
			session = fh.sender_id;
			last_seq = fr[k].seq;
		}
	}
	for (;;) {
		if (a->rewind_seq != 0) {
			uint64_t want = a->rewind_seq, now = mono_ns();
			a->rewind_seq = 0;
			uint64_t k = seq_find(fr, frames, want);
			bool repeat = a->rewind_repeat;
			if (!repeat && k < next &&
			    (want != last_rewind || now - last_rewind_ns > REWIND_ECHO_NS)) {
				resent += next - k;
				rewinds++;
				next = k;
				last_rewind = want;
				last_rewind_ns = now;
				probes_left = PROBES;
			} else if (repeat) {
				/* The node has every frame below the one it expects (all of them
				 * when it expects one past the capture: the probe's). */
				uint64_t ahead = want > last_seq ? frames : k;
				if (ahead <= frames && ahead > next) {
					skipped += ahead - next;
					next = ahead;
				}
			}
		}
		if (next < frames) {
			uint64_t due = start + sends * gap;
			while (gap > 0 && mono_ns() < due)
				answers_wait(fd, a, due);
			sends++;
			const struct sframe *f = &fr[next++];
			if (sendto(fd, data + f->off, f->len, 0, (const struct sockaddr *)&dst,
				   sizeof(dst)) == (ssize_t)f->len)
				sent++;
			else
				send_errors++;
			answers_read(fd, a);
			drain_end = 0;
			continue;
		}
		uint64_t now = mono_ns();
		if (drain_end == 0) {
			sent_ns = now - start;
			drain_end = now + drain_ms * 1000000u;
			last_answer = now;
		}
		if (now >= drain_end || now - last_answer >= idle_ms * 1000000u)
			break;
		if (last_seq != 0 && api.key_id != 0 && probes_left > 0 &&
		    now - last_probe >= PROBE_GAP_NS) {
			static uint64_t pb[WIRE_FRAME_MAX / 8 + 1];
			uint32_t plen = probe_frame((uint8_t *)pb, &a->key, session, last_seq + 1);
			if (plen != 0 && sendto(fd, pb, plen, 0, (const struct sockaddr *)&dst,
						sizeof(dst)) == (ssize_t)plen)
				probes++;
			probes_left--;
			last_probe = now;
		}
		if (answers_wait(fd, a, now + 50000000u) > 0)
			last_answer = mono_ns();
	}
	free(fr);
	free(data);
	close(fd);
	for (uint16_t r = 0; r < WIRE_REASON_MAX; r++)
		if (a->per_reason[r] != 0)
			printf("nak   %-16s %" PRIu64 "\n", wire_reason_name(r), a->per_reason[r]);
	printf("send: frames=%" PRIu64 " sent=%" PRIu64 " send_errors=%" PRIu64 " non_udp=%" PRIu64
	       " send_ms=%" PRIu64 " rx_frames=%" PRIu64 " rx_msgs=%" PRIu64 " ACK=%" PRIu64
	       " NAK=%" PRIu64 " EXEC_REPORT=%" PRIu64 " ADMIN_REPLY=%" PRIu64
	       " decode_errors=%" PRIu64 " resent=%" PRIu64 " rewinds=%" PRIu64
	       " skipped=%" PRIu64 " probes=%" PRIu64 "\n",
	       frames, sent, send_errors, non_udp, sent_ns / 1000000, a->frames, a->msgs,
	       a->per_type[WIRE_ACK], a->per_type[WIRE_NAK], a->per_type[WIRE_EXEC_REPORT],
	       a->per_type[WIRE_ADMIN_REPLY], a->errors, resent, rewinds, skipped, probes);
	free(a);
	return rc == PCAP_ERROR || send_errors != 0 ? 1 : 0;
bad:
	free(a);
	return usage();
}

#ifndef OMSPCAP_NO_MAIN
int
main(int argc, char **argv)
{
	if (argc < 2)
		return usage();
	if (strcmp(argv[1], "gen") == 0)
		return gen(argc, argv);
	if (strcmp(argv[1], "show") == 0)
		return show(argc, argv);
	if (strcmp(argv[1], "send") == 0)
		return send_cmd(argc, argv);
	return usage();
}
#endif
