/* SPDX-License-Identifier: Apache-2.0 */
/* omsload's history file (history.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>

#include "tools/omsload/history.h"

#define HISTORY_BUF (1u << 20)

int
history_open(struct history *h, const char *path)
{
	h->f = NULL;
	h->buf = NULL;
	if (path == NULL)
		return 0;
	h->f = fopen(path, "w");
	if (h->f == NULL)
		return -errno;
	h->buf = malloc(HISTORY_BUF);
	if (h->buf != NULL)
		setvbuf(h->f, h->buf, _IOFBF, HISTORY_BUF);
	return 0;
}

int
history_close(struct history *h)
{
	if (h->f == NULL)
		return 0;
	int bad = ferror(h->f);
	bad |= fclose(h->f) != 0;
	free(h->buf);
	h->f = NULL;
	h->buf = NULL;
	return bad ? -EIO : 0;
}

void
history_sent(struct history *h, uint64_t now_ns, const struct wire_msg_hdr *msg)
{
	if (h->f == NULL)
		return;
	uint64_t t = now_ns / 1000u;
	switch (msg->type) {
	case WIRE_NEW_ORDER: {
		const struct wire_new_order *m = (const void *)msg;
		fprintf(h->f,
			"new\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu64 "\t%u\t%u\t%u\t%u\t%" PRId64
			"\t%" PRId64 "\t%" PRId64 "\n",
			t, m->user, m->cl_ord_id, m->symbol, m->side, m->ord_type, m->tif, m->qty,
			m->px, m->quote_qty);
		break;
	}
	case WIRE_CANCEL: {
		const struct wire_cancel *m = (const void *)msg;
		fprintf(h->f, "cxl\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu64 "\n", t,
			m->user, m->cl_ord_id, m->orig_cl_ord_id);
		break;
	}
	case WIRE_TRANSFER: {
		const struct wire_transfer *m = (const void *)msg;
		fprintf(h->f, "dep\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu64 "\t%u\t%" PRId64 "\n", t,
			m->user, m->transfer_id, m->asset, m->amount);
		break;
	}
	default:
		break;
	}
}

void
history_received(struct history *h, uint64_t now_ns, const struct wire_msg_hdr *msg)
{
	if (h->f == NULL)
		return;
	uint64_t t = now_ns / 1000u;
	switch (msg->type) {
	case WIRE_ACK: {
		const struct wire_ack *m = (const void *)msg;
		fprintf(h->f, "ack\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu64 "\n",
			t, m->user, m->cl_ord_id, m->oid.shard_seq, m->seq);
		break;
	}
	case WIRE_NAK: {
		const struct wire_nak *m = (const void *)msg;
		fprintf(h->f, "nak\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu64 "\t%u\t%" PRIu64 "\n", t,
			m->user, m->cl_ord_id, m->reason, m->seq);
		break;
	}
	case WIRE_EXEC_REPORT: {
		const struct wire_exec_report *m = (const void *)msg;
		fprintf(h->f,
			"exec\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu64
			"\t%u\t%" PRId64 "\t%" PRId64 "\t%" PRId64 "\t%" PRId64 "\t%" PRId64
			"\t%u\n",
			t, m->user, m->cl_ord_id, m->oid.shard_seq, m->seq, m->exec, m->last_qty,
			m->last_px, m->cum_qty, m->leaves_qty, m->fee, m->hdr.flags);
		break;
	}
	case WIRE_ADMIN_REPLY: {
		const struct wire_admin_reply *m = (const void *)msg;
		fprintf(h->f, "admin\t%" PRIu64 "\t%" PRIu64 "\t%u\t%" PRIu64 "\n", t, m->req_id,
			m->reason, m->value);
		break;
	}
	default:
		break;
	}
}

void
history_gave_up(struct history *h, uint64_t now_ns, uint64_t user, uint64_t id, uint64_t tag)
{
	if (h->f != NULL)
		fprintf(h->f, "gave\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu64 "\n",
			now_ns / 1000u, user, id, tag);
}

void
history_end(struct history *h, uint64_t now_ns)
{
	if (h->f != NULL)
		fprintf(h->f, "end\t%" PRIu64 "\n", now_ns / 1000u);
}
