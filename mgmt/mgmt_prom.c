/* SPDX-License-Identifier: Apache-2.0 */
/* Prometheus text exposition format 0.0.4. */
#include <inttypes.h>
#include <stdio.h>

#include "mgmt.h"

void
mgmt_prom_family(struct mgmt_out *o, const char *name, const char *type, const char *help)
{
	char line[512];
	snprintf(line, sizeof(line), "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
	mgmt_out_raw(o, line);
}

void
mgmt_prom_sample(struct mgmt_out *o, const char *name, const char *labels, uint64_t value)
{
	char line[512];
	if (labels != NULL && labels[0] != '\0')
		snprintf(line, sizeof(line), "%s{%s} %" PRIu64 "\n", name, labels, value);
	else
		snprintf(line, sizeof(line), "%s %" PRIu64 "\n", name, value);
	mgmt_out_raw(o, line);
}

void
mgmt_prom_summary(struct mgmt_out *o, const char *name, const char *labels,
		  const struct hist *h)
{
	static const double qs[] = {50, 90, 99, 99.9, 99.99};
	char line[512];
	const char *comma = (labels != NULL && labels[0] != '\0') ? "," : "";
	for (unsigned i = 0; i < sizeof(qs) / sizeof(qs[0]); i++) {
		snprintf(line, sizeof(line), "%s{%s%squantile=\"%g\"} %" PRIu64 "\n", name,
			 labels ? labels : "", comma, qs[i] / 100.0, hist_percentile(h, qs[i]));
		mgmt_out_raw(o, line);
	}
	const char *open = (labels != NULL && labels[0] != '\0') ? "{" : "";
	const char *close = (labels != NULL && labels[0] != '\0') ? "}" : "";
	snprintf(line, sizeof(line), "%s_sum%s%s%s %" PRIu64 "\n%s_count%s%s%s %" PRIu64 "\n",
		 name, open, labels ? labels : "", close, h->sum, name, open,
		 labels ? labels : "", close, h->count);
	mgmt_out_raw(o, line);
}
