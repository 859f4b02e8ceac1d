/* SPDX-License-Identifier: Apache-2.0 */
/* Prometheus text exposition format 0.0.4. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

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

void
mgmt_prom_histogram(struct mgmt_out *o, const char *name, const char *labels,
		    const struct hist *h, const uint64_t *bounds, uint32_t bound_count)
{
	char line[512];
	bool has = labels != NULL && labels[0] != '\0';
	const char *l = has ? labels : "";
	const char *comma = has ? "," : "";
	uint64_t cum = 0;
	uint32_t b = 0;
	for (uint32_t j = 0; j < bound_count; j++) {
		/* Buckets are ascending: add every bucket whose upper edge is within bound j. */
		for (; b < HIST_BUCKETS && hist_bucket_high(b) <= bounds[j]; b++)
			cum += h->buckets[b];
		snprintf(line, sizeof(line), "%s_bucket{%s%sle=\"%" PRIu64 "\"} %" PRIu64 "\n", name, l,
			 comma, bounds[j], cum);
		mgmt_out_raw(o, line);
	}
	for (; b < HIST_BUCKETS; b++)
		cum += h->buckets[b];
	/* +Inf and _count from the buckets themselves, so they agree even on a copy taken
	 * while the writer was between its count and bucket stores. */
	snprintf(line, sizeof(line), "%s_bucket{%s%sle=\"+Inf\"} %" PRIu64 "\n", name, l, comma,
		 cum);
	mgmt_out_raw(o, line);
	const char *open = has ? "{" : "";
	const char *close = has ? "}" : "";
	snprintf(line, sizeof(line), "%s_sum%s%s%s %" PRIu64 "\n%s_count%s%s%s %" PRIu64 "\n", name,
		 open, l, close, h->sum, name, open, l, close, cum);
	mgmt_out_raw(o, line);
}

static bool
name_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '_';
}

static const char *
label_of(const char *const *keys, const char *tok, size_t len)
{
	for (size_t i = 0; keys != NULL && keys[i] != NULL && keys[i + 1] != NULL; i += 2)
		if (strlen(keys[i]) == len && memcmp(keys[i], tok, len) == 0)
			return keys[i + 1];
	return NULL;
}

int
mgmt_prom_name(const char *dotted, const char *const *label_keys, char *family,
	       size_t family_cap, char *labels, size_t labels_cap)
{
	size_t f = 0, l = 0;
	if (dotted == NULL || dotted[0] == '\0' || family_cap < 6 || labels_cap < 1)
		return -EINVAL;
	memcpy(family, "omsd", 4);
	f = 4;
	labels[0] = '\0';
	const char *p = dotted;
	const char *pending = NULL; /* label whose value is the next token */
	for (;;) {
		const char *dot = strchr(p, '.');
		size_t len = dot != NULL ? (size_t)(dot - p) : strlen(p);
		if (len == 0)
			return -EINVAL;
		if (pending != NULL) {
			/* label="value" with escapes; +8 covers the separators and quotes. */
			if (l + strlen(pending) + 2 * len + 8 > labels_cap)
				return -ENOSPC;
			l += (size_t)snprintf(labels + l, labels_cap - l, "%s%s=\"", l ? "," : "",
					      pending);
			for (size_t i = 0; i < len; i++) {
				if (p[i] == '"' || p[i] == '\\' || p[i] == '\n') {
					labels[l++] = '\\';
					labels[l++] = p[i] == '\n' ? 'n' : p[i];
				} else {
					labels[l++] = p[i];
				}
			}
			labels[l++] = '"';
			labels[l] = '\0';
			pending = NULL;
		} else {
			if (f + 1 + len + 1 > family_cap)
				return -ENOSPC;
			family[f++] = '_';
			for (size_t i = 0; i < len; i++)
				family[f++] = !name_char(p[i])		  ? '_'
					      : (p[i] >= 'A' && p[i] <= 'Z') ? (char)(p[i] - 'A' + 'a')
									   : p[i];
			/* A key token names a label only when a value token follows it. */
			if (dot != NULL)
				pending = label_of(label_keys, p, len);
		}
		if (dot == NULL)
			break;
		p = dot + 1;
	}
	family[f] = '\0';
	return 0;
}
