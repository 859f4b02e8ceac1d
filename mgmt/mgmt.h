/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mgmt — the control plane of one omsd node: a unix socket speaking JSON lines, served on
 * the main lcore (never a hot lcore), plus Prometheus text rendering of counters.
 *
 * Protocol: one request per line, one response per line.
 *   request:  {"id": 7, "cmd": "status", "args": {...}}
 *   response: {"id": 7, "ok": true, "result": {...}}
 *          or {"id": 7, "ok": false, "error": "not_leader", "message": "...", ...}
 * Requests that change shard state become admin entries in that shard's log; the handler
 * returns MGMT_PENDING and answers later with mgmt_reply_*() once the entry commits (or
 * says why not).
 */
#ifndef OMSD_MGMT_H
#define OMSD_MGMT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/hist.h"

/* ---------------------------------------------------------------------------------------
 * JSON: a small validating reader (tokens over the caller's text, no allocation) and an
 * appending writer.
 * ------------------------------------------------------------------------------------- */

enum mgmt_json_type {
	MGMT_JSON_NULL = 1,
	MGMT_JSON_BOOL,
	MGMT_JSON_NUMBER,
	MGMT_JSON_STRING,
	MGMT_JSON_ARRAY,
	MGMT_JSON_OBJECT,
};

struct mgmt_json_tok {
	uint8_t type;     /* enum mgmt_json_type */
	uint32_t start;   /* byte offset of the value (strings: after the quote) */
	uint32_t len;     /* bytes (strings: raw, escapes not decoded) */
	uint32_t size;    /* arrays: elements; objects: key/value pairs */
	uint32_t next;    /* index of the token after this value and all its children */
};

#define MGMT_JSON_TOKENS_MAX 256
#define MGMT_LINE_MAX 65536

struct mgmt_json {
	const char *text;
	uint32_t count;                                 /* tokens used */
	struct mgmt_json_tok toks[MGMT_JSON_TOKENS_MAX];
};

/* Parse one JSON value (the whole text, surrounding white space allowed). 0, or -EINVAL
 * with *err_at set to the byte offset of the first problem, or -E2BIG (too many tokens). */
int mgmt_json_parse(struct mgmt_json *j, const char *text, size_t len, size_t *err_at);
/* Token index of key in the object at obj, or -1. */
int mgmt_json_get(const struct mgmt_json *j, int obj, const char *key);
/* Typed getters: 0 on success, -ENOENT (missing), -EINVAL (wrong type or out of range). */
int mgmt_json_str(const struct mgmt_json *j, int tok, char *out, size_t cap);
int mgmt_json_u64(const struct mgmt_json *j, int tok, uint64_t *out);
int mgmt_json_i64(const struct mgmt_json *j, int tok, int64_t *out);
int mgmt_json_bool(const struct mgmt_json *j, int tok, bool *out);
/* Object member getters: -ENOENT when the key is absent. */
int mgmt_json_get_str(const struct mgmt_json *j, int obj, const char *key, char *out, size_t cap);
int mgmt_json_get_u64(const struct mgmt_json *j, int obj, const char *key, uint64_t *out);
int mgmt_json_get_i64(const struct mgmt_json *j, int obj, const char *key, int64_t *out);
int mgmt_json_get_bool(const struct mgmt_json *j, int obj, const char *key, bool *out);

/* Appending writer into a fixed buffer; once full it stays full (out->overflow) and
 * further appends are dropped, so a handler never has to check every call. */
struct mgmt_out {
	char *buf;
	size_t cap;
	size_t len;
	bool overflow;
	bool need_comma;  /* a value was written at the current nesting level */
};

void mgmt_out_init(struct mgmt_out *o, char *buf, size_t cap);
void mgmt_out_raw(struct mgmt_out *o, const char *s);
void mgmt_out_obj_begin(struct mgmt_out *o);
void mgmt_out_obj_end(struct mgmt_out *o);
void mgmt_out_arr_begin(struct mgmt_out *o);
void mgmt_out_arr_end(struct mgmt_out *o);
void mgmt_out_key(struct mgmt_out *o, const char *key);
void mgmt_out_str(struct mgmt_out *o, const char *s);
void mgmt_out_u64(struct mgmt_out *o, uint64_t v);
void mgmt_out_i64(struct mgmt_out *o, int64_t v);
void mgmt_out_bool(struct mgmt_out *o, bool v);
void mgmt_out_null(struct mgmt_out *o);
/* key + value in one call. */
void mgmt_out_kv_str(struct mgmt_out *o, const char *key, const char *v);
void mgmt_out_kv_u64(struct mgmt_out *o, const char *key, uint64_t v);
void mgmt_out_kv_i64(struct mgmt_out *o, const char *key, int64_t v);
void mgmt_out_kv_bool(struct mgmt_out *o, const char *key, bool v);

/* ---------------------------------------------------------------------------------------
 * Server.
 * ------------------------------------------------------------------------------------- */

#define MGMT_CLIENTS_MAX 32
#define MGMT_COMMANDS_MAX 64
#define MGMT_PENDING 1 /* handler return: it will answer later with mgmt_reply_* */

struct mgmt_server;

/* A request as a handler sees it. */
struct mgmt_req {
	const struct mgmt_json *json; /* the whole request */
	int args;                     /* token of "args" (an object), or -1 */
	uint64_t id;                  /* request id echoed in the response */
	uint32_t token;               /* for a deferred answer (MGMT_PENDING) */
	const char *cmd;
};

/* A handler writes its result object into out (mgmt_out_obj_begin ... end) and returns 0;
 * or fills err/msg and returns a negative errno; or returns MGMT_PENDING. */
typedef int(mgmt_handler_fn)(void *ctx, const struct mgmt_req *req, struct mgmt_out *out,
			     char *err, size_t err_cap);

/* Open the socket at path (directories created, a stale socket replaced), its group set to
 * group when that group exists, with the given mode. 0 or -errno; -EPERM when the socket's
 * directory is not safe (mgmt_dir_check). */
int mgmt_server_open(struct mgmt_server **out, const char *path, const char *group,
		     mode_t mode);
void mgmt_server_close(struct mgmt_server *s);
/* Close a client that sent no request line for idle_ms (default 10 s; 0: the default),
 * unless a request of its waits for its answer. */
void mgmt_server_set_idle_ms(struct mgmt_server *s, uint32_t idle_ms);
/* The control socket's directory is safe to serve in: a directory (not a link) owned by
 * root or by this process's user and writable by no one else. 0, or a negative errno
 * (-EPERM: unsafe) with the reason, naming dir, in why. mgmt_server_open refuses (-EPERM)
 * a socket in an unsafe directory. */
int mgmt_dir_check(const char *dir, char *why, size_t cap);
/* The same for the directory of socket path. */
int mgmt_socket_dir_check(const char *path, char *why, size_t cap);
int mgmt_register(struct mgmt_server *s, const char *cmd, mgmt_handler_fn *fn, void *ctx,
		  const char *help);
/* Accept, read, dispatch, write. Waits at most timeout_ms for activity (0: never waits).
 * Returns requests handled. */
int mgmt_poll(struct mgmt_server *s, int timeout_ms);
/* Answer a deferred request. The client may have gone; then this is a no-op. */
void mgmt_reply_ok(struct mgmt_server *s, uint32_t token, const char *result_json);
void mgmt_reply_err(struct mgmt_server *s, uint32_t token, const char *err, const char *msg);
/* The same with more members in the error object: members is JSON object content without
 * braces ("\"leader\":2,\"results\":[...]"), written as given (the caller's JSON). */
void mgmt_reply_err_extra(struct mgmt_server *s, uint32_t token, const char *err,
			  const char *msg, const char *members);
/* Counters of the server itself. */
struct mgmt_stats {
	uint64_t requests;
	uint64_t errors;        /* error responses sent */
	uint64_t bad_json;      /* lines that were not a JSON object */
	uint64_t clients;       /* accepted connections */
	uint64_t overlong;      /* lines over MGMT_LINE_MAX */
	uint64_t idle_closed;   /* clients closed for sending no request within the deadline */
	uint64_t busy_refused;  /* connections refused: every place taken (or all but the
				 * operator's, for anyone else) */
};
void mgmt_stats_get(const struct mgmt_server *s, struct mgmt_stats *out);

/* ---------------------------------------------------------------------------------------
 * Client (omsctl and tests).
 * ------------------------------------------------------------------------------------- */

/* Send one request line and read one response line into resp (NUL-terminated). 0 or
 * -errno (-ETIMEDOUT after timeout_ms). */
int mgmt_call(const char *path, const char *request, char *resp, size_t cap, int timeout_ms);

/* ---------------------------------------------------------------------------------------
 * Prometheus text exposition (mgmt_prom.c), under the Prometheus naming conventions
 * (docs/appliance.md "Metric names"; `promtool check metrics` finds nothing to report).
 * ------------------------------------------------------------------------------------- */

/* Append "# HELP/# TYPE" once per family (call with the same name consecutively). */
void mgmt_prom_family(struct mgmt_out *o, const char *name, const char *type, const char *help);
/* One sample: name{labels} value. labels is "" or `k="v",k2="v2"`. */
void mgmt_prom_sample(struct mgmt_out *o, const char *name, const char *labels, uint64_t value);
/* value / per_unit as an exact decimal ("12345" / 10^9 → "0.000012345", 2000 / 10^3 → "2"),
 * for a value counted in a sub-unit and rendered in its base unit. per_unit is a power of
 * ten (CHECKed). The length written, or -ENOSPC (buf emptied); 48 bytes always suffice. */
int mgmt_prom_decimal(char *buf, size_t cap, uint64_t value, uint64_t per_unit);
/* A histogram as a summary: quantiles 0.5 0.9 0.99 0.999 0.9999, _sum and _count. The
 * values (quantiles, _sum) are divided by per_unit: a hist of ns rendered in seconds takes
 * 1000000000, a hist of counts 1. */
void mgmt_prom_summary(struct mgmt_out *o, const char *name, const char *labels,
		       const struct hist *h, uint64_t per_unit);

/* A histogram as a Prometheus histogram: cumulative name_bucket{labels,le="B"} for each of
 * bound_count ascending bounds, le="+Inf", then name_sum and name_count. A hist bucket counts
 * under the first bound at or above its upper edge (so within the hist's 3.1 %). bounds are
 * in the hist's unit; le and _sum are divided by per_unit (as for mgmt_prom_summary). */
void mgmt_prom_histogram(struct mgmt_out *o, const char *name, const char *labels,
			 const struct hist *h, const uint64_t *bounds, uint32_t bound_count,
			 uint64_t per_unit);

/* A dotted counter name (the stats dump's "shard.1.oms.naks") as a Prometheus family and
 * labels: "omsd_" + the tokens joined with '_', except that the token after a key listed in
 * label_keys (pairs {token, label}, NULL-terminated) becomes a label instead:
 * with {"shard","shard"}, "shard.1.oms.naks" → family "omsd_shard_oms_naks", labels
 * `shard="1"`. The family is lower case, with '_' for characters outside [A-Za-z0-9_];
 * '"' and '\' are escaped in label values. 0, or -ENOSPC when either output would be
 * truncated, or -EINVAL for an empty name or token. The family is the stat's name; the
 * metric's name is that family under mgmt_prom_conventions. */
int mgmt_prom_name(const char *dotted, const char *const *label_keys, char *family,
		   size_t family_cap, char *labels, size_t labels_cap);
/* The same dotted name (len bytes, not NUL-terminated) with each label value replaced by
 * <label>, for HELP texts: "agent.io.busy_ns" → "agent.<lcore>.busy_ns". 0 or -ENOSPC. */
int mgmt_prom_pattern(const char *dotted, size_t len, const char *const *label_keys, char *out,
		      size_t cap);

enum mgmt_prom_type {
	MGMT_PROM_COUNTER = 1, /* only goes up (from 0 at start) */
	MGMT_PROM_GAUGE,       /* a value now: may go down */
	MGMT_PROM_INFO,        /* a text, rendered as the label value="..." of a sample 1 */
};
/* Rewrite a family made by mgmt_prom_name (in place, cap bytes) into its metric name under
 * the Prometheus conventions, and say how its values scale:
 *  - words that read as abbreviated units but are not ("_not_us" → "_not_ours");
 *  - a counter or gauge whose last token is a unit is in the base unit, *per_unit raw values
 *    to one: ns, us, ms, s, sec → seconds (10^9, 10^6, 10^3, 1); permille, percent, pct →
 *    ratio (1000, 100, 100); "_per_s" → "_per_second" (1; a rate per ms or us: -EINVAL);
 *  - a counter ends in _total: appended, or in place of a final _count;
 *  - a gauge that would end in _total, _count, _sum, _bucket or _info gets "_now";
 *  - an info metric ends in _info (a text has no unit: -EINVAL for one named in a unit).
 * 0, -ENOSPC when it would not fit, -EINVAL for a name that cannot be rendered. */
int mgmt_prom_conventions(char *family, size_t cap, enum mgmt_prom_type type,
			  uint64_t *per_unit);

/* ---------------------------------------------------------------------------------------
 * Metrics over HTTP (mgmt_http.c): GET /metrics for Prometheus, polled, never blocking.
 * ------------------------------------------------------------------------------------- */

#define MGMT_HTTP_CLIENTS_MAX 4        /* connections at once; more get 503 */
#define MGMT_HTTP_REQ_MAX 4096         /* request head bytes; more get 431 */
#define MGMT_HTTP_OUT_MAX (1u << 20)   /* largest answer */
#define MGMT_HTTP_IDLE_MS 5000         /* a connection without progress is closed */

struct mgmt_http;
/* Render the metrics text into body. 0 or -errno (answered 500). */
typedef int(mgmt_http_body_fn)(void *ctx, struct mgmt_out *body);

struct mgmt_http_stats {
	uint64_t accepted;     /* connections accepted */
	uint64_t requests;     /* well-formed requests */
	uint64_t ok;           /* 200 answers */
	uint64_t not_found;    /* 404: a path other than /metrics */
	uint64_t bad_method;   /* 405: a method other than GET/HEAD */
	uint64_t bad_request;  /* 400: malformed request line */
	uint64_t too_large;    /* 431: head over MGMT_HTTP_REQ_MAX */
	uint64_t busy;         /* 503: all connections in use */
	uint64_t timeouts;     /* connections closed for lack of progress */
	uint64_t errors;       /* 500: the body callback failed */
};

/* Listen on ip_be:port (network order address; port 0 picks one). 0 or -errno. */
int mgmt_http_open(struct mgmt_http **out, uint32_t ip_be, uint16_t port,
		   mgmt_http_body_fn *fn, void *ctx);
void mgmt_http_close(struct mgmt_http *h);
/* Accept, read, answer, write, time out; never waits. now_ms: any monotonic clock.
 * Returns answers completed. */
int mgmt_http_poll(struct mgmt_http *h, uint64_t now_ms);
uint16_t mgmt_http_port(const struct mgmt_http *h);
int mgmt_http_fd(const struct mgmt_http *h);
void mgmt_http_stats_get(const struct mgmt_http *h, struct mgmt_http_stats *out);
/* Parse a request head: the length of the head (through the empty line) with method and
 * path filled, 0 when incomplete, -EINVAL when malformed. */
int mgmt_http_parse(const char *buf, size_t len, char *method, size_t method_cap, char *path,
		    size_t path_cap);

#endif
