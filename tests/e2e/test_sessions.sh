#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Goal: client sessions hold on a live cluster (docs/security.md): every bad input is refused
# with its own reason and counted, nothing from outside a session trades, an entitled
# session keeps trading, and revoking a key in the key file ends its session at once.
# Method: three omsd processes (OMS shard 1 + ME shard 2 on each, the shipped-style config
# with [sessions] keys_file, no allow_unauthenticated; a real PostgreSQL behind the
# persisters, deploy/pg/pgctl) and tests/e2e/e2e_session, which
# builds its own frames: step logons (good, BAD_KEY, BAD_SIGNATURE, STALE_LOGON past and
# future, NONCE_REUSED, SESSION_IN_USE, truncated and oversize LOGONs), step frames
# (UNKNOWN_SESSION, bad MAC, SEQ_GAP and SEQ_REPEAT with the expected seq, a deposit and an
# ACKed order in sessions, NOT_ENTITLED, NO_PERMISSION, NO_SESSION, heartbeat, logout) and
# step revoke (the key file is rewritten with key 3 revoked while its session is open: LOGOUT
# KEY_REVOKED, then its LOGON refused). All the while omsload trades in a session of its own
# (key 5, users 1000-1049) and throws away 5 % of the datagrams it receives: it must end with
# every answer recovered through REPORT_REPLAY (still_missing=0), nothing doubled or lost.
# The users are new, so their answers are numbered from 1 (--seq-from-one): a user whose
# first answers were all thrown away has a hole from 1 to ask for, not a stream that starts
# at the first seq it saw (that was this test's flake: an order ACKed only by the duplicate
# answer to its re-send, its ACK and ACCEPTED lost below it, counted unreported).
# Then the gateway's counters must show each refusal, and the io lcore's MAC checks of the
# session frames.
source "$(dirname "$0")/lib.sh"
need_root
[ -n "${E2E_SESSION:-}" ] || { echo "E2E_SESSION (tests/e2e/e2e_session) not set"; exit 77; }
[ -n "${OMSLOAD:-}" ] || { echo "OMSLOAD not set"; exit 77; }
e2e_cluster_init ses 60 3
e2e_cluster_pg_start $((57000 + $$ % 1000)) 1 20000

secret() { od -An -tx1 -N32 /dev/urandom | tr -d ' \n'; }
S1=$(secret) S2=$(secret) S3=$(secret) S4=$(secret) S5=$(secret)
keys() { # $1: "revoked" to revoke key 3
	printf '# test_sessions.sh\n1 %s trade,read 1-100\n2 %s all *\n3 %s trade 7 %s\n' \
		"$S1" "$S2" "$S3" "${1:-}"
	printf '5 %s trade,transfer,read 1000-1049\n' "$S5"
}
export E2E_KEYS_FILE=$TMP/api_keys
keys >"$E2E_KEYS_FILE"
chmod 600 "$E2E_KEYS_FILE"
# The driver's view: the node's keys plus key 4, which the node does not know.
{ keys; printf '4 %s all *\n' "$S4"; } >"$TMP/client_keys"

e2e_cluster_net_up
e2e_cluster_trading_up "" "[persister]" "cpu = 1" "idle = sleep" "" "[database]" \
	"conninfo = $CONNINFO"
e2e_cluster_wait_bootstrap
gw=2
drive() {
	ip netns exec "$NS_C" "$E2E_SESSION" --host "$NET.1$gw" --port 7400 \
		--keys "$TMP/client_keys" "$@"
}

printf '5 %s\n' "$S5" >"$TMP/load_key"
chmod 600 "$TMP/load_key"
log "omsload: 50 users in a session of key 5, 5 % of its answers thrown away"
ip netns exec "$NS_C" "$OMSLOAD" --host "$NET.1$gw" --port 7400 --key-file "$TMP/load_key" \
	--users 50 --first-user 1000 --rate 300 --seconds 12 --seed 3 --symbols 1 --mid 100 \
	--drain-ms 4000 --drop-rx-permille 50 --seq-from-one --history "$TMP/load.hist" \
	>"$TMP/load.log" 2>&1 &
load_pid=$!
sleep 2

log "step logons (node $gw)"
drive logons || fail "logon checks"
log "step frames"
drive frames || fail "session frame checks"

log "step revoke: key 3 revoked in the key file while its session is open"
drive revoke >"$TMP/revoke.out" 2>&1 &
rpid=$!
for _ in $(seq 50); do grep -q '^ready' "$TMP/revoke.out" && break; sleep 0.1; done
grep -q '^ready' "$TMP/revoke.out" || { cat "$TMP/revoke.out"; fail "key 3 never logged on"; }
keys revoked >"$E2E_KEYS_FILE.new"
chmod 600 "$E2E_KEYS_FILE.new"
mv "$E2E_KEYS_FILE.new" "$E2E_KEYS_FILE"
rrc=0
wait "$rpid" || rrc=$?
grep -v '^ready' "$TMP/revoke.out"
[ "$rrc" -eq 0 ] || fail "revocation checks"

lrc=0
wait "$load_pid" || lrc=$?
sed 's/^/  /' "$TMP/load.log"
[ "$lrc" -eq 0 ] || fail "omsload exit status $lrc"
field() { sed -n "s/.*\b$1=\([0-9]*\).*/\1/p" "$TMP/load.log" | head -1; }
[ "$(field rx_dropped)" -gt 0 ] || fail "omsload dropped nothing"
[ "$(field still_missing)" = 0 ] || fail "answers never recovered: still_missing=$(field still_missing)"
[ "$(field doubled)" = 0 ] || fail "doubled=$(field doubled)"
[ "$(field unreported)" = 0 ] || fail "unreported=$(field unreported)"
[ "$(field gave_up)" = 0 ] || fail "gave_up=$(field gave_up)"
[ "$(field session_ended)" = 0 ] || fail "omsload's session ended"
log "load: rx_dropped=$(field rx_dropped) replay requests=$(field requests) still_missing=0"

log "the gateway's counters (node $gw)"
want_at_least() { # NAME MIN
	local v
	v=$(e2e_cluster_stat "$gw" "$1")
	if [ "$v" = missing ] || [ "$v" -lt "$2" ]; then fail "$1 = $v, want >= $2"; fi
	echo "  $1 = $v"
}
for c in refused_bad_key refused_bad_signature refused_nonce_reused refused_session_in_use \
	refused_unknown_session refused_bad_mac refused_seq_gap refused_seq_repeat \
	refused_not_entitled refused_no_permission refused_key_revoked ended_revoked logouts; do
	want_at_least "gateway.sessions.$c" 1
done
want_at_least gateway.sessions.refused_stale_logon 2
want_at_least "$([ -n "${E2E_GATEWAY:-}" ] && echo gateway || echo shard.1).gw_no_session" 1
want_at_least dp.frame_err.bad_msg_length 2 # the truncated and the oversize LOGON
# The io lcore checked the session frames' MACs under the keys the gateway published (the
# gateway took its word for them: mac_proven), and left the bad-MAC one to the gateway.
want_at_least dp.session_mac_proven 100
want_at_least gateway.sessions.mac_proven 100
want_at_least dp.session_mac_unproven 1
log "PASS"
