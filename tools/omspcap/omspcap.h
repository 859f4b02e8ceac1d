/* SPDX-License-Identifier: Apache-2.0 */
/*
 * omspcap's capture reader as a function (omspcap.c): `omspcap show` is this call, and the
 * fuzzer (tests/fuzz/fuzz_pcap.c) builds omspcap.c with -DOMSPCAP_NO_MAIN to feed it files.
 */
#ifndef OMSD_TOOLS_OMSPCAP_H
#define OMSD_TOOLS_OMSPCAP_H

#include <stdbool.h>
#include <stdint.h>

#include "common/wire.h"

struct omspcap_show_counts {
	uint64_t frames;  /* UDP payloads offered to the decoder */
	uint64_t msgs;    /* messages in the frames that decoded */
	uint64_t errors;  /* frames that did not decode */
	uint64_t non_udp; /* packets that are not Ethernet II / IPv4 / UDP, skipped */
	bool read_error;  /* libpcap stopped on a damaged file */
};

/* A logged-on capture's API key (docs/security.md): key_id 0 = none. session_key, when not
 * zero, is the session's frame key to start with (an egress capture has no LOGON of its
 * own: `show --logon-from` takes it from the capture that logged on). */
struct omspcap_api_key {
	uint64_t key_id;
	uint8_t secret[32];
	struct wire_key session_key;
};

/* Read a capture, decode every UDP payload with wire_frame_decode (key: the client key, or
 * zero; session frames with the session decoder, their MACs checked under the session key
 * derived from the capture's LOGON when api names its key), print the per-type counts and
 * the `show:` line on stdout. Exit status: 0, or 1 when the file cannot be read or a frame
 * did not decode. api and counts may be NULL. */
int omspcap_show_file(const char *file, const struct wire_key *key,
		      const struct omspcap_api_key *api, bool verbose,
		      struct omspcap_show_counts *counts);

#endif
