/* SPDX-License-Identifier: Apache-2.0 */
/* omsctl and omsload as programs: the control-plane commands against a fake control socket
 * built on mgmt/mgmt.h's server, order entry and load against the fake node (fake_node.h),
 * plain and, with --key-file, logged on to its gateway side.
 * The binaries come from $OMSCTL and $OMSLOAD (set by tests/tools/meson.build). */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fake_node.h"
#include "mgmt/mgmt.h"

#define OUT_MAX 65536

static struct mgmt_server *srv;
static pthread_t srv_thread;
static atomic_bool srv_stop;
static char sock_path[160];
static char sock_dir[128];
static char last_args[1024]; /* the args object of the last "echo.args" request */
static struct fake_node node;

static char out[OUT_MAX], err[OUT_MAX];

/* ---------------------------------------------------------------------------------------
 * Running a tool.
 * ------------------------------------------------------------------------------------- */

static void
drain(int fd, char *buf, size_t *len)
{
	ssize_t r = read(fd, buf + *len, OUT_MAX - 1 - *len);
	if (r > 0)
		*len += (size_t)r;
	buf[*len] = '\0';
}

/* Run prog (an env var naming the binary) with argv; capture stdout/stderr; exit code. */
static int
run_tool(const char *env, const char *const *args)
{
	const char *prog = getenv(env);
	cr_assert(not(eq(ptr, (void *)prog, NULL)), "%s is not set", env);
	int po[2], pe[2];
	cr_assert(eq(int, pipe(po), 0));
	cr_assert(eq(int, pipe(pe), 0));
	pid_t pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		dup2(po[1], 1);
		dup2(pe[1], 2);
		close(po[0]);
		close(pe[0]);
		char *argv[48];
		int n = 0;
		argv[n++] = (char *)prog;
		for (int i = 0; args[i] != NULL && n < 47; i++)
			argv[n++] = (char *)args[i];
		argv[n] = NULL;
		execv(prog, argv);
		_exit(127);
	}
	close(po[1]);
	close(pe[1]);
	size_t ol = 0, el = 0;
	out[0] = err[0] = '\0';
	bool open_o = true, open_e = true;
	while (open_o || open_e) {
		struct pollfd p[2] = {{.fd = open_o ? po[0] : -1, .events = POLLIN},
				      {.fd = open_e ? pe[0] : -1, .events = POLLIN}};
		if (poll(p, 2, 20000) <= 0)
			break;
		if (p[0].revents) {
			size_t before = ol;
			drain(po[0], out, &ol);
			open_o = ol != before && ol < OUT_MAX - 1;
		}
		if (p[1].revents) {
			size_t before = el;
			drain(pe[0], err, &el);
			open_e = el != before && el < OUT_MAX - 1;
		}
	}
	close(po[0]);
	close(pe[0]);
	int status;
	cr_assert(eq(int, waitpid(pid, &status, 0), pid));
	bool exited = WIFEXITED(status);
	cr_assert(exited, "%s died: %s", prog, err);
	return WEXITSTATUS(status);
}

/* ---------------------------------------------------------------------------------------
 * The fake control socket.
 * ------------------------------------------------------------------------------------- */

static int
h_status(void *ctx, const struct mgmt_req *req, struct mgmt_out *o, char *e, size_t cap)
{
	(void)ctx, (void)req, (void)e, (void)cap;
	mgmt_out_obj_begin(o);
	mgmt_out_kv_u64(o, "node", 1);
	mgmt_out_kv_str(o, "roles", "oms,me");
	mgmt_out_key(o, "shards");
	mgmt_out_arr_begin(o);
	for (uint64_t i = 1; i <= 2; i++) {
		mgmt_out_obj_begin(o);
		mgmt_out_kv_u64(o, "id", i);
		mgmt_out_kv_str(o, "service", i == 1 ? "oms" : "me");
		mgmt_out_kv_u64(o, "leader", 1);
		mgmt_out_kv_u64(o, "commit_index", i * 12345);
		mgmt_out_obj_end(o);
	}
	mgmt_out_arr_end(o);
	mgmt_out_key(o, "config");
	mgmt_out_obj_begin(o);
	mgmt_out_kv_str(o, "durability", "memory");
	mgmt_out_obj_end(o);
	mgmt_out_obj_end(o);
	return 0;
}

static int
h_metrics(void *ctx, const struct mgmt_req *req, struct mgmt_out *o, char *e, size_t cap)
{
	(void)ctx, (void)req, (void)e, (void)cap;
	static uint64_t n;
	char text[256];
	snprintf(text, sizeof(text),
		 "# HELP omsd_frames_in_total Frames received\n"
		 "# TYPE omsd_frames_in_total counter\n"
		 "omsd_frames_in_total{lcore=\"1\"} %lu\n"
		 "omsd_ack_latency_us{quantile=\"0.5\"} 12\n",
		 (unsigned long)(n += 100));
	mgmt_out_obj_begin(o);
	mgmt_out_kv_str(o, "text", text);
	mgmt_out_obj_end(o);
	return 0;
}

static int
h_not_leader(void *ctx, const struct mgmt_req *req, struct mgmt_out *o, char *e, size_t cap)
{
	(void)ctx, (void)req, (void)o;
	snprintf(e, cap, "not_leader: shard 1 is led by node 3");
	return -EAGAIN;
}

static int
h_timeout(void *ctx, const struct mgmt_req *req, struct mgmt_out *o, char *e, size_t cap)
{
	(void)ctx, (void)req, (void)o;
	snprintf(e, cap, "timeout: shard 2: no outcome before the deadline");
	return -ETIMEDOUT;
}

static int
h_echo_args(void *ctx, const struct mgmt_req *req, struct mgmt_out *o, char *e, size_t cap)
{
	(void)ctx, (void)e, (void)cap;
	const struct mgmt_json_tok *t = &req->json->toks[req->args];
	snprintf(last_args, sizeof(last_args), "%.*s", (int)t->len,
		 req->json->text + t->start);
	mgmt_out_obj_begin(o);
	mgmt_out_key(o, "pins");
	mgmt_out_arr_begin(o);
	mgmt_out_arr_end(o);
	mgmt_out_obj_end(o);
	return 0;
}

static void *
serve(void *arg)
{
	(void)arg;
	while (!atomic_load(&srv_stop))
		mgmt_poll(srv, 10);
	return NULL;
}

static void
start_server(void)
{
	snprintf(sock_dir, sizeof(sock_dir), "/tmp/omsd-tools-test-%d", getpid());
	snprintf(sock_path, sizeof(sock_path), "%s/omsd.sock", sock_dir);
	cr_assert(eq(int, mgmt_server_open(&srv, sock_path, "nonexistent-group", 0660), 0));
	cr_assert(eq(int, mgmt_register(srv, "status", h_status, NULL, "node status"), 0));
	cr_assert(eq(int, mgmt_register(srv, "metrics", h_metrics, NULL, "prometheus"), 0));
	cr_assert(eq(int, mgmt_register(srv, "users.evict", h_not_leader, NULL, "evict"), 0));
	cr_assert(eq(int, mgmt_register(srv, "routes.pin", h_echo_args, NULL, "pin"), 0));
	cr_assert(eq(int, mgmt_register(srv, "symbols.resume", h_timeout, NULL, "resume"), 0));
	atomic_store(&srv_stop, false);
	pthread_create(&srv_thread, NULL, serve, NULL);
}

static void
stop_server(void)
{
	atomic_store(&srv_stop, true);
	pthread_join(srv_thread, NULL);
	mgmt_server_close(srv);
	rmdir(sock_dir);
}

/* ---------------------------------------------------------------------------------------
 * Control-plane commands.
 * ------------------------------------------------------------------------------------- */

/* Goal: a result renders as key: value lines and an aligned table; exit 0.
 * Method: status from the fake server; check the lines and the column alignment. */
Test(omsctl_mgmt, renders_tables, .init = start_server, .fini = stop_server)
{
	const char *args[] = {"status", "--socket", sock_path, NULL};
	cr_assert(eq(int, run_tool("OMSCTL", args), 0), "stderr: %s", err);
	cr_assert(not(eq(ptr, strstr(out, "node:  1\n"), NULL)), "%s", out);
	cr_assert(not(eq(ptr, strstr(out, "roles: oms,me\n"), NULL)), "%s", out);
	cr_assert(not(eq(ptr, strstr(out, "shards:\n  id  service  leader  commit_index\n"), NULL)),
		  "%s", out);
	cr_assert(not(eq(ptr, strstr(out, "\n   1  oms           1  12345\n"), NULL)), "%s", out);
	cr_assert(not(eq(ptr, strstr(out, "\n   2  me            1  24690\n"), NULL)), "%s", out);
	cr_assert(not(eq(ptr, strstr(out, "config:\n  durability: memory\n"), NULL)), "%s", out);
}

/* Goal: --json prints the response line as it came; exit 0. */
Test(omsctl_mgmt, json_is_raw, .init = start_server, .fini = stop_server)
{
	const char *args[] = {"--json", "status", "--socket", sock_path, NULL};
	cr_assert(eq(int, run_tool("OMSCTL", args), 0));
	const char *head = "{\"id\":1,\"ok\":true,\"result\":{\"node\":1,";
	cr_assert(eq(int, strncmp(out, head, strlen(head)), 0), "%s", out);
	cr_assert(eq(int, (int)(strchr(out, '\n') - out), (int)strlen(out) - 1));
}

/* Goal: --key value options become typed args, dashes as underscores; words join with
 * dots. Method: routes pin with an integer, a string, a boolean and a negative number. */
Test(omsctl_mgmt, builds_args, .init = start_server, .fini = stop_server)
{
	const char *args[] = {"routes", "pin", "--user", "42", "--socket", sock_path,
			      "--tier", "whale", "--force", "true", "--delta-x", "-5",
			      "--zip", "007", NULL};
	cr_assert(eq(int, run_tool("OMSCTL", args), 0), "stderr: %s", err);
	cr_assert(eq(str, last_args,
		     "{\"user\":42,\"tier\":\"whale\",\"force\":true,\"delta_x\":-5,\"zip\":\"007\"}"));
	cr_assert(eq(str, out, "pins: (none)\n"));
}

/* Goal: an error response prints "error: code: message" on stderr and exits 1. */
Test(omsctl_mgmt, error_response_exits_1, .init = start_server, .fini = stop_server)
{
	const char *args[] = {"users", "evict", "--user", "7", "--socket", sock_path, NULL};
	cr_assert(eq(int, run_tool("OMSCTL", args), 1));
	cr_assert(eq(str, err, "error: not_leader: shard 1 is led by node 3\n"));
	cr_assert(eq(str, out, ""));
}

/* Goal: a node's timeout answer (no final state: the entry may still apply) exits 3. */
Test(omsctl_mgmt, timeout_answer_exits_3, .init = start_server, .fini = stop_server)
{
	const char *args[] = {"symbols", "resume", "--symbol", "1", "--socket", sock_path, NULL};
	cr_assert(eq(int, run_tool("OMSCTL", args), 3));
	cr_assert(eq(str, err, "error: timeout: shard 2: no outcome before the deadline\n"));
}

/* Goal: a command the node does not implement is an error response, handled gracefully:
 * a known family (symbols halt) and an unknown word alike. */
Test(omsctl_mgmt, unknown_command, .init = start_server, .fini = stop_server)
{
	const char *a1[] = {"symbols", "halt", "--symbol", "1", "--socket", sock_path, NULL};
	cr_assert(eq(int, run_tool("OMSCTL", a1), 1));
	cr_assert(not(eq(ptr, strstr(err, "error: unknown_command: unknown command "
					  "'symbols.halt'"), NULL)), "%s", err);
	cr_assert(not(eq(ptr, strstr(err, "does not implement 'symbols.halt'"), NULL)));
	const char *st[] = {"order", "status", "--user", "3", "--socket", sock_path, NULL};
	cr_assert(eq(int, run_tool("OMSCTL", st), 1));
	cr_assert(not(eq(ptr, strstr(err, "unknown command 'users.show'"), NULL)), "%s", err);
	const char *a2[] = {"frobnicate", "--socket", sock_path, NULL};
	cr_assert(eq(int, run_tool("OMSCTL", a2), 1));
	cr_assert(not(eq(ptr, strstr(err, "error: unknown_command"), NULL)), "%s", err);
	const char *a3[] = {"--json", "frobnicate", "--socket", sock_path, NULL};
	cr_assert(eq(int, run_tool("OMSCTL", a3), 1));
	cr_assert(not(eq(ptr, strstr(out, "\"ok\":false,\"error\":\"unknown_command\""), NULL)));
}

/* Goal: usage errors exit 2 without a round trip; an unreachable socket exits 3. */
Test(omsctl_mgmt, usage_and_unreachable)
{
	const char *a1[] = {"routes", NULL};
	cr_assert(eq(int, run_tool("OMSCTL", a1), 2));
	cr_assert(not(eq(ptr, strstr(err, "routes: expected show|set|pin|unpin"), NULL)), "%s", err);
	const char *a2[] = {"symbols", "explode", NULL};
	cr_assert(eq(int, run_tool("OMSCTL", a2), 2));
	const char *a3[] = {"status", "extra", NULL};
	cr_assert(eq(int, run_tool("OMSCTL", a3), 2));
	const char *a4[] = {NULL};
	cr_assert(eq(int, run_tool("OMSCTL", a4), 2));
	const char *a5[] = {"status", "--socket", "/tmp/omsd-tools-test-none/x.sock", NULL};
	cr_assert(eq(int, run_tool("OMSCTL", a5), 3));
	cr_assert(not(eq(ptr, strstr(err, "cannot reach"), NULL)), "%s", err);
	const char *a6[] = {"--help", NULL};
	cr_assert(eq(int, run_tool("OMSCTL", a6), 0));
	cr_assert(not(eq(ptr, strstr(out, "usage: omsctl"), NULL)));
}

/* Goal: metrics prints the Prometheus text as-is; top refreshes a bounded number of times
 * and shows rates of counters that moved. */
Test(omsctl_mgmt, metrics_and_top, .init = start_server, .fini = stop_server)
{
	const char *a1[] = {"metrics", "--socket", sock_path, NULL};
	cr_assert(eq(int, run_tool("OMSCTL", a1), 0));
	cr_assert(eq(int, strncmp(out, "# HELP omsd_frames_in_total Frames received\n", 44), 0));
	cr_assert(not(eq(ptr, strstr(out, "omsd_ack_latency_us{quantile=\"0.5\"} 12\n"), NULL)));
	const char *a2[] = {"top", "--count", "2", "--interval-ms", "100", "--socket", sock_path,
			    NULL};
	cr_assert(eq(int, run_tool("OMSCTL", a2), 0), "%s", err);
	cr_assert(not(eq(ptr, strstr(out, "refresh 2 of 2"), NULL)), "%s", out);
	cr_assert(not(eq(ptr, strstr(out, "omsd_frames_in_total{lcore=\"1\"}"), NULL)), "%s", out);
	cr_assert(not(eq(ptr, strstr(out, "omsd_ack_latency_us{quantile=\"0.5\"}"), NULL)));
}

/* ---------------------------------------------------------------------------------------
 * Order entry against the fake node.
 * ------------------------------------------------------------------------------------- */

static char port_arg[16];

static void
start_node(void)
{
	memset(&node, 0, sizeof(node));
	cr_assert(eq(int, fake_node_start(&node), 0));
	snprintf(port_arg, sizeof(port_arg), "%u", node.port);
}

static void
stop_node(void)
{
	fake_node_stop(&node);
}

#define NODE "--host", "127.0.0.1", "--port", port_arg

/* Goal: a resting order prints ack and open and exits 0. */
Test(omsctl_order, new_rests, .init = start_node, .fini = stop_node)
{
	const char *args[] = {"order", "new", "--user", "1", "--symbol", "1", "--side", "buy",
			      "--type", "limit", "--tif", "gtc", "--px", "100", "--qty", "10",
			      "--cl-id", "5", NODE, NULL};
	cr_assert(eq(int, run_tool("OMSCTL", args), 0), "%s%s", out, err);
	cr_assert(not(eq(ptr, strstr(out, "sent NEW_ORDER user=1 cl_id=5\n"), NULL)), "%s", out);
	cr_assert(not(eq(ptr, strstr(out, "ack        user=1 cl_id=5 oid=1:1:5 seq=1\n"), NULL)),
		  "%s", out);
	cr_assert(not(eq(ptr, strstr(out, "open       user=1 cl_id=5 buy px=100 cum=0 leaves=10"),
			 NULL)), "%s", out);
	/* --wait ack stops at the provisional ack; a repeated cl-id is answered (dedup). */
	const char *a2[] = {"order", "new", "--user", "1", "--symbol", "1", "--side", "buy",
			    "--type", "limit", "--px", "100", "--qty", "10", "--cl-id", "5",
			    "--wait", "ack", NODE, NULL};
	cr_assert(eq(int, run_tool("OMSCTL", a2), 0), "%s%s", out, err);
	cr_assert(not(eq(ptr, strstr(out, "ack        user=1 cl_id=5"), NULL)), "%s", out);
	cr_assert(eq(u64, atomic_load(&node.duplicates), 1));
}

/* Goal: an IOC that fills prints the fill with px/qty/fee, which says done; exit 0. */
Test(omsctl_order, ioc_fills_and_is_done, .init = start_node, .fini = stop_node)
{
	const char *args[] = {"order", "new", "--user", "1", "--symbol", "1", "--side", "buy",
			      "--type", "limit", "--tif", "ioc", "--px", "100", "--qty", "3",
			      NODE, NULL};
	cr_assert(eq(int, run_tool("OMSCTL", args), 0), "%s%s", out, err);
	cr_assert(not(eq(ptr, strstr(out, "fill       user=1"), NULL)), "%s", out);
	cr_assert(not(eq(ptr, strstr(out, "px=100 qty=3 fee=1 taker cum=3 leaves=0 seq=2 done\n"),
			  NULL)),
		  "%s", out);
	cr_assert(eq(ptr, strstr(out, "done       user=1"), NULL), "%s", out); /* no DONE report */
}

/* Goal: a NAK and a reject both exit 1 with the reason printed. */
Test(omsctl_order, refusals_exit_1, .init = start_node, .fini = stop_node)
{
	const char *a1[] = {"order", "new", "--user", "666", "--symbol", "1", "--side", "sell",
			    "--type", "limit", "--px", "100", "--qty", "1", NODE, NULL};
	cr_assert(eq(int, run_tool("OMSCTL", a1), 1));
	cr_assert(not(eq(ptr, strstr(out, "reason=INSUFFICIENT_FUNDS"), NULL)), "%s", out);
	const char *a2[] = {"order", "new", "--user", "2", "--symbol", "1", "--side", "sell",
			    "--type", "limit", "--px", "13", "--qty", "1", NODE, NULL};
	cr_assert(eq(int, run_tool("OMSCTL", a2), 1));
	cr_assert(not(eq(ptr, strstr(out, "rejected   user=2"), NULL)), "%s", out);
	cr_assert(not(eq(ptr, strstr(out, "reason=OUTSIDE_BAND"), NULL)), "%s", out);
}

/* Goal: cancel, amend and replace of an order wait for the target's transitions. */
Test(omsctl_order, cancel_amend_replace, .init = start_node, .fini = stop_node)
{
	const char *n1[] = {"order", "new", "--user", "4", "--symbol", "1", "--side", "buy",
			    "--type", "limit", "--px", "100", "--qty", "10", "--cl-id", "1", NODE,
			    NULL};
	cr_assert(eq(int, run_tool("OMSCTL", n1), 0));
	const char *am[] = {"order", "amend", "--user", "4", "--orig", "1", "--qty", "5",
			    "--cl-id", "2", NODE, NULL};
	cr_assert(eq(int, run_tool("OMSCTL", am), 0), "%s%s", out, err);
	cr_assert(not(eq(ptr, strstr(out, "amended    user=4 cl_id=1"), NULL)), "%s", out);
	const char *rp[] = {"order", "replace", "--user", "4", "--orig", "1", "--px", "99",
			    "--qty", "5", "--cl-id", "3", NODE, NULL};
	cr_assert(eq(int, run_tool("OMSCTL", rp), 0), "%s%s", out, err);
	cr_assert(not(eq(ptr, strstr(out, "cause=replaced"), NULL)), "%s", out);
	cr_assert(not(eq(ptr, strstr(out, "open       user=4 cl_id=3 buy px=99"), NULL)), "%s", out);
	const char *cx[] = {"order", "cancel", "--user", "4", "--orig", "3", "--cl-id", "4",
			    NODE, NULL};
	cr_assert(eq(int, run_tool("OMSCTL", cx), 0), "%s%s", out, err);
	char *c = strstr(out, "cancelled  user=4 cl_id=3");
	cr_assert(not(eq(ptr, c, NULL)), "%s", out);
	cr_assert(not(eq(ptr, strstr(c, " done\n"), NULL)), "%s", out);
	const char *bad[] = {"order", "cancel", "--user", "4", "--orig", "999", NODE, NULL};
	cr_assert(eq(int, run_tool("OMSCTL", bad), 1));
	cr_assert(not(eq(ptr, strstr(out, "reason=UNKNOWN_ORDER"), NULL)), "%s", out);
}

/* Goal: --json prints one object per received message. */
Test(omsctl_order, json_lines, .init = start_node, .fini = stop_node)
{
	const char *args[] = {"--json", "order", "new", "--user", "1", "--symbol", "1", "--side",
			      "buy", "--type", "market", "--quote", "1000", "--cl-id", "8", NODE,
			      NULL};
	cr_assert(eq(int, run_tool("OMSCTL", args), 0), "%s%s", out, err);
	const char *want[] = {"{\"type\":\"ACK\",\"user\":1,\"cl_ord_id\":8,",
			      "{\"type\":\"EXEC_REPORT\",\"user\":1,\"cl_ord_id\":8,"};
	char *line = out;
	for (int i = 0; i < 2; i++) {
		cr_assert(eq(int, strncmp(line, want[i], strlen(want[i])), 0), "line %d: %s", i, line);
		char *nl = strchr(line, '\n');
		cr_assert(not(eq(ptr, nl, NULL)));
		cr_assert(eq(chr, nl[-1], '}'));
		line = nl + 1;
	}
	cr_assert(eq(chr, *line, '\0'));
	cr_assert(not(eq(ptr, strstr(out, "\"exec\":\"fill\""), NULL)));
	cr_assert(not(eq(ptr, strstr(out, "\"done\":true}"), NULL)), "%s", out);
}

/* Goal: deposit and withdraw are answered by ADMIN_REPLY; exit 0. */
Test(omsctl_order, transfers, .init = start_node, .fini = stop_node)
{
	const char *a1[] = {"deposit", "--user", "1", "--asset", "2", "--amount", "5000",
			    "--shard", "1", NODE, NULL};
	cr_assert(eq(int, run_tool("OMSCTL", a1), 0), "%s%s", out, err);
	cr_assert(not(eq(ptr, strstr(out, "ok         transfer_id="), NULL)), "%s", out);
	cr_assert(not(eq(ptr, strstr(out, "total=5000"), NULL)), "%s", out);
	const char *a2[] = {"withdraw", "--user", "1", "--asset", "2", "--amount", "0", NODE, NULL};
	cr_assert(eq(int, run_tool("OMSCTL", a2), 2));
}

/* Goal: no node → the request is retransmitted, then exit 3 within --wait-ms; a lost first
 * frame is recovered by a retransmit. */
Test(omsctl_order, no_answer_and_recovery, .init = start_node, .fini = stop_node)
{
	atomic_store(&node.silent, 1);
	const char *a1[] = {"order", "new", "--user", "1", "--symbol", "1", "--side", "buy",
			    "--type", "limit", "--px", "100", "--qty", "1", "--wait-ms", "400",
			    "--retry-ms", "50", NODE, NULL};
	cr_assert(eq(int, run_tool("OMSCTL", a1), 3));
	cr_assert(not(eq(ptr, strstr(out, "no answer: gave up after"), NULL)), "%s", out);
	cr_assert(atomic_load(&node.frames_rx) >= 3);
	atomic_store(&node.silent, 0);
	atomic_store(&node.drop_frames, 1);
	const char *a2[] = {"order", "new", "--user", "1", "--symbol", "1", "--side", "buy",
			    "--type", "limit", "--px", "100", "--qty", "1", "--retry-ms", "50",
			    NODE, NULL};
	cr_assert(eq(int, run_tool("OMSCTL", a2), 0), "%s%s", out, err);
	const char *a3[] = {"order", "new", "--user", "1", NODE, NULL};
	cr_assert(eq(int, run_tool("OMSCTL", a3), 2));
	const char *a4[] = {"order", "new", "--user", "1", "--symbol", "1", "--side", "up",
			    "--type", "limit", "--px", "1", "--qty", "1", NODE, NULL};
	cr_assert(eq(int, run_tool("OMSCTL", a4), 2));
	const char *a5[] = {"order", "new", "--user", "1", "--symbol", "1", "--side", "buy",
			    "--type", "limit", "--px", "1", "--qty", "1", "--bogus", "1", NODE, NULL};
	cr_assert(eq(int, run_tool("OMSCTL", a5), 2));
	cr_assert(not(eq(ptr, strstr(err, "unknown option --bogus"), NULL)), "%s", err);
}

/* Goal: omsload funds its users, runs at a bounded rate for the given time, stops by itself
 * and reports; everything sent is answered. */
Test(omsload, runs_and_reports, .init = start_node, .fini = stop_node, .timeout = 30)
{
	const char *args[] = {"--users", "4", "--rate", "300", "--seconds", "1", "--seed", "3",
			      "--drain-ms", "5000", NODE, NULL};
	cr_assert(eq(int, run_tool("OMSLOAD", args), 0), "%s%s", out, err);
	char *last = out + strlen(out) - 1;
	while (last > out && last[-1] != '\n')
		last--;
	unsigned long sent, acked, naked, final, p50, p99;
	cr_assert(eq(int, sscanf(last, "load: sent=%lu acked=%lu naked=%lu final=%lu "
				       "ack_p50_us=%lu ack_p99_us=%lu",
				 &sent, &acked, &naked, &final, &p50, &p99), 6), "%s", last);
	cr_assert(sent >= 250 && sent <= 310, "sent %lu", sent);
	cr_assert(eq(u64, acked + naked, sent), "%s", out);
	cr_assert(final > 0);
	cr_assert(p99 >= p50);
	cr_assert(not(eq(ptr, strstr(out, "deposits: sent=8 ok=8 refused=0 lost=0"), NULL)),
		  "%s", out);
	cr_assert(not(eq(ptr, strstr(out, "naks: none"), NULL)), "%s", out);
	/* Without a key the summary line is what its parsers know: no session counters. */
	cr_assert(eq(ptr, strstr(last, "seq_resyncs="), NULL), "%s", last);
}

/* ---------------------------------------------------------------------------------------
 * API keys: the fake node as the gateway with the real session table (fake_node.h).
 * ------------------------------------------------------------------------------------- */

#define KEY_ID 7
static struct auth_key gw_key;
static struct auth_keys gw_keys = {.keys = &gw_key, .count = 1, .cap = 1};
static char key_path[64];     /* a client key file for KEY_ID */
static char unknown_path[64]; /* the same secret under a key id the node does not know */

/* A key file of one line, "<id> <secret hex> trade,transfer *", as the node's key file has. */
static void
key_file_write(char *path, size_t cap, uint64_t key_id, const uint8_t *secret)
{
	snprintf(path, cap, "/tmp/omsd-cli-key-XXXXXX");
	int fd = mkstemp(path);
	cr_assert(fd >= 0);
	FILE *f = fdopen(fd, "w");
	cr_assert(not(eq(ptr, f, NULL)));
	fprintf(f, "# client key\n%lu ", (unsigned long)key_id);
	for (uint32_t i = 0; i < AUTH_SECRET_SIZE; i++)
		fprintf(f, "%02x", secret[i]);
	fprintf(f, " trade,transfer *\n");
	cr_assert(eq(int, fclose(f), 0));
}

static void
start_gateway(void)
{
	memset(&node, 0, sizeof(node));
	memset(&gw_key, 0, sizeof(gw_key));
	gw_key.key_id = KEY_ID;
	for (uint32_t i = 0; i < AUTH_SECRET_SIZE; i++)
		gw_key.secret[i] = (uint8_t)(0x30 + i);
	gw_key.perms = AUTH_P_ALL;
	gw_key.all_users = true;
	cr_assert(eq(int, fake_node_sessions(&node, &gw_keys, 0, 0, 0), 0));
	cr_assert(eq(int, fake_node_start(&node), 0));
	snprintf(port_arg, sizeof(port_arg), "%u", node.port);
	key_file_write(key_path, sizeof(key_path), KEY_ID, gw_key.secret);
	key_file_write(unknown_path, sizeof(unknown_path), KEY_ID + 1, gw_key.secret);
}

static void
stop_gateway(void)
{
	fake_node_stop(&node);
	unlink(key_path);
	unlink(unknown_path);
}

/* Wait up to 1 s for the node thread to count a LOGOUT (the tool sends it as it exits). */
static uint64_t
logouts_seen(uint64_t want)
{
	for (int i = 0; i < 1000 && atomic_load(&node.logouts_rx) < want; i++)
		usleep(1000);
	return atomic_load(&node.logouts_rx);
}

/* Goal: with --key-file omsctl logs on, sends in the session, is answered, and logs out;
 * a refused logon exits 1 with the node's reason; --key with --key-file and a bad key file
 * are usage errors. Method: the fake node as the gateway; an order with the right key, one
 * with a key id it does not know (human and --json), then the option errors. */
Test(omsctl_order, key_file_logon, .init = start_gateway, .fini = stop_gateway)
{
	const char *a1[] = {"order", "new", "--user", "1", "--symbol", "1", "--side", "buy",
			    "--type", "limit", "--px", "100", "--qty", "10", "--cl-id", "5",
			    "--key-file", key_path, NODE, NULL};
	cr_assert(eq(int, run_tool("OMSCTL", a1), 0), "%s%s", out, err);
	cr_assert(not(eq(ptr, strstr(out, "ack        user=1 cl_id=5"), NULL)), "%s", out);
	cr_assert(not(eq(ptr, strstr(out, "open       user=1 cl_id=5"), NULL)), "%s", out);
	cr_assert(eq(u64, atomic_load(&node.logons), 1));
	cr_assert(atomic_load(&node.session_frames) >= 1);
	cr_assert(eq(u64, logouts_seen(1), 1));
	cr_assert(eq(u64, atomic_load(&node.decode_errors), 0));

	const char *a2[] = {"order", "new", "--user", "1", "--symbol", "1", "--side", "buy",
			    "--type", "limit", "--px", "100", "--qty", "10",
			    "--key-file", unknown_path, NODE, NULL};
	cr_assert(eq(int, run_tool("OMSCTL", a2), 1), "%s%s", out, err);
	cr_assert(not(eq(ptr, strstr(err, "logon refused: BAD_KEY"), NULL)), "%s", err);
	cr_assert(eq(ptr, strstr(out, "sent NEW_ORDER"), NULL), "%s", out); /* nothing sent */
	const char *a3[] = {"--json", "deposit", "--user", "1", "--asset", "1", "--amount", "5",
			    "--key-file", unknown_path, NODE, NULL};
	cr_assert(eq(int, run_tool("OMSCTL", a3), 1), "%s%s", out, err);
	cr_assert(not(eq(ptr, strstr(out, "{\"type\":\"LOGON_REPLY\","), NULL)), "%s", out);
	cr_assert(not(eq(ptr, strstr(out, "\"reason\":\"BAD_KEY\"}"), NULL)), "%s", out);
	cr_assert(eq(u64, atomic_load(&node.logons_refused), 2));

	const char *a4[] = {"deposit", "--user", "1", "--asset", "1", "--amount", "5",
			    "--key-file", key_path, "--key", "000102030405060708090a0b0c0d0e0f",
			    NODE, NULL};
	cr_assert(eq(int, run_tool("OMSCTL", a4), 2), "%s%s", out, err);
	const char *a5[] = {"deposit", "--user", "1", "--asset", "1", "--amount", "5",
			    "--key-file", "/nonexistent/omsd.key", NODE, NULL};
	cr_assert(eq(int, run_tool("OMSCTL", a5), 4), "%s%s", out, err);
	cr_assert(not(eq(ptr, strstr(err, "/nonexistent/omsd.key"), NULL)), "%s", err);
	const char *a6[] = {"deposit", "--user", "1", "--asset", "1", "--amount", "5",
			    "--key-file", "/dev/null", NODE, NULL};
	cr_assert(eq(int, run_tool("OMSCTL", a6), 2), "%s%s", out, err);
	cr_assert(not(eq(ptr, strstr(err, "no key line"), NULL)), "%s", err);
	cr_assert(eq(u64, atomic_load(&node.logons), 1));
}

/* Goal: omsload with --key-file runs its whole load in a session (every request answered)
 * and prints the session counters after the summary line's fields; refused, it exits 1
 * with the reason. Method: the fake node as the gateway; one short run with the key, one
 * with an unknown key id. */
Test(omsload, logs_on_with_a_key_file, .init = start_gateway, .fini = stop_gateway,
     .timeout = 30)
{
	const char *args[] = {"--users", "4", "--rate", "300", "--seconds", "1", "--seed", "3",
			      "--drain-ms", "5000", "--key-file", key_path, NODE, NULL};
	cr_assert(eq(int, run_tool("OMSLOAD", args), 0), "%s%s", out, err);
	char *last = out + strlen(out) - 1;
	while (last > out && last[-1] != '\n')
		last--;
	unsigned long sent, acked, naked, final, p50, p99, resyncs, relogons, rate;
	cr_assert(eq(int, sscanf(last, "load: sent=%lu acked=%lu naked=%lu final=%lu "
				       "ack_p50_us=%lu ack_p99_us=%lu seq_resyncs=%lu "
				       "relogons=%lu rate_refused=%lu",
				 &sent, &acked, &naked, &final, &p50, &p99, &resyncs, &relogons,
				 &rate), 9), "%s", last);
	cr_assert(sent >= 250 && sent <= 310, "sent %lu", sent);
	cr_assert(eq(u64, acked + naked, sent), "%s", out);
	cr_assert(eq(u64, resyncs + relogons + rate, 0), "%s", last);
	cr_assert(not(eq(ptr, strstr(out, "deposits: sent=8 ok=8 refused=0 lost=0"), NULL)),
		  "%s", out);
	cr_assert(eq(u64, atomic_load(&node.logons), 1));
	cr_assert(atomic_load(&node.session_frames) > 0);
	cr_assert(eq(u64, atomic_load(&node.decode_errors), 0));
	cr_assert(eq(u64, logouts_seen(1), 1));

	const char *bad[] = {"--users", "1", "--seconds", "1", "--key-file", unknown_path, NODE,
			     NULL};
	cr_assert(eq(int, run_tool("OMSLOAD", bad), 1), "%s%s", out, err);
	cr_assert(not(eq(ptr, strstr(err, "logon refused: BAD_KEY"), NULL)), "%s", err);
	const char *both[] = {"--key", "000102030405060708090a0b0c0d0e0f", "--key-file",
			      key_path, NODE, NULL};
	cr_assert(eq(int, run_tool("OMSLOAD", both), 2), "%s%s", out, err);
}
