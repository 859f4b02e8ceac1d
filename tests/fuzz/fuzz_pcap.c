/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for `omspcap show` (tools/omspcap/omspcap.c, built here with
 * -DOMSPCAP_NO_MAIN): the input is written as a capture file and read the way the tool reads
 * it: libpcap's reader, then the tool's own Ethernet / IPv4 / UDP walk (IHL, UDP length and
 * capture length checks) and the wire decoder on each payload.
 *
 * Properties: no capture crashes the tool or reads past a packet (a truncated file, a damaged
 * record header, a packet shorter than its headers, an IHL or UDP length pointing past the
 * capture, a UDP payload longer than a frame); its counts add up (frames that did not decode
 * are among the frames offered) and its exit status says 1 exactly when a frame failed or
 * the file could not be read.
 */
#include <stdio.h>

#include "common/check.h"
#include "fuzz_util.h"
#include "tools/omspcap/omspcap.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 65536)
		return 0;
	fz_quiet_stdout();
	char path[512];
	const char *dir = fz_dir();
	fz_write(dir, "in.pcap", data, size, path, sizeof(path));
	struct wire_key key = {0, 0};
	struct omspcap_show_counts c = {.frames = 99};
	int rc = omspcap_show_file(path, &key, NULL, size & 1, &c);
	CHECK(rc == 0 || rc == 1);
	if (c.frames == 99 && c.msgs == 0) {
		CHECK(rc == 1); /* not a capture libpcap opens, or not Ethernet */
		return 0;
	}
	CHECK(c.errors <= c.frames);
	CHECK(c.msgs >= c.frames - c.errors);
	CHECK(rc == (c.errors != 0 || c.read_error ? 1 : 0));
	return 0;
}
