/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Prometheus text exposition format 0.0.4, and the naming conventions every family follows
 * (https://prometheus.io/docs/practices/naming/, checked by `promtool check metrics`):
 * counters end in _total, times are in seconds and ratios in [0, 1] (base units), and only
 * histograms and summaries end in _count, _sum or _bucket. Values stay integers up to the
 * point of rendering: a value in a sub-unit is printed as an exact decimal of the base unit.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/check.h"
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

/* Digits after the point of a power of ten (10^digits == per_unit), or -1. */
static int
decimal_digits(uint64_t per_unit)
{
	int digits = 0;
	for (; per_unit > 1 && per_unit % 10 == 0; per_unit /= 10)
		digits++;
	return per_unit == 1 ? digits : -1;
}

int
mgmt_prom_decimal(char *buf, size_t cap, uint64_t value, uint64_t per_unit)
{
	int digits = decimal_digits(per_unit);
	CHECK(digits >= 0);
	CHECK(cap > 0);
	uint64_t whole = value / per_unit, frac = value % per_unit;
	int n;
	if (frac == 0)
		n = snprintf(buf, cap, "%" PRIu64, whole);
	else
		n = snprintf(buf, cap, "%" PRIu64 ".%0*" PRIu64, whole, digits, frac);
	if (n < 0 || (size_t)n >= cap) {
		buf[0] = '\0';
		return -ENOSPC;
	}
	/* An exact decimal has no trailing zeros after its point (frac != 0: one digit stays). */
	if (frac != 0)
		while (buf[n - 1] == '0')
			buf[--n] = '\0';
	return n;
}

void
mgmt_prom_summary(struct mgmt_out *o, const char *name, const char *labels,
		  const struct hist *h, uint64_t per_unit)
{
	static const double qs[] = {50, 90, 99, 99.9, 99.99};
	char line[512], v[48];
	bool has = labels != NULL && labels[0] != '\0';
	const char *l = has ? labels : "";
	const char *comma = has ? "," : "";
	for (unsigned i = 0; i < sizeof(qs) / sizeof(qs[0]); i++) {
		(void)mgmt_prom_decimal(v, sizeof(v), hist_percentile(h, qs[i]), per_unit);
		snprintf(line, sizeof(line), "%s{%s%squantile=\"%g\"} %s\n", name, l, comma,
			 qs[i] / 100.0, v);
		mgmt_out_raw(o, line);
	}
	const char *open = has ? "{" : "";
	const char *close = has ? "}" : "";
	(void)mgmt_prom_decimal(v, sizeof(v), h->sum, per_unit);
	snprintf(line, sizeof(line), "%s_sum%s%s%s %s\n%s_count%s%s%s %" PRIu64 "\n", name, open,
		 l, close, v, name, open, l, close, h->count);
	mgmt_out_raw(o, line);
}

void
mgmt_prom_histogram(struct mgmt_out *o, const char *name, const char *labels,
		    const struct hist *h, const uint64_t *bounds, uint32_t bound_count,
		    uint64_t per_unit)
{
	char line[512], v[48];
	bool has = labels != NULL && labels[0] != '\0';
	const char *l = has ? labels : "";
	const char *comma = has ? "," : "";
	uint64_t cum = 0;
	uint32_t b = 0;
	for (uint32_t j = 0; j < bound_count; j++) {
		/* Buckets are ascending: add every bucket whose upper edge is within bound j. */
		for (; b < HIST_BUCKETS && hist_bucket_high(b) <= bounds[j]; b++)
			cum += h->buckets[b];
		(void)mgmt_prom_decimal(v, sizeof(v), bounds[j], per_unit);
		snprintf(line, sizeof(line), "%s_bucket{%s%sle=\"%s\"} %" PRIu64 "\n", name, l,
			 comma, v, cum);
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
	(void)mgmt_prom_decimal(v, sizeof(v), h->sum, per_unit);
	snprintf(line, sizeof(line), "%s_sum%s%s%s %s\n%s_count%s%s%s %" PRIu64 "\n", name, open,
		 l, close, v, name, open, l, close, cum);
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

int
mgmt_prom_pattern(const char *dotted, size_t len, const char *const *label_keys, char *out,
		  size_t cap)
{
	size_t n = 0;
	if (cap == 0)
		return -ENOSPC;
	const char *p = dotted, *end = dotted + len;
	const char *pending = NULL; /* label whose value is the next token */
	while (p < end) {
		const char *dot = memchr(p, '.', (size_t)(end - p));
		size_t tok = dot != NULL ? (size_t)(dot - p) : (size_t)(end - p);
		int w = pending != NULL
				? snprintf(out + n, cap - n, "%s<%s>", n ? "." : "", pending)
				: snprintf(out + n, cap - n, "%s%.*s", n ? "." : "", (int)tok, p);
		if (w < 0 || (size_t)w >= cap - n) {
			out[0] = '\0';
			return -ENOSPC;
		}
		n += (size_t)w;
		pending = pending == NULL && dot != NULL ? label_of(label_keys, p, tok) : NULL;
		if (dot == NULL)
			break;
		p = dot + 1;
	}
	out[n] = '\0';
	return 0;
}

/* Words of the stats names that a linter reads as an abbreviated unit (promtool flags any
 * token s, ms, us, ns, sec, b, kb, mb, gb, tb, pb, m, h, d), and what they become. */
static const struct {
	const char *from; /* whole tokens, with their leading '_' */
	const char *to;
} words[] = {
	{"_not_us", "_not_ours"}, /* dp.rx_not_us, ip_not_us, arp_not_us: not for this node */
};

/* Units a stats name may end in, and the base unit its metric is rendered in. */
static const struct {
	const char *token;   /* the last token of the name */
	const char *base;    /* replaces it */
	uint64_t per_unit;   /* raw values per base unit (a power of ten) */
} units[] = {
	{"ns", "seconds", 1000000000}, {"us", "seconds", 1000000}, {"ms", "seconds", 1000},
	{"s", "seconds", 1},           {"sec", "seconds", 1},      {"permille", "ratio", 1000},
	{"percent", "ratio", 100},     {"pct", "ratio", 100},
};

/* Suffixes a gauge may not end in: the series names of histograms and summaries, the
 * counters' _total and the info metrics' _info. */
static const char *const reserved[] = {"_total", "_count", "_sum", "_bucket", "_info"};

static bool
ends_with(const char *s, size_t len, const char *suffix)
{
	size_t n = strlen(suffix);
	return len >= n && memcmp(s + len - n, suffix, n) == 0;
}

/* Replace old_len bytes at pos of the NUL-terminated s by with. 0 or -ENOSPC. */
static int
splice(char *s, size_t cap, size_t pos, size_t old_len, const char *with)
{
	size_t len = strlen(s), n = strlen(with);
	if (len - old_len + n + 1 > cap)
		return -ENOSPC;
	memmove(s + pos + n, s + pos + old_len, len - pos - old_len + 1);
	memcpy(s + pos, with, n);
	return 0;
}

int
mgmt_prom_conventions(char *family, size_t cap, enum mgmt_prom_type type, uint64_t *per_unit)
{
	CHECK(family != NULL);
	CHECK(per_unit != NULL);
	*per_unit = 1;
	for (size_t w = 0; w < sizeof(words) / sizeof(words[0]); w++) {
		size_t n = strlen(words[w].from);
		for (char *at = strstr(family, words[w].from); at != NULL;
		     at = strstr(at + 1, words[w].from)) {
			if (at[n] != '\0' && at[n] != '_')
				continue; /* a longer token ("_not_used") */
			if (splice(family, cap, (size_t)(at - family), n, words[w].to) != 0)
				return -ENOSPC;
		}
	}
	/* The unit: the last token in a base unit, the value scaled at rendering. */
	const char *last = strrchr(family, '_');
	if (last != NULL) {
		for (size_t u = 0; u < sizeof(units) / sizeof(units[0]); u++) {
			if (strcmp(last + 1, units[u].token) != 0)
				continue;
			if (type == MGMT_PROM_INFO)
				return -EINVAL; /* a text has no unit to scale */
			size_t pos = (size_t)(last + 1 - family);
			const char *base = units[u].base;
			if (pos >= 5 && memcmp(family + pos - 5, "_per_", 5) == 0) {
				/* A rate: x_per_s is x_per_second; a rate per sub-unit would need
				 * a multiplication this rendering does not do. */
				if (strcmp(base, "seconds") != 0 || units[u].per_unit != 1)
					return -EINVAL;
				base = "second";
			} else {
				*per_unit = units[u].per_unit;
			}
			if (splice(family, cap, pos, strlen(units[u].token), base) != 0)
				return -ENOSPC;
			break;
		}
	}
	size_t len = strlen(family);
	if (type == MGMT_PROM_INFO)
		return ends_with(family, len, "_info") ? 0 : splice(family, cap, len, 0, "_info");
	if (type == MGMT_PROM_COUNTER) {
		if (ends_with(family, len, "_total"))
			return 0;
		if (ends_with(family, len, "_count")) /* x_count counts x: x_total */
			return splice(family, cap, len - 6, 6, "_total");
		return splice(family, cap, len, 0, "_total");
	}
	CHECK(type == MGMT_PROM_GAUGE);
	for (size_t r = 0; r < sizeof(reserved) / sizeof(reserved[0]); r++)
		if (ends_with(family, len, reserved[r]))
			return splice(family, cap, len, 0, "_now"); /* a count now: x_count_now */
	return 0;
}
