/* SPDX-License-Identifier: Apache-2.0 */
/* The views' pure helpers: Prometheus histograms and names under the naming conventions,
 * the metrics HTTP listener (its request parser, and the server over a real loopback
 * socket). */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "mgmt/mgmt.h"

static bool
has(const char *text, const char *needle)
{
	return strstr(text, needle) != NULL;
}

static const char *const keys[] = {"shard", "shard", "agent", "lcore", "member", "member",
				   "nak", "reason", "frame_err", "cause", NULL};

static int
name(const char *dotted, char *fam, char *lab)
{
	return mgmt_prom_name(dotted, keys, fam, 96, lab, 96);
}

/* Goal: a hist becomes cumulative Prometheus buckets that agree with _count.
 * Method: 100 values 1..100 and one of 10^6; bounds 10, 50, 1000: cumulative 10, 50, 100,
 * then +Inf and _count 101, _sum the exact sum. */
Test(mgmt_prom, histogram_buckets)
{
	static struct hist h;
	hist_init(&h);
	for (uint64_t v = 1; v <= 100; v++)
		hist_record(&h, v);
	hist_record(&h, 1000000);
	static const uint64_t bounds[] = {10, 50, 1000};
	char buf[4096];
	struct mgmt_out o;
	mgmt_out_init(&o, buf, sizeof(buf));
	mgmt_prom_histogram(&o, "omsd_hops_hist", "shard=\"1\"", &h, bounds, 3, 1);
	cr_assert(not(o.overflow));
	cr_assert(has(buf, "omsd_hops_hist_bucket{shard=\"1\",le=\"10\"} 10\n"), "%s", buf);
	cr_assert(has(buf, "omsd_hops_hist_bucket{shard=\"1\",le=\"50\"} 50\n"), "%s", buf);
	cr_assert(has(buf, "omsd_hops_hist_bucket{shard=\"1\",le=\"1000\"} 100\n"), "%s", buf);
	cr_assert(has(buf, "omsd_hops_hist_bucket{shard=\"1\",le=\"+Inf\"} 101\n"), "%s", buf);
	cr_assert(has(buf, "omsd_hops_hist_count{shard=\"1\"} 101\n"), "%s", buf);
	cr_assert(has(buf, "omsd_hops_hist_sum{shard=\"1\"} 1005050\n"), "%s", buf);
}

/* Goal: a hist of ns renders in seconds: le bounds, quantiles and _sum divided by 10^9 as
 * exact decimals, the counts untouched.
 * Method: 12345 ns and 2 s recorded; a histogram with bounds 1 µs, 1 ms, 10 s and a summary
 * of the same hist, per_unit 10^9. */
Test(mgmt_prom, histogram_and_summary_in_seconds)
{
	static struct hist h;
	hist_init(&h);
	hist_record(&h, 12345);
	hist_record(&h, 2000000000);
	static const uint64_t bounds[] = {1000, 1000000, 10000000000};
	char buf[4096];
	struct mgmt_out o;
	mgmt_out_init(&o, buf, sizeof(buf));
	mgmt_prom_histogram(&o, "omsd_latency_hist_seconds", "path=\"a\"", &h, bounds, 3,
			    1000000000);
	cr_assert(has(buf, "_bucket{path=\"a\",le=\"0.000001\"} 0\n"), "%s", buf);
	cr_assert(has(buf, "_bucket{path=\"a\",le=\"0.001\"} 1\n"), "%s", buf);
	cr_assert(has(buf, "_bucket{path=\"a\",le=\"10\"} 2\n"), "%s", buf);
	cr_assert(has(buf, "_bucket{path=\"a\",le=\"+Inf\"} 2\n"), "%s", buf);
	cr_assert(has(buf, "omsd_latency_hist_seconds_sum{path=\"a\"} 2.000012345\n"), "%s", buf);
	cr_assert(has(buf, "omsd_latency_hist_seconds_count{path=\"a\"} 2\n"), "%s", buf);
	mgmt_out_init(&o, buf, sizeof(buf));
	mgmt_prom_summary(&o, "omsd_latency_seconds", "", &h, 1000000000);
	/* The median is the smaller value (the bucket's top, clamped to it within 3.1 %). */
	cr_assert(has(buf, "omsd_latency_seconds{quantile=\"0.5\"} 0.0000"), "%s", buf);
	cr_assert(has(buf, "omsd_latency_seconds{quantile=\"0.99\"} 2\n"), "%s", buf);
	cr_assert(has(buf, "omsd_latency_seconds_sum 2.000012345\n"), "%s", buf);
	cr_assert(has(buf, "omsd_latency_seconds_count 2\n"), "%s", buf);
}

/* Goal: a value in a sub-unit prints as the exact decimal of its base unit, without
 * trailing zeros, and a buffer too small is refused, not truncated.
 * Method: ns, ms and permille against 10^9, 10^3; the extremes of uint64_t; a 4-byte buffer. */
Test(mgmt_prom, decimal)
{
	char b[48];
	cr_assert(eq(int, mgmt_prom_decimal(b, sizeof(b), 0, 1000000000), 1));
	cr_assert(eq(str, b, "0"));
	mgmt_prom_decimal(b, sizeof(b), 1, 1000000000);
	cr_assert(eq(str, b, "0.000000001"));
	mgmt_prom_decimal(b, sizeof(b), 1500000000, 1000000000);
	cr_assert(eq(str, b, "1.5"));
	mgmt_prom_decimal(b, sizeof(b), 2000, 1000);
	cr_assert(eq(str, b, "2"));
	mgmt_prom_decimal(b, sizeof(b), 875, 1000);
	cr_assert(eq(str, b, "0.875"));
	mgmt_prom_decimal(b, sizeof(b), 42, 1);
	cr_assert(eq(str, b, "42"));
	cr_assert(eq(int, mgmt_prom_decimal(b, sizeof(b), UINT64_MAX, 1), 20));
	cr_assert(eq(str, b, "18446744073709551615"));
	cr_assert(gt(int, mgmt_prom_decimal(b, sizeof(b), UINT64_MAX, 1000000000000000000ull), 0));
	cr_assert(eq(str, b, "18.446744073709551615"));
	cr_assert(eq(int, mgmt_prom_decimal(b, 4, 12345, 1000000000), -ENOSPC));
	cr_assert(eq(str, b, ""));
}

/* Goal: a divisor that is not a power of ten is a programmer error (the decimal would not be
 * exact). Method: 1024. */
Test(mgmt_prom, decimal_needs_power_of_ten, .signal = SIGABRT)
{
	char b[48];
	mgmt_prom_decimal(b, sizeof(b), 1, 1024);
}

/* What promtool's lint (client_golang promlint) reports about a name of a given type: the
 * rules mgmt_prom_conventions exists to satisfy. NULL when it has nothing to say. */
static const char *
lint(const char *n, enum mgmt_prom_type type)
{
	static const char *const abbrev[] = {"s",  "ms", "us", "ns", "sec", "b", "kb",
					     "mb", "gb", "tb", "pb", "m",   "h", "d"};
	static const char *const types[] = {"counter", "gauge", "histogram", "summary"};
	char tok[40];
	size_t len = strlen(n);
	for (size_t i = 0; i < sizeof(abbrev) / sizeof(abbrev[0]); i++) {
		snprintf(tok, sizeof(tok), "_%s_", abbrev[i]);
		size_t t = strlen(tok) - 1;
		if (strstr(n, tok) != NULL || (len >= t && memcmp(n + len - t, tok, t) == 0))
			return "abbreviated unit";
	}
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		snprintf(tok, sizeof(tok), "_%s", types[i]);
		if (strstr(n, tok) != NULL)
			return "type in the name";
	}
	bool total = len > 6 && strcmp(n + len - 6, "_total") == 0;
	if (type == MGMT_PROM_COUNTER && !total)
		return "counter without _total";
	if (type != MGMT_PROM_COUNTER && total)
		return "non-counter with _total";
	if (type != MGMT_PROM_COUNTER) {
		static const char *const reserved[] = {"_count", "_sum", "_bucket"};
		for (size_t i = 0; i < 3; i++) {
			size_t t = strlen(reserved[i]);
			if (len > t && strcmp(n + len - t, reserved[i]) == 0)
				return "histogram/summary suffix";
		}
	}
	if (strstr(n, "milli") != NULL || strstr(n, "micro") != NULL || strstr(n, "nano") != NULL)
		return "not a base unit";
	return NULL;
}

struct conv_case {
	const char *family;       /* as mgmt_prom_name makes it */
	enum mgmt_prom_type type;
	const char *want;         /* the metric name */
	uint64_t per_unit;
};

/* Goal: every stats family becomes a metric name promtool has nothing to say about: counters
 * end in _total, times are in seconds (the divisor returned), ratios are ratios, no gauge
 * ends like a histogram's series, words that look like units are spelled out, info metrics
 * end in _info; each result passes the linter's rules as coded in lint() above.
 * Method: the shapes of the stats dump (agent.*.busy_ns, uptime_ms, busy_permille,
 * sleeps_per_s, dp.rx_not_us, *_bytes) and the edge cases of each rule. */
Test(mgmt_prom, conventions)
{
	static const struct conv_case cases[] = {
		{"omsd_dp_rx_pkts", MGMT_PROM_COUNTER, "omsd_dp_rx_pkts_total", 1},
		{"omsd_dp_rx_bytes", MGMT_PROM_COUNTER, "omsd_dp_rx_bytes_total", 1},
		{"omsd_agent_busy_ns", MGMT_PROM_COUNTER, "omsd_agent_busy_seconds_total",
		 1000000000},
		{"omsd_shard_oms_admit_wait_ns", MGMT_PROM_COUNTER,
		 "omsd_shard_oms_admit_wait_seconds_total", 1000000000},
		{"omsd_agent_max_cycle_ns", MGMT_PROM_GAUGE, "omsd_agent_max_cycle_seconds",
		 1000000000},
		{"omsd_x_us", MGMT_PROM_GAUGE, "omsd_x_seconds", 1000000},
		{"omsd_uptime_ms", MGMT_PROM_GAUGE, "omsd_uptime_seconds", 1000},
		{"omsd_x_s", MGMT_PROM_GAUGE, "omsd_x_seconds", 1},
		{"omsd_x_sec", MGMT_PROM_COUNTER, "omsd_x_seconds_total", 1},
		{"omsd_agent_busy_permille", MGMT_PROM_GAUGE, "omsd_agent_busy_ratio", 1000},
		{"omsd_x_percent", MGMT_PROM_GAUGE, "omsd_x_ratio", 100},
		{"omsd_agent_sleeps_per_s", MGMT_PROM_GAUGE, "omsd_agent_sleeps_per_second", 1},
		{"omsd_dp_rx_not_us", MGMT_PROM_COUNTER, "omsd_dp_rx_not_ours_total", 1},
		{"omsd_dp_not_us_x_not_us", MGMT_PROM_COUNTER, "omsd_dp_not_ours_x_not_ours_total",
		 1},
		{"omsd_dp_not_used", MGMT_PROM_COUNTER, "omsd_dp_not_used_total", 1},
		{"omsd_status", MGMT_PROM_GAUGE, "omsd_status", 1},
		{"omsd_x_count", MGMT_PROM_COUNTER, "omsd_x_total", 1},
		{"omsd_x_total", MGMT_PROM_COUNTER, "omsd_x_total", 1},
		{"omsd_x_sum", MGMT_PROM_COUNTER, "omsd_x_sum_total", 1},
		{"omsd_x_count", MGMT_PROM_GAUGE, "omsd_x_count_now", 1},
		{"omsd_x_sum", MGMT_PROM_GAUGE, "omsd_x_sum_now", 1},
		{"omsd_x_bucket", MGMT_PROM_GAUGE, "omsd_x_bucket_now", 1},
		{"omsd_x_total", MGMT_PROM_GAUGE, "omsd_x_total_now", 1},
		{"omsd_x_info", MGMT_PROM_GAUGE, "omsd_x_info_now", 1},
		{"omsd_shard_parked_now", MGMT_PROM_GAUGE, "omsd_shard_parked_now", 1},
		{"omsd_shard_role", MGMT_PROM_INFO, "omsd_shard_role_info", 1},
		{"omsd_build_info", MGMT_PROM_INFO, "omsd_build_info", 1},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct conv_case *c = &cases[i];
		char f[96];
		uint64_t per_unit = 0;
		snprintf(f, sizeof(f), "%s", c->family);
		cr_assert(eq(int, mgmt_prom_conventions(f, sizeof(f), c->type, &per_unit), 0),
			  "%s", c->family);
		cr_assert(eq(str, f, (char *)c->want), "%s", c->family);
		cr_assert(eq(u64, per_unit, c->per_unit), "%s", c->family);
		/* Info metrics are gauges to the linter. */
		const char *problem =
			lint(f, c->type == MGMT_PROM_INFO ? MGMT_PROM_GAUGE : c->type);
		cr_assert(eq(ptr, (void *)problem, NULL), "%s → %s: %s", c->family, f, problem);
	}
}

/* Goal: a name the conventions cannot render is refused, and one that would not fit is
 * refused without being truncated.
 * Method: a rate per millisecond; a text named in a unit; families that fill their buffer
 * before _total or seconds. */
Test(mgmt_prom, conventions_refused)
{
	char f[32];
	uint64_t per_unit;
	snprintf(f, sizeof(f), "omsd_x_per_ms");
	cr_assert(eq(int, mgmt_prom_conventions(f, sizeof(f), MGMT_PROM_GAUGE, &per_unit),
		     -EINVAL));
	snprintf(f, sizeof(f), "omsd_a_long_counter_name_xx");
	cr_assert(eq(int, mgmt_prom_conventions(f, sizeof(f), MGMT_PROM_COUNTER, &per_unit),
		     -ENOSPC));
	cr_assert(eq(str, f, "omsd_a_long_counter_name_xx"));
	snprintf(f, sizeof(f), "omsd_x_elapsed_ms");
	cr_assert(eq(int, mgmt_prom_conventions(f, sizeof(f), MGMT_PROM_INFO, &per_unit),
		     -EINVAL));
	snprintf(f, sizeof(f), "omsd_abcdefghijklmnop_busy_ns");
	cr_assert(eq(int, mgmt_prom_conventions(f, sizeof(f), MGMT_PROM_GAUGE, &per_unit),
		     -ENOSPC));
}

/* Goal: the HELP text names the stats line a family comes from, its ids as <label>.
 * Method: the shapes of names_and_labels; a name given by length inside a longer line. */
Test(mgmt_prom, pattern)
{
	char p[64];
	const char *line = "shard.1.oms.naks 12";
	cr_assert(eq(int, mgmt_prom_pattern(line, 16, keys, p, sizeof(p)), 0));
	cr_assert(eq(str, p, "shard.<shard>.oms.naks"));
	const char *n = "shard.12.member.3.lag";
	mgmt_prom_pattern(n, strlen(n), keys, p, sizeof(p));
	cr_assert(eq(str, p, "shard.<shard>.member.<member>.lag"));
	n = "agent.io.busy_ns";
	mgmt_prom_pattern(n, strlen(n), keys, p, sizeof(p));
	cr_assert(eq(str, p, "agent.<lcore>.busy_ns"));
	n = "dp.shard";
	mgmt_prom_pattern(n, strlen(n), keys, p, sizeof(p));
	cr_assert(eq(str, p, "dp.shard"));
	n = "uptime_ms";
	mgmt_prom_pattern(n, strlen(n), keys, p, sizeof(p));
	cr_assert(eq(str, p, "uptime_ms"));
	cr_assert(eq(int, mgmt_prom_pattern("shard.1.oms.naks", 16, keys, p, 8), -ENOSPC));
	cr_assert(eq(str, p, ""));
}

/* Goal: an empty hist and no labels still give a valid histogram (all zero).
 * Method: bounds 1, 2; no labels. */
Test(mgmt_prom, histogram_empty_unlabelled)
{
	static struct hist h;
	hist_init(&h);
	static const uint64_t bounds[] = {1, 2};
	char buf[1024];
	struct mgmt_out o;
	mgmt_out_init(&o, buf, sizeof(buf));
	mgmt_prom_histogram(&o, "x", "", &h, bounds, 2, 1);
	cr_assert(eq(str, buf, "x_bucket{le=\"1\"} 0\nx_bucket{le=\"2\"} 0\nx_bucket{le=\"+Inf\"} 0\n"
			       "x_sum 0\nx_count 0\n"));
}

/* Goal: dotted counter names map to one family per counter, with ids as labels.
 * Method: the shapes of the stats dump: shard.N.x, shard.N.member.M.lag, agent.io.x,
 * dp.frame_err.cause, a key as the last token, odd characters. */
Test(mgmt_prom, names_and_labels)
{
	char f[96], l[96];
	cr_assert(eq(int, name("shard.1.oms.naks", f, l), 0));
	cr_assert(eq(str, f, "omsd_shard_oms_naks"));
	cr_assert(eq(str, l, "shard=\"1\""));
	cr_assert(eq(int, name("shard.12.member.3.lag", f, l), 0));
	cr_assert(eq(str, f, "omsd_shard_member_lag"));
	cr_assert(eq(str, l, "shard=\"12\",member=\"3\""));
	cr_assert(eq(int, name("agent.io.max_cycle_ns", f, l), 0));
	cr_assert(eq(str, f, "omsd_agent_max_cycle_ns"));
	cr_assert(eq(str, l, "lcore=\"io\""));
	cr_assert(eq(int, name("shard.1.nak.NOT_OWNER", f, l), 0));
	cr_assert(eq(str, f, "omsd_shard_nak"));
	cr_assert(eq(str, l, "shard=\"1\",reason=\"NOT_OWNER\""));
	cr_assert(eq(int, name("dp.frame_err.bad_mac", f, l), 0));
	cr_assert(eq(str, f, "omsd_dp_frame_err"));
	cr_assert(eq(str, l, "cause=\"bad_mac\""));
	/* A key as the last token is a plain name part. */
	cr_assert(eq(int, name("dp.shard", f, l), 0));
	cr_assert(eq(str, f, "omsd_dp_shard"));
	cr_assert(eq(str, l, ""));
	cr_assert(eq(int, name("shard.2.cns.ELECTIONS_STARTED", f, l), 0));
	cr_assert(eq(str, f, "omsd_shard_cns_elections_started"));
	cr_assert(eq(int, name("a-b.c", f, l), 0));
	cr_assert(eq(str, f, "omsd_a_b_c"));
	cr_assert(eq(int, name("agent.x\"y.z", f, l), 0));
	cr_assert(eq(str, l, "lcore=\"x\\\"y\""));
}

/* Goal: names that are empty, have empty tokens or do not fit are refused, not truncated.
 * Method: "", "a..b", a 200-byte token into a 96-byte family. */
Test(mgmt_prom, names_refused)
{
	char f[96], l[96], big[201];
	cr_assert(eq(int, name("", f, l), -EINVAL));
	cr_assert(eq(int, name("a..b", f, l), -EINVAL));
	cr_assert(eq(int, name("a.", f, l), -EINVAL));
	memset(big, 'x', 200);
	big[200] = '\0';
	cr_assert(eq(int, name(big, f, l), -ENOSPC));
}

static int
parse(const char *req, char *m, char *p)
{
	return mgmt_http_parse(req, strlen(req), m, 16, p, 64);
}

/* Goal: the request parser takes a well-formed head, waits for an incomplete one and refuses
 * a malformed one.
 * Method: a GET with headers; the same without its empty line; bad request lines. */
Test(mgmt_http, parse)
{
	char m[16], p[64];
	const char *ok = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
	cr_assert(eq(int, parse(ok, m, p), (int)strlen(ok)));
	cr_assert(eq(str, m, "GET"));
	cr_assert(eq(str, p, "/metrics"));
	cr_assert(eq(int, parse("GET /metrics HTTP/1.1\r\nHost: x\r\n", m, p), 0));
	cr_assert(eq(int, parse("GARBAGE\r\n\r\n", m, p), -EINVAL));
	cr_assert(eq(int, parse("GET metrics HTTP/1.1\r\n\r\n", m, p), -EINVAL));
	cr_assert(eq(int, parse("GET /metrics HTTP/2.0\r\n\r\n", m, p), -EINVAL));
	cr_assert(eq(int, parse("get /metrics HTTP/1.1\r\n\r\n", m, p), -EINVAL));
	cr_assert(eq(int, parse("GET /a\x01 HTTP/1.1\r\n\r\n", m, p), -EINVAL));
	cr_assert(eq(int, mgmt_http_parse("GE\0T", 4, m, 16, p, 64), -EINVAL));
}

/* A server on 127.0.0.1 with an ephemeral port, polled by the test between its calls. */
static struct mgmt_http *srv;
static int renders;

static int
body(void *ctx, struct mgmt_out *o)
{
	(void)ctx;
	renders++;
	mgmt_out_raw(o, "omsd_up 1\n");
	return 0;
}

static uint64_t
ms_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int
dial(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(mgmt_http_port(srv)),
				.sin_addr = {.s_addr = htonl(INADDR_LOOPBACK)}};
	cr_assert(eq(int, connect(fd, (struct sockaddr *)&a, sizeof(a)), 0));
	return fd;
}

/* Send req on a new connection, poll the server until it closes, return the answer. */
static void
exchange(const char *req, size_t len, char *resp, size_t cap)
{
	int fd = dial();
	cr_assert(eq(sz, (size_t)send(fd, req, len, MSG_NOSIGNAL), len));
	size_t got = 0;
	for (int i = 0; i < 2000; i++) {
		mgmt_http_poll(srv, ms_now());
		ssize_t n = recv(fd, resp + got, cap - 1 - got, MSG_DONTWAIT);
		if (n == 0)
			break;
		if (n > 0)
			got += (size_t)n;
		else
			usleep(1000);
	}
	resp[got] = '\0';
	close(fd);
}

static void
start(void)
{
	cr_assert(eq(int, mgmt_http_open(&srv, htonl(INADDR_LOOPBACK), 0, body, NULL), 0));
	cr_assert(gt(u16, mgmt_http_port(srv), 0));
}

static void
finish(void)
{
	mgmt_http_close(srv);
	srv = NULL;
}

/* Goal: GET /metrics answers 200 with the Prometheus content type and the body; other
 * paths 404, other methods 405, a malformed line 400, and the server keeps serving.
 * Method: one connection per request against the real socket. */
Test(mgmt_http, answers, .init = start, .fini = finish)
{
	static char r[8192];
	const char *get = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
	exchange(get, strlen(get), r, sizeof(r));
	cr_assert(has(r, "HTTP/1.1 200 OK\r\n"), "%s", r);
	cr_assert(has(r, "Content-Type: text/plain; version=0.0.4"), "%s", r);
	cr_assert(has(r, "Content-Length: 10\r\n"), "%s", r);
	cr_assert(has(r, "\r\n\r\nomsd_up 1\n"), "%s", r);
	const char *nf = "GET /other HTTP/1.0\r\n\r\n";
	exchange(nf, strlen(nf), r, sizeof(r));
	cr_assert(has(r, "HTTP/1.1 404 Not Found"), "%s", r);
	const char *post = "POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n";
	exchange(post, strlen(post), r, sizeof(r));
	cr_assert(has(r, "HTTP/1.1 405"), "%s", r);
	const char *bad = "\x16\x03\x01 junk\r\n\r\n";
	exchange(bad, strlen(bad), r, sizeof(r));
	cr_assert(has(r, "HTTP/1.1 400 Bad Request"), "%s", r);
	exchange(get, strlen(get), r, sizeof(r));
	cr_assert(has(r, "HTTP/1.1 200 OK\r\n"), "%s", r);
	struct mgmt_http_stats st;
	mgmt_http_stats_get(srv, &st);
	cr_assert(eq(u64, st.ok, 2));
	cr_assert(eq(u64, st.not_found, 1));
	cr_assert(eq(u64, st.bad_method, 1));
	cr_assert(eq(u64, st.bad_request, 1));
	cr_assert(eq(int, renders, 2));
}

/* Goal: a request head larger than MGMT_HTTP_REQ_MAX is refused (431) without growing a
 * buffer, and a connection that sends nothing is closed after MGMT_HTTP_IDLE_MS.
 * Method: 4 KiB of header bytes without an end; then an idle connection with the poll
 * clock moved past the limit. */
Test(mgmt_http, bounded, .init = start, .fini = finish)
{
	static char req[MGMT_HTTP_REQ_MAX + 64], r[4096];
	memcpy(req, "GET /metrics HTTP/1.1\r\nX: ", 26);
	memset(req + 26, 'a', sizeof(req) - 26);
	exchange(req, MGMT_HTTP_REQ_MAX, r, sizeof(r));
	cr_assert(has(r, "HTTP/1.1 431"), "%s", r);
	int fd = dial();
	uint64_t t = ms_now();
	for (int i = 0; i < 50; i++) {
		mgmt_http_poll(srv, t);
		usleep(1000);
	}
	mgmt_http_poll(srv, t + MGMT_HTTP_IDLE_MS + 1);
	char c;
	ssize_t n = -1;
	for (int i = 0; i < 200 && n < 0; i++) {
		n = recv(fd, &c, 1, MSG_DONTWAIT);
		usleep(1000);
	}
	cr_assert(eq(sz, (size_t)n, 0), "idle connection not closed");
	close(fd);
	struct mgmt_http_stats st;
	mgmt_http_stats_get(srv, &st);
	cr_assert(eq(u64, st.too_large, 1));
	cr_assert(eq(u64, st.timeouts, 1));
}
