/* SPDX-License-Identifier: Apache-2.0 */
/* The views' pure helpers: Prometheus histograms and names, the metrics HTTP listener (its
 * request parser, and the server over a real loopback socket). */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <errno.h>
#include <netinet/in.h>
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
	mgmt_prom_histogram(&o, "omsd_latency_hist_ns", "shard=\"1\"", &h, bounds, 3);
	cr_assert(not(o.overflow));
	cr_assert(has(buf, "omsd_latency_hist_ns_bucket{shard=\"1\",le=\"10\"} 10\n"), "%s", buf);
	cr_assert(has(buf, "omsd_latency_hist_ns_bucket{shard=\"1\",le=\"50\"} 50\n"), "%s", buf);
	cr_assert(has(buf, "omsd_latency_hist_ns_bucket{shard=\"1\",le=\"1000\"} 100\n"), "%s", buf);
	cr_assert(has(buf, "omsd_latency_hist_ns_bucket{shard=\"1\",le=\"+Inf\"} 101\n"), "%s", buf);
	cr_assert(has(buf, "omsd_latency_hist_ns_count{shard=\"1\"} 101\n"), "%s", buf);
	cr_assert(has(buf, "omsd_latency_hist_ns_sum{shard=\"1\"} 1005050\n"), "%s", buf);
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
	mgmt_prom_histogram(&o, "x", "", &h, bounds, 2);
	cr_assert(eq(str, buf, "x_bucket{le=\"1\"} 0\nx_bucket{le=\"2\"} 0\nx_bucket{le=\"+Inf\"} 0\n"
			       "x_sum 0\nx_count 0\n"));
}

static const char *const keys[] = {"shard", "shard", "agent", "lcore", "member", "member",
				   "nak", "reason", "frame_err", "cause", NULL};

static int
name(const char *dotted, char *fam, char *lab)
{
	return mgmt_prom_name(dotted, keys, fam, 96, lab, 96);
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
