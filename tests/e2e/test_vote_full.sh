#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Goal: a member whose vote cannot be saved at run time neither aborts nor acts on the
# unsaved vote: it counts the failure, holds its Raft messages until a save succeeds, and
# takes part again once the disk has room (docs/persist.md "A vote that cannot be saved at
# run time"). The vote is saved by the [persister] lcore, not the shard lcore ("The vote
# off the shard lcore"): the writer's flog_votes moves once the disk has room.
# Method: three nodes, durable mode, OMS shard 1 and ME shard 2 on each. A follower F of shard 1 gets a filled
# 64 KiB tmpfs over its vote directory (in its own mount namespace); the leader is stopped
# (SIGSTOP), so the others hold an election and F must save a new term. F must stay up with
# vote_save_failed > 0 and raft_held > 0, and no leader can be elected meanwhile (F is
# silent, the leader stopped). The tmpfs is then removed: F saves its vote, F and the third
# node elect a leader, and F's vote file holds the new term.
source "$(dirname "$0")/lib.sh"
need_root
e2e_cluster_init osv 42 3
e2e_cluster_net_up
e2e_cluster_trading_up "" "[durability]" "mode = durable"
leader=
for _ in $(seq 75); do
	for i in 1 2 3; do
		[ "$(e2e_cluster_stat "$i" shard.1.is_leader)" = 1 ] && leader=$i
	done
	[ -n "$leader" ] && break
	sleep 0.2
done
[ -n "$leader" ] || { OMSD_LOG=$TMP/1/omsd.log; fail "no leader of shard 1"; }
f=$(( leader % 3 + 1 ))
g=$(( f % 3 + 1 ))
[ "$g" = "$leader" ] && g=$(( g % 3 + 1 ))
OMSD_LOG=$TMP/$f/omsd.log
pf=${NODE_PIDS[$f]}
log "leader node $leader; node $f's vote directory is full"
vdir=$TMP/$f/data/shard1/vote
nsenter -t "$pf" -m mount -t tmpfs -o size=64k tmpfs "$vdir"
nsenter -t "$pf" -m dd if=/dev/zero of="$vdir/fill" bs=4k 2>/dev/null || true
kill -STOP "${NODE_PIDS[$leader]}"
for _ in $(seq 50); do
	sleep 0.2
	kill -0 "$pf" 2>/dev/null || fail "node $f died when its vote could not be saved"
	v=$(e2e_cluster_stat "$f" shard.1.vote_save_failed)
	[ "$v" != missing ] && [ "$v" -gt 0 ] && break
done
kill -0 "$pf" 2>/dev/null || fail "node $f died when its vote could not be saved"
[ "$v" != missing ] && [ "$v" -gt 0 ] || fail "node $f: vote_save_failed $v"
sleep 1
kill -0 "$pf" 2>/dev/null || fail "node $f died while its vote was unsaved"
held=$(e2e_cluster_stat "$f" shard.1.raft_held)
[ "$held" -gt 0 ] || fail "node $f: raft_held $held while its vote was unsaved"
[ "$(e2e_cluster_stat "$g" shard.1.is_leader)" = 0 ] ||
	fail "node $g became leader with node $f silent and the leader stopped"
grep "saving the vote" "$OMSD_LOG" | sed 's/^/    /'
[ "$(e2e_cluster_stat "$f" shard.1.flog_on_persister)" = 1 ] ||
	fail "node $f: the vote is not the persister's to save"
votes0=$(e2e_cluster_stat "$f" shard.1.flog_votes)
log "node $f: vote_save_failed $v, raft_held $held, flog_votes $votes0; freeing the disk"
nsenter -t "$pf" -m umount "$vdir"
ok=
for _ in $(seq 75); do
	for i in $f $g; do
		[ "$(e2e_cluster_stat "$i" shard.1.is_leader)" = 1 ] && ok=$i
	done
	[ -n "$ok" ] && break
	sleep 0.2
done
[ -n "$ok" ] || fail "no leader among nodes $f and $g after the disk came back"
grep "vote saved" "$OMSD_LOG" | sed 's/^/    /'
votes1=$(e2e_cluster_stat "$f" shard.1.flog_votes)
[ "$votes1" -gt "$votes0" ] || fail "node $f: flog_votes $votes0 -> $votes1: no vote saved"
term=$(e2e_cluster_stat "$ok" shard.1.term)
log "node $ok leads shard 1 in term $term"
kill -CONT "${NODE_PIDS[$leader]}"
log "PASS"
