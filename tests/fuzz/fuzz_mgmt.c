/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the control plane's decoders: the JSON-lines reader of the control
 * socket (mgmt/mgmt_json.c) and the request-head parser of the metrics listener
 * (mgmt/mgmt_http.c). The first byte picks the decoder; the rest is its input.
 *
 * Properties: neither crashes or reads past its input (ASan), whatever the bytes.
 * JSON: an accepted text yields tokens inside the text, each token's `next` after itself and
 * within the count, container sizes that match their children; every typed getter on every
 * token answers without crashing, and a key found by mgmt_json_get is a member of its object.
 * HTTP: an accepted head ends with CRLF CRLF inside the input, method and path are
 * NUL-terminated within their buffers, the method is upper-case letters and the path starts
 * with '/'; "incomplete" (0) is never said of an input holding a complete head.
 */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "common/check.h"
#include "mgmt/mgmt.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char text[MGMT_LINE_MAX + 1];
static struct mgmt_json json;

static void
json_one(const char *t, size_t len)
{
	size_t err_at = 0;
	if (mgmt_json_parse(&json, t, len, &err_at) != 0) {
		CHECK(err_at <= len);
		return;
	}
	CHECK(json.count >= 1 && json.count <= MGMT_JSON_TOKENS_MAX);
	for (uint32_t i = 0; i < json.count; i++) {
		const struct mgmt_json_tok *k = &json.toks[i];
		CHECK(k->type >= MGMT_JSON_NULL && k->type <= MGMT_JSON_OBJECT);
		CHECK((size_t)k->start + k->len <= len);
		CHECK(k->next > i && k->next <= json.count);
		if (k->type == MGMT_JSON_ARRAY || k->type == MGMT_JSON_OBJECT) {
			/* Children: size values (objects: size key/value pairs) up to next. */
			uint32_t want = k->type == MGMT_JSON_OBJECT ? 2 * k->size : k->size;
			uint32_t n = 0;
			for (uint32_t c = i + 1; c < k->next; c = json.toks[c].next)
				n++;
			CHECK(n == want);
		}
		char s[64];
		uint64_t u;
		int64_t v;
		bool b;
		(void)mgmt_json_str(&json, (int)i, s, sizeof(s));
		(void)mgmt_json_u64(&json, (int)i, &u);
		(void)mgmt_json_i64(&json, (int)i, &v);
		(void)mgmt_json_bool(&json, (int)i, &b);
		if (k->type == MGMT_JSON_OBJECT && k->size > 0) {
			/* The first key, decoded, must be found again in its own object. */
			char key[64];
			if (mgmt_json_str(&json, (int)i + 1, key, sizeof(key)) == 0) {
				int got = mgmt_json_get(&json, (int)i, key);
				CHECK(got > (int)i && (uint32_t)got < k->next);
				(void)mgmt_json_get_u64(&json, (int)i, key, &u);
				(void)mgmt_json_get_str(&json, (int)i, key, s, sizeof(s));
			}
		}
	}
}

static void
http_one(const char *t, size_t len)
{
	char method[16], path[256];
	int rc = mgmt_http_parse(t, len, method, sizeof(method), path, sizeof(path));
	bool complete = false;
	for (size_t i = 0; i + 3 < len && !complete; i++)
		complete = memcmp(t + i, "\r\n\r\n", 4) == 0;
	if (rc == 0) {
		CHECK(!complete);
		return;
	}
	if (rc < 0)
		return;
	CHECK(complete && (size_t)rc <= len && rc >= 4);
	CHECK(memcmp(t + rc - 4, "\r\n\r\n", 4) == 0);
	size_t ml = strnlen(method, sizeof(method)), pl = strnlen(path, sizeof(path));
	CHECK(ml > 0 && ml < sizeof(method) && pl > 0 && pl < sizeof(path));
	for (size_t i = 0; i < ml; i++)
		CHECK(method[i] >= 'A' && method[i] <= 'Z');
	CHECK(path[0] == '/');
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1 || size - 1 > MGMT_LINE_MAX)
		return 0;
	size_t len = size - 1;
	memcpy(text, data + 1, len); /* an exact-size copy: ASan sees any read past len */
	if ((data[0] & 1) == 0)
		json_one(text, len);
	else
		http_one(text, len);
	return 0;
}
