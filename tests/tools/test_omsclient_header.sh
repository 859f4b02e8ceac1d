#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
#
# Goal: libomsclient's public header stands alone: a translation unit that includes only it
# compiles as strict C11 (and as C++ when a C++ compiler is there), with nothing on the
# include path but the header's own folder.
# Method: write such a unit, using every public type and the callback type, and compile it
# with -std=c11 -pedantic -Werror and the pure cores' warnings.
#   CC      the C compiler (meson's)
#   HEADER  the path of omsclient.h
set -eu
: "${CC:?}" "${HEADER:?}"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
mkdir "$dir/inc"
cp "$HEADER" "$dir/inc/omsclient.h"
cat > "$dir/alone.c" <<'C'
#include <omsclient.h>

_Static_assert(sizeof(struct omsc_config) % 8 == 0, "config");
_Static_assert(sizeof(struct omsc_event) % 8 == 0, "event");
_Static_assert(sizeof(struct omsc_stats) % 8 == 0, "stats");
_Static_assert(OMSC_REASON_COUNT == 48, "reasons");

void alone_on_event(void *ctx, const struct omsc_event *ev);
int alone_main(void);

void
alone_on_event(void *ctx, const struct omsc_event *ev)
{
	(void)ctx;
	(void)ev->kind;
}

int
alone_main(void)
{
	struct omsc_config cfg;
	struct omsc *o;
	struct omsc_order ord = {.user = 1, .cl_ord_id = 1, .symbol = 1, .side = OMSC_SIDE_BUY,
				 .type = OMSC_ORD_LIMIT, .tif = OMSC_TIF_GTC, .px = 1, .qty = 1};
	struct omsc_transfer t = {.user = 1, .transfer_id = 1, .asset = 1, .amount = 1};
	struct omsc_request_info info;
	struct omsc_stats st;
	omsc_event_fn *fn = alone_on_event;
	omsc_config_init(&cfg);
	if (omsc_open(&o, &cfg) != 0)
		return 1;
	(void)omsc_new_order(o, &ord, 0);
	(void)omsc_transfer(o, &t, 0);
	(void)omsc_request_get(o, 1, 1, false, &info);
	(void)omsc_stats(o, &st, sizeof(st));
	(void)omsc_poll(o, 0, fn, NULL);
	omsc_close(o);
	return omsc_abi() == OMSC_ABI ? 0 : 1;
}
C
# shellcheck disable=SC2086 # CC may be a command with arguments
$CC -std=c11 -Wall -Wextra -Werror -pedantic -Wconversion -Wsign-conversion -Wshadow \
	-Wstrict-prototypes -Wmissing-prototypes -I"$dir/inc" -c "$dir/alone.c" \
	-o "$dir/alone.o"
echo "C11: ok"
if command -v c++ > /dev/null 2>&1; then
	cat > "$dir/alone.cc" <<'CC'
#include <omsclient.h>

static_assert(sizeof(struct omsc_event) % 8 == 0, "event");

extern "C" void alone_cc_on_event(void *ctx, const struct omsc_event *ev);

void
alone_cc_on_event(void *ctx, const struct omsc_event *ev)
{
	(void)ctx;
	(void)ev;
}

int
alone_cc_main()
{
	struct omsc_config cfg;
	struct omsc *o;
	omsc_config_init(&cfg);
	if (omsc_open(&o, &cfg) != 0)
		return 1;
	int n = omsc_poll(o, 0, alone_cc_on_event, nullptr);
	omsc_close(o);
	return n < 0;
}
CC
	c++ -std=c++11 -Wall -Wextra -Werror -pedantic -I"$dir/inc" -c "$dir/alone.cc" \
		-o "$dir/alone_cc.o"
	echo "C++11: ok"
else
	echo "C++11: skipped (no c++)"
fi
