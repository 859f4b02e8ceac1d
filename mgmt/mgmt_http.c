/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The metrics listener ([mgmt] metrics_listen): a minimal HTTP/1.1 server for Prometheus
 * scrapers, polled by the main lcore without ever blocking it.
 *
 * GET /metrics answers 200 with the body callback's text (Content-Type text/plain;
 * version=0.0.4); any other path 404, any other method 405, a malformed request 400, a
 * request head over MGMT_HTTP_REQ_MAX 431. Every answer closes the connection
 * (Connection: close), so there is no keep-alive state. At most MGMT_HTTP_CLIENTS_MAX
 * connections: one more is answered 503 and closed. A client that sends nothing, or does
 * not read its answer, for MGMT_HTTP_IDLE_MS loses its connection.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "mgmt.h"

struct http_conn {
	int fd;                 /* -1: free */
	uint32_t in_len;        /* request bytes held */
	uint64_t last_ms;       /* last progress (accept, read, write) */
	char in[MGMT_HTTP_REQ_MAX + 1];
	char *out;              /* MGMT_HTTP_OUT_MAX bytes */
	size_t out_len;         /* answer bytes */
	size_t out_off;         /* bytes sent */
};

struct mgmt_http {
	int listen_fd;
	mgmt_http_body_fn *fn;
	void *ctx;
	char *body;             /* MGMT_HTTP_OUT_MAX: the body being rendered */
	struct http_conn conns[MGMT_HTTP_CLIENTS_MAX];
	struct mgmt_http_stats stats;
};

int
mgmt_http_parse(const char *buf, size_t len, char *method, size_t method_cap, char *path,
		size_t path_cap)
{
	/* The head ends at the first empty line. */
	const char *end = NULL;
	for (size_t i = 0; i + 3 < len; i++) {
		if (buf[i] == '\r' && buf[i + 1] == '\n' && buf[i + 2] == '\r' && buf[i + 3] == '\n') {
			end = buf + i + 4;
			break;
		}
	}
	if (end == NULL) {
		/* Incomplete, unless what is there already cannot be a request line. */
		for (size_t i = 0; i < len; i++)
			if (buf[i] == '\0')
				return -EINVAL;
		return 0;
	}
	/* A NUL anywhere in the head is malformed, as it is in a head still arriving (above):
	 * the answer must not depend on how the bytes were split on the way. */
	if (memchr(buf, '\0', (size_t)(end - buf)) != NULL)
		return -EINVAL;
	/* Request line: METHOD SP PATH SP HTTP/1.x CRLF */
	const char *eol = memchr(buf, '\r', (size_t)(end - buf));
	const char *sp1 = memchr(buf, ' ', (size_t)(eol - buf));
	if (sp1 == NULL || sp1 == buf)
		return -EINVAL;
	const char *sp2 = memchr(sp1 + 1, ' ', (size_t)(eol - sp1 - 1));
	if (sp2 == NULL || sp2 == sp1 + 1 || sp1[1] != '/')
		return -EINVAL;
	size_t vlen = (size_t)(eol - sp2 - 1);
	if (vlen != 8 || (memcmp(sp2 + 1, "HTTP/1.1", 8) != 0 && memcmp(sp2 + 1, "HTTP/1.0", 8) != 0))
		return -EINVAL;
	size_t mlen = (size_t)(sp1 - buf), plen = (size_t)(sp2 - sp1 - 1);
	for (size_t i = 0; i < mlen; i++)
		if (buf[i] < 'A' || buf[i] > 'Z')
			return -EINVAL;
	for (size_t i = 0; i < plen; i++)
		if ((unsigned char)sp1[1 + i] <= ' ' || (unsigned char)sp1[1 + i] >= 0x7f)
			return -EINVAL;
	if (mlen >= method_cap || plen >= path_cap)
		return -EINVAL;
	memcpy(method, buf, mlen);
	method[mlen] = '\0';
	memcpy(path, sp1 + 1, plen);
	path[plen] = '\0';
	return (int)(end - buf);
}

int
mgmt_http_open(struct mgmt_http **out, uint32_t ip_be, uint16_t port, mgmt_http_body_fn *fn,
	       void *ctx)
{
	int err;
	struct mgmt_http *h = calloc(1, sizeof(*h));
	if (h == NULL)
		return -ENOMEM;
	h->fn = fn;
	h->ctx = ctx;
	h->listen_fd = -1;
	h->body = malloc(MGMT_HTTP_OUT_MAX);
	for (int i = 0; i < MGMT_HTTP_CLIENTS_MAX; i++) {
		h->conns[i].fd = -1;
		h->conns[i].out = malloc(MGMT_HTTP_OUT_MAX);
		if (h->conns[i].out == NULL) {
			err = -ENOMEM;
			goto fail;
		}
	}
	if (h->body == NULL) {
		err = -ENOMEM;
		goto fail;
	}
	h->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (h->listen_fd < 0) {
		err = -errno;
		goto fail;
	}
	int one = 1;
	setsockopt(h->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port),
				.sin_addr = {.s_addr = ip_be}};
	if (bind(h->listen_fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    listen(h->listen_fd, 16) < 0) {
		err = -errno;
		goto fail;
	}
	*out = h;
	return 0;
fail:
	mgmt_http_close(h);
	return err;
}

uint16_t
mgmt_http_port(const struct mgmt_http *h)
{
	struct sockaddr_in a;
	socklen_t len = sizeof(a);
	if (getsockname(h->listen_fd, (struct sockaddr *)&a, &len) < 0)
		return 0;
	return ntohs(a.sin_port);
}

static void
conn_close(struct http_conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	c->in_len = 0;
	c->out_len = 0;
	c->out_off = 0;
}

void
mgmt_http_close(struct mgmt_http *h)
{
	if (h == NULL)
		return;
	for (int i = 0; i < MGMT_HTTP_CLIENTS_MAX; i++) {
		conn_close(&h->conns[i]);
		free(h->conns[i].out);
	}
	if (h->listen_fd >= 0)
		close(h->listen_fd);
	free(h->body);
	free(h);
}

/* Queue an answer on c (replacing nothing: one answer per connection). */
static void
respond(struct http_conn *c, int code, const char *reason, const char *type, const char *body,
	size_t body_len)
{
	int n = snprintf(c->out, MGMT_HTTP_OUT_MAX,
			 "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
			 "Connection: close\r\n\r\n",
			 code, reason, type, body_len);
	if (n < 0 || (size_t)n + body_len > MGMT_HTTP_OUT_MAX) {
		n = snprintf(c->out, MGMT_HTTP_OUT_MAX,
			     "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n"
			     "Connection: close\r\n\r\n");
		body_len = 0;
	} else {
		memcpy(c->out + n, body, body_len);
	}
	c->out_len = (size_t)n + body_len;
	c->out_off = 0;
}

static void
respond_text(struct http_conn *c, int code, const char *reason, const char *text)
{
	respond(c, code, reason, "text/plain; charset=utf-8", text, strlen(text));
}

static void
handle(struct mgmt_http *h, struct http_conn *c, int head_len)
{
	char method[16], path[256];
	if (head_len < 0) {
		h->stats.bad_request++;
		respond_text(c, 400, "Bad Request", "malformed request\n");
		return;
	}
	mgmt_http_parse(c->in, c->in_len, method, sizeof(method), path, sizeof(path));
	h->stats.requests++;
	if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
		h->stats.bad_method++;
		respond_text(c, 405, "Method Not Allowed", "only GET\n");
		return;
	}
	char *q = strchr(path, '?'); /* a scraper may add parameters; they change nothing */
	if (q != NULL)
		*q = '\0';
	if (strcmp(path, "/metrics") != 0) {
		h->stats.not_found++;
		respond_text(c, 404, "Not Found", "not found: try /metrics\n");
		return;
	}
	struct mgmt_out o;
	mgmt_out_init(&o, h->body, MGMT_HTTP_OUT_MAX - 512);
	int rc = h->fn(h->ctx, &o);
	if (rc < 0 || o.overflow) {
		h->stats.errors++;
		respond_text(c, 500, "Internal Server Error", "metrics unavailable\n");
		return;
	}
	h->stats.ok++;
	respond(c, 200, "OK", "text/plain; version=0.0.4; charset=utf-8", h->body,
		strcmp(method, "HEAD") == 0 ? 0 : o.len);
	if (strcmp(method, "HEAD") == 0) {
		/* HEAD: the length of what GET would send, no body. */
		int n = snprintf(c->out, MGMT_HTTP_OUT_MAX,
				 "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4; "
				 "charset=utf-8\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
				 o.len);
		c->out_len = (size_t)n;
	}
}

static void
conn_read(struct mgmt_http *h, struct http_conn *c, uint64_t now_ms)
{
	for (;;) {
		if (c->in_len >= MGMT_HTTP_REQ_MAX) {
			h->stats.too_large++;
			respond_text(c, 431, "Request Header Fields Too Large", "request too large\n");
			shutdown(c->fd, SHUT_RD);
			return;
		}
		ssize_t n = recv(c->fd, c->in + c->in_len, MGMT_HTTP_REQ_MAX - c->in_len, 0);
		if (n == 0) {
			conn_close(c); /* closed before a whole request */
			return;
		}
		if (n < 0) {
			if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
				conn_close(c);
			return;
		}
		c->in_len += (uint32_t)n;
		c->last_ms = now_ms;
		char m[16], p[256];
		int head = mgmt_http_parse(c->in, c->in_len, m, sizeof(m), p, sizeof(p));
		if (head != 0) {
			handle(h, c, head);
			return;
		}
	}
}

/* Send what is queued; close once all of it is out. */
static void
conn_write(struct http_conn *c, uint64_t now_ms)
{
	while (c->out_off < c->out_len) {
		ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off,
				 MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0) {
			if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
				conn_close(c);
			return;
		}
		c->out_off += (size_t)n;
		c->last_ms = now_ms;
	}
	conn_close(c);
}

int
mgmt_http_poll(struct mgmt_http *h, uint64_t now_ms)
{
	int done = 0;
	for (int accepted = 0; accepted < MGMT_HTTP_CLIENTS_MAX; accepted++) {
		int fd = accept4(h->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			break;
		int i;
		for (i = 0; i < MGMT_HTTP_CLIENTS_MAX && h->conns[i].fd >= 0; i++)
			;
		if (i == MGMT_HTTP_CLIENTS_MAX) {
			static const char busy[] = "HTTP/1.1 503 Service Unavailable\r\n"
						   "Content-Length: 0\r\nConnection: close\r\n\r\n";
			(void)!send(fd, busy, sizeof(busy) - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
			close(fd);
			h->stats.busy++;
			continue;
		}
		h->conns[i].fd = fd;
		h->conns[i].last_ms = now_ms;
		h->stats.accepted++;
	}
	for (int i = 0; i < MGMT_HTTP_CLIENTS_MAX; i++) {
		struct http_conn *c = &h->conns[i];
		if (c->fd < 0)
			continue;
		if (c->out_len == 0)
			conn_read(h, c, now_ms);
		if (c->fd >= 0 && c->out_len > 0) {
			conn_write(c, now_ms);
			done += c->fd < 0;
		}
		if (c->fd >= 0 && now_ms - c->last_ms > MGMT_HTTP_IDLE_MS) {
			h->stats.timeouts++;
			conn_close(c);
		}
	}
	return done;
}

int
mgmt_http_fd(const struct mgmt_http *h)
{
	return h->listen_fd;
}

void
mgmt_http_stats_get(const struct mgmt_http *h, struct mgmt_http_stats *out)
{
	*out = h->stats;
}
