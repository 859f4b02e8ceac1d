/* SPDX-License-Identifier: Apache-2.0 */
#include "bank.h"

#include <errno.h>
#include <string.h>

#define BANK_MAGIC UINT64_C(0x4b4e4142544e5343) /* "CSNTBANK" */

static uint64_t
mix(uint64_t h, uint64_t v)
{
	h ^= v + UINT64_C(0x9e3779b97f4a7c15) + (h << 6) + (h >> 2);
	h *= UINT64_C(0xff51afd7ed558ccd);
	return h ^ (h >> 33);
}

void
bank_init(struct bank *b)
{
	memset(b, 0, sizeof(*b));
	for (uint32_t i = 0; i < BANK_ACCOUNTS; i++)
		b->balance[i] = BANK_INITIAL;
}

int64_t
bank_total(const struct bank *b)
{
	int64_t sum = 0;
	for (uint32_t i = 0; i < BANK_ACCOUNTS; i++)
		sum += b->balance[i];
	return sum;
}

void
bank_transfer_msg(struct wire_transfer *m, uint16_t shard, uint64_t from, uint64_t to,
		  int64_t amount, uint64_t id)
{
	memset(m, 0, sizeof(*m));
	wire_hdr_init(&m->hdr, WIRE_TRANSFER, shard);
	m->user = from;
	m->asset = (uint32_t)to;
	m->amount = amount;
	m->transfer_id = id;
}

static void
see(struct bank *b, uint64_t index, uint64_t now_ns)
{
	if (index < b->last_index || now_ns < b->last_time_ns)
		b->violations++;
	b->last_index = index;
	b->last_time_ns = now_ns;
}

static void
bank_apply(void *svc, uint64_t index, uint64_t now_ns, const struct wire_msg_hdr *msg,
	   struct svc_sink *sink)
{
	struct bank *b = svc;
	(void)sink;
	see(b, index, now_ns);
	b->msgs++;
	b->digest = mix(b->digest, index);
	if (msg->type != WIRE_TRANSFER)
		return;
	const struct wire_transfer *t = (const void *)msg;
	uint64_t from = t->user % BANK_ACCOUNTS;
	uint64_t to = t->asset % BANK_ACCOUNTS;
	b->digest = mix(b->digest, t->transfer_id);
	if (t->amount <= 0 || b->balance[from] < t->amount || from == to) {
		b->transfers_refused++;
		return;
	}
	b->balance[from] -= t->amount;
	b->balance[to] += t->amount;
	b->transfers_ok++;
	if (bank_total(b) != (int64_t)BANK_ACCOUNTS * BANK_INITIAL)
		b->violations++;
}

static void
bank_tick(void *svc, uint64_t index, uint64_t now_ns, struct svc_sink *sink)
{
	struct bank *b = svc;
	(void)sink;
	see(b, index, now_ns);
	b->ticks++;
	b->digest = mix(b->digest, now_ns);
}

struct bank_image {
	uint64_t magic;
	struct bank bank;
};

static size_t
bank_snapshot_size(const void *svc)
{
	(void)svc;
	return sizeof(struct bank_image);
}

static size_t
bank_snapshot(const void *svc, void *buf, size_t cap)
{
	if (cap < sizeof(struct bank_image))
		return 0;
	struct bank_image img;
	memset(&img, 0, sizeof(img));
	img.magic = BANK_MAGIC;
	img.bank = *(const struct bank *)svc;
	memcpy(buf, &img, sizeof(img));
	return sizeof(img);
}

static int
bank_restore(void *svc, const void *buf, size_t len)
{
	struct bank *b = svc;
	struct bank_image img;
	if (len != sizeof(img)) {
		bank_init(b);
		return -EINVAL;
	}
	memcpy(&img, buf, sizeof(img));
	if (img.magic != BANK_MAGIC) {
		bank_init(b);
		return -EINVAL;
	}
	*b = img.bank;
	return 0;
}

static uint64_t
bank_state_hash(const void *svc)
{
	const struct bank *b = svc;
	uint64_t h = 0;
	for (uint32_t i = 0; i < BANK_ACCOUNTS; i++)
		h = mix(h, (uint64_t)b->balance[i]);
	h = mix(h, b->transfers_ok);
	h = mix(h, b->transfers_refused);
	h = mix(h, b->msgs);
	h = mix(h, b->ticks);
	h = mix(h, b->last_time_ns);
	h = mix(h, b->digest);
	return h;
}

const struct svc_ops bank_ops = {
	.name = "bank",
	.apply = bank_apply,
	.tick = bank_tick,
	.snapshot_size = bank_snapshot_size,
	.snapshot = bank_snapshot,
	.restore = bank_restore,
	.state_hash = bank_state_hash,
};
