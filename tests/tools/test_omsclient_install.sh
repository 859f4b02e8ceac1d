#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
#
# Goal: libomsclient as a program outside the tree gets it from an installed package: the
# header, omsclient.pc, the shared library with its soname, and the static one.
# Method: `meson install --destdir` into a temporary directory; there:
#  - the soname is libomsclient.so.OMSC_ABI (the installed header's number);
#  - the shared library defines every omsc_* function the header declares and nothing
#    else (nm -D --defined-only; the version node OMSC_1 aside);
#  - a small program built with `pkg-config --cflags --libs omsclient` (PKG_CONFIG_PATH
#    into the destdir, PKG_CONFIG_SYSROOT_DIR relocating its paths) runs with
#    LD_LIBRARY_PATH: omsc_version() is the project's, omsc_abi() the header's, and it
#    opens and closes a client;
#  - the same program linked with libomsclient.a and `pkg-config --static` runs without.
#   MESON BUILD_DIR  the meson command and the build to install
#   PREFIX LIBDIR INCLUDEDIR  the install paths (absolute)
#   CC VERSION       the C compiler, the project's version
set -eu
: "${MESON:?}" "${BUILD_DIR:?}" "${PREFIX:?}" "${LIBDIR:?}" "${INCLUDEDIR:?}" "${CC:?}" \
	"${VERSION:?}"
dest=$(mktemp -d)
trap 'rm -rf "$dest"' EXIT
fail() {
	echo "FAIL: $*" >&2
	exit 1
}

# shellcheck disable=SC2086 # MESON may be a command with arguments
if ! $MESON install -C "$BUILD_DIR" --no-rebuild --destdir "$dest" > "$dest.log" 2>&1; then
	cat "$dest.log" >&2
	rm -f "$dest.log"
	fail "meson install"
fi
rm -f "$dest.log"
lib="$dest$LIBDIR"
header="$dest$INCLUDEDIR/omsclient/omsclient.h"
[ -f "$header" ] || fail "no $header"
[ -f "$lib/pkgconfig/omsclient.pc" ] || fail "no $lib/pkgconfig/omsclient.pc"
[ -f "$lib/libomsclient.a" ] || fail "no $lib/libomsclient.a"
abi=$(sed -n 's/^#define OMSC_ABI \([0-9]*\).*/\1/p' "$header")
[ -n "$abi" ] || fail "no OMSC_ABI in the header"
[ -e "$lib/libomsclient.so.$abi" ] || fail "no libomsclient.so.$abi"
[ -e "$lib/libomsclient.so" ] || fail "no libomsclient.so (the link-time name)"
soname=$(readelf -d "$lib/libomsclient.so" | sed -n 's/.*SONAME.*\[\(.*\)\].*/\1/p')
[ "$soname" = "libomsclient.so.$abi" ] || fail "soname '$soname', want libomsclient.so.$abi"
echo "soname: $soname"

# The exports: exactly the functions the header declares.
nm -D --defined-only "$lib/libomsclient.so" | awk '{print $3}' | sed 's/@.*//' |
	grep -v '^OMSC_1$' | sort > "$dest/exported"
grep -o '^[a-z_0-9 ]*[ *]omsc_[a-z_0-9]*(' "$header" | sed 's/.*\(omsc_[a-z_0-9]*\)(/\1/' |
	sort > "$dest/declared"
[ -s "$dest/declared" ] || fail "no declarations found in the header"
if ! cmp -s "$dest/exported" "$dest/declared"; then
	diff "$dest/declared" "$dest/exported" >&2 || true
	fail "exported symbols differ from the header's functions (< declared, > exported)"
fi
echo "exports: $(wc -l < "$dest/declared") omsc_* functions, nothing else"

cat > "$dest/prog.c" <<'C'
#include <errno.h>
#include <omsclient.h>
#include <stdio.h>
#include <string.h>

int
main(int argc, char **argv)
{
	struct omsc_config cfg;
	struct omsc *o;
	struct omsc_stats st;
	if (argc != 2 || strcmp(omsc_version(), argv[1]) != 0 || omsc_abi() != OMSC_ABI) {
		fprintf(stderr, "version %s abi %d\n", omsc_version(), omsc_abi());
		return 1;
	}
	omsc_config_init(&cfg);
	cfg.host = "127.0.0.1";
	cfg.port = 9;
	if (omsc_open(&o, &cfg) != 0)
		return 2;
	if (omsc_stats(o, &st, sizeof(st)) != sizeof(st) || omsc_logon(o, 10) != -EINVAL)
		return 3;
	omsc_close(o);
	printf("%s\n", omsc_version());
	return 0;
}
C
export PKG_CONFIG_PATH="$lib/pkgconfig"
export PKG_CONFIG_SYSROOT_DIR="$dest"
flags=$(pkg-config --cflags --libs omsclient) || fail "pkg-config omsclient"
echo "pkg-config: $flags"
# shellcheck disable=SC2086 # CC and the flags are word lists
$CC "$dest/prog.c" $flags -o "$dest/prog_shared" || fail "build against the shared library"
out=$(LD_LIBRARY_PATH="$lib" "$dest/prog_shared" "$VERSION") || fail "run (shared)"
[ "$out" = "$VERSION" ] || fail "shared: printed '$out', want '$VERSION'"
LD_LIBRARY_PATH="$lib" ldd "$dest/prog_shared" | grep -q "libomsclient.so.$abi => $lib/" ||
	fail "prog_shared does not load the installed libomsclient.so.$abi"
echo "shared: ok ($out)"

static_flags=$(pkg-config --static --libs omsclient) || fail "pkg-config --static"
cflags=$(pkg-config --cflags omsclient)
# The archive by path (-lomsclient would pick the .so), then what --static adds after it.
extra=$(echo " $static_flags " | sed 's/ -lomsclient / /')
# shellcheck disable=SC2086
$CC "$dest/prog.c" $cflags "$lib/libomsclient.a" $extra -o "$dest/prog_static" ||
	fail "build against the static library"
if ldd "$dest/prog_static" | grep -q libomsclient; then
	fail "prog_static loads libomsclient.so"
fi
out=$("$dest/prog_static" "$VERSION") || fail "run (static)"
[ "$out" = "$VERSION" ] || fail "static: printed '$out', want '$VERSION'"
echo "static: ok ($out)"
