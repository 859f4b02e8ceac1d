#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Goal: deploy/omsd-host (docs/host.md) reads a host right and changes it only when told:
# a tuned host passes every check (exit 0); an untuned one names each failing check with the
# value it saw (exit 2); --json parses; `setup` without --apply changes no byte and runs no
# command; `setup --apply` writes the right files and runs modprobe, mount and dpdk-devbind.py
# with the right arguments, and `setup --undo --apply` puts every one of them back; a bad
# configuration is named FILE:LINE (exit 3); unreadable entries are WARN rows, never a
# traceback; and the real host of this run is checked to the end (0..2).
# Method: the script builds /proc, /sys, /etc trees in a temporary directory
# (OMSD_HOST_ROOT) and puts fake commands that log their arguments and play their effect on
# the tree in OMSD_HOST_BIN. No root needed, no DPDK, about two seconds.
set -euo pipefail
: "${OMSD_HOST:?set OMSD_HOST to deploy/omsd-host}"
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
PROD=$HERE/fixtures/prod.ini
TMP=$(mktemp -d /tmp/omsd-host-test.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
unset OMSD_HOST_ROOT OMSD_HOST_BIN
PY=python3
[ -x /usr/bin/python3 ] && PY=/usr/bin/python3 # what omsd-host runs on; no version shim
fails=0
checks=0

ok() { checks=$((checks + 1)); echo "ok   $1"; }
bad() { checks=$((checks + 1)); fails=$((fails + 1)); echo "FAIL $1"; }
expect() { # expect NAME CONDITION...
	local name=$1
	shift
	if "$@"; then ok "$name"; else bad "$name"; fi
}
has() { grep -qF -- "$2" "$1"; }
contains() { [[ "$1" == *"$2"* ]]; }
no_traceback() { ! grep -q 'Traceback' "$1"; }

# --- fixture trees --------------------------------------------------------------------------

put() { # put FILE CONTENT: a file under the tree being built ($T)
	mkdir -p "$(dirname "$T/$1")"
	printf '%s\n' "$2" >"$T/$1"
}

# make_host DIR tuned|untuned: a two-node host with 16 CPUs (node 0: 0-7, node 1: 8-15) and
# an Intel NIC at 0000:3b:00.0.
make_host() {
	local T=$1 kind=$2 cpu node gov
	mkdir -p "$T"
	put proc/cpuinfo $'processor\t: 0\nvendor_id\t: GenuineIntel'
	put sys/devices/system/cpu/online "0-15"
	put sys/devices/system/cpu/possible "0-15"
	put sys/devices/system/node/node0/cpulist "0-7"
	put sys/devices/system/node/node1/cpulist "8-15"
	mkdir -p "$T/sys/bus/pci/drivers/vfio-pci" "$T/sys/bus/pci/drivers/ixgbe"
	mkdir -p "$T/sys/bus/pci/devices/0000:3b:00.0" "$T/sys/kernel/iommu_groups" \
		"$T/sys/class/iommu" "$T/dev"
	put sys/module/vfio/parameters/enable_unsafe_noiommu_mode "N"
	put proc/self/limits $'Limit                     Soft Limit           Hard Limit           Units\nMax open files            1024                 524288               files'
	for cpu in $(seq 0 15); do
		node=$((cpu / 8))
		mkdir -p "$T/sys/devices/system/cpu/cpu$cpu/node$node"
		put "sys/devices/system/cpu/cpu$cpu/topology/thread_siblings_list" "$cpu"
	done
	if [ "$kind" = tuned ]; then
		put proc/cmdline "BOOT_IMAGE=/boot/vmlinuz-6.1.0-18-amd64 root=UUID=0b5e ro quiet isolcpus=nohz,domain,2-5 nohz_full=2-5 rcu_nocbs=2-5 intel_iommu=on iommu=pt transparent_hugepage=madvise"
		put proc/meminfo $'MemTotal:       65536000 kB\nHugePages_Total:    1024\nHugePages_Free:     1024\nHugepagesize:       2048 kB'
		put proc/mounts $'proc /proc proc rw,nosuid,nodev,noexec,relatime 0 0\nhugetlbfs /dev/hugepages hugetlbfs rw,relatime,pagesize=2M 0 0'
		mkdir -p "$T/dev/hugepages" && chmod 0755 "$T/dev/hugepages"
		put proc/swaps $'Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority'
		put proc/sys/vm/swappiness "10"
		put proc/self/limits "$(cat "$T/proc/self/limits")"$'\nMax locked memory         unlimited            unlimited            bytes'
		put sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages "1024"
		put sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages "1024"
		put sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages "0"
		put sys/kernel/mm/hugepages/hugepages-1048576kB/free_hugepages "0"
		put sys/devices/system/node/node0/hugepages/hugepages-2048kB/nr_hugepages "1024"
		put sys/devices/system/node/node1/hugepages/hugepages-2048kB/nr_hugepages "0"
		put sys/devices/system/cpu/nohz_full "2-5"
		mkdir -p "$T/sys/kernel/iommu_groups/0" "$T/sys/kernel/iommu_groups/1" \
			"$T/sys/class/iommu/dmar0" "$T/sys/module/vfio_pci"
		ln -s ../../../bus/pci/drivers/vfio-pci "$T/sys/bus/pci/devices/0000:3b:00.0/driver"
		put sys/bus/pci/devices/0000:3b:00.0/numa_node "0"
		put sys/kernel/mm/transparent_hugepage/enabled "always [madvise] never"
		put etc/passwd $'root:x:0:0:root:/root:/bin/bash\nomsd:x:998:998::/var/lib/omsd:/usr/sbin/nologin'
		put etc/group $'root:x:0:\nomsd:x:998:'
		put etc/default/grub $'GRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX_DEFAULT="quiet"\nGRUB_CMDLINE_LINUX="isolcpus=nohz,domain,2-5 nohz_full=2-5 rcu_nocbs=2-5 intel_iommu=on iommu=pt transparent_hugepage=madvise"'
		gov=performance
	else
		# isolcpus too short; nohz_full only after "--", where it belongs to init.
		put proc/cmdline "BOOT_IMAGE=/boot/vmlinuz-6.1.0-18-amd64 root=UUID=0b5e ro quiet isolcpus=2-3 -- nohz_full=2-5"
		put proc/meminfo $'MemTotal:       65536000 kB\nHugePages_Total:       0\nHugePages_Free:        0\nHugepagesize:       2048 kB'
		put proc/mounts "proc /proc proc rw,nosuid,nodev,noexec,relatime 0 0"
		put proc/swaps $'Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n/dev/sda2                               partition\t8388604\t\t0\t\t-2'
		put proc/sys/vm/swappiness "60"
		put proc/self/limits "$(cat "$T/proc/self/limits")"$'\nMax locked memory         65536                65536                bytes'
		put sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages "0"
		put sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages "0"
		put sys/devices/system/node/node0/hugepages/hugepages-2048kB/nr_hugepages "0"
		put sys/devices/system/node/node1/hugepages/hugepages-2048kB/nr_hugepages "0"
		ln -s ../../../bus/pci/drivers/ixgbe "$T/sys/bus/pci/devices/0000:3b:00.0/driver"
		put sys/bus/pci/devices/0000:3b:00.0/numa_node "1"
		mkdir -p "$T/sys/bus/pci/devices/0000:3b:00.0/net/eth2"
		put sys/kernel/mm/transparent_hugepage/enabled "[always] madvise never"
		put etc/passwd 'root:x:0:0:root:/root:/bin/bash'
		put etc/group 'root:x:0:'
		put etc/default/grub $'GRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX_DEFAULT="quiet"\nGRUB_CMDLINE_LINUX="isolcpus=2-3 console=ttyS0"'
		gov=powersave
	fi
	for cpu in $(seq 0 15); do
		[ "$kind" = untuned ] && [ "$cpu" = 5 ] && continue # no cpufreq: a WARN with the reason
		put "sys/devices/system/cpu/cpu$cpu/cpufreq/scaling_governor" "$gov"
		put "sys/devices/system/cpu/cpu$cpu/cpufreq/scaling_available_governors" "performance powersave"
	done
}

# Fake commands: log argv to $FAKE_LOG and play the effect on the tree.
make_fakes() {
	local B=$1
	mkdir -p "$B"
	cat >"$B/modprobe" <<'SH'
#!/bin/sh
echo "modprobe $*" >>"$FAKE_LOG"
if [ "$1" = -r ]; then rmdir "$OMSD_HOST_ROOT/sys/module/vfio_pci"; else mkdir -p "$OMSD_HOST_ROOT/sys/module/vfio_pci"; fi
SH
	cat >"$B/dpdk-devbind.py" <<'SH'
#!/bin/sh
echo "dpdk-devbind.py $*" >>"$FAKE_LOG"
link="$OMSD_HOST_ROOT/sys/bus/pci/devices/$2/driver"
rm -f "$link"
case "$1" in --bind=*) ln -s "../../../bus/pci/drivers/${1#--bind=}" "$link" ;; esac
SH
	cat >"$B/mount" <<'SH'
#!/bin/sh
echo "mount $*" >>"$FAKE_LOG"
echo "hugetlbfs $6 hugetlbfs rw,relatime,${4} 0 0" >>"$OMSD_HOST_ROOT/proc/mounts"
SH
	cat >"$B/umount" <<'SH'
#!/bin/sh
echo "umount $*" >>"$FAKE_LOG"
grep -v " $1 hugetlbfs " "$OMSD_HOST_ROOT/proc/mounts" >"$OMSD_HOST_ROOT/proc/mounts.new"
mv "$OMSD_HOST_ROOT/proc/mounts.new" "$OMSD_HOST_ROOT/proc/mounts"
SH
	chmod +x "$B"/*
}

# Every path, its type, mode and link target, and every file's checksum.
tree_sum() { # tree_sum DIR [EXCLUDED PATH...]
	local d=$1
	shift
	(
		cd "$d"
		find . -printf '%p %y %m %l\n' | sort
		find . -type f -print0 | sort -z | xargs -0 sha256sum
	) | { if [ $# -gt 0 ]; then grep -vE "^\./($(IFS='|'; echo "$*"))|  \./($(IFS='|'; echo "$*"))"; else cat; fi; }
}

make_host "$TMP/tuned" tuned
make_host "$TMP/untuned" untuned
make_fakes "$TMP/bin"
export FAKE_LOG=$TMP/fake.log

host() { # host ROOT ARGS...: omsd-host against a fixture tree with the fakes
	local root=$1
	shift
	OMSD_HOST_ROOT=$root OMSD_HOST_BIN=$TMP/bin "$OMSD_HOST" "$@"
}

# The status or the observed value of one row of a --json answer (FILE NAME). Each answer is
# parsed once into FILE.tsv: python3 may be a slow shim, and there are many rows to ask about.
json_rows() {
	[ -e "$1.tsv" ] || $PY -c '
import json, sys
for c in json.load(open(sys.argv[1]))["checks"]:
    print("\t".join((c["name"], c["status"], c["observed"])))
' "$1" >"$1.tsv"
}
json_status() { json_rows "$1" && awk -F'\t' -v n="$2" '$1 == n { print $2 }' "$1.tsv"; }
json_observed() { json_rows "$1" && awk -F'\t' -v n="$2" '$1 == n { print $3 }' "$1.tsv"; }

# --- the cpu-list parser and the command line, as a module -----------------------------------
if $PY - "$OMSD_HOST" <<'PY'
import importlib.machinery, importlib.util, sys
loader = importlib.machinery.SourceFileLoader("omsd_host", sys.argv[1])
spec = importlib.util.spec_from_loader("omsd_host", loader)
h = importlib.util.module_from_spec(spec)
loader.exec_module(h)
p = h.parse_cpulist
assert p("2-5,7") == {2, 3, 4, 5, 7}
assert p(" 0 \n") == {0}
assert p("") == set()
assert p("0-15:2/4") == {0, 1, 4, 5, 8, 9, 12, 13}
assert p("all", 4) == {0, 1, 2, 3}
assert p("2-N", 6) == {2, 3, 4, 5}
for bad in ("5-2", "a", "1,,2", "0-3:0/2", "0-3:3/2", "N", "2-"):
    try:
        p(bad)
    except ValueError:
        pass
    else:
        raise AssertionError("accepted " + bad)
assert h.format_cpulist({2, 3, 4, 5, 7}) == "2-5,7"
assert h.format_cpulist({1, 3}) == "1,3"
assert h.format_cpulist(set()) == ""
assert all(h.format_cpulist(p(t)) == t for t in ("0-3,8-11", "5", "1,3-4"))
assert h.split_isolcpus("nohz,domain,managed_irq,2-5,7") == (["nohz", "domain", "managed_irq"], "2-5,7")
c = h.cmdline_dict(h.parse_cmdline('ro quiet nohz-full=2-5 dyndbg="file a.c +p" isolcpus=1 -- isolcpus=9'))
assert c["nohz_full"] == "2-5", c
assert c["dyndbg"] == "file a.c +p", c
assert c["isolcpus"] == "1", c
assert c["quiet"] is None
assert h.pci_address("3B:00.0,txq_inline=128") == "0000:3b:00.0"
assert h.pci_address("0000:3b:00.1") == "0000:3b:00.1"
assert h.pci_address("net_tap0,iface=x") is None
assert h.size_kb("2M") == 2048 and h.size_kb("1G") == 1048576 and h.size_kb("2048kB") == 2048
PY
then ok "unit: cpu lists, isolcpus flags, kernel command line, PCI addresses, sizes"
else bad "unit: cpu lists, isolcpus flags, kernel command line, PCI addresses, sizes"; fi

# --- check: the tuned host --------------------------------------------------------------------
set +e
host "$TMP/tuned" check -c "$PROD" >"$TMP/tuned.out" 2>"$TMP/tuned.err"
rc=$?
set -e
expect "tuned host: exit 0" [ "$rc" = 0 ]
expect "tuned host: 17 rows, every one PASS" [ "$(grep -cE '^PASS  ' "$TMP/tuned.out")" = 17 ]
expect "tuned host: no WARN or FAIL" bash -c "! grep -qE '^(WARN|FAIL)' '$TMP/tuned.out'"
expect "tuned host: the lcore layout is shown" has "$TMP/tuned.out" "io 2 busy, bridge 5 busy, persister 1 sleep, shard.1 3 busy, shard.2 4 pause"
expect "tuned host: isolcpus flags understood" has "$TMP/tuned.out" "isolcpus=nohz,domain,2-5 covers the polling lcores 2-5"
expect "tuned host: short PCI address normalised" has "$TMP/tuned.out" "0000:3b:00.0: vfio-pci"
expect "tuned host: nothing on stderr" [ ! -s "$TMP/tuned.err" ]
set +e
host "$TMP/tuned" check -c "$PROD" --json >"$TMP/tuned.json"
rc=$?
set -e
expect "tuned host --json: exit 0" [ "$rc" = 0 ]
expect "tuned host --json: parses, result PASS, 17 checks" $PY -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["result"] == "PASS" and d["exit"] == 0, d
assert [c["name"] for c in d["checks"]] == ["lcores", "hugepages", "hugetlbfs", "isolcpus",
    "nohz_full", "rcu_nocbs", "iommu", "vfio-pci", "nic", "numa", "governor", "thp", "swap",
    "memlock", "service", "shadow", "user"], d
assert all(c["status"] == "PASS" for c in d["checks"])
' "$TMP/tuned.json"

# THP never: omsd's madvise for its services' memory is ignored and each snapshot child's
# fork copies 4 KiB entries ([limits] snapshot_by = fork, the default): WARN; with
# snapshot_by = lcore there is no fork, and never is fine.
cp -a "$TMP/tuned" "$TMP/thpnever"
printf 'always madvise [never]\n' >"$TMP/thpnever/sys/kernel/mm/transparent_hugepage/enabled"
set +e
host "$TMP/thpnever" check -c "$PROD" --json >"$TMP/thpnever.json"
{ cat "$PROD"; printf '[limits]\nsnapshot_by = lcore\n'; } >"$TMP/lcore.ini"
host "$TMP/thpnever" check -c "$TMP/lcore.ini" --json >"$TMP/thpnever-lcore.json"
set -e
expect "THP never with snapshot children: thp WARN" [ "$(json_status "$TMP/thpnever.json" thp)" = WARN ]
expect "THP never with snapshot_by = lcore: thp PASS" [ "$(json_status "$TMP/thpnever-lcore.json" thp)" = PASS ]

# --- check: the untuned host ------------------------------------------------------------------
set +e
host "$TMP/untuned" check -c "$PROD" >"$TMP/untuned.out" 2>"$TMP/untuned.err"
rc=$?
host "$TMP/untuned" check -c "$PROD" --json >"$TMP/untuned.json" 2>>"$TMP/untuned.err"
rcj=$?
set -e
expect "untuned host: exit 2" [ "$rc" = 2 ]
expect "untuned host --json: exit 2, result FAIL" $PY -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["exit"] == 2 and d["result"] == "FAIL" and sys.argv[2] == "2", (d, sys.argv[2])
' "$TMP/untuned.json" "$rcj"
expect "untuned host: no traceback" no_traceback "$TMP/untuned.err"
declare -A want=(
	[lcores]=PASS [hugepages]=FAIL [hugetlbfs]=FAIL [isolcpus]=WARN [nohz_full]=WARN
	[rcu_nocbs]=WARN [iommu]=FAIL [vfio-pci]=FAIL [nic]=FAIL [numa]=WARN [governor]=WARN
	[thp]=WARN [swap]=WARN [memlock]=WARN [service]=PASS [shadow]=PASS [user]=WARN
)
for name in "${!want[@]}"; do
	got=$(json_status "$TMP/untuned.json" "$name")
	expect "untuned host: $name is ${want[$name]}" [ "$got" = "${want[$name]}" ]
	if [ "${want[$name]}" != PASS ]; then
		expect "untuned host: the table names $name ${want[$name]}" \
			grep -qE "^${want[$name]}  $name " "$TMP/untuned.out"
	fi
done
while IFS='|' read -r name value; do
	expect "untuned host: $name shows '$value'" contains "$(json_observed "$TMP/untuned.json" "$name")" "$value"
done <<'EOF'
hugepages|2M: 0 reserved, 0 free (0 MB); needs 2048 MB (--socket-mem 2048)
hugetlbfs|none mounted
isolcpus|isolcpus=2-3; polling lcores 4-5 not covered (bridge 5, shard.2 4)
nohz_full|nohz_full not set; polling lcores 2-5 not covered
rcu_nocbs|rcu_nocbs not set
iommu|0 IOMMU groups
vfio-pci|vfio-pci not loaded
nic|0000:3b:00.0: ixgbe (eth2), not a DPDK driver
numa|NIC 0000:3b:00.0 on node 1
governor|CPU 0-4 powersave
governor|CPU 5: cannot read cpufreq/scaling_governor: No such file or directory
thp|transparent_hugepage always
swap|swap active on /dev/sda2, vm.swappiness=60
memlock|memlock limit 64 kB
user|user omsd missing
EOF
expect "untuned host: the fix for the NIC is the devbind line" has "$TMP/untuned.out" "-> dpdk-devbind.py --bind=vfio-pci 0000:3b:00.0"
expect "untuned host: the fix for isolcpus is the whole list" has "$TMP/untuned.out" "add isolcpus=2-5 to GRUB_CMDLINE_LINUX"

# --- setup without --apply changes nothing --------------------------------------------------
cp -a "$TMP/untuned" "$TMP/orig" # the untouched untuned tree, for the undo below
before=$(tree_sum "$TMP/untuned")
set +e
host "$TMP/untuned" setup -c "$PROD" >"$TMP/plan.out" 2>"$TMP/plan.err"
rc=$?
host "$TMP/untuned" setup -c "$PROD" --hugepage-size 1G --hugepages 4 >"$TMP/plan1g.out" 2>>"$TMP/plan.err"
rc1g=$?
host "$TMP/untuned" setup --undo >"$TMP/plan-undo.out" 2>>"$TMP/plan.err"
rcu=$?
set -e
expect "setup (plan): exit 0" [ "$rc" = 0 ]
expect "setup (plan): every byte of the tree as it was" [ "$(tree_sum "$TMP/untuned")" = "$before" ]
expect "setup (plan): no command run" [ ! -e "$FAKE_LOG" ]
expect "setup (plan): no traceback" no_traceback "$TMP/plan.err"
expect "setup (plan): says it is a plan" has "$TMP/plan.out" "plan only: --apply to make the runtime changes"
while IFS= read -r line; do
	expect "setup (plan): '$line'" has "$TMP/plan.out" "$line"
done <<'EOF'
[do] hugepages (2048 MB on node 0 for --socket-mem 2048): /sys/devices/system/node/node0/hugepages/hugepages-2048kB/nr_hugepages 0 -> 1024
[do] hugetlbfs at /dev/hugepages: mount -t hugetlbfs -o pagesize=2M nodev
[do] load vfio-pci: modprobe vfio-pci
[do] bind 0000:3b:00.0 (ixgbe, interface eth2 leaves the kernel) to vfio-pci: dpdk-devbind.py --bind=vfio-pci 0000:3b:00.0
[do] governor CPU 2: /sys/devices/system/cpu/cpu2/cpufreq/scaling_governor powersave -> performance
[skip] governor CPU 5: no cpufreq (No such file or directory)
[do] transparent hugepages: /sys/kernel/mm/transparent_hugepage/enabled always -> madvise
add to GRUB_CMDLINE_LINUX in /etc/default/grub: isolcpus=2-5 nohz_full=2-5 rcu_nocbs=2-5 intel_iommu=on iommu=pt transparent_hugepage=madvise
replace   GRUB_CMDLINE_LINUX="isolcpus=2-3 console=ttyS0"
with      GRUB_CMDLINE_LINUX="isolcpus=2-5 console=ttyS0 nohz_full=2-5 rcu_nocbs=2-5 intel_iommu=on iommu=pt transparent_hugepage=madvise"
swap is active: swapoff -a
EOF
# A key GRUB_CMDLINE_LINUX_DEFAULT also sets comes later on the command line and wins: named.
G=$TMP/grubdef
cp -a "$TMP/untuned" "$G"
sed -i 's/^GRUB_CMDLINE_LINUX_DEFAULT=.*/GRUB_CMDLINE_LINUX_DEFAULT="quiet transparent_hugepage=always"/' "$G/etc/default/grub"
host "$G" setup -c "$PROD" >"$TMP/grubdef.out" 2>&1 || true
expect "setup (plan): a later GRUB_CMDLINE_LINUX_DEFAULT value is named" has "$TMP/grubdef.out" "and remove transparent_hugepage=always from GRUB_CMDLINE_LINUX_DEFAULT"
expect "setup (plan, 1G): exit 1, no 1G pages on this host" [ "$rc1g" = 1 ]
expect "setup (plan, 1G): says why" has "$TMP/plan1g.out" "[fail] hugepages: no 1G pages on this host"
expect "setup (plan, 1G): boot-time 1G pages on the command line" has "$TMP/plan1g.out" "default_hugepagesz=1G hugepagesz=1G hugepages=4"
expect "setup --undo (plan): nothing recorded, exit 0" [ "$rcu" = 0 ]
expect "setup --undo (plan): says so" has "$TMP/plan-undo.out" "nothing to undo"
expect "setup (plan): still every byte as it was" [ "$(tree_sum "$TMP/untuned")" = "$before" ]

# A fake root without fake commands: --apply refuses before touching anything.
set +e
OMSD_HOST_ROOT=$TMP/untuned "$OMSD_HOST" setup -c "$PROD" --apply >"$TMP/nobin.out" 2>&1
rc=$?
set -e
expect "setup --apply under OMSD_HOST_ROOT without OMSD_HOST_BIN: exit 3" [ "$rc" = 3 ]
expect "setup --apply under OMSD_HOST_ROOT without OMSD_HOST_BIN: says why" has "$TMP/nobin.out" "set OMSD_HOST_BIN too"
expect "setup --apply refused: every byte as it was" [ "$(tree_sum "$TMP/untuned")" = "$before" ]

# --- setup --apply ----------------------------------------------------------------------------
U=$TMP/untuned
set +e
host "$U" setup -c "$PROD" --apply >"$TMP/apply.out" 2>"$TMP/apply.err"
rc=$?
set -e
expect "setup --apply: exit 0" [ "$rc" = 0 ]
expect "setup --apply: no traceback" no_traceback "$TMP/apply.err"
expect "setup --apply: node 0 nr_hugepages 1024" [ "$(cat "$U/sys/devices/system/node/node0/hugepages/hugepages-2048kB/nr_hugepages")" = 1024 ]
expect "setup --apply: node 1 untouched (--socket-mem gives it nothing)" [ "$(cat "$U/sys/devices/system/node/node1/hugepages/hugepages-2048kB/nr_hugepages")" = 0 ]
expect "setup --apply: modprobe vfio-pci" grep -qxF "modprobe vfio-pci" "$FAKE_LOG"
expect "setup --apply: dpdk-devbind.py --bind=vfio-pci 0000:3b:00.0" grep -qxF "dpdk-devbind.py --bind=vfio-pci 0000:3b:00.0" "$FAKE_LOG"
expect "setup --apply: mount hugetlbfs at the root's /dev/hugepages" grep -qxF "mount -t hugetlbfs -o pagesize=2M nodev $U/dev/hugepages" "$FAKE_LOG"
expect "setup --apply: three commands, no other" [ "$(wc -l <"$FAKE_LOG")" = 3 ]
expect "setup --apply: mount point made" [ -d "$U/dev/hugepages" ]
expect "setup --apply: governor of CPU 2 performance" [ "$(cat "$U/sys/devices/system/cpu/cpu2/cpufreq/scaling_governor")" = performance ]
expect "setup --apply: governor of CPU 8 (no lcore) untouched" [ "$(cat "$U/sys/devices/system/cpu/cpu8/cpufreq/scaling_governor")" = powersave ]
expect "setup --apply: THP madvise" [ "$(cat "$U/sys/kernel/mm/transparent_hugepage/enabled")" = madvise ]
expect "setup --apply: /proc/cmdline and grub untouched" bash -c "cmp -s '$U/proc/cmdline' '$TMP/orig/proc/cmdline' && cmp -s '$U/etc/default/grub' '$TMP/orig/etc/default/grub'"
expect "setup --apply: undo record written" [ -s "$U/run/omsd-host/undo.json" ]
set +e
host "$U" check -c "$PROD" --json >"$TMP/after.json"
set -e
for name in hugetlbfs vfio-pci nic thp; do
	expect "check after --apply: $name PASS" [ "$(json_status "$TMP/after.json" "$name")" = PASS ]
done
expect "check after --apply: governor still WARN (CPU 5 has no cpufreq)" [ "$(json_status "$TMP/after.json" governor)" = WARN ]

# A second --apply finds everything done and runs nothing.
set +e
host "$U" setup -c "$PROD" --apply >"$TMP/apply2.out" 2>&1
rc=$?
set -e
expect "setup --apply again: exit 0" [ "$rc" = 0 ]
expect "setup --apply again: no command run" [ "$(wc -l <"$FAKE_LOG")" = 3 ]
expect "setup --apply again: nothing to do" bash -c "! grep -qF '[do]' '$TMP/apply2.out'"
expect "setup again: the reboot line keeps THP=madvise (the boot default is always)" has "$TMP/apply2.out" "transparent_hugepage=madvise"

# --- setup --undo --apply puts it all back ------------------------------------------------
set +e
host "$U" setup --undo --apply >"$TMP/undo.out" 2>"$TMP/undo.err"
rc=$?
set -e
expect "setup --undo --apply: exit 0" [ "$rc" = 0 ]
expect "setup --undo --apply: no traceback" no_traceback "$TMP/undo.err"
expect "setup --undo --apply: umount" grep -qxF "umount $U/dev/hugepages" "$FAKE_LOG"
expect "setup --undo --apply: modprobe -r vfio-pci" grep -qxF "modprobe -r vfio-pci" "$FAKE_LOG"
expect "setup --undo --apply: the NIC back to ixgbe" grep -qxF "dpdk-devbind.py --bind=ixgbe 0000:3b:00.0" "$FAKE_LOG"
expect "setup --undo --apply: THP back to always" [ "$(cat "$U/sys/kernel/mm/transparent_hugepage/enabled")" = always ]
expect "setup --undo --apply: the undo record is gone" [ ! -e "$U/run/omsd-host/undo.json" ]
# Everything else byte for byte as before --apply: the THP file is rewritten in the kernel's
# input form, and the mount point and the record's directory stay.
expect "setup --undo --apply: the tree as it was" [ "$(tree_sum "$U" run dev/hugepages sys/kernel/mm/transparent_hugepage/enabled)" = "$(tree_sum "$TMP/orig" run dev/hugepages sys/kernel/mm/transparent_hugepage/enabled)" ]

# --hugepages N reserves on the global pool.
rm -f "$FAKE_LOG"
set +e
host "$U" setup -c "$PROD" --hugepages 512 --apply >"$TMP/apply512.out" 2>&1
rc=$?
set -e
expect "setup --hugepages 512 --apply: exit 0" [ "$rc" = 0 ]
expect "setup --hugepages 512 --apply: global nr_hugepages 512" [ "$(cat "$U/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages")" = 512 ]
host "$U" setup --undo --apply >/dev/null 2>&1 || true
expect "setup --undo --apply: global nr_hugepages back to 0" [ "$(cat "$U/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages")" = 0 ]

# --- bad configurations and command lines: FILE:LINE, exit 3 ---------------------------------
badcase() { # badcase NAME EXPECTED-MESSAGE < config
	local f=$TMP/bad.ini out rc
	cat >"$f"
	set +e
	out=$(host "$TMP/tuned" check -c "$f" 2>&1)
	rc=$?
	set -e
	if [ "$rc" = 3 ] && [[ "$out" == *"$2"* ]] && [[ "$out" != *Traceback* ]]; then
		ok "bad config: $1"
	else
		bad "bad config: $1 (exit $rc: $out)"
	fi
}
badcase "section without ]" "$TMP/bad.ini:2: section header without ']'" <<'EOF'
; a comment
[port
dev = net_null0
EOF
badcase "cpu not a number" "$TMP/bad.ini:5: [shard.1] cpu: 'two' is not a non-negative decimal integer" <<'EOF'
[port]
dev = net_null0

[shard.1]
cpu = two
EOF
badcase "cpu out of range" "$TMP/bad.ini:4: [io] cpu: 4096 is out of range [0, 1023]" <<'EOF'
[port]
dev = net_null0
[io]
cpu = 4096
EOF
badcase "duplicate key" "$TMP/bad.ini:5: [io] cpu: duplicate key (first at line 4)" <<'EOF'
[port]
dev = net_null0
[io]
cpu = 1
cpu = 2
EOF
badcase "bad idle" "$TMP/bad.ini:5: [io] idle: 'spin' is not one of busy|pause|sleep" <<'EOF'
[port]
dev = net_null0
[io]
cpu = 1
idle = spin
EOF
badcase "io cpus not one per rx queue" "$TMP/bad.ini:6: [io] cpus: 3 CPU(s) for 2 io lcore(s)" <<'EOF'
[port]
dev = net_null0
rx_queues = 2
[io]
cpu = 1
cpus = 1,2,3
EOF
badcase "port dev missing" "$TMP/bad.ini:1: [port] dev: missing (required)" <<'EOF'
[port]
rx_desc = 1024
EOF
badcase "port dev neither vdev nor PCI" "$TMP/bad.ini:2: [port] dev: 'eth0' is neither a vdev" <<'EOF'
[port]
dev = eth0
EOF
badcase "key before a section" "$TMP/bad.ini:1: key before the first [section]" <<'EOF'
cpu = 1
EOF
badcase "bad --socket-mem" "$TMP/bad.ini:4: [eal] args: --socket-mem 'lots' is not a list" <<'EOF'
[port]
dev = 0000:3b:00.0
[eal]
args = --socket-mem lots
EOF
set +e
out=$(host "$TMP/tuned" check -c "$TMP/nope.ini" 2>&1)
rc=$?
set -e
expect "missing config: exit 3" [ "$rc" = 3 ]
expect "missing config: names the file" contains "$out" "$TMP/nope.ini: cannot open: No such file or directory"
set +e
out=$(host "$TMP/tuned" setup -c "$TMP/nope.ini" 2>&1)
rc=$?
set -e
expect "missing config (setup): exit 3" [ "$rc" = 3 ]
set +e
"$OMSD_HOST" check --bogus >/dev/null 2>&1
rc1=$?
"$OMSD_HOST" >/dev/null 2>&1
rc2=$?
"$OMSD_HOST" setup --hugepage-size 3M >/dev/null 2>&1
rc3=$?
set -e
expect "usage errors: exit 3" [ "$rc1$rc2$rc3" = 333 ]

# --- unreadable entries: WARN with the reason, never a traceback -------------------------------
B=$TMP/broken
cp -a "$TMP/tuned" "$B"
rm "$B/proc/cmdline" "$B/sys/kernel/mm/transparent_hugepage/enabled"
rm "$B/proc/swaps" && mkdir "$B/proc/swaps" # EISDIR
rm -r "$B/sys/kernel/mm/hugepages" # falls back to /proc/meminfo
set +e
host "$B" check -c "$PROD" --json >"$TMP/broken.json" 2>"$TMP/broken.err"
rc=$?
host "$B" setup -c "$PROD" >"$TMP/broken-plan.out" 2>>"$TMP/broken.err"
rcp=$?
set -e
expect "broken host: exit 1 (WARN)" [ "$rc" = 1 ]
expect "broken host: no traceback" no_traceback "$TMP/broken.err"
expect "broken host: isolcpus WARN names /proc/cmdline" contains "$(json_observed "$TMP/broken.json" isolcpus)" "cannot read /proc/cmdline: No such file or directory"
expect "broken host: thp WARN with the reason" contains "$(json_observed "$TMP/broken.json" thp)" "cannot read /sys/kernel/mm/transparent_hugepage/enabled: No such file"
expect "broken host: swap WARN with the reason" contains "$(json_observed "$TMP/broken.json" swap)" "cannot read /proc/swaps: Is a directory"
expect "broken host: hugepages from /proc/meminfo" [ "$(json_status "$TMP/broken.json" hugepages)" = PASS ]
expect "broken host: setup still prints a plan" [ "$rcp" -le 1 ]

# --- an installed omsd.service: memlock, CPU affinity, the user's devices -------------------
M=$TMP/unit
cp -a "$TMP/tuned" "$M"
mkdir -p "$M/etc/systemd/system" "$M/usr/lib/systemd/system" "$M/dev/vfio"
unit() { printf '[Unit]\nDescription=omsd\n[Service]\n%s\n' "$1" >"$M/usr/lib/systemd/system/omsd.service"; }
set +e
unit $'User=omsd\nExecStart=/usr/bin/omsd'
host "$M" check -c "$PROD" --json >"$TMP/unit1.json"
unit $'User=omsd\nLimitMEMLOCK=4G'
host "$M" check -c "$PROD" --json >"$TMP/unit2.json"
unit $'User=omsd\nLimitMEMLOCK=1048576'
host "$M" check -c "$PROD" --json >"$TMP/unit3.json"
set -e
expect "unit User=omsd without LimitMEMLOCK: memlock WARN" [ "$(json_status "$TMP/unit1.json" memlock)" = WARN ]
expect "unit LimitMEMLOCK=4G >= 2048 MB: memlock PASS" [ "$(json_status "$TMP/unit2.json" memlock)" = PASS ]
expect "unit LimitMEMLOCK=1048576 (bytes) < 2048 MB: memlock WARN" [ "$(json_status "$TMP/unit3.json" memlock)" = WARN ]
expect "unit without CPUAffinity on an isolcpus host: service FAIL" [ "$(json_status "$TMP/unit1.json" service)" = FAIL ]
expect "unit without CPUAffinity: names the CPUs left out" contains "$(json_observed "$TMP/unit1.json" service)" "the lcores' CPUs 2-5 are outside the service's affinity"
expect "unit User=omsd: names the hugetlbfs mount it cannot write" contains "$(json_observed "$TMP/unit1.json" service)" "user omsd cannot create files in the hugetlbfs mount /dev/hugepages ("

# The package's shape: capabilities, a drop-in with the CPUs, a mount and a VFIO group device
# omsd may use (the group device first without access, then with it).
unit $'User=omsd\nGroup=omsd\nAmbientCapabilities=CAP_IPC_LOCK CAP_NET_ADMIN\nLimitMEMLOCK=infinity'
mkdir -p "$M/etc/systemd/system/omsd.service.d"
printf '[Service]\nCPUAffinity=0 1 2-5\n' >"$M/etc/systemd/system/omsd.service.d/cpus.conf"
chmod 0777 "$M/dev/hugepages"
ln -s ../../../../kernel/iommu_groups/1 "$M/sys/bus/pci/devices/0000:3b:00.0/iommu_group"
: >"$M/dev/vfio/1"
chmod 0600 "$M/dev/vfio/1"
set +e
host "$M" check -c "$PROD" --json >"$TMP/unit4.json"
chmod 0666 "$M/dev/vfio/1"
host "$M" check -c "$PROD" --json >"$TMP/unit5.json"
rc=$?
set -e
expect "unit: the VFIO group device closed to omsd: service FAIL" [ "$(json_status "$TMP/unit4.json" service)" = FAIL ]
expect "unit: names the device" contains "$(json_observed "$TMP/unit4.json" service)" "user omsd cannot open /dev/vfio/1 ("
expect "unit: the drop-in's CPUAffinity read" contains "$(json_observed "$TMP/unit4.json" service)" "CPUAffinity=0 1 2-5"
expect "unit: CAP_IPC_LOCK: memlock PASS" [ "$(json_status "$TMP/unit5.json" memlock)" = PASS ]
expect "unit, everything open to omsd: service PASS, exit 0" bash -c "[ '$(json_status "$TMP/unit5.json" service)' = PASS ] && [ $rc = 0 ]"
# Shadow copies (snapshot_by = shadow, as production.ini ships) take the CPUs left to the
# service outside the lcores' (0 here, main's); an affinity of the lcores' CPUs alone leaves
# none. Without them (the fixture: fork) nothing to check.
expect "unit, snapshot_by = fork: shadow PASS, nothing to place" contains "$(json_status "$TMP/unit5.json" shadow) $(json_observed "$TMP/unit5.json" shadow)" "PASS snapshot_by = fork: no shadow copies"
{ cat "$PROD"; printf '[limits]\nsnapshot_by = shadow\n'; } >"$TMP/shadow.ini"
set +e
host "$M" check -c "$TMP/shadow.ini" --json >"$TMP/unit5s.json"
printf '[Service]\nCPUAffinity=1-5\n' >"$M/etc/systemd/system/omsd.service.d/cpus.conf"
host "$M" check -c "$TMP/shadow.ini" --json >"$TMP/unit6.json"
set -e
expect "unit: the shadow copies on CPU 0: shadow PASS" contains "$(json_status "$TMP/unit5s.json" shadow) $(json_observed "$TMP/unit5s.json" shadow)" "PASS 2 shadow copies on CPU 0 (CPUAffinity=0 1 2-5 less the lcores')"
expect "unit, CPUAffinity=1-5 (the lcores' but main's): shadow WARN" [ "$(json_status "$TMP/unit6.json" shadow)" = WARN ]
expect "unit, CPUAffinity=1-5: says the copies would run on the lcores' CPUs" contains "$(json_observed "$TMP/unit6.json" shadow)" "2 shadow copies, no CPU for them in CPUAffinity=1-5 outside the lcores' 1-5"

# --- this machine, for real: runs to the end ---------------------------------------------------
for cfg in "$SRC/deploy/omsd.ini" "$SRC/deploy/configs/production.ini"; do
	name=${cfg#"$SRC"/}
	set +e
	"$OMSD_HOST" check -c "$cfg" >"$TMP/real.out" 2>"$TMP/real.err"
	rc=$?
	"$OMSD_HOST" check -c "$cfg" --json >"$TMP/real.json" 2>>"$TMP/real.err"
	rcj=$?
	"$OMSD_HOST" setup -c "$cfg" >"$TMP/real-plan.out" 2>>"$TMP/real.err"
	rcp=$?
	set -e
	expect "this host, $name: check exits 0..2 ($rc)" [ "$rc" -le 2 ]
	expect "this host, $name: --json parses, same exit ($rcj)" $PY -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["exit"] == int(sys.argv[2]) == int(sys.argv[3]) and len(d["checks"]) == 17
' "$TMP/real.json" "$rc" "$rcj"
	expect "this host, $name: setup plan exits 0..1 ($rcp)" [ "$rcp" -le 1 ]
	expect "this host, $name: no traceback" no_traceback "$TMP/real.err"
	expect "this host, $name: a row per check and the verdict" bash -c "[ \$(grep -cE '^(PASS|WARN|FAIL)  ' '$TMP/real.out') = 17 ] && grep -q 'exit $rc\$' '$TMP/real.out'"
done

echo "$((checks - fails)) of $checks passed"
[ "$fails" = 0 ]
