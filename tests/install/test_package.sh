#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Goal: deploy/package makes a .deb an operator can install: the programs, the configuration
# with an installed node's paths, the database scripts with their migrations, the manual
# pages, the units, the dashboard and the dissector; control fields with the runtime
# dependencies; maintainer scripts that make the user, the directories and the key file and
# take them away again on purge; an installed omsd that accepts its own configuration; units
# that systemd-analyze verify accepts.
# Method: run deploy/package (its build tree is $OMSD_PKG_BUILD, else build-pkg, kept between
# runs so only what changed is rebuilt), dpkg-deb -I / -e / -x the result into a scratch
# root, check the file list and fields; dpkg --root --force-script-chrootless installs,
# upgrades, removes and purges it in a second root, its maintainer scripts running with
# DPKG_ROOT (users written with useradd --root into a copy of /etc's user files); run the
# scratch root's omsd --check and omsctl --help, and systemd-analyze verify --root on the
# units.
set -euo pipefail
: "${OMSD_SRC:?set OMSD_SRC to the source tree}"
export OMSD_PKG_BUILD=${OMSD_PKG_BUILD:-${OMSD_PKG_BUILD_DEFAULT:-$OMSD_SRC/build-pkg}}

log() { echo "[$(date +%H:%M:%S)] $*"; }
fail() { echo "FAIL: $*" >&2; exit 1; }
TMP=$(mktemp -d /tmp/omsd-install.XXXXXX)
cleanup() {
	local rc=$?
	if [ "$rc" -eq 0 ]; then rm -rf "$TMP"; else echo "kept $TMP for inspection" >&2; fi
}
trap cleanup EXIT

for tool in dpkg-deb systemd-analyze; do
	command -v "$tool" >/dev/null || { echo "SKIP: no $tool"; exit 77; }
done

# --- 1. Build the package ----------------------------------------------------------------
log "deploy/package (build tree $OMSD_PKG_BUILD)"
start=$(date +%s)
"$OMSD_SRC/deploy/package" "$TMP/out" >"$TMP/package.log" 2>&1 ||
	fail "deploy/package: $(tail -20 "$TMP/package.log")"
deb=$(tail -1 "$TMP/package.log")
[ -f "$deb" ] || fail "deploy/package printed no .deb: $(tail -5 "$TMP/package.log")"
log "$(basename "$deb") in $(($(date +%s) - start)) s, $(du -h "$deb" | cut -f1)"

# --- 2. Control fields -------------------------------------------------------------------
dpkg-deb -I "$deb" >"$TMP/info" || fail "dpkg-deb -I"
field() { dpkg-deb -f "$deb" "$1"; }
[ "$(field Package)" = omsd ] || fail "Package: $(field Package)"
[ "$(field Architecture)" = "$(dpkg --print-architecture)" ] || fail "Architecture: $(field Architecture)"
pversion=$(sed -n "s/^ *version: '\([^']*\)',$/\1/p" "$OMSD_SRC/meson.build" | head -1)
version=$(field Version)
[[ $version =~ ^${pversion//./\\.}(\+g[0-9a-f]{4,}(\.dirty)?)?$ ]] ||
	fail "Version $version is not meson.build's $pversion plus the commit"
[[ $(basename "$deb") == "omsd_${version}_$(field Architecture).deb" ]] || fail "file name $(basename "$deb")"
depends=$(field Depends)
for want in librte-eal libpq5 libjemalloc2 libsystemd0 libxxhash0 libnettle8 libpcap0.8 \
	librte-mempool-ring librte-net-tap librte-net-af-packet librte-bus-pci adduser; do
	grep -qE "(^|, )$want[0-9]*( |,|$)" <<<"$depends" || fail "Depends lacks $want: $depends"
done
[ -n "$(field Installed-Size)" ] || fail "no Installed-Size"
[ -n "$(field Maintainer)" ] || fail "no Maintainer"
grep -q '^  Built from git ' "$TMP/info" || fail "Description does not name the commit"
dpkg-deb -e "$deb" "$TMP/control"
grep -qx '/etc/omsd/omsd.ini' "$TMP/control/conffiles" || fail "omsd.ini is not a conffile"
for s in postinst prerm postrm; do
	[ -x "$TMP/control/$s" ] || fail "no executable $s"
	sh -n "$TMP/control/$s" || fail "$s: sh -n"
done
(cd "$TMP/control" && grep -q ' usr/bin/omsd$' md5sums) || fail "md5sums lacks usr/bin/omsd"
log "control: Version $version; Depends $depends"

# --- 3. Files ------------------------------------------------------------------------------
root=$TMP/root
dpkg -x "$deb" "$root"
dpkg-deb -c "$deb" >"$TMP/contents"
owners=$(awk '{ print $2 }' "$TMP/contents" | sort -u)
[ "$owners" = root/root ] || fail "files not owned by root/root: $owners"
for f in usr/bin/omsd usr/bin/omsctl usr/bin/omsload usr/bin/omspcap \
	usr/share/omsd/pg/migrate usr/share/omsd/pg/accounts usr/share/omsd/pg/pgctl; do
	[ -x "$root/$f" ] || fail "/$f missing or not executable"
done
if [ -e "$OMSD_SRC/deploy/omsd-host" ]; then
	[ -x "$root/usr/bin/omsd-host" ] || fail "/usr/bin/omsd-host missing or not executable"
	[ "$(stat -c %a "$root/usr/bin/omsd-host")" = 755 ] || fail "omsd-host is not mode 755"
fi
for f in etc/omsd/omsd.ini usr/share/man/man8/omsd.8 usr/share/man/man8/omsctl.8 \
	usr/share/man/man5/omsd.ini.5 usr/lib/systemd/system/omsd.service \
	usr/lib/systemd/system/omsd@.service usr/lib/sysusers.d/omsd.conf \
	usr/lib/tmpfiles.d/omsd.conf usr/share/omsd/wireshark/omsd.lua \
	usr/share/omsd/grafana/omsd.json usr/share/doc/omsd/install.md \
	usr/share/doc/omsd/examples/node1.ini usr/share/doc/omsd/examples/production.ini; do
	[ -f "$root/$f" ] || fail "/$f missing"
done
src_sql=$(cd "$OMSD_SRC/deploy/pg/migrations" && ls -- *.sql | sort)
pkg_sql=$(cd "$root/usr/share/omsd/pg/migrations" && ls -- *.sql | sort)
[ "$src_sql" = "$pkg_sql" ] || fail "migrations differ from deploy/pg/migrations: $pkg_sql"
python3 -m json.tool "$root/usr/share/omsd/grafana/omsd.json" >/dev/null || fail "dashboard JSON"
grep -q 'Proto("omsd"' "$root/usr/share/omsd/wireshark/omsd.lua" || fail "omsd.lua is not the dissector"
for m in man8/omsd.8 man8/omsctl.8 man5/omsd.ini.5; do
	warn=$(LC_ALL=C groff -man -ww -z "$root/usr/share/man/$m" 2>&1) || fail "$m: groff"
	[ -z "$warn" ] || fail "$m: $warn"
done
ini=$root/etc/omsd/omsd.ini
for want in 'data_dir = /var/lib/omsd' 'mgmt_socket = /run/omsd/omsd.sock' \
	'stats_file = /run/omsd/stats' 'keys_file = /etc/omsd/api_keys'; do
	grep -qxF "$want" "$ini" || fail "installed omsd.ini lacks '$want'"
done
grep -q '/tmp/' <(grep -v '^;' "$ini") && fail "installed omsd.ini still names /tmp: $(grep -v '^;' "$ini" | grep /tmp/)"
# The migrate script finds its migrations next to itself, installed.
grep -q 'here=$(cd "$(dirname "$0")" && pwd)' "$root/usr/share/omsd/pg/migrate" ||
	fail "migrate no longer finds migrations/ next to itself"
log "files: $(wc -l <"$TMP/contents") entries, $(wc -w <<<"$pkg_sql") migrations"

# --- 4. dpkg installs it into a fake root (DPKG_ROOT) ---------------------------------------
# dpkg --root with --force-script-chrootless runs the maintainer scripts here, with DPKG_ROOT
# set, instead of in a chroot: they write the user into a copy of this host's user files
# (useradd --root), and everything else under the root. Dependencies are the host's.
droot=$TMP/droot
dpkg_root() {
	dpkg --root="$droot" --force-script-chrootless --force-depends --log=/dev/null "$@" \
		>>"$TMP/dpkg.log" 2>&1 || fail "dpkg $*: $(tail -5 "$TMP/dpkg.log")"
}
if [ "$(id -u)" = 0 ] && command -v useradd >/dev/null; then
	mkdir -p "$droot/var/lib/dpkg/info" "$droot/var/lib/dpkg/updates" "$droot/etc" "$droot/run"
	touch "$droot/var/lib/dpkg/status" "$droot/var/lib/dpkg/available"
	cp -a /etc/passwd /etc/group /etc/shadow /etc/gshadow "$droot/etc/"
	[ -f /etc/login.defs ] && cp -a /etc/login.defs "$droot/etc/"
	sed -i '/^omsd:/d' "$droot/etc/passwd" "$droot/etc/group" "$droot/etc/shadow" "$droot/etc/gshadow"
	dpkg_root -i "$deb"
	dpkg-query --admindir="$droot/var/lib/dpkg" -W -f '${Status}' omsd | grep -qx 'install ok installed' ||
		fail "dpkg --root: omsd not installed: $(tail -5 "$TMP/dpkg.log")"
	uid=$(awk -F: '$1 == "omsd" { print $3 }' "$droot/etc/passwd")
	gid=$(awk -F: '$1 == "omsd" { print $3 }' "$droot/etc/group")
	[ -n "$uid" ] && [ -n "$gid" ] || fail "postinst made no user or group omsd"
	[ "$uid" -lt 1000 ] || fail "user omsd is not a system user (uid $uid)"
	grep -q '^omsd:.*:/var/lib/omsd:/usr/sbin/nologin$' "$droot/etc/passwd" || fail "omsd's home or shell"
	for d in var/lib/omsd run/omsd; do
		[ "$(stat -c '%u:%g %a' "$droot/$d")" = "$uid:$gid 750" ] ||
			fail "/$d: $(stat -c '%u:%g %a' "$droot/$d"), want $uid:$gid 750"
	done
	keys=$droot/etc/omsd/api_keys
	[ "$(stat -c '%u:%g %a' "$keys")" = "0:$gid 640" ] || fail "api_keys: $(stat -c '%u:%g %a' "$keys")"
	# An upgrade (the same package again) keeps the operator's keys and adds no second user.
	echo "# kept" >>"$keys"
	dpkg_root -i "$deb"
	grep -q '^# kept' "$keys" || fail "an upgrade rewrote api_keys"
	[ "$(grep -c '^omsd:' "$droot/etc/passwd")" = 1 ] || fail "an upgrade added omsd twice"
	log "dpkg -i into a fake root: user omsd ($uid:$gid), /var/lib/omsd and /run/omsd 750, api_keys 640 root:omsd, kept on upgrade"
else
	log "dpkg -i into a fake root not run (needs root and useradd)"
fi

# --- 5. The installed programs ---------------------------------------------------------------
# The programs run against the host's libraries, and the package's own if it ships any.
libdirs=$(find "$root/usr/lib" -name 'lib*.so*' -printf '%h\n' 2>/dev/null | sort -u | paste -sd: -)
if [ -n "$libdirs" ]; then
	export LD_LIBRARY_PATH=$libdirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
	grep -qx 'activate-noawait ldconfig' "$TMP/control/triggers" ||
		fail "the package ships libraries but no ldconfig trigger"
fi
for b in "$root"/usr/bin/*; do
	[ "$(head -c 4 "$b" | tail -c 3)" = ELF ] || continue
	ldd "$b" | grep -q 'not found' && fail "$b: $(ldd "$b" | grep 'not found')"
done
"$root/usr/bin/omsctl" --help >"$TMP/omsctl.help" || fail "omsctl --help: exit $?"
grep -q '^usage: omsctl' "$TMP/omsctl.help" || fail "omsctl --help: $(head -2 "$TMP/omsctl.help")"
"$root/usr/bin/omsd" --help >"$TMP/omsd.help" || fail "omsd --help: exit $?"
grep -q -- '--service' "$TMP/omsd.help" || fail "omsd --help lacks --service"
grep -q '/etc/omsd/omsd.ini' "$TMP/omsd.help" || fail "omsd's default configuration is not /etc/omsd/omsd.ini"
# The installed configuration, its key file where the postinst made it (the file names
# /etc/omsd/api_keys; this host's /etc is not the scratch root's).
cfg=$TMP/check.ini
keyfile=$droot/etc/omsd/api_keys
if [ ! -f "$keyfile" ]; then
	keyfile=$TMP/api_keys
	install -m 0600 /dev/null "$keyfile"
fi
sed "s|^keys_file = .*|keys_file = $keyfile|" "$ini" >"$cfg"
rc=0
"$root/usr/bin/omsd" --check -c "$cfg" >"$TMP/check.out" 2>&1 || rc=$?
if [ "$rc" != 0 ] && grep -q 'CPU [0-9]* is not available' "$TMP/check.out"; then
	log "omsd --check: this machine lacks the default's CPUs 0-1: $(grep -m1 CPU "$TMP/check.out")"
else
	[ "$rc" = 0 ] || fail "installed omsd --check on the installed omsd.ini: exit $rc: $(cat "$TMP/check.out")"
	grep -qx 'durability.mode = durable' "$TMP/check.out" || fail "--check: not durable"
	grep -qx 'cpus = 0,1' "$TMP/check.out" || fail "--check: no 'cpus = 0,1' line: $(tail -2 "$TMP/check.out")"
	log "installed omsd --check: $(grep -E '^(shard|cpus)' "$TMP/check.out" | paste -sd';' -)"
fi

# --- 6. The units ----------------------------------------------------------------------------
unitdir=$root/usr/lib/systemd/system
for u in omsd.service omsd@.service; do
	# $OMSD_ARGS comes from the optional /etc/default/omsd (e.g. --join on a joining host);
	# unset, systemd drops the word, so the command is the plain one.
	grep -qx 'EnvironmentFile=-/etc/default/omsd' "$unitdir/$u" || fail "$u: EnvironmentFile"
	grep -q '^ExecStart=/usr/bin/omsd --service $OMSD_ARGS -c /etc/omsd/' "$unitdir/$u" || fail "$u: ExecStart"
	grep -q '^ExecStartPre=/usr/bin/omsd --check $OMSD_ARGS -c /etc/omsd/' "$unitdir/$u" || fail "$u: ExecStartPre"
	grep -qx 'Type=notify' "$unitdir/$u" || fail "$u: Type"
	grep -qx 'RestartPreventExitStatus=2 3' "$unitdir/$u" || fail "$u: RestartPreventExitStatus"
	grep -qx 'User=omsd' "$unitdir/$u" || fail "$u: User"
	grep -qx 'LimitMEMLOCK=infinity' "$unitdir/$u" || fail "$u: LimitMEMLOCK"
done
# systemd-analyze verify --root=R loads units by name from R's unit directories, checks that
# every Exec*= command is an executable inside R (the scratch root holds /usr/bin/omsd) and
# runs man on Documentation=man: pages (MANPATH: the package's own). The targets the units
# name come from this host's systemd.
mkdir -p "$root/etc/systemd/system"
for t in /usr/lib/systemd/system/*.target; do
	[ -e "$unitdir/$(basename "$t")" ] || cp "$t" "$unitdir/"
done
verify() {
	local out rc=0
	out=$(MANPATH=$root/usr/share/man SYSTEMD_LOG_LEVEL=notice \
		systemd-analyze verify --root="$root" "$@" 2>&1) || rc=$?
	[ "$rc" = 0 ] && [ -z "$out" ] && return 0
	echo "exit $rc: $out"
	return 1
}
why=$(verify "$unitdir/omsd.service") || fail "systemd-analyze verify omsd.service: $why"
# An instance of the template, by name: omsd@node1 runs /etc/omsd/node1.ini.
why=$(verify "$unitdir/omsd@node1.service") || fail "systemd-analyze verify omsd@node1.service: $why"
# A command the root does not hold is an error verify reports: the checks above are real.
sed 's|^ExecStart=/usr/bin/omsd |ExecStart=/usr/bin/omsd-missing |' "$unitdir/omsd.service" \
	>"$root/etc/systemd/system/omsd-broken.service"
why=$(verify "$root/etc/systemd/system/omsd-broken.service") &&
	fail "systemd-analyze verify accepts a unit whose ExecStart= is not in the root"
grep -q 'omsd-missing is not executable' <<<"$why" || fail "verify of a broken unit: $why"
rm "$root/etc/systemd/system/omsd-broken.service"
if systemd-analyze security --help 2>/dev/null | grep -q -- '--offline'; then
	exposure=$(systemd-analyze security --offline=yes --root="$root" "$unitdir/omsd.service" 2>&1 |
		sed -n 's/.*Overall exposure level for omsd.service: //p')
	log "systemd-analyze security (offline): $exposure"
fi
log "systemd-analyze verify: omsd.service and omsd@node1.service"

# --- 7. Remove and purge -----------------------------------------------------------------
if [ -n "${uid:-}" ]; then
	dpkg_root -r omsd
	[ -d "$droot/var/lib/omsd" ] && [ -f "$droot/etc/omsd/api_keys" ] && [ -f "$droot/etc/omsd/omsd.ini" ] &&
		grep -q '^omsd:' "$droot/etc/passwd" || fail "dpkg -r deleted state, configuration, keys or the user"
	[ ! -e "$droot/usr/bin/omsd" ] || fail "dpkg -r left /usr/bin/omsd"
	dpkg_root --purge omsd
	[ ! -e "$droot/var/lib/omsd" ] && [ ! -e "$droot/run/omsd" ] && [ ! -e "$droot/etc/omsd" ] ||
		fail "dpkg --purge left state, configuration or keys"
	grep -q '^omsd:' "$droot/etc/passwd" "$droot/etc/group" && fail "dpkg --purge left the user or group"
	log "dpkg -r keeps state, configuration, keys and user; --purge removes them"
fi
log "PASS"
