#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Goal: the pure-Python client (clients/python/omsclient, issue 20) works against a real node:
# logon and its refusals, trading for two users, cancel, amend, cancel-replace, transfers,
# heartbeats, a seq resync, logout, and lost answers recovered through REPORT_REPLAY.
# Method: one trading node (OMS shard 1 + ME shard 2, symbol 1, tests/e2e/lib.sh) with client
# sessions ([sessions] keys_file, no allow_unauthenticated) and no database (the node serves
# any user a session may act for as a new account, docs/security.md); pytest runs
# clients/python/tests/test_live.py inside the client namespace with the node's address and
# a key file. Then the gateway's counters must show the refusals and logouts the tests
# caused, and the node's asset sums must be conserved (nothing deposited twice).
source "$(dirname "$0")/../e2e/lib.sh"
need_root
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PYTEST=${PYTEST:-pytest-3}
command -v "$PYTEST" >/dev/null || { echo "SKIP: $PYTEST not found (python3-pytest)"; exit 77; }

e2e_init opy 71
secret() { od -An -tx1 -N32 /dev/urandom | tr -d ' \n'; }
S1=$(secret) S2=$(secret)
export E2E_KEYS_FILE=$TMP/api_keys
# Key 1: the tests' (everything, any user); key 2: trade only, for users 1-10.
printf '# test_pyclient.sh\n1 %s all *\n2 %s trade 1-10\n' "$S1" "$S2" >"$E2E_KEYS_FILE"
chmod 600 "$E2E_KEYS_FILE"
printf '1 %s\n' "$S1" >"$TMP/client_key"
chmod 600 "$TMP/client_key"

e2e_net_up
e2e_trade_config "$TMP/omsd.ini"
e2e_start "$TMP/omsd.ini"
log "omsd up (pid $OMSD_PID)"
e2e_wait_stat shard.1.route_epoch 1 || fail "OMS shard never applied the routing config"
log "bootstrap applied (routing epoch 1)"

log "pytest clients/python/tests/test_live.py in $NS_C"
rc=0
: >"$TMP/transfers"
ip netns exec "$NS_C" env PYTHONPATH="$ROOT/clients/python" PYTHONDONTWRITEBYTECODE=1 \
	OMSD_TEST_HOST="$NODE_IP" OMSD_TEST_PORT=7400 OMSD_TEST_KEY_FILE="$TMP/client_key" \
	OMSD_TEST_SYMBOL=1 OMSD_TEST_BASE=1 OMSD_TEST_QUOTE=2 OMSD_TEST_PX=100 \
	OMSD_TEST_TRANSFER_LOG="$TMP/transfers" \
	"$PYTEST" -v -p no:cacheprovider -rs "$ROOT/clients/python/tests/test_live.py" || rc=$?
[ "$rc" -eq 0 ] || fail "pytest exit status $rc"

log "the gateway's counters"
e2e_stats
want_at_least() { # NAME MIN
	local v
	v=$(e2e_stat "$1")
	if [ "$v" = missing ] || [ "$v" -lt "$2" ]; then fail "$1 = $v, want >= $2"; fi
	echo "  $1 = $v"
}
want_at_least gateway.sessions.refused_bad_key 1
want_at_least gateway.sessions.refused_bad_signature 1
want_at_least gateway.sessions.refused_seq_gap 1
want_at_least gateway.sessions.logouts 1
want_at_least gateway.sessions.logons 8
want_at_least shard.2.me.TRADES 1
# Trades move assets between users and fees stay inside: each asset sums to what was
# deposited less what was withdrawn, every transfer counted once however often it was sent.
for asset in 1 2; do
	want=$(awk -v a="$asset" '$1 == a { s += $2 } END { print s + 0 }' "$TMP/transfers")
	got=$(e2e_stat "shard.1.asset.$asset.sum")
	[ "$got" = "$want" ] || fail "asset $asset sums to $got, the applied transfers to $want"
	echo "  shard.1.asset.$asset.sum = $got (the transfers applied)"
done
e2e_stop TERM
[ "$STOP_RC" -eq 0 ] || fail "omsd exit status $STOP_RC after SIGTERM"
log "PASS"
