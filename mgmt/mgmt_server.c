/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The control socket: non-blocking accept/read/write with poll(), JSON lines, a command
 * table, and deferred answers for requests that wait for a log commit. Runs on the main
 * lcore only. Every bound is explicit: clients, line length, pending answers, output.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "mgmt.h"

#define OUT_MAX (640 * 1024)  /* unsent output per client before it is dropped */
#define IDLE_MS_DEFAULT 10000 /* a client with no request for this long is closed */
#define PENDING_MAX 256       /* deferred answers outstanding */
#define RESULT_MAX (512 * 1024) /* metrics of a node with many shards */

struct client {
	int fd;              /* -1: free slot */
	uint32_t gen;        /* bumped when the slot is reused: stale tokens miss */
	size_t in_len;
	size_t out_len;
	bool discarding;     /* inside an overlong line: drop until newline */
	uint64_t active_ms;  /* accepted or last request line (monotonic ms) */
	char *in;            /* MGMT_LINE_MAX */
	char *out;           /* OUT_MAX */
};

struct command {
	char name[32];
	mgmt_handler_fn *fn;
	void *ctx;
	const char *help;
};

struct pending {
	bool used;
	uint32_t slot;
	uint32_t gen;
	uint64_t id;
};

struct mgmt_server {
	int listen_fd;
	char path[108];
	struct client clients[MGMT_CLIENTS_MAX];
	struct command commands[MGMT_COMMANDS_MAX];
	uint32_t command_count;
	struct pending pending[PENDING_MAX];
	struct mgmt_stats stats;
	uint32_t idle_ms;               /* idle deadline of a client (mgmt_server_set_idle_ms) */
	struct mgmt_json json;          /* one request at a time */
	char result[RESULT_MAX];
};

static int
set_nonblock(int fd)
{
	int flags = fcntl(fd, F_GETFL);
	if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
		return -errno;
	return 0;
}

static uint64_t
mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

int
mgmt_dir_check(const char *dir, char *why, size_t cap)
{
	struct stat st;
	if (lstat(dir, &st) < 0) {
		snprintf(why, cap, "%s: %s", dir, strerror(errno));
		return -errno;
	}
	if (!S_ISDIR(st.st_mode)) {
		snprintf(why, cap, "%s is not a directory%s", dir,
			 S_ISLNK(st.st_mode) ? " (a symbolic link)" : "");
		return -EPERM;
	}
	if (st.st_uid != 0 && st.st_uid != geteuid()) {
		snprintf(why, cap,
			 "%s is owned by uid %u, not by root or this service (uid %u): whoever "
			 "owns it can replace the socket",
			 dir, (unsigned)st.st_uid, (unsigned)geteuid());
		return -EPERM;
	}
	if (st.st_mode & (S_IWGRP | S_IWOTH)) {
		snprintf(why, cap,
			 "%s is writable by its group or by others (mode %04o): they can replace "
			 "the socket",
			 dir, (unsigned)(st.st_mode & 07777));
		return -EPERM;
	}
	return 0;
}

/* The directory part of a socket path ("." when there is none). */
static void
dir_of(const char *path, char *dir, size_t cap)
{
	snprintf(dir, cap, "%s", path);
	char *slash = strrchr(dir, '/');
	if (slash == NULL)
		snprintf(dir, cap, ".");
	else if (slash == dir)
		dir[1] = '\0';
	else
		*slash = '\0';
}

int
mgmt_socket_dir_check(const char *path, char *why, size_t cap)
{
	char dir[108];
	dir_of(path, dir, sizeof(dir));
	return mgmt_dir_check(dir, why, cap);
}

static int
mkdir_parents(const char *path)
{
	char dir[108];
	snprintf(dir, sizeof(dir), "%s", path);
	char *slash = strrchr(dir, '/');
	if (slash == NULL || slash == dir)
		return 0;
	*slash = '\0';
	for (char *p = dir + 1; *p != '\0'; p++) {
		if (*p == '/') {
			*p = '\0';
			if (mkdir(dir, 0755) < 0 && errno != EEXIST)
				return -errno;
			*p = '/';
		}
	}
	if (mkdir(dir, 0755) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

int
mgmt_server_open(struct mgmt_server **out, const char *path, const char *group, mode_t mode)
{
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	int err;

	if (strlen(path) >= sizeof(addr.sun_path))
		return -ENAMETOOLONG;
	struct mgmt_server *s = calloc(1, sizeof(*s));
	if (s == NULL)
		return -ENOMEM;
	for (int i = 0; i < MGMT_CLIENTS_MAX; i++) {
		s->clients[i].fd = -1;
		s->clients[i].in = malloc(MGMT_LINE_MAX);
		s->clients[i].out = malloc(OUT_MAX);
		if (s->clients[i].in == NULL || s->clients[i].out == NULL) {
			err = -ENOMEM;
			goto fail_alloc;
		}
	}
	snprintf(s->path, sizeof(s->path), "%s", path);
	snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path);

	err = mkdir_parents(path);
	if (err < 0)
		goto fail_alloc;
	/* A directory someone else controls lets them swap the socket for their own and
	 * answer the operator's commands (docs/appliance.md, "Control socket"). */
	char why[256];
	err = mgmt_socket_dir_check(path, why, sizeof(why));
	if (err < 0)
		goto fail_alloc;
	s->idle_ms = IDLE_MS_DEFAULT;
	s->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s->listen_fd < 0) {
		err = -errno;
		goto fail_alloc;
	}
	unlink(path); /* a stale socket from a previous run */
	if (bind(s->listen_fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
		err = -errno;
		goto fail_socket;
	}
	if (group != NULL && group[0] != '\0') {
		struct group *g = getgrnam(group);
		if (g != NULL && chown(path, (uid_t)-1, g->gr_gid) < 0) {
			err = -errno;
			goto fail_bound;
		}
	}
	if (chmod(path, mode) < 0 || listen(s->listen_fd, 16) < 0 ||
	    set_nonblock(s->listen_fd) < 0) {
		err = -errno;
		goto fail_bound;
	}
	*out = s;
	return 0;

fail_bound:
	unlink(path);
fail_socket:
	close(s->listen_fd);
fail_alloc:
	for (int i = 0; i < MGMT_CLIENTS_MAX; i++) {
		free(s->clients[i].in);
		free(s->clients[i].out);
	}
	free(s);
	return err;
}

static void
client_close(struct mgmt_server *s, struct client *c)
{
	(void)s;
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	c->gen++;
	c->in_len = 0;
	c->out_len = 0;
	c->discarding = false;
}

void
mgmt_server_set_idle_ms(struct mgmt_server *s, uint32_t idle_ms)
{
	s->idle_ms = idle_ms > 0 ? idle_ms : IDLE_MS_DEFAULT;
}

void
mgmt_server_close(struct mgmt_server *s)
{
	if (s == NULL)
		return;
	for (int i = 0; i < MGMT_CLIENTS_MAX; i++) {
		client_close(s, &s->clients[i]);
		free(s->clients[i].in);
		free(s->clients[i].out);
	}
	close(s->listen_fd);
	unlink(s->path);
	free(s);
}

int
mgmt_register(struct mgmt_server *s, const char *cmd, mgmt_handler_fn *fn, void *ctx,
	      const char *help)
{
	if (s->command_count >= MGMT_COMMANDS_MAX || strlen(cmd) >= sizeof(s->commands[0].name))
		return -ENOSPC;
	struct command *c = &s->commands[s->command_count++];
	snprintf(c->name, sizeof(c->name), "%s", cmd);
	c->fn = fn;
	c->ctx = ctx;
	c->help = help;
	return 0;
}

/* Queue bytes for a client and try to write them now. */
static void
client_send(struct mgmt_server *s, struct client *c, const char *data, size_t n)
{
	if (c->fd < 0)
		return;
	if (c->out_len + n > OUT_MAX) {
		client_close(s, c); /* a client that does not read loses its connection */
		return;
	}
	memcpy(c->out + c->out_len, data, n);
	c->out_len += n;
	ssize_t w = send(c->fd, c->out, c->out_len, MSG_NOSIGNAL);
	if (w > 0) {
		memmove(c->out, c->out + w, c->out_len - (size_t)w);
		c->out_len -= (size_t)w;
	} else if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
		client_close(s, c);
	}
}

static void
send_error_extra(struct mgmt_server *s, struct client *c, uint64_t id, const char *err,
		 const char *msg, const char *extra)
{
	char line[8192];
	struct mgmt_out o;
	mgmt_out_init(&o, line, sizeof(line) - 1);
	mgmt_out_obj_begin(&o);
	mgmt_out_kv_u64(&o, "id", id);
	mgmt_out_kv_bool(&o, "ok", false);
	mgmt_out_kv_str(&o, "error", err);
	mgmt_out_kv_str(&o, "message", msg);
	if (extra != NULL && extra[0] != '\0') {
		mgmt_out_raw(&o, ",");
		mgmt_out_raw(&o, extra);
	}
	mgmt_out_obj_end(&o);
	mgmt_out_raw(&o, "\n");
	if (o.overflow && extra != NULL) {
		send_error_extra(s, c, id, err, msg, NULL); /* the members did not fit */
		return;
	}
	s->stats.errors++;
	client_send(s, c, line, o.len);
}

static void
send_error(struct mgmt_server *s, struct client *c, uint64_t id, const char *err,
	   const char *msg)
{
	send_error_extra(s, c, id, err, msg, NULL);
}

static void
send_ok(struct mgmt_server *s, struct client *c, uint64_t id, const char *result, size_t len)
{
	char head[64];
	int n = snprintf(head, sizeof(head), "{\"id\":%" PRIu64 ",\"ok\":true,\"result\":", id);
	client_send(s, c, head, (size_t)n);
	client_send(s, c, result, len);
	client_send(s, c, "}\n", 2);
}

static void
handle_help(struct mgmt_server *s, struct client *c, uint64_t id)
{
	struct mgmt_out o;
	mgmt_out_init(&o, s->result, sizeof(s->result));
	mgmt_out_obj_begin(&o);
	mgmt_out_key(&o, "commands");
	mgmt_out_arr_begin(&o);
	for (uint32_t i = 0; i < s->command_count; i++) {
		mgmt_out_obj_begin(&o);
		mgmt_out_kv_str(&o, "cmd", s->commands[i].name);
		mgmt_out_kv_str(&o, "help", s->commands[i].help ? s->commands[i].help : "");
		mgmt_out_obj_end(&o);
	}
	mgmt_out_arr_end(&o);
	mgmt_out_obj_end(&o);
	send_ok(s, c, id, s->result, o.len);
}

static uint32_t
pending_add(struct mgmt_server *s, uint32_t slot, uint64_t id)
{
	for (uint32_t i = 0; i < PENDING_MAX; i++) {
		if (!s->pending[i].used) {
			s->pending[i] = (struct pending){
				.used = true, .slot = slot, .gen = s->clients[slot].gen, .id = id};
			return i + 1;
		}
	}
	return 0;
}

static void
handle_line(struct mgmt_server *s, uint32_t slot, char *line, size_t len)
{
	struct client *c = &s->clients[slot];
	struct mgmt_json *j = &s->json;
	size_t err_at = 0;
	char msg[256];

	s->stats.requests++;
	int rc = mgmt_json_parse(j, line, len, &err_at);
	if (rc < 0 || j->toks[0].type != MGMT_JSON_OBJECT) {
		s->stats.bad_json++;
		if (rc == -E2BIG)
			snprintf(msg, sizeof(msg), "request has too many JSON values (max %d)",
				 MGMT_JSON_TOKENS_MAX);
		else if (rc < 0)
			snprintf(msg, sizeof(msg), "invalid JSON at byte %zu", err_at);
		else
			snprintf(msg, sizeof(msg), "request must be a JSON object");
		send_error(s, c, 0, "bad_json", msg);
		return;
	}
	uint64_t id = 0;
	if (mgmt_json_get(j, 0, "id") >= 0 && mgmt_json_get_u64(j, 0, "id", &id) < 0) {
		send_error(s, c, 0, "bad_request", "\"id\" must be a non-negative integer");
		return;
	}
	char cmd[64];
	rc = mgmt_json_get_str(j, 0, "cmd", cmd, sizeof(cmd));
	if (rc < 0) {
		send_error(s, c, id, "bad_request", "\"cmd\" (a string) is required");
		return;
	}
	int args = mgmt_json_get(j, 0, "args");
	if (args >= 0 && j->toks[args].type != MGMT_JSON_OBJECT) {
		send_error(s, c, id, "bad_request", "\"args\" must be an object");
		return;
	}
	if (strcmp(cmd, "help") == 0) {
		handle_help(s, c, id);
		return;
	}
	for (uint32_t i = 0; i < s->command_count; i++) {
		struct command *k = &s->commands[i];
		if (strcmp(k->name, cmd) != 0)
			continue;
		struct mgmt_req req = {.json = j, .args = args, .id = id, .cmd = cmd};
		req.token = pending_add(s, slot, id);
		struct mgmt_out o;
		mgmt_out_init(&o, s->result, sizeof(s->result));
		char err[64] = "error";
		msg[0] = '\0';
		rc = k->fn(k->ctx, &req, &o, err, sizeof(err));
		if (rc != MGMT_PENDING && req.token != 0)
			s->pending[req.token - 1].used = false;
		if (rc == MGMT_PENDING) {
			if (req.token == 0)
				send_error(s, c, id, "busy", "too many requests waiting for commit");
			return;
		}
		if (rc < 0) {
			/* The handler put "code: message" in err, or just a code. */
			char *colon = strchr(err, ':');
			if (colon != NULL) {
				*colon = '\0';
				snprintf(msg, sizeof(msg), "%s", colon + 1 + (colon[1] == ' '));
			} else {
				snprintf(msg, sizeof(msg), "%s", strerror(-rc));
			}
			send_error(s, c, id, err, msg);
			return;
		}
		if (o.overflow) {
			send_error(s, c, id, "too_large", "result does not fit the response buffer");
			return;
		}
		send_ok(s, c, id, s->result, o.len);
		return;
	}
	snprintf(msg, sizeof(msg), "unknown command '%s' (try \"help\")", cmd);
	send_error(s, c, id, "unknown_command", msg);
}

static int
client_read(struct mgmt_server *s, uint32_t slot)
{
	struct client *c = &s->clients[slot];
	int handled = 0;
	for (;;) {
		ssize_t r = recv(c->fd, c->in + c->in_len, MGMT_LINE_MAX - c->in_len, 0);
		if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
			client_close(s, c);
			return handled;
		}
		if (r < 0)
			return handled;
		c->in_len += (size_t)r;
		size_t start = 0;
		for (size_t i = 0; i < c->in_len && c->fd >= 0; i++) {
			if (c->in[i] != '\n')
				continue;
			c->active_ms = mono_ms();
			if (!c->discarding && i > start)
				handle_line(s, slot, c->in + start, i - start);
			else if (c->discarding)
				send_error(s, c, 0, "too_large", "request line too long");
			c->discarding = false;
			handled++;
			start = i + 1;
		}
		if (c->fd < 0)
			return handled;
		memmove(c->in, c->in + start, c->in_len - start);
		c->in_len -= start;
		if (c->in_len == MGMT_LINE_MAX) {
			/* No newline in a full buffer: drop it and the rest of the line. */
			s->stats.overlong++;
			c->discarding = true;
			c->in_len = 0;
		}
	}
}

/* A request of the client in slot waits for its answer (a log commit). */
static bool
client_waits(const struct mgmt_server *s, uint32_t slot)
{
	for (uint32_t i = 0; i < PENDING_MAX; i++)
		if (s->pending[i].used && s->pending[i].slot == slot &&
		    s->pending[i].gen == s->clients[slot].gen)
			return true;
	return false;
}

/* Clients that connected and sent no request line for idle_ms are closed, unless one of
 * their requests is waiting for its answer: a connection that sends nothing must not hold
 * a slot for as long as it likes. */
static void
close_idle(struct mgmt_server *s, uint64_t now_ms)
{
	for (uint32_t i = 0; i < MGMT_CLIENTS_MAX; i++) {
		struct client *c = &s->clients[i];
		if (c->fd < 0 || now_ms - c->active_ms < s->idle_ms || client_waits(s, i))
			continue;
		static const char bye[] = "{\"id\":0,\"ok\":false,\"error\":\"idle\",\"message\":"
					  "\"no request for too long: closing\"}\n";
		s->stats.idle_closed++;
		(void)!send(c->fd, bye, sizeof(bye) - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
		client_close(s, c);
	}
}

/* The last free slot is kept for the operator: root or the user omsd runs as. So clients
 * of the socket's group that hold every other slot do not lock the operator out. */
static bool
peer_is_operator(int fd)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
		return false;
	return cred.uid == 0 || cred.uid == geteuid();
}

static void
accept_clients(struct mgmt_server *s, uint64_t now_ms)
{
	for (;;) {
		int fd = accept4(s->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			break;
		uint32_t free_slots = 0, slot = MGMT_CLIENTS_MAX;
		for (uint32_t i = 0; i < MGMT_CLIENTS_MAX; i++) {
			if (s->clients[i].fd >= 0)
				continue;
			free_slots++;
			if (slot == MGMT_CLIENTS_MAX)
				slot = i;
		}
		if (free_slots == 0 || (free_slots == 1 && !peer_is_operator(fd))) {
			static const char busy[] =
				"{\"id\":0,\"ok\":false,\"error\":\"busy\",\"message\":\"too many "
				"clients (the last place is kept for root and the service user)\"}\n";
			s->stats.busy_refused++;
			(void)!send(fd, busy, sizeof(busy) - 1, MSG_NOSIGNAL);
			close(fd);
			continue;
		}
		s->clients[slot].fd = fd;
		s->clients[slot].active_ms = now_ms;
		s->stats.clients++;
	}
}

int
mgmt_poll(struct mgmt_server *s, int timeout_ms)
{
	struct pollfd pfd[1 + MGMT_CLIENTS_MAX];
	uint32_t slots[1 + MGMT_CLIENTS_MAX];
	nfds_t n = 0;
	pfd[n++] = (struct pollfd){.fd = s->listen_fd, .events = POLLIN};
	for (uint32_t i = 0; i < MGMT_CLIENTS_MAX; i++) {
		struct client *c = &s->clients[i];
		if (c->fd < 0)
			continue;
		slots[n] = i;
		pfd[n++] = (struct pollfd){
			.fd = c->fd, .events = (short)(POLLIN | (c->out_len ? POLLOUT : 0))};
	}
	int ready = poll(pfd, n, timeout_ms);
	close_idle(s, mono_ms());
	if (ready <= 0)
		return 0;
	int handled = 0;
	for (nfds_t k = 1; k < n; k++) {
		struct client *c = &s->clients[slots[k]];
		if (c->fd < 0)
			continue;
		if (pfd[k].revents & POLLOUT)
			client_send(s, c, "", 0);
		if (c->fd >= 0 && (pfd[k].revents & (POLLIN | POLLHUP | POLLERR)))
			handled += client_read(s, slots[k]);
	}
	if (pfd[0].revents & POLLIN)
		accept_clients(s, mono_ms());
	return handled;
}

static struct client *
pending_take(struct mgmt_server *s, uint32_t token, uint64_t *id)
{
	if (token == 0 || token > PENDING_MAX || !s->pending[token - 1].used)
		return NULL;
	struct pending *p = &s->pending[token - 1];
	p->used = false;
	struct client *c = &s->clients[p->slot];
	*id = p->id;
	return (c->fd >= 0 && c->gen == p->gen) ? c : NULL;
}

void
mgmt_reply_ok(struct mgmt_server *s, uint32_t token, const char *result_json)
{
	uint64_t id;
	struct client *c = pending_take(s, token, &id);
	if (c != NULL)
		send_ok(s, c, id, result_json, strlen(result_json));
}

void
mgmt_reply_err(struct mgmt_server *s, uint32_t token, const char *err, const char *msg)
{
	uint64_t id;
	struct client *c = pending_take(s, token, &id);
	if (c != NULL)
		send_error(s, c, id, err, msg);
}

void
mgmt_reply_err_extra(struct mgmt_server *s, uint32_t token, const char *err, const char *msg,
		     const char *members)
{
	uint64_t id;
	struct client *c = pending_take(s, token, &id);
	if (c != NULL)
		send_error_extra(s, c, id, err, msg, members);
}

void
mgmt_stats_get(const struct mgmt_server *s, struct mgmt_stats *out)
{
	*out = s->stats;
}

/* ---------------------------------------------------------------------------------------
 * Client.
 * ------------------------------------------------------------------------------------- */

int
mgmt_call(const char *path, const char *request, char *resp, size_t cap, int timeout_ms)
{
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof(addr.sun_path) || cap == 0)
		return -EINVAL;
	snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	int err = 0;
	if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
		err = -errno;
		goto out;
	}
	size_t n = strlen(request);
	if (send(fd, request, n, MSG_NOSIGNAL) != (ssize_t)n ||
	    (request[n - 1] != '\n' && send(fd, "\n", 1, MSG_NOSIGNAL) != 1)) {
		err = -EIO;
		goto out;
	}
	size_t len = 0;
	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		int pr = poll(&p, 1, timeout_ms);
		if (pr == 0) {
			err = -ETIMEDOUT;
			goto out;
		}
		if (pr < 0) {
			err = -errno;
			goto out;
		}
		ssize_t r = recv(fd, resp + len, cap - 1 - len, 0);
		if (r <= 0) {
			err = r == 0 ? -ECONNRESET : -errno;
			goto out;
		}
		len += (size_t)r;
		resp[len] = '\0';
		char *nl = memchr(resp, '\n', len);
		if (nl != NULL) {
			*nl = '\0';
			break;
		}
		if (len == cap - 1) {
			err = -E2BIG;
			goto out;
		}
	}
out:
	close(fd);
	return err;
}
