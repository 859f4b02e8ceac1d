/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for client sessions (auth/auth.c): the key-file readers, and the
 * gateway's session rules driven by arbitrary frames.
 *
 * Input: byte 0 picks the mode. Mode 0: the rest is a key file (auth_keys_parse, then
 * auth_client_key_parse). Otherwise the rest is a sequence of records {u16 length, u8 flags,
 * u8 clock step, frame bytes}: each frame goes through the decoder the io lcore would use
 * (the session decoder when it has WIRE_FRAME_F_SESSION) and then the gateway's rules —
 * auth_logon for a LOGON, auth_frame and auth_check_msg for a session frame — with the
 * clocks advanced by the step. So that the fuzzer gets past the cryptography, flag bit 0
 * re-signs a LOGON with its key's secret and bit 1 re-MACs a session frame under its
 * session's key before the rules see it; bit 2 swaps in a key set with key 2 revoked; bit 3
 * runs the idle expiry.
 *
 * Properties: nothing crashes or reads past its input (ASan); the table never holds more
 * than sessions_max sessions and every session is found under its own id; an accepted
 * frame advanced its session's seq by exactly one; a refused logon or frame changed no
 * session's seq.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "auth/auth.h"
#include "common/check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define SEC UINT64_C(1000000000)

static const char KEYS[] =
	"1 0101010101010101010101010101010101010101010101010101010101010101 trade,read 1-100\n"
	"2 0202020202020202020202020202020202020202020202020202020202020202 all *\n"
	"3 0303030303030303030303030303030303030303030303030303030303030303 transfer 7,9-12\n";
static const char KEYS_REVOKED[] =
	"1 0101010101010101010101010101010101010101010101010101010101010101 trade,read 1-100\n"
	"2 0202020202020202020202020202020202020202020202020202020202020202 all * revoked\n";

static struct auth_key mem_a[4], mem_b[4], mem_file[64];
static struct auth_keys keys_a = { .keys = mem_a, .cap = 4 };
static struct auth_keys keys_b = { .keys = mem_b, .cap = 4 };
static _Alignas(8) uint8_t frame[WIRE_FRAME_MAX + 8];

static void
check_table(struct auth_sessions *t)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i <= t->mask; i++) {
		if (t->slots[i].id == 0)
			continue;
		n++;
		CHECK(auth_session_find(t, t->slots[i].id) == &t->slots[i]);
	}
	CHECK(n == t->count);
	CHECK(t->count <= t->cfg.sessions_max);
}

static void
run_frames(const uint8_t *p, size_t size)
{
	char err[256];
	CHECK(auth_keys_parse(KEYS, strlen(KEYS), "a", &keys_a, err, sizeof(err)) == 0);
	CHECK(auth_keys_parse(KEYS_REVOKED, strlen(KEYS_REVOKED), "b", &keys_b, err,
			      sizeof(err)) == 0);
	struct auth_config cfg = { .sessions_max = 8, .nonces_max = 64,
				   .logon_window_ns = 5 * SEC, .msgs_per_window = 20,
				   .rate_window_ns = SEC, .warn_pct = 50 };
	struct auth_sessions t;
	CHECK(auth_sessions_init(&t, &cfg, &keys_a) == 0);
	uint64_t wall = UINT64_C(1700000000) * SEC, mono = SEC;
	size_t pos = 0;
	while (pos + 4 <= size) {
		uint16_t len;
		memcpy(&len, p + pos, 2);
		uint8_t flags = p[pos + 2], step = p[pos + 3];
		pos += 4;
		if (len > size - pos || len > WIRE_FRAME_MAX)
			len = (uint16_t)(size - pos > WIRE_FRAME_MAX ? WIRE_FRAME_MAX : size - pos);
		memcpy(frame, p + pos, len);
		pos += len;
		wall += (uint64_t)step * (SEC / 8);
		mono += (uint64_t)step * (SEC / 8);
		if (flags & 4)
			(void)auth_keys_swap(&t, t.keys == &keys_a ? &keys_b : &keys_a, NULL, NULL);
		if (flags & 8)
			(void)auth_expire(&t, mono, NULL, NULL);
		if (flags & 16) {
			bool done;
			(void)auth_expire_step(&t, mono, 1u + step % 5u, &done, NULL, NULL);
		}
		check_table(&t);

		const struct wire_msg_hdr *msgs[WIRE_FRAME_MSGS_MAX];
		uint32_t count = 0, sender = 0;
		bool session = (wire_frame_flags(frame, len) & WIRE_FRAME_F_SESSION) != 0;
		enum wire_err e = session ? wire_session_frame_decode(frame, len, msgs,
								      WIRE_FRAME_MSGS_MAX, &count,
								      &sender)
					  : wire_frame_decode(frame, len, NULL, msgs,
							      WIRE_FRAME_MSGS_MAX, &count, &sender);
		if (e != WIRE_E_OK)
			continue;
		if (!session) {
			for (uint32_t i = 0; i < count; i++) {
				if (msgs[i]->type != WIRE_LOGON)
					continue;
				struct wire_logon *l = (void *)(uintptr_t)msgs[i];
				const struct auth_key *k = auth_keys_find(t.keys, l->key_id);
				if ((flags & 1) && k != NULL)
					auth_logon_sign(k->secret, l);
				struct auth_session *s;
				uint16_t r = auth_logon(&t, l, wall, mono, 0, &s);
				CHECK((r == 0) == (s != NULL));
				if (s != NULL)
					CHECK(s->next_seq == 1 && s->id == l->session_id);
			}
			continue;
		}
		const struct wire_session_hdr *sh = (const void *)msgs[0];
		struct auth_session *s = auth_session_find(&t, sh->session_id);
		uint64_t before = s != NULL ? s->next_seq : 0;
		if ((flags & 2) && s != NULL) /* re-MAC under the session's key */
			wire_siphash128(&s->frame_key, frame, len - WIRE_MAC_SIZE,
					frame + len - WIRE_MAC_SIZE);
		bool warn;
		uint16_t r = auth_frame(&t, frame, len, sh, count - 1, mono, 0, &s, &warn);
		if (s != NULL)
			CHECK(s->next_seq == before + (r == 0));
		if (r != 0)
			continue;
		for (uint32_t i = 1; i < count; i++) {
			uint64_t user = 0;
			if (msgs[i]->length >= sizeof(struct wire_msg_hdr) + 8)
				memcpy(&user, msgs[i] + 1, sizeof(user));
			uint16_t why = auth_check_msg(&t, s, msgs[i], user);
			CHECK(why == 0 || why == WIRE_REASON_NO_PERMISSION ||
			      why == WIRE_REASON_NOT_ENTITLED);
		}
	}
	check_table(&t);
	auth_sessions_free(&t);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	if (data[0] == 0) {
		struct auth_keys ks = { .keys = mem_file, .cap = 64 };
		char err[256];
		uint64_t id;
		uint8_t secret[AUTH_SECRET_SIZE];
		const char *text = (const char *)data + 1;
		if (auth_keys_parse(text, size - 1, "f", &ks, err, sizeof(err)) == 0) {
			CHECK(ks.count <= ks.cap);
			for (uint32_t i = 1; i < ks.count; i++)
				CHECK(ks.keys[i - 1].key_id < ks.keys[i].key_id);
		}
		(void)auth_client_key_parse(text, size - 1, &id, secret, err, sizeof(err));
		return 0;
	}
	run_frames(data + 1, size - 1);
	return 0;
}
