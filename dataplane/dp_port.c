/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The port, the mbuf pool, rings, routes and tx queues: everything dp allocates, all of it
 * before dp_start (STYLE.md §6: nothing allocates after start-up).
 */
#include <errno.h>
#include <string.h>

#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_malloc.h>

#include "common/check.h"
#include "dp_int.h"

static int
port_setup(struct dp *dp)
{
	const struct dp_conf *c = &dp->conf;
	struct rte_eth_conf eth_conf;
	struct rte_eth_dev_info info;
	uint16_t rx_desc = c->rx_desc, tx_desc = c->tx_desc;
	int ret;

	ret = rte_eth_dev_get_port_by_name(c->port_name, &dp->port_id);
	if (ret != 0) {
		DP_LOG(ERR, "port %s not found (is the vdev or PCI device given to the EAL?)",
		       c->port_name);
		return -ENODEV;
	}
	ret = rte_eth_dev_info_get(dp->port_id, &info);
	if (ret != 0)
		return ret;
	memset(&eth_conf, 0, sizeof(eth_conf));
	/* One rx queue per io lcore, one tx queue (the first io lcore transmits). Checksums are
	 * verified in software unless the PMD reports them good per packet (ol_flags), so no
	 * offload is required. */
	if (info.rx_offload_capa & RTE_ETH_RX_OFFLOAD_CHECKSUM)
		eth_conf.rxmode.offloads |= info.rx_offload_capa & RTE_ETH_RX_OFFLOAD_CHECKSUM;
	/* The frames' IPv4 and UDP checksums are the port's to compute when it can (the io
	 * lcore otherwise sums every byte it sends; dp_udp_encap). */
	const uint64_t tx_csum = RTE_ETH_TX_OFFLOAD_IPV4_CKSUM | RTE_ETH_TX_OFFLOAD_UDP_CKSUM;
	dp->tx_csum_offload = (info.tx_offload_capa & tx_csum) == tx_csum;
	if (dp->tx_csum_offload)
		eth_conf.txmode.offloads |= tx_csum;
	DP_LOG(INFO, "port %s: checksums: rx %s, tx %s", c->port_name,
	       (info.rx_offload_capa & RTE_ETH_RX_OFFLOAD_CHECKSUM) != 0 ? "by the port when it "
	       "says so per packet" : "in software", dp->tx_csum_offload ? "by the port" :
	       "in software");
	if (dp->io_count > info.max_rx_queues) {
		DP_LOG(ERR, "port %s: %u rx queues asked, the port has %u (net_af_packet: qpairs=N)",
		       c->port_name, dp->io_count, info.max_rx_queues);
		return -EINVAL;
	}
	if (dp->io_count > 1) {
		/* Flows spread by the port's RSS over the IP addresses and UDP ports, so a
		 * sender's frames stay on one queue, in order. A port without RSS (net_af_packet)
		 * spreads them itself (the kernel's fanout by flow hash). */
		uint64_t hf = info.flow_type_rss_offloads & (RTE_ETH_RSS_IP | RTE_ETH_RSS_UDP);
		if (hf != 0) {
			eth_conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
			eth_conf.rx_adv_conf.rss_conf.rss_hf = hf;
		}
		DP_LOG(INFO, "port %s: %u rx queues, %s", c->port_name, dp->io_count,
		       hf != 0 ? "RSS over IP and UDP" : "spread by the port (no RSS offload)");
	}
	if (dp->io_count > info.max_tx_queues) {
		DP_LOG(ERR, "port %s: %u tx queues asked (one per io lcore), the port has %u",
		       c->port_name, dp->io_count, info.max_tx_queues);
		return -EINVAL;
	}
	ret = rte_eth_dev_configure(dp->port_id, dp->io_count, dp->io_count, &eth_conf);
	if (ret != 0) {
		DP_LOG(ERR, "port %s: configure failed: %s", c->port_name, strerror(-ret));
		return ret;
	}
	dp->port_configured = true;
	ret = rte_eth_dev_adjust_nb_rx_tx_desc(dp->port_id, &rx_desc, &tx_desc);
	if (ret != 0)
		return ret;
	for (uint16_t q = 0; q < dp->io_count; q++) {
		ret = rte_eth_rx_queue_setup(dp->port_id, q, rx_desc,
					     rte_eth_dev_socket_id(dp->port_id), NULL, dp->pool);
		if (ret != 0) {
			DP_LOG(ERR, "port %s: rx queue %u: %s", c->port_name, q, strerror(-ret));
			return ret;
		}
	}
	/* One tx queue per io lcore: each sends what it drains (dp_io.c). */
	for (uint16_t q = 0; q < dp->io_count; q++) {
		ret = rte_eth_tx_queue_setup(dp->port_id, q, tx_desc,
					     rte_eth_dev_socket_id(dp->port_id), NULL);
		if (ret != 0) {
			DP_LOG(ERR, "port %s: tx queue %u: %s", c->port_name, q, strerror(-ret));
			return ret;
		}
	}
	/* Not every vdev can change its MTU; the dataplane enforces c->mtu on tx anyway. */
	ret = rte_eth_dev_set_mtu(dp->port_id, c->mtu);
	if (ret != 0 && ret != -ENOTSUP)
		DP_LOG(WARNING, "port %s: set mtu %u: %s", c->port_name, c->mtu, strerror(-ret));
	if (c->has_mac) {
		dp->host.mac = c->mac;
		ret = rte_eth_dev_default_mac_addr_set(dp->port_id, &dp->host.mac);
		if (ret != 0)
			DP_LOG(WARNING, "port %s: cannot set MAC (%s); enabling promiscuous mode",
			       c->port_name, strerror(-ret));
		if (ret != 0 && rte_eth_promiscuous_enable(dp->port_id) != 0)
			DP_LOG(WARNING, "port %s: promiscuous mode refused", c->port_name);
	} else {
		ret = rte_eth_macaddr_get(dp->port_id, &dp->host.mac);
		if (ret != 0)
			return ret;
	}
	if (c->promiscuous && rte_eth_promiscuous_enable(dp->port_id) != 0)
		DP_LOG(WARNING, "port %s: promiscuous mode refused", c->port_name);
	return 0;
}

int
dp_create(struct dp **out, const struct dp_conf *conf)
{
	struct dp *dp;
	int ret;

	if (conf->burst == 0 || conf->burst > DP_BURST_MAX || conf->peer_count > DP_PEERS_MAX ||
	    conf->mtu < 576 || conf->ip_be == 0 || conf->prefix_len > 32 ||
	    conf->rx_queues > DP_IO_MAX)
		return -EINVAL;
	dp = rte_zmalloc("dp", sizeof(*dp), RTE_CACHE_LINE_SIZE);
	if (dp == NULL)
		return -ENOMEM;
	dp->conf = *conf;
	dp->host.ip_be = conf->ip_be;
	dp->host.mask_be = conf->prefix_len == 0 ? 0
			   : rte_cpu_to_be_32(~UINT32_C(0) << (32 - conf->prefix_len));
	dp->host.udp_port_be = rte_cpu_to_be_16(conf->udp_port);
	dp->peer_key = (conf->peer_key.k0 | conf->peer_key.k1) ? &dp->conf.peer_key : NULL;
	dp->client_key = (conf->client_key.k0 | conf->client_key.k1) ? &dp->conf.client_key : NULL;
	dp->io_count = conf->rx_queues == 0 ? 1 : conf->rx_queues;
	for (uint16_t k = 0; k < dp->io_count; k++) {
		dp->io[k].dp = dp;
		dp->io[k].k = k;
	}
	dp_arp_table_init(&dp->arp, (uint64_t)conf->arp_timeout_ms * 1000000u);
	for (uint32_t i = 0; i < conf->peer_count; i++) {
		if (conf->peers[i].has_mac &&
		    dp_arp_static_add(&dp->arp, conf->peers[i].ip_be, &conf->peers[i].mac) != 0) {
			ret = -ENOSPC;
			goto fail_pool;
		}
	}
	if (dp->io_count > 1) {
		dp->slow = rte_ring_create("dp_slow", 1024, rte_socket_id(), RING_F_SC_DEQ);
		dp->tx_slow = rte_ring_create("dp_tx_slow", 1024, rte_socket_id(), RING_F_SC_DEQ);
		if (dp->slow == NULL || dp->tx_slow == NULL) {
			ret = -ENOMEM;
			goto fail_pool;
		}
	}

	dp->pool = rte_pktmbuf_pool_create("dp_pool", conf->mbufs, conf->mbuf_cache,
					   RTE_ALIGN(sizeof(struct dp_meta), RTE_MBUF_PRIV_ALIGN),
					   conf->mbuf_data_room, rte_socket_id());
	if (dp->pool == NULL) {
		DP_LOG(ERR, "mbuf pool (%u x %u bytes): %s", conf->mbufs, conf->mbuf_data_room,
		       rte_strerror(rte_errno));
		ret = -ENOMEM;
		goto fail_pool;
	}
	ret = port_setup(dp);
	if (ret != 0)
		goto fail_port;
	*out = dp;
	return 0;

fail_port:
	if (dp->port_configured)
		rte_eth_dev_close(dp->port_id);
	rte_mempool_free(dp->pool);
fail_pool:
	rte_ring_free(dp->slow);
	rte_ring_free(dp->tx_slow);
	rte_free(dp);
	return ret;
}

int
dp_start(struct dp *dp)
{
	int ret = rte_eth_dev_start(dp->port_id);
	if (ret != 0) {
		DP_LOG(ERR, "port %s: start: %s", dp->conf.port_name, strerror(-ret));
		return ret;
	}
	dp->port_started = true;
	char mac[RTE_ETHER_ADDR_FMT_SIZE];
	rte_ether_format_addr(mac, sizeof(mac), &dp->host.mac);
	/* The wire version, so an operator sees which minor a node runs (docs/upgrade.md). */
	DP_LOG(INFO, "port %s (id %u) started, mac %s, udp port %u, wire %u.%u",
	       dp->conf.port_name, dp->port_id, mac, dp->conf.udp_port, WIRE_VERSION_MAJOR,
	       WIRE_VERSION_MINOR);
	return 0;
}

void
dp_stop(struct dp *dp)
{
	if (dp->port_started) {
		int ret = rte_eth_dev_stop(dp->port_id);
		if (ret != 0)
			DP_LOG(WARNING, "port %s: stop: %s", dp->conf.port_name, strerror(-ret));
		dp->port_started = false;
	}
	if (dp->port_configured) {
		rte_eth_dev_close(dp->port_id);
		dp->port_configured = false;
	}
}

static void
ring_drain_free(struct rte_ring *r)
{
	void *objs[DP_BURST_MAX];
	unsigned n;

	while ((n = rte_ring_dequeue_burst(r, objs, RTE_DIM(objs), NULL)) > 0)
		rte_pktmbuf_free_bulk((struct rte_mbuf **)objs, n);
	rte_ring_free(r);
}

void
dp_destroy(struct dp *dp)
{
	if (dp == NULL)
		return;
	dp_stop(dp);
	for (uint16_t k = 0; k < dp->io_count; k++) {
		rte_pktmbuf_free_bulk(dp->io[k].tx, dp->io[k].tx_count);
		dp->io[k].tx_count = 0;
	}
	if (dp->slow != NULL)
		ring_drain_free(dp->slow);
	if (dp->tx_slow != NULL)
		ring_drain_free(dp->tx_slow);
	for (uint32_t i = 0; i < dp->ring_count; i++)
		ring_drain_free(dp->rings[i]);
	for (uint32_t i = 0; i < dp->txq_count; i++)
		ring_drain_free(dp->txq[i].ring);
	rte_mempool_free(dp->pool);
	rte_free(dp);
}

void
dp_mac(const struct dp *dp, struct rte_ether_addr *mac)
{
	rte_ether_addr_copy(&dp->host.mac, mac);
}

uint32_t
dp_node_id(const struct dp *dp)
{
	return dp->conf.node_id;
}

struct rte_ring *
dp_ring_create(struct dp *dp, const char *name, uint32_t size, struct dp_bell *bell)
{
	if (dp->ring_count >= DP_RINGS_MAX || dp->port_started)
		return NULL;
	/* Several io lcores route into the same rings: multi-producer then. */
	struct rte_ring *r = rte_ring_create(name, size, rte_socket_id(),
					     dp->io_count > 1 ? RING_F_SC_DEQ
							      : RING_F_SP_ENQ | RING_F_SC_DEQ);
	if (r == NULL) {
		DP_LOG(ERR, "ring %s (%u): %s", name, size, rte_strerror(rte_errno));
		return NULL;
	}
	dp->ring_bell[dp->ring_count] = bell;
	dp->rings[dp->ring_count++] = r;
	return r;
}

static struct dp_bell *
ring_bell(const struct dp *dp, const struct rte_ring *ring)
{
	for (uint32_t i = 0; i < dp->ring_count; i++)
		if (dp->rings[i] == ring)
			return dp->ring_bell[i];
	return NULL;
}

int
dp_route_add(struct dp *dp, enum dp_class cls, uint16_t shard, struct rte_ring *ring)
{
	if (cls <= DP_CLASS_NONE || cls >= DP_CLASS_COUNT || ring == NULL || dp->port_started)
		return -EINVAL;
	struct rte_ring **slot;
	struct dp_bell **bell;
	if (shard == DP_SHARD_ANY) {
		slot = &dp->route_any[cls];
		bell = &dp->route_any_bell[cls];
	} else if (shard < DP_SHARDS_MAX) {
		slot = &dp->route[cls][shard];
		bell = &dp->route_bell[cls][shard];
	} else {
		return -EINVAL;
	}
	if (*slot != NULL)
		return -EEXIST;
	*slot = ring;
	*bell = ring_bell(dp, ring);
	return 0;
}

struct dp_txq *
dp_txq_create(struct dp *dp, const char *name, uint32_t size)
{
	/* Round robin over the io lcores: a producer's frames leave through one of them, in
	 * order. */
	return dp_txq_create_on(dp, name, size, (uint16_t)(dp->txq_count % dp->io_count));
}

struct dp_txq *
dp_txq_create_on(struct dp *dp, const char *name, uint32_t size, uint16_t k)
{
	if (dp->txq_count >= DP_TXQ_MAX || dp->port_started || k >= dp->io_count)
		return NULL;
	struct dp_txq *q = &dp->txq[dp->txq_count];
	char ring_name[RTE_RING_NAMESIZE];
	snprintf(ring_name, sizeof(ring_name), "txq_%s", name);
	q->ring = rte_ring_create(ring_name, size, rte_socket_id(), RING_F_SP_ENQ | RING_F_SC_DEQ);
	if (q->ring == NULL) {
		DP_LOG(ERR, "tx ring %s (%u): %s", ring_name, size, rte_strerror(rte_errno));
		return NULL;
	}
	q->dp = dp;
	q->full = 0;
	q->io_k = k;
	snprintf(q->name, sizeof(q->name), "%s", name);
	dp->txq_count++;
	return q;
}

int
dp_session_key_set(struct dp *dp, dp_session_key_fn *fn, void *arg)
{
	if (dp->port_started)
		return -EBUSY; /* the io lcores read it without synchronisation */
	dp->sess_key = fn;
	dp->sess_key_arg = arg;
	return 0;
}

int
dp_io_bell_set(struct dp *dp, uint16_t k, struct dp_bell *bell)
{
	if (dp->port_started)
		return -EBUSY; /* producers read it without synchronisation */
	if (k >= dp->io_count)
		return -EINVAL;
	dp->io_bell[k] = bell;
	return 0;
}

uint32_t
dp_txq_count(const struct dp *dp)
{
	return dp->txq_count;
}

struct rte_ring *
dp_txq_ring(const struct dp *dp, uint32_t i, uint16_t *io_k)
{
	CHECK(i < dp->txq_count);
	*io_k = dp->txq[i].io_k;
	return dp->txq[i].ring;
}
