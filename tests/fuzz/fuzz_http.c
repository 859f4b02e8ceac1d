/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the metrics listener (mgmt/mgmt_http.c, [mgmt] metrics_listen) as a
 * scraper meets it: a real listener on 127.0.0.1, a real TCP connection, the input sent as
 * the request in pieces with the listener polled between them.
 *
 * Byte 0 says where the pieces end (bit k: a cut after byte 8(k+1) of the request), the rest
 * is the request (at most MGMT_HTTP_REQ_MAX bytes).
 * Properties: the listener never crashes; it answers exactly one well-formed response (status
 * line, Content-Length equal to the body that follows, Connection: close) or, for a request
 * cut short by the client, closes without answering; and the status is the one the request
 * as a whole calls for (200 for GET or HEAD /metrics, 404 another path, 405 another method,
 * 400 malformed, 431 too large), however the bytes were split on the way.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/check.h"
#include "mgmt/mgmt.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct mgmt_http *http;
static uint16_t port;

static int
body(void *ctx, struct mgmt_out *o)
{
	(void)ctx;
	mgmt_out_raw(o, "# HELP omsd_up 1 when the node runs\nomsd_up 1\n");
	return 0;
}

/* The status the listener owes this request, judged on the whole of it. */
static int
expected(const char *req, size_t len)
{
	char method[16], path[256];
	int rc = mgmt_http_parse(req, len, method, sizeof(method), path, sizeof(path));
	if (rc < 0)
		return 400;
	if (rc == 0)
		return len >= MGMT_HTTP_REQ_MAX ? 431 : 0;
	if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
		return 405;
	char *q = strchr(path, '?');
	if (q != NULL)
		*q = '\0';
	return strcmp(path, "/metrics") == 0 ? 200 : 404;
}

static bool
readable(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	int n;
	while ((n = poll(&p, 1, 0)) < 0)
		CHECK(errno == EINTR);
	return n == 1;
}

static void
send_all(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);
		if (n < 0) {
			CHECK(errno == EINTR);
			continue;
		}
		buf += n;
		len -= (size_t)n;
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1 || size - 1 > MGMT_HTTP_REQ_MAX)
		return 0;
	if (http == NULL) {
		CHECK(mgmt_http_open(&http, htonl(INADDR_LOOPBACK), 0, body, NULL) == 0);
		port = mgmt_http_port(http);
	}
	const char *req = (const char *)data + 1;
	size_t len = size - 1;
	int want = expected(req, len);

	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	CHECK(fd >= 0);
	/* Closed with a reset: a hundred thousand runs leave no TIME_WAIT to run the
	 * ephemeral ports out (connect would fail with EADDRNOTAVAIL). */
	struct linger lg = {.l_onoff = 1, .l_linger = 0};
	CHECK(setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)) == 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port),
				.sin_addr = {.s_addr = htonl(INADDR_LOOPBACK)}};
	/* libFuzzer's timers interrupt system calls: every call here survives EINTR. */
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
		CHECK(errno == EINTR);
		struct pollfd p = {.fd = fd, .events = POLLOUT};
		while (poll(&p, 1, -1) != 1)
			CHECK(errno == EINTR);
		int err = 0;
		socklen_t el = sizeof(err);
		CHECK(getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) == 0 && err == 0);
	}
	mgmt_http_poll(http, 0);
	size_t off = 0;
	for (int k = 0; k <= 8 && off < len && !readable(fd); k++) {
		size_t cut = len;
		for (int b = k; b < 8; b++) {
			if (data[0] & (1u << b)) {
				cut = 8u * (size_t)(b + 1) < len ? 8u * (size_t)(b + 1) : len;
				break;
			}
		}
		if (cut <= off)
			cut = len;
		send_all(fd, req + off, cut - off);
		off = cut;
		mgmt_http_poll(http, 0);
	}
	if (!readable(fd)) {
		/* The client is done sending: a listener still waiting sees the end of input. */
		shutdown(fd, SHUT_WR);
		mgmt_http_poll(http, 0);
	}
	static char resp[MGMT_HTTP_OUT_MAX];
	size_t got = 0;
	for (;;) {
		ssize_t n = recv(fd, resp + got, sizeof(resp) - 1 - got, MSG_DONTWAIT);
		if (n > 0) {
			got += (size_t)n;
			continue;
		}
		if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
			break;
		mgmt_http_poll(http, 0);
	}
	close(fd);
	mgmt_http_poll(http, 0);
	resp[got] = '\0';
	if (want == 0) {
		CHECK(got == 0); /* cut short by the client: no answer */
		return 0;
	}
	int code = 0;
	CHECK(sscanf(resp, "HTTP/1.1 %d ", &code) == 1);
	CHECK(code == want);
	char *head_end = strstr(resp, "\r\n\r\n");
	CHECK(head_end != NULL);
	CHECK(strstr(resp, "Connection: close\r\n") != NULL);
	const char *cl = strstr(resp, "Content-Length: ");
	CHECK(cl != NULL && cl < head_end);
	size_t clen = strtoul(cl + 16, NULL, 10);
	size_t body_len = got - (size_t)(head_end + 4 - resp);
	bool head = len >= 5 && memcmp(req, "HEAD ", 5) == 0 && code == 200;
	CHECK(head ? body_len == 0 : body_len == clen);
	return 0;
}
