/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Member lifecycle and the host's entry points: memory, configuration, the message
 * dispatcher, the tick, durability reports, leadership transfer and the getters. Everything
 * else is called from here, never the other way round.
 */
#include "cns_int.h"

static const char *const counter_names[CNS_C_COUNT] = {
#define CNS_COUNTER_NAME(name, text) [CNS_C_##name] = #name,
	CNS_COUNTERS(CNS_COUNTER_NAME)
#undef CNS_COUNTER_NAME
};

const char *
cns_counter_name(enum cns_counter counter)
{
	return (unsigned)counter < CNS_C_COUNT ? counter_names[counter] : "?";
}

static size_t
align64(size_t n)
{
	return (n + 63u) & ~(size_t)63u;
}

size_t
cns_footprint(const struct cns_limits *limits)
{
	CHECK(limits != NULL);
	/* Snapshot buffers: the configuration prefix, then the service's bytes. */
	size_t snap = align64(limits->snapshot_bytes_max + sizeof(struct cns_snap_prefix));
	size_t bufs = (limits->flags & CNS_LIM_SNAP_ASYNC) ? 3 : 2;
	return align64(sizeof(struct cns)) + align64(CNS_ENTRY_DATA_MAX) + bufs * snap +
	       align64(CNS_SEND_BUF_SIZE);
}

void
cns_config_default(struct cns_config *cfg, uint16_t shard, uint32_t self, uint32_t member_count,
		   const uint32_t *members)
{
	CHECK(cfg != NULL);
	CHECK(member_count <= CNS_MEMBERS_MAX);
	memset(cfg, 0, sizeof(*cfg));
	cfg->shard = shard;
	cfg->self = self;
	cfg->member_count = member_count;
	for (uint32_t i = 0; i < member_count; i++)
		cfg->members[i] = members[i];
	cfg->durability = CNS_DURABLE_MEMORY;
	cfg->election_timeout_min_ns = 150000000;
	cfg->election_timeout_max_ns = 300000000;
	cfg->heartbeat_ns = 25000000;
	cfg->tick_entry_ns = 50000000;
	cfg->batch_bytes_max = CNS_ENTRY_DATA_MAX;
	cfg->append_entries_max = 64;
	cfg->inflight_max = 8;
	cfg->uncommitted_max = 4096;
	cfg->log_keep_entries = 64;
	cfg->snapshot_chunk_bytes = CNS_SNAPSHOT_CHUNK_MAX;
	cfg->snapshot_inflight_max = 4;
	cfg->flags = 0;
	cfg->seed = self;
}

static bool
config_ok(const struct cns_config *cfg)
{
	if (cfg->self == CNS_NODE_NONE || (cfg->flags & ~CNS_CFG_JOIN) != 0)
		return false;
	if (cfg->member_count > CNS_MEMBERS_MAX)
		return false;
	/* The bootstrap set: an odd number of voters with self among them; a joining node
	 * may name the members it knows of (itself not among them) or none. */
	bool join = (cfg->flags & CNS_CFG_JOIN) != 0;
	if (!join && cfg->member_count != 1 && cfg->member_count != 3 && cfg->member_count != 5)
		return false;
	bool self_found = false;
	for (uint32_t i = 0; i < cfg->member_count; i++) {
		if (cfg->members[i] == CNS_NODE_NONE)
			return false;
		for (uint32_t j = 0; j < i; j++)
			if (cfg->members[j] == cfg->members[i])
				return false;
		self_found |= cfg->members[i] == cfg->self;
	}
	if (self_found == join)
		return false;
	if (cfg->durability != CNS_DURABLE_MEMORY && cfg->durability != CNS_DURABLE_DISK)
		return false;
	if (cfg->election_timeout_min_ns == 0 ||
	    cfg->election_timeout_max_ns < cfg->election_timeout_min_ns)
		return false;
	/* Heartbeats must arrive well inside the shortest election timeout (Raft §5.6). */
	if (cfg->heartbeat_ns == 0 || cfg->heartbeat_ns * 2 > cfg->election_timeout_min_ns)
		return false;
	if (cfg->batch_bytes_max < 8 || cfg->batch_bytes_max > CNS_ENTRY_DATA_MAX ||
	    cfg->batch_bytes_max % 8 != 0)
		return false;
	if (cfg->append_entries_max == 0 || cfg->inflight_max == 0 || cfg->uncommitted_max == 0)
		return false;
	/* A chunk must fit one message tail; the host sizes it to the MTU. */
	if (cfg->snapshot_chunk_bytes < 8 || cfg->snapshot_chunk_bytes > CNS_SNAPSHOT_CHUNK_MAX ||
	    cfg->snapshot_chunk_bytes % 8 != 0)
		return false;
	if (cfg->snapshot_inflight_max == 0 ||
	    cfg->snapshot_inflight_max > CNS_SNAPSHOT_INFLIGHT_MAX)
		return false;
	return true;
}

int
cns_init(struct cns **out, void *memory, const struct cns_limits *limits,
	 const struct cns_config *config, const struct cns_env *env, const struct cns_boot *boot)
{
	CHECK(out != NULL);
	CHECK(memory != NULL);
	CHECK(limits != NULL);
	CHECK(config != NULL);
	CHECK(env != NULL);
	CHECK(boot != NULL);
	CHECK(((uintptr_t)memory & 63u) == 0);
	if (!config_ok(config))
		return -EINVAL;
	if (env->log_ops == NULL || env->svc_ops == NULL || env->host.send == NULL)
		return -EINVAL;
	if (limits->snapshot_bytes_max == 0 || (limits->flags & ~CNS_LIM_SNAP_ASYNC) != 0)
		return -EINVAL;

	memset(memory, 0, sizeof(struct cns));
	struct cns *c = memory;
	uint8_t *p = (uint8_t *)memory + align64(sizeof(struct cns));
	c->batch = p;
	p += align64(CNS_ENTRY_DATA_MAX);
	size_t snap_bytes = align64(limits->snapshot_bytes_max + sizeof(struct cns_snap_prefix));
	c->snap_buf = p;
	p += snap_bytes;
	c->recv_buf = p;
	p += snap_bytes;
	if (limits->flags & CNS_LIM_SNAP_ASYNC) {
		c->take_buf = p;
		p += snap_bytes;
	}
	c->send_buf = p;
	p += align64(CNS_SEND_BUF_SIZE);
	CHECK((size_t)(p - (uint8_t *)memory) == cns_footprint(limits));

	c->cfg = *config;
	c->lim = *limits;
	c->env = *env;
	prng_seed(&c->prng, config->seed ^ ((uint64_t)config->self << 32));
	c->self_slot = CNS_SLOT_NONE;
	c->term_first_index = UINT64_MAX;
	c->term = boot->term;
	c->vote = boot->vote;
	c->role = CNS_FOLLOWER;
	c->leader = CNS_NODE_NONE;

	/* The log store holds what survived; the boot snapshot (if any) is its base. */
	const struct cns_log_ops *ops = env->log_ops;
	uint64_t first = ops->first_index(env->log);
	struct cns_members boot_mem;
	cns_members_bootstrap(c, &boot_mem);
	cns_members_set(c, &boot_mem, 0);
	c->mem_applied = boot_mem;
	if (boot->snapshot != NULL) {
		const struct cns_snapshot_meta *s = boot->snapshot;
		if (s->len > limits->snapshot_bytes_max + sizeof(struct cns_snap_prefix) ||
		    s->index == 0)
			return -EINVAL;
		/* A gap between the snapshot and the log is not a log. */
		if (first > s->index + 1)
			return -EINVAL;
		int rc = cns_snapshot_restore(c, s, boot->snapshot_data);
		if (rc != 0)
			return rc;
	} else {
		if (first != 1)
			return -EINVAL;
		c->base_index = 0;
		c->base_term = 0;
		c->base_time_ns = 0;
		cns_log_refresh(c);
	}
	/* The configuration in effect is the latest one in the log after the snapshot's. */
	for (uint64_t i = c->base_index + 1; i <= c->last_index; i++) {
		const struct wire_entry_hdr *e = ops->entry(env->log, i);
		if (e->kind != CNS_ENTRY_CONFIG)
			continue;
		struct cns_members m;
		if (!cns_members_decode(e + 1, e->data_len, &m))
			return -EINVAL;
		cns_members_appended(c, i, e, e + 1);
	}
	/* What the store holds after a restart is durable by contract. */
	c->durable = c->last_index;
	c->leader_match = c->base_index;
	c->election_deadline_ns = 0; /* set by the first tick */
	*out = c;
	CHECK(c->commit <= c->last_index);
	return 0;
}

static uint64_t
msg_term(const struct wire_msg_hdr *msg)
{
	/* Every Raft message carries the term right after the header. */
	uint64_t term;
	memcpy(&term, msg + 1, sizeof(term));
	return term;
}

int
cns_step(struct cns *c, uint64_t now_ns, const struct wire_msg_hdr *msg)
{
	CHECK(c != NULL);
	CHECK(msg != NULL);
	DCHECK(((uintptr_t)msg & 7u) == 0);
	if (now_ns > c->now_ns)
		c->now_ns = now_ns;
	if (msg->shard != c->cfg.shard)
		return -EINVAL;
	if (msg->type < WIRE_REQUEST_VOTE || msg->type > WIRE_TIMEOUT_NOW)
		return -EINVAL;
	if (msg->length < wire_type_size(msg->type))
		return -EINVAL;
	uint32_t from;
	switch (msg->type) {
	case WIRE_REQUEST_VOTE:
		from = ((const struct wire_request_vote *)msg)->candidate;
		break;
	case WIRE_VOTE_REPLY:
		from = ((const struct wire_vote_reply *)msg)->voter;
		break;
	case WIRE_APPEND_ENTRIES: {
		const struct wire_append_entries *m = (const void *)msg;
		if ((uint32_t)msg->length < sizeof(*m) + m->tail_len)
			return -EINVAL;
		from = m->leader;
		break;
	}
	case WIRE_APPEND_REPLY:
		from = ((const struct wire_append_reply *)msg)->follower;
		break;
	case WIRE_INSTALL_SNAPSHOT: {
		const struct wire_install_snapshot *m = (const void *)msg;
		if ((uint32_t)msg->length < sizeof(*m) + m->tail_len)
			return -EINVAL;
		from = m->leader;
		break;
	}
	case WIRE_SNAPSHOT_REPLY:
		from = ((const struct wire_snapshot_reply *)msg)->follower;
		break;
	case WIRE_TIMEOUT_NOW:
		from = ((const struct wire_timeout_now *)msg)->leader;
		break;
	default:
		return -EINVAL;
	}
	/* Anyone but ourselves: a leader may be outside our configuration (ours is behind, or
	 * we are joining) and a removed member may still ask for votes. Replies from
	 * non-members are dropped by their handlers. */
	if (from == CNS_NODE_NONE || from == c->cfg.self) {
		CNS_COUNT(c, STALE_MSGS);
		return -EINVAL;
	}

	uint64_t term = msg_term(msg);
	switch (msg->type) {
	case WIRE_REQUEST_VOTE:
		/* Term handling is special: a pre-vote never bumps terms, and a lease holder
		 * ignores disruptive candidates (cns_elect.c). */
		cns_on_request_vote(c, (const void *)msg);
		break;
	case WIRE_VOTE_REPLY:
		cns_on_vote_reply(c, (const void *)msg);
		break;
	default:
		/* Raft §5.1: a newer term makes us a follower; stale terms are answered (AE/IS,
		 * so an old leader learns) or dropped. */
		if (term > c->term) {
			uint32_t leader = CNS_NODE_NONE;
			if (msg->type == WIRE_APPEND_ENTRIES || msg->type == WIRE_INSTALL_SNAPSHOT)
				leader = from;
			cns_become_follower(c, term, leader);
		}
		switch (msg->type) {
		case WIRE_APPEND_ENTRIES:
			cns_on_append_entries(c, (const void *)msg);
			break;
		case WIRE_APPEND_REPLY:
			cns_on_append_reply(c, (const void *)msg);
			break;
		case WIRE_INSTALL_SNAPSHOT:
			cns_on_install_snapshot(c, (const void *)msg);
			break;
		case WIRE_SNAPSHOT_REPLY:
			cns_on_snapshot_reply(c, (const void *)msg);
			break;
		case WIRE_TIMEOUT_NOW:
			cns_on_timeout_now(c, (const void *)msg);
			break;
		default:
			break;
		}
	}
	CHECK(c->commit <= c->last_index);
	return 0;
}

void
cns_tick(struct cns *c, uint64_t now_ns)
{
	CHECK(c != NULL);
	if (now_ns > c->now_ns)
		c->now_ns = now_ns;
	if (c->election_deadline_ns == 0)
		cns_reset_election_timer(c);
	if (c->role == CNS_LEADER) {
		cns_leader_tick(c);
	} else if (c->now_ns >= c->election_deadline_ns) {
		/* Raft §5.2 with pre-vote (thesis §9.6): find out whether we could win before
		 * bumping the term, so a partitioned node cannot disrupt a healthy majority. */
		cns_start_pre_vote(c);
	}
	CHECK(c->commit <= c->last_index);
}

void
cns_flush(struct cns *c, uint64_t now_ns)
{
	CHECK(c != NULL);
	if (now_ns > c->now_ns)
		c->now_ns = now_ns;
	if (c->role != CNS_LEADER)
		return;
	cns_seal_batch(c);
	cns_replicate_all(c);
}

void
cns_durable(struct cns *c, uint64_t index, uint64_t term)
{
	CHECK(c != NULL);
	/* Writes complete in order, so (index, term) still in our log means the whole prefix
	 * through index is durable; by Log Matching the prefix is the one written. */
	if (index <= c->durable)
		return;
	if (index > c->last_index || cns_log_term(c, index) != term) {
		CNS_COUNT(c, DURABLE_REPORTS_STALE);
		return;
	}
	c->durable = index;
	if (c->role == CNS_LEADER)
		cns_leader_commit(c);
	else if (c->cfg.durability == CNS_DURABLE_DISK)
		cns_follower_ack(c);
	CHECK(c->durable <= c->last_index);
}

int
cns_transfer(struct cns *c, uint64_t now_ns, uint32_t target)
{
	CHECK(c != NULL);
	if (now_ns > c->now_ns)
		c->now_ns = now_ns;
	if (c->role != CNS_LEADER)
		return -EPERM;
	int slot = cns_slot_of(c, target);
	if (slot < 0 || target == c->cfg.self || !cns_slot_votes(c, (uint32_t)slot))
		return -EINVAL;
	/* Thesis §3.10: stop taking proposals, bring the target up to date, then tell it to
	 * time out now. Abandoned after an election timeout. */
	cns_seal_batch(c);
	c->transfer_target = target;
	c->transfer_sent_ns = 0;
	c->transfer_deadline_ns = c->now_ns + c->cfg.election_timeout_max_ns;
	CNS_COUNT(c, TRANSFERS);
	cns_replicate_all(c);
	cns_leader_tick(c);
	return 0;
}

enum cns_role
cns_role(const struct cns *c)
{
	return (enum cns_role)c->role;
}

uint64_t
cns_term(const struct cns *c)
{
	return c->term;
}

uint32_t
cns_leader(const struct cns *c)
{
	return c->leader;
}

uint32_t
cns_self(const struct cns *c)
{
	return c->cfg.self;
}

uint64_t
cns_commit_index(const struct cns *c)
{
	return c->commit;
}

uint64_t
cns_applied_index(const struct cns *c)
{
	return c->applied;
}

uint64_t
cns_applied_time(const struct cns *c)
{
	return c->applied_time_ns;
}

uint64_t
cns_last_index(const struct cns *c)
{
	return c->last_index;
}

uint64_t
cns_last_term(const struct cns *c)
{
	return c->last_term;
}

uint64_t
cns_durable_index(const struct cns *c)
{
	return c->durable;
}

uint64_t
cns_match_index(const struct cns *c, uint32_t node)
{
	CHECK(c != NULL);
	int slot = cns_slot_of(c, node);
	if (c->role != CNS_LEADER || slot < 0)
		return UINT64_MAX;
	/* The same value cns_replicate.c counts towards commit for each member. */
	if ((uint32_t)slot == c->self_slot)
		return c->cfg.durability == CNS_DURABLE_DISK ? c->durable : c->last_index;
	uint64_t match = c->peers[slot].match_index;
	CHECK(match <= c->last_index);
	return match;
}

uint64_t
cns_term_at(const struct cns *c, uint64_t index)
{
	return cns_log_term(c, index);
}

const struct cns_snapshot_meta *
cns_snapshot(const struct cns *c, const void **data)
{
	if (data != NULL)
		*data = c->snap_buf;
	return &c->snap;
}

uint64_t
cns_counter(const struct cns *c, enum cns_counter counter)
{
	CHECK((unsigned)counter < CNS_C_COUNT);
	return c->counters[counter];
}
