/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Persistence without a database (docs/appliance.md): an OMS leader with no persister
 * answers its own HYDRATE_REQUEST (HYDRATE_USER NEW), BEGIN_DEHYDRATE (FLUSH_COMPLETE OK),
 * RELEASE_CLAIM (RELEASE_DONE OK) and TRANSFER_LOOKUP (TRANSFER_FOUND NOT_FOUND) at once, and proposes the answers back into its log
 * from a bounded queue, as a persister's completions would arrive (ARCHITECTURE.md §3).
 */
#include <errno.h>

#include "app_shard_int.h"

void
app_inline_persist_answer(struct app_shard *s, const struct wire_msg_hdr *msg)
{
	if (s->pq_count == PQ_MAX) {
		sc_add(s, SC_PERSIST_DROPPED, 1); /* the re-drive asks again */
		return;
	}
	uint8_t *b = s->pq[s->pq_count].msg;
	memset(b, 0, PQ_MSG_MAX);
	switch (msg->type) {
	case WIRE_HYDRATE_REQUEST: {
		const struct wire_hydrate_request *r = (const void *)msg;
		struct wire_hydrate_user *h = (void *)b;
		wire_hdr_init(&h->hdr, WIRE_HYDRATE_USER, s->id);
		h->epoch = r->epoch;
		h->status = WIRE_HYD_NEW;
		h->state.user = r->user;
		break;
	}
	case WIRE_BEGIN_DEHYDRATE: {
		const struct wire_begin_dehydrate *r = (const void *)msg;
		struct wire_flush_complete *f = (void *)b;
		wire_hdr_init(&f->hdr, WIRE_FLUSH_COMPLETE, s->id);
		f->user = r->state.user;
		f->epoch = r->epoch;
		f->version = r->state.version + 1;
		f->status = WIRE_FLUSH_OK;
		break;
	}
	case WIRE_RELEASE_CLAIM: {
		const struct wire_release_claim *r = (const void *)msg;
		struct wire_release_claim *d = (void *)b;
		wire_hdr_init(&d->hdr, WIRE_RELEASE_DONE, s->id);
		d->user = r->user;
		d->epoch = r->epoch;
		d->status = WIRE_FLUSH_OK;
		break;
	}
	case WIRE_TRANSFER_LOOKUP: {
		/* No database, nothing recorded beyond the window: never applied as far as
		 * memory mode can know (docs/oms.md, "Transfers for their lifetime"). */
		const struct wire_transfer_lookup *r = (const void *)msg;
		struct wire_transfer_found *f = (void *)b;
		wire_hdr_init(&f->hdr, WIRE_TRANSFER_FOUND, s->id);
		f->user = r->user;
		f->transfer_id = r->transfer_id;
		f->epoch = r->epoch;
		f->status = WIRE_XFER_NOT_FOUND;
		break;
	}
	default:
		sc_add(s, SC_NO_ROUTE, 1);
		return;
	}
	s->pq_count++;
	sc_add(s, SC_PERSIST_ANSWERED, 1);
}

uint32_t
app_inline_persist_drain(struct app_shard *s)
{
	uint32_t done = 0;
	while (done < s->pq_count) {
		int rc = cns_propose(s->cns, s->now, (const void *)s->pq[done].msg);
		if (rc == -EAGAIN)
			break; /* keep the rest for the next cycle */
		done++;
	}
	if (done > 0 && done < s->pq_count)
		memmove(s->pq, s->pq + done, (s->pq_count - done) * sizeof(*s->pq));
	s->pq_count -= done;
	return done;
}
