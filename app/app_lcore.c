/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Agents and the role table. The duty cycle (STYLE.md §3): read the clock once, do bounded
 * work, record the cycle, idle according to the work done.
 */
#include <inttypes.h>
#include <stdio.h>
#include <sys/prctl.h>

#include <rte_lcore.h>
#include <rte_ring.h>

#include "app.h"

int
app_agent_main(void *arg)
{
	struct app_agent *a = arg;

	/* Sleeping lcores on a shared box: ask for microsecond timer precision instead of the
	 * default 50 µs slack, so the back-off's short sleeps are short. */
	if (a->idle.policy.mode == DP_IDLE_SLEEP)
		prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
	APP_LOG(INFO, "lcore %u (cpu %u): %s, idle %s%s", a->lcore_id, a->cpu, a->name,
		dp_idle_mode_name(a->idle.policy.mode), a->rcu_reader ? ", RCU reader" : "");
	if (a->rcu_reader)
		app_rcu_reader_begin();
	while (!__atomic_load_n(&a->stop, __ATOMIC_ACQUIRE)) {
		dp_idle_arm(&a->idle); /* before the cycle looks at its inputs */
		uint64_t now_ns = dp_clock_ns(); /* once per cycle */
		uint32_t work = a->do_work(a->state, now_ns);
		dp_duty_record(&a->duty, now_ns, work ? dp_clock_ns() : now_ns, work);
		if (!a->rcu_reader) {
			dp_idle_run(&a->idle, work);
			continue;
		}
		/* Nothing read in the cycle is held past it: a grace period may end. Idle, a
		 * sleeping lcore goes offline, so it holds no grace period up meanwhile (one that
		 * busy-polls announces the next cycle instead: no barriers per empty poll). */
		app_rcu_quiescent();
		if (work == 0 && a->idle.policy.mode == DP_IDLE_SLEEP) {
			app_rcu_offline();
			dp_idle_run(&a->idle, work);
			app_rcu_online();
		} else {
			dp_idle_run(&a->idle, work);
		}
	}
	if (a->rcu_reader)
		app_rcu_reader_end();
	return 0;
}

/* ---------------------------------------------------------------------------------------
 * io: the dataplane's own work.
 * ------------------------------------------------------------------------------------- */

/* The io lcores' RX gate (docs/dataplane.md, [port] rx_start and rx_hold_frames). Runs on
 * every io lcore once per cycle: reads what the shard lcores publish, never blocks. */
static bool
io_rx_gate(void *arg)
{
	struct app *app = arg;
	const struct app_config *cfg = &app->cfg;

	if (cfg->rx_start_leader && !__atomic_load_n(&app->rx_open, __ATOMIC_RELAXED)) {
		for (uint32_t i = 0; i < cfg->shard_count; i++)
			if (cfg->shards[i].service != APP_SERVICE_ECHO && !app_shard_ready(app, i))
				return false;
		/* Several io lcores may see it open at once: one says so. */
		if (__atomic_exchange_n(&app->rx_open, true, __ATOMIC_RELAXED))
			return true;
		APP_LOG(INFO, "rx open: every hosted shard has a leader and is configured "
			"(%" PRIu64 " ms after start)", (dp_clock_ns() - app->start_ns) / 1000000);
	}
	if (cfg->rx_hold_frames > 0) {
		for (uint32_t i = 0; i < cfg->shard_count; i++) {
			uint32_t queued = cfg->shards[i].service == APP_SERVICE_ECHO
						  ? rte_ring_count(app->echoes[i].rx)
						  : app_shard_queued(app, i);
			if (queued >= cfg->rx_hold_frames)
				return false;
		}
		/* The gateway lcore's rings too ([gateway]: it holds its intake while a local
		 * OMS shard has a backlog, app_gateway.c). */
		if (cfg->gateway.enabled && app_shard_queued(app, cfg->shard_count) >= cfg->rx_hold_frames)
			return false;
	}
	return true;
}

static int
io_init(struct app *app, struct app_agent *agent, uint32_t index)
{
	agent->do_work = dp_io_do_work;
	agent->state = dp_io_get(app->dp, (uint16_t)index);
	if (app->cfg.rx_start_leader || app->cfg.rx_hold_frames > 0)
		dp_rx_gate_set(app->dp, io_rx_gate, app);
	return 0;
}

/* ---------------------------------------------------------------------------------------
 * echo shard (diagnostic): count every frame routed to the shard and echo it, unchanged, to
 * its sender. oms and me shards run the shard lcore instead (app_shard_int.h).
 * ------------------------------------------------------------------------------------- */

static uint32_t
echo_do_work(void *arg, uint64_t now_ns)
{
	struct app_echo *s = arg;
	struct rte_mbuf *ms[APP_SHARD_DRAIN_MAX];
	uint64_t msgs = 0;
	unsigned n;

	(void)now_ns;
	n = rte_ring_sc_dequeue_burst(s->rx, (void **)ms, APP_SHARD_DRAIN_MAX, NULL);
	if (n == 0)
		return 0;
	for (unsigned i = 0; i < n; i++) {
		struct dp_meta *meta = dp_meta(ms[i]);
		struct dp_addr dst = meta->src;
		msgs += meta->msg_count;
		dp_tx_prepare(ms[i], ms[i]->data_len, &dst);
	}
	uint32_t queued = dp_tx_send_burst(s->txq, ms, n);
	if (queued < n)
		rte_pktmbuf_free_bulk(&ms[queued], n - queued);
	__atomic_store_n(&s->frames, s->frames + n, __ATOMIC_RELAXED);
	__atomic_store_n(&s->msgs, s->msgs + msgs, __ATOMIC_RELAXED);
	__atomic_store_n(&s->echoed, s->echoed + queued, __ATOMIC_RELAXED);
	__atomic_store_n(&s->echo_dropped, s->echo_dropped + (n - queued), __ATOMIC_RELAXED);
	return n;
}

int
app_echo_init(struct app *app, struct app_agent *agent, uint32_t index)
{
	struct app_echo *s = &app->echoes[index];
	struct app_shard_wires w;

	/* The wiring made its rings and routes: an echo shard also takes bridge traffic for
	 * its id, and the first one client order entry, so every valid frame class comes back. */
	app_wire_shard(app, index, &w);
	s->conf = &app->cfg.shards[index];
	s->rx = w.rx;
	s->txq = w.txq;
	agent->do_work = echo_do_work;
	agent->state = s;
	return 0;
}

static int
shard_init(struct app *app, struct app_agent *agent, uint32_t index)
{
	if (app->cfg.shards[index].service == APP_SERVICE_ECHO)
		return app_echo_init(app, agent, index);
	return app_shard_init(app, agent, index);
}

static void
shard_fini(struct app *app, struct app_agent *agent)
{
	app_shard_fini(app, agent);
}

const struct app_role_ops app_roles[APP_ROLE_COUNT] = {
	[APP_ROLE_IO] = { .name = "io", .init = io_init },
	[APP_ROLE_SHARD] = { .name = "shard", .init = shard_init, .fini = shard_fini },
	[APP_ROLE_BRIDGE] = { .name = "bridge", .init = app_seal_init, .fini = app_seal_fini },
	[APP_ROLE_PERSISTER] = { .name = "persister", .init = app_persist_init,
				 .fini = app_persist_fini },
	[APP_ROLE_GATEWAY] = { .name = "gateway", .init = app_gateway_init,
			       .fini = app_gateway_fini },
};

/* ---------------------------------------------------------------------------------------
 * Stats.
 * ------------------------------------------------------------------------------------- */

#define LOAD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)

void
app_stats_write(const struct app *app, FILE *out)
{
	fprintf(out, "node.id %u\n", app->cfg.dp.node_id);
	fprintf(out, "uptime_ms %" PRIu64 "\n", (dp_clock_ns() - app->start_ns) / 1000000);
	if (app->dp != NULL)
		dp_stats_write(app->dp, out);
	for (uint32_t i = 0; i < app->agent_count; i++) {
		const struct app_agent *a = &app->agents[i];
		fprintf(out, "agent.%s.cycles %" PRIu64 "\n", a->name, LOAD(a->duty.cycles));
		fprintf(out, "agent.%s.work_cycles %" PRIu64 "\n", a->name,
			LOAD(a->duty.work_cycles));
		fprintf(out, "agent.%s.work_items %" PRIu64 "\n", a->name, LOAD(a->duty.work_items));
		fprintf(out, "agent.%s.max_cycle_ns %" PRIu64 "\n", a->name, LOAD(a->duty.max_ns));
		fprintf(out, "agent.%s.busy_ns %" PRIu64 "\n", a->name, LOAD(a->duty.busy_ns));
		fprintf(out, "agent.%s.over_threshold %" PRIu64 "\n", a->name,
			LOAD(a->duty.over_count));
		fprintf(out, "agent.%s.sleeps %" PRIu64 "\n", a->name, LOAD(a->idle.sleeps));
		fprintf(out, "agent.%s.sleeps_rung %" PRIu64 "\n", a->name, LOAD(a->idle.rung));
		fprintf(out, "agent.%s.bell_wakes %" PRIu64 "\n", a->name, LOAD(a->bell.wakes));
	}
	app_persist_stats_write(app, out);
	app_seal_stats_write(app, out);
	app_gateway_stats_write(app, out);
	for (uint32_t i = 0; i < app->cfg.shard_count; i++) {
		const struct app_echo *s = &app->echoes[i];
		unsigned id = app->cfg.shards[i].id;
		if (app->cfg.shards[i].service != APP_SERVICE_ECHO) {
			app_shard_stats_write(app, i, out);
			continue;
		}
		fprintf(out, "shard.%u.frames %" PRIu64 "\n", id, LOAD(s->frames));
		fprintf(out, "shard.%u.msgs %" PRIu64 "\n", id, LOAD(s->msgs));
		fprintf(out, "shard.%u.echoed %" PRIu64 "\n", id, LOAD(s->echoed));
		fprintf(out, "shard.%u.echo_dropped %" PRIu64 "\n", id, LOAD(s->echo_dropped));
	}
}
