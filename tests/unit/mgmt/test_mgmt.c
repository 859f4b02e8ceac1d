/* SPDX-License-Identifier: Apache-2.0 */
/* The control plane: JSON reader/writer, the socket server over a real unix socket,
 * Prometheus rendering. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mgmt/mgmt.h"

static struct mgmt_json j;

static int
parse(const char *s)
{
	return mgmt_json_parse(&j, s, strlen(s), NULL);
}

/* Goal: well-formed JSON parses; members and typed values come back. */
Test(mgmt_json, parses_and_gets)
{
	cr_assert(eq(int, parse(" {\"cmd\":\"routes\",\"args\":{\"user\":18446744073709551615,"
				"\"px\":-5,\"on\":true,\"name\":\"a\\\"b\\u0041\",\"list\":[1,2,{}]}} "),
		     0));
	int args = mgmt_json_get(&j, 0, "args");
	cr_assert(args > 0);
	uint64_t u;
	int64_t px;
	bool on;
	char name[16];
	cr_assert(eq(int, mgmt_json_get_u64(&j, args, "user", &u), 0));
	cr_assert(eq(u64, u, UINT64_MAX));
	cr_assert(eq(int, mgmt_json_get_i64(&j, args, "px", &px), 0));
	cr_assert(eq(i64, px, -5));
	cr_assert(eq(int, mgmt_json_get_bool(&j, args, "on", &on), 0));
	cr_assert(on);
	cr_assert(eq(int, mgmt_json_get_str(&j, args, "name", name, sizeof(name)), 0));
	cr_assert(eq(str, name, "a\"bA"));
	cr_assert(eq(int, mgmt_json_get_u64(&j, args, "missing", &u), -ENOENT));
	cr_assert(eq(int, mgmt_json_get_u64(&j, args, "px", &u), -EINVAL)); /* negative */
	cr_assert(eq(int, mgmt_json_get_u64(&j, args, "name", &u), -EINVAL)); /* a string */
	/* A key after a nested container is still found. */
	cr_assert(eq(int, parse("{\"a\":{\"b\":[1,{\"c\":2}]},\"d\":3}"), 0));
	cr_assert(eq(int, mgmt_json_get_u64(&j, 0, "d", &u), 0));
	cr_assert(eq(u64, u, 3));
}

/* Goal: every malformed class is refused with the offset of the problem. */
/* Goal: keys compare decoded (an escaped key is the same key), and every key token's
 * `next` is the value after it (found by fuzz_mgmt: it was left unset).
 * Method: {"us\u0065r":5,"a\\b":[1,2]}: user and a\b are found; token structure walks. */
Test(mgmt_json, escaped_keys_and_key_next)
{
	static struct mgmt_json j;
	const char *t = "{\"us\\u0065r\":5,\"a\\\\b\":[1,2]}";
	size_t at = 0;
	cr_assert(eq(int, mgmt_json_parse(&j, t, strlen(t), &at), 0));
	uint64_t u = 0;
	cr_assert(eq(int, mgmt_json_get_u64(&j, 0, "user", &u), 0));
	cr_assert(eq(u64, u, 5));
	int arr = mgmt_json_get(&j, 0, "a\\b");
	cr_assert(gt(int, arr, 0));
	cr_assert(eq(u32, j.toks[arr].size, 2));
	cr_assert(eq(u32, j.toks[1].next, 2)); /* the first key */
	cr_assert(eq(u32, j.toks[3].next, 4)); /* the second key */
	cr_assert(eq(u32, j.toks[0].next, j.count));
}

Test(mgmt_json, refuses_malformed)
{
	const char *bad[] = {
		"", "{", "}", "{\"a\"}", "{\"a\":}", "{\"a\":1,}", "[1,]", "{a:1}", "\"open",
		"01", "1.", "-", "1e", "tru", "nul", "{\"a\":1} x", "\"\\x\"", "\"\\u12g4\"",
		"\"tab\there\"", "{\"a\":1 \"b\":2}",
	};
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_assert(eq(int, parse(bad[i]), -EINVAL), "accepted: %s", bad[i]);
	/* Nesting and token count are bounded. */
	char deep[200];
	memset(deep, '[', 100);
	memset(deep + 100, ']', 100);
	cr_assert(eq(int, mgmt_json_parse(&j, deep, 200, NULL), -EINVAL));
	static char many[MGMT_JSON_TOKENS_MAX * 2 + 8];
	size_t n = 0;
	many[n++] = '[';
	for (int i = 0; i < MGMT_JSON_TOKENS_MAX; i++) {
		many[n++] = '1';
		many[n++] = ',';
	}
	many[n - 1] = ']';
	cr_assert(eq(int, mgmt_json_parse(&j, many, n, NULL), -E2BIG));
	/* Integers only: fractions and out-of-range values are refused, not truncated. */
	int64_t v;
	cr_assert(eq(int, parse("{\"x\":1.5,\"y\":9223372036854775808}"), 0));
	cr_assert(eq(int, mgmt_json_get_i64(&j, 0, "x", &v), -EINVAL));
	cr_assert(eq(int, mgmt_json_get_i64(&j, 0, "y", &v), -EINVAL));
}

/* Goal: the writer produces valid JSON, escapes strings, and reports overflow. */
Test(mgmt_json, writer)
{
	char buf[128];
	struct mgmt_out o;
	mgmt_out_init(&o, buf, sizeof(buf));
	mgmt_out_obj_begin(&o);
	mgmt_out_kv_str(&o, "s", "q\"\n");
	mgmt_out_key(&o, "a");
	mgmt_out_arr_begin(&o);
	mgmt_out_i64(&o, -1);
	mgmt_out_u64(&o, 2);
	mgmt_out_bool(&o, false);
	mgmt_out_null(&o);
	mgmt_out_arr_end(&o);
	mgmt_out_obj_end(&o);
	cr_assert(eq(str, buf, "{\"s\":\"q\\\"\\u000a\",\"a\":[-1,2,false,null]}"));
	cr_assert(eq(int, parse(buf), 0));
	char small[8];
	mgmt_out_init(&o, small, sizeof(small));
	mgmt_out_kv_str(&o, "long", "value");
	cr_assert(o.overflow);
}

/* --- server over a real socket ---------------------------------------------------------- */

static struct mgmt_server *srv;
static atomic_bool stop;
static pthread_t thread;
static char path[108];
static uint32_t deferred_token;
static atomic_bool deferred_error; /* answer the deferred request with an error + members */

static int
h_echo(void *ctx, const struct mgmt_req *req, struct mgmt_out *out, char *err, size_t cap)
{
	(void)ctx;
	uint64_t n;
	int rc = mgmt_json_get_u64(req->json, req->args, "n", &n);
	if (rc < 0) {
		snprintf(err, cap, "bad_argument: \"n\" (an integer) is required");
		return -EINVAL;
	}
	mgmt_out_obj_begin(out);
	mgmt_out_kv_u64(out, "n", n + 1);
	mgmt_out_obj_end(out);
	return 0;
}

static int
h_later(void *ctx, const struct mgmt_req *req, struct mgmt_out *out, char *err, size_t cap)
{
	(void)ctx, (void)out, (void)err, (void)cap;
	deferred_token = req->token;
	return MGMT_PENDING;
}

static void *
serve(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop)) {
		mgmt_poll(srv, 10);
		if (deferred_token != 0) {
			if (atomic_load(&deferred_error))
				mgmt_reply_err_extra(srv, deferred_token, "not_leader",
						     "shard 1: leader is node 2",
						     "\"leader\":2,\"leaders\":[{\"shard\":1}]");
			else
				mgmt_reply_ok(srv, deferred_token, "{\"committed\":true}");
			deferred_token = 0;
		}
	}
	return NULL;
}

static uint32_t idle_ms_next; /* the next start's idle deadline (0: the default) */

static void
start(void)
{
	snprintf(path, sizeof(path), "/tmp/omsd-test-%d/mgmt.sock", getpid());
	cr_assert(eq(int, mgmt_server_open(&srv, path, "nonexistent-group", 0660), 0));
	mgmt_server_set_idle_ms(srv, idle_ms_next);
	cr_assert(eq(int, mgmt_register(srv, "echo", h_echo, NULL, "add one"), 0));
	cr_assert(eq(int, mgmt_register(srv, "later", h_later, NULL, "answer after commit"), 0));
	atomic_store(&stop, false);
	atomic_store(&deferred_error, false);
	pthread_create(&thread, NULL, serve, NULL);
}

static void
finish(void)
{
	atomic_store(&stop, true);
	pthread_join(thread, NULL);
	mgmt_server_close(srv);
}

static const char *
call(const char *req)
{
	static char resp[4096];
	int rc = mgmt_call(path, req, resp, sizeof(resp), 2000);
	cr_assert(eq(int, rc, 0), "mgmt_call: %s", strerror(-rc));
	return resp;
}

/* Goal: commands answer; errors are clear and change nothing; deferred answers arrive. */
Test(mgmt_server, requests_and_errors, .init = start, .fini = finish)
{
	cr_assert(eq(str, (char *)call("{\"id\":4,\"cmd\":\"echo\",\"args\":{\"n\":41}}"),
		     "{\"id\":4,\"ok\":true,\"result\":{\"n\":42}}"));
	cr_assert(eq(str, (char *)call("{\"id\":5,\"cmd\":\"echo\",\"args\":{}}"),
		     "{\"id\":5,\"ok\":false,\"error\":\"bad_argument\",\"message\":"
		     "\"\\\"n\\\" (an integer) is required\"}"));
	cr_assert(eq(str, (char *)call("{\"cmd\":\"nope\"}"),
		     "{\"id\":0,\"ok\":false,\"error\":\"unknown_command\",\"message\":"
		     "\"unknown command 'nope' (try \\\"help\\\")\"}"));
	cr_assert(eq(str, (char *)call("{\"cmd\":"),
		     "{\"id\":0,\"ok\":false,\"error\":\"bad_json\",\"message\":"
		     "\"invalid JSON at byte 7\"}"));
	cr_assert(eq(str, (char *)call("[1]"),
		     "{\"id\":0,\"ok\":false,\"error\":\"bad_json\",\"message\":"
		     "\"request must be a JSON object\"}"));
	cr_assert(eq(str, (char *)call("{\"id\":9,\"cmd\":\"echo\",\"args\":[]}"),
		     "{\"id\":9,\"ok\":false,\"error\":\"bad_request\",\"message\":"
		     "\"\\\"args\\\" must be an object\"}"));
	cr_assert(eq(str, (char *)call("{\"id\":11,\"cmd\":\"later\"}"),
		     "{\"id\":11,\"ok\":true,\"result\":{\"committed\":true}}"));
	cr_assert(not(eq(ptr, strstr(call("{\"cmd\":\"help\"}"), "\"cmd\":\"echo\""), NULL)));
}

/* Goal: a deferred error carries extra members (a leader hint) inside the error object. */
Test(mgmt_server, deferred_error_with_members, .init = start, .fini = finish)
{
	atomic_store(&deferred_error, true);
	cr_assert(eq(str, (char *)call("{\"id\":12,\"cmd\":\"later\"}"),
		     "{\"id\":12,\"ok\":false,\"error\":\"not_leader\",\"message\":"
		     "\"shard 1: leader is node 2\",\"leader\":2,\"leaders\":[{\"shard\":1}]}"));
}

/* Goal: a line longer than the limit is refused and the connection stays usable. */
Test(mgmt_server, overlong_line, .init = start, .fini = finish)
{
	static char big[MGMT_LINE_MAX + 100];
	memset(big, ' ', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	const char *r = call(big);
	cr_assert(not(eq(ptr, strstr(r, "too_large"), NULL)), "%s", r);
	cr_assert(eq(str, (char *)call("{\"id\":1,\"cmd\":\"echo\",\"args\":{\"n\":1}}"),
		     "{\"id\":1,\"ok\":true,\"result\":{\"n\":2}}"));
}

/* Goal: the socket's mode is what was asked for. */
Test(mgmt_server, socket_mode, .init = start, .fini = finish)
{
	struct stat st;
	cr_assert(eq(int, stat(path, &st), 0));
	cr_assert(eq(u32, st.st_mode & 0777, 0660));
}

/* A raw client connection to the test socket (-1 when refused at connect). */
static int
raw_connect(void)
{
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path);
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	cr_assert(ge(int, fd, 0));
	if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* What the server sent fd within timeout_ms, up to its closing the connection. */
static const char *
raw_read(int fd, int timeout_ms)
{
	static char buf[1024];
	size_t len = 0;
	struct timeval tv = {.tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	for (;;) {
		ssize_t r = recv(fd, buf + len, sizeof(buf) - 1 - len, 0);
		if (r <= 0)
			break;
		len += (size_t)r;
	}
	buf[len] = '\0';
	return buf;
}

/* Goal: a socket directory someone else controls is refused, with the reason; a safe one is
 * taken. Method: a directory writable by others, a symbolic link to a safe directory, a
 * directory of another user (as root only). */
Test(mgmt_server, unsafe_directory_refused)
{
	char dir[96], sock[128], link[96], why[256];
	snprintf(dir, sizeof(dir), "/tmp/omsd-test-%d-open", getpid());
	snprintf(sock, sizeof(sock), "%s/mgmt.sock", dir);
	cr_assert(eq(int, mkdir(dir, 0755), 0));
	cr_assert(eq(int, chmod(dir, 0777), 0));
	struct mgmt_server *s = NULL;
	cr_assert(eq(int, mgmt_server_open(&s, sock, "", 0660), -EPERM));
	cr_assert(eq(int, mgmt_dir_check(dir, why, sizeof(why)), -EPERM));
	cr_assert(not(eq(ptr, strstr(why, "writable by its group or by others"), NULL)), "%s", why);
	cr_assert(eq(int, access(sock, F_OK), -1), "no socket left behind");

	cr_assert(eq(int, chmod(dir, 0755), 0));
	snprintf(link, sizeof(link), "/tmp/omsd-test-%d-link", getpid());
	cr_assert(eq(int, symlink(dir, link), 0));
	cr_assert(eq(int, mgmt_dir_check(link, why, sizeof(why)), -EPERM));
	cr_assert(not(eq(ptr, strstr(why, "symbolic link"), NULL)), "%s", why);

	if (geteuid() == 0) {
		cr_assert(eq(int, chown(dir, 65534, 65534), 0));
		cr_assert(eq(int, mgmt_dir_check(dir, why, sizeof(why)), -EPERM));
		cr_assert(not(eq(ptr, strstr(why, "owned by uid 65534"), NULL)), "%s", why);
		cr_assert(eq(int, chown(dir, 0, 0), 0));
	}
	cr_assert(eq(int, mgmt_server_open(&s, sock, "", 0660), 0), "a safe directory");
	mgmt_server_close(s);
	unlink(link);
	rmdir(dir);
}

static void
start_idle(void)
{
	idle_ms_next = 300;
	start();
	idle_ms_next = 0;
}

/* Goal: a client that connects and sends nothing is closed at the deadline and told why;
 * one that keeps asking stays. */
Test(mgmt_server, idle_client_closed, .init = start_idle, .fini = finish)
{
	int quiet = raw_connect(), busy = raw_connect();
	cr_assert(ge(int, quiet, 0));
	cr_assert(ge(int, busy, 0));
	static const char req[] = "{\"id\":1,\"cmd\":\"echo\",\"args\":{\"n\":1}}\n";
	for (int k = 0; k < 8; k++) {
		cr_assert(eq(int, (int)send(busy, req, sizeof(req) - 1, MSG_NOSIGNAL),
			     (int)sizeof(req) - 1));
		usleep(100000);
	}
	/* Read at once: the last request was 100 ms ago, within the deadline. */
	const char *r = raw_read(busy, 50);
	cr_assert(not(eq(ptr, strstr(r, "\"result\":{\"n\":2}"), NULL)), "%s", r);
	cr_assert(eq(ptr, strstr(r, "idle"), NULL), "the busy client was not closed: %s", r);
	r = raw_read(quiet, 2000);
	cr_assert(not(eq(ptr, strstr(r, "\"error\":\"idle\""), NULL)), "%s", r);
	struct mgmt_stats st;
	mgmt_stats_get(srv, &st);
	cr_assert(ge(u64, st.idle_closed, 1));
	close(quiet);
	close(busy);
}

/* Goal: clients that hold every other place do not lock the operator out. Method (root
 * only: another user must connect): 31 connections take all places but one; a connection
 * from uid 65534 is refused busy; root's takes the last place; then even root is refused. */
Test(mgmt_server, last_place_kept_for_the_operator, .init = start, .fini = finish)
{
	if (geteuid() != 0)
		cr_skip_test("needs root to connect as another user");
	cr_assert(eq(int, chmod(path, 0666), 0)); /* let the other user reach the socket */
	int fds[MGMT_CLIENTS_MAX];
	for (int k = 0; k < MGMT_CLIENTS_MAX - 1; k++) {
		fds[k] = raw_connect();
		cr_assert(ge(int, fds[k], 0));
	}
	usleep(100000); /* all accepted */
	pid_t pid = fork();
	cr_assert(ge(int, pid, 0));
	if (pid == 0) {
		if (setgid(65534) != 0 || setuid(65534) != 0)
			_exit(2);
		int fd = raw_connect();
		if (fd < 0)
			_exit(3);
		_exit(strstr(raw_read(fd, 2000), "\"error\":\"busy\"") != NULL ? 0 : 4);
	}
	int status = 0;
	cr_assert(eq(int, waitpid(pid, &status, 0), pid));
	bool refused = WIFEXITED(status) && WEXITSTATUS(status) == 0;
	cr_assert(refused, "another user got the last place (exit %d)", WEXITSTATUS(status));
	fds[MGMT_CLIENTS_MAX - 1] = raw_connect();
	cr_assert(ge(int, fds[MGMT_CLIENTS_MAX - 1], 0));
	int late = raw_connect();
	cr_assert(ge(int, late, 0));
	const char *r = raw_read(late, 2000);
	cr_assert(not(eq(ptr, strstr(r, "\"error\":\"busy\""), NULL)), "every place is taken: %s", r);
	close(late);
	for (int k = 0; k < MGMT_CLIENTS_MAX; k++)
		close(fds[k]);
	struct mgmt_stats st;
	mgmt_stats_get(srv, &st);
	cr_assert(ge(u64, st.busy_refused, 2));
}

/* Goal: Prometheus text has HELP/TYPE, labels, and summary quantiles.
 * Method: a counter sample and a summary of a unitless hist (per_unit 1: values as counted). */
Test(mgmt_prom, text_format)
{
	static struct hist h;
	hist_init(&h);
	for (uint64_t v = 1; v <= 100; v++)
		hist_record(&h, v);
	char buf[2048];
	struct mgmt_out o;
	mgmt_out_init(&o, buf, sizeof(buf));
	mgmt_prom_family(&o, "omsd_frames_dropped_total", "counter", "Frames dropped");
	mgmt_prom_sample(&o, "omsd_frames_dropped_total", "cause=\"bad_mac\"", 3);
	mgmt_prom_family(&o, "omsd_ack_hops", "summary", "Hops to an ack");
	mgmt_prom_summary(&o, "omsd_ack_hops", "shard=\"1\"", &h, 1);
	cr_assert(not(eq(ptr, strstr(buf, "# TYPE omsd_frames_dropped_total counter\n"), NULL)));
	cr_assert(not(eq(ptr, strstr(buf, "omsd_frames_dropped_total{cause=\"bad_mac\"} 3\n"), NULL)));
	cr_assert(not(eq(ptr, strstr(buf, "omsd_ack_hops{shard=\"1\",quantile=\"0.5\"} 50\n"), NULL)));
	cr_assert(not(eq(ptr, strstr(buf, "omsd_ack_hops_count{shard=\"1\"} 100\n"), NULL)));
	cr_assert(not(eq(ptr, strstr(buf, "omsd_ack_hops_sum{shard=\"1\"} 5050\n"), NULL)));
}
