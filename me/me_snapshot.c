/* SPDX-License-Identifier: Apache-2.0 */
/*
 * me snapshot: snapshot/restore, state hash, and the svc_ops table consensus hosts.
 *
 * The engine's region holds no pointers (me_int.h), so the state is exactly the region's
 * bytes after the runtime header. A snapshot is a small header (magic, version, sizes, the
 * limits, an XXH3 checksum) followed by those bytes: byte-exact and deterministic, because
 * every byte of the region is written only by init and by applied messages. Restore checks
 * the header against this instance's limits and the checksum before it copies, so a corrupt
 * or foreign snapshot is refused (-EINVAL) and leaves an empty engine.
 */
#include <errno.h>
#include <string.h>
#include <xxhash.h>

#include "me/me_int.h"

struct me_snap_hdr {
	uint64_t magic;          /* ME_SNAP_MAGIC */
	uint32_t version;        /* ME_SNAP_VERSION */
	uint32_t reserved0;
	uint64_t state_len;      /* bytes of state that follow */
	uint64_t checksum;       /* XXH3-64 of those bytes */
	struct me_limits limits; /* of the engine that wrote it */
	uint32_t reserved1;
};
static_assert(sizeof(struct me_snap_hdr) == 72, "me_snap_hdr");

static const uint8_t *
state_bytes(const struct me *me)
{
	return (const uint8_t *)me + ME_RT_SIZE;
}

static size_t
state_len(const struct me *me)
{
	return (size_t)me->footprint - ME_RT_SIZE;
}

size_t
me_snapshot_size(const struct me *me)
{
	CHECK(me != NULL && me->magic == ME_MAGIC);
	return sizeof(struct me_snap_hdr) + state_len(me);
}

size_t
me_snapshot(const struct me *me, void *buf, size_t cap)
{
	CHECK(me != NULL && me->magic == ME_MAGIC);
	size_t need = me_snapshot_size(me);
	if (buf == NULL || cap < need)
		return 0;
	struct me_snap_hdr h;
	memset(&h, 0, sizeof(h));
	h.magic = ME_SNAP_MAGIC;
	h.version = ME_SNAP_VERSION;
	h.state_len = state_len(me);
	h.checksum = XXH3_64bits(state_bytes(me), state_len(me));
	h.limits = me->limits;
	memcpy(buf, &h, sizeof(h));
	memcpy((uint8_t *)buf + sizeof(h), state_bytes(me), state_len(me));
	return need;
}

int
me_restore(struct me *me, const void *buf, size_t len)
{
	CHECK(me != NULL && me->magic == ME_MAGIC);
	struct me_limits limits = me->limits;
	struct me_snap_hdr h;
	if (buf == NULL || len < sizeof(h))
		goto fail;
	memcpy(&h, buf, sizeof(h));
	if (h.magic != ME_SNAP_MAGIC || h.version != ME_SNAP_VERSION)
		goto fail;
	if (h.state_len != state_len(me) || len != sizeof(h) + h.state_len)
		goto fail;
	if (memcmp(&h.limits, &limits, sizeof(limits)) != 0)
		goto fail;
	const uint8_t *state = (const uint8_t *)buf + sizeof(h);
	if (XXH3_64bits(state, (size_t)h.state_len) != h.checksum)
		goto fail;
	/* The header fields inside the state must agree with what we are. */
	struct me probe;
	memcpy((uint8_t *)&probe + ME_RT_SIZE, state, sizeof(probe) - ME_RT_SIZE);
	if (probe.magic != ME_MAGIC || probe.footprint != me->footprint)
		goto fail;
	memcpy((uint8_t *)me + ME_RT_SIZE, state, (size_t)h.state_len);
	me_rt_bind(me);
	return 0;
fail: {
	struct me *fresh;
	int rc = me_init(&fresh, me, &limits);
	CHECK(rc == 0 && fresh == me);
	return -EINVAL;
}
}

uint64_t
me_state_hash(const struct me *me)
{
	CHECK(me != NULL && me->magic == ME_MAGIC);
	return XXH3_64bits(state_bytes(me), state_len(me));
}

/* ---- svc_ops ---- */

static void
svc_apply(void *svc, uint64_t index, uint64_t now_ns, const struct wire_msg_hdr *msg,
	  struct svc_sink *sink)
{
	(void)index;
	me_apply(svc, now_ns, msg, sink);
}

static void
svc_tick(void *svc, uint64_t index, uint64_t now_ns, struct svc_sink *sink)
{
	(void)index;
	me_tick(svc, now_ns, sink);
}

static size_t
svc_snapshot_size(const void *svc)
{
	return me_snapshot_size(svc);
}

static size_t
svc_snapshot(const void *svc, void *buf, size_t cap)
{
	return me_snapshot(svc, buf, cap);
}

static int
svc_restore(void *svc, const void *buf, size_t len)
{
	return me_restore(svc, buf, len);
}

static uint64_t
svc_state_hash(const void *svc)
{
	return me_state_hash(svc);
}

const struct svc_ops me_svc_ops = {
	.name = "me",
	.apply = svc_apply,
	.tick = svc_tick,
	.snapshot_size = svc_snapshot_size,
	.snapshot = svc_snapshot,
	.restore = svc_restore,
	.state_hash = svc_state_hash,
};
