#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Packet helpers for the e2e tests, run inside the client namespace.

  e2e_net.py csum-off IFACE      turn tx checksum offload off (SIOCETHTOOL, no ethtool here)
  e2e_net.py echo ...            one frame from a given source until it is echoed
  e2e_net.py storm ...           malformed-frame storm with valid traffic interleaved; checks
                                 the node's per-cause counters (see storm())
"""
import argparse
import ctypes
import fcntl
import os
import random
import signal
import socket
import struct
import subprocess
import sys
import time

SIOCETHTOOL = 0x8946
ETHTOOL_STXCSUM = 0x17


def csum_off(iface):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    ev = ctypes.create_string_buffer(struct.pack("II", ETHTOOL_STXCSUM, 0))
    ifr = struct.pack("16sP", iface.encode(), ctypes.addressof(ev)).ljust(40, b"\0")
    fcntl.ioctl(s.fileno(), SIOCETHTOOL, ifr)
    s.close()


def inet_csum(data):
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def mac_bytes(s):
    return bytes(int(x, 16) for x in s.split(":"))


def ip_udp(src_mac, dst_mac, src_ip, dst_ip, sport, dport, payload,
           bad_udp_csum=False, bad_ip_csum=False, proto=17):
    """An Ethernet/IPv4/UDP packet with correct checksums unless told otherwise."""
    src, dst = socket.inet_aton(src_ip), socket.inet_aton(dst_ip)
    l4_len = 8 + len(payload)
    ip = bytearray(struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + l4_len, 0x1234, 0x4000, 64,
                               proto, 0, src, dst))
    c = inet_csum(bytes(ip))
    if bad_ip_csum:
        c ^= 0x5A5A
    ip[10:12] = struct.pack("!H", c)
    udp = bytearray(struct.pack("!HHHH", sport, dport, l4_len, 0) + payload)
    c = inet_csum(src + dst + struct.pack("!BBH", 0, 17, l4_len) + bytes(udp)) or 0xFFFF
    if bad_udp_csum:
        c = (c ^ 0x00F0) or 1
    udp[6:8] = struct.pack("!H", c)
    return dst_mac + src_mac + b"\x08\x00" + bytes(ip) + bytes(udp)


def frame(tool, kind, **kw):
    args = [tool, kind]
    for k, v in kw.items():
        args += ["--" + k, str(v)]
    return bytes.fromhex(subprocess.check_output(args, text=True).strip())


def read_stats(path, pid):
    """SIGUSR1 the node and parse the fresh dump."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    os.kill(pid, signal.SIGUSR1)
    for _ in range(100):
        if os.path.exists(path):
            break
        time.sleep(0.05)
    else:
        raise SystemExit("FAIL: no stats dump after SIGUSR1")
    stats = {}
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 2 and not line.startswith("#"):
                try:
                    stats[parts[0]] = int(parts[1])
                except ValueError:
                    pass
    return stats


def storm(a):
    """Send `rounds` rounds; each round sends, in a seeded random order, every malformed
    class once plus three valid frames (an order and a batch of five orders to the gateway
    class, a Raft message to shard 2). Valid frames are echoed by the echo shards; every echo must come back
    intact, and the node's counters must move by exactly what was sent, per cause."""
    rng = random.Random(a.seed)
    key = a.key
    other_key = "ff" * 16
    node_mac, client_mac = mac_bytes(a.node_mac), mac_bytes(a.client_mac)

    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    # Root may exceed rmem_max: echoes can pile up while this process is busy sending.
    udp.setsockopt(socket.SOL_SOCKET, 33, 8 << 20)  # SO_RCVBUFFORCE
    udp.bind((a.client_ip, 9000))
    udp.setblocking(False)
    raw = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    raw.bind((a.iface, 0))

    def send_udp(payload, port=a.port):
        udp.sendto(payload, (a.node_ip, port))

    def send_raw(payload, **kw):
        raw.send(ip_udp(client_mac, node_mac, a.client_ip, a.node_ip, 9000, a.port,
                        payload, **kw))

    echoes = []

    def drain(deadline):
        while time.time() < deadline:
            try:
                echoes.append(udp.recv(65535))
            except BlockingIOError:
                time.sleep(0.001)
                return

    # Warm-up: resolves ARP in the client kernel and checks the path before the baseline.
    warm = frame(a.tool, "order", key=key, seq=1)
    send_udp(warm)
    t = time.time() + 5
    while not echoes and time.time() < t:
        drain(t)
    if echoes != [warm]:
        raise SystemExit("FAIL: warm-up frame not echoed")
    echoes.clear()
    base = read_stats(a.stats, a.pid)

    wrong_mac = frame(a.tool, "order", key=other_key, seq=2)
    no_mac = frame(a.tool, "order", seq=3)
    bad_type = frame(a.tool, "badtype", key=key, seq=4)
    raft2 = frame(a.tool, "raft", key=key, shard=2)
    raft9 = frame(a.tool, "raft", key=key, shard=9)
    mixed = frame(a.tool, "mixed", key=key, seq=5)
    batch = frame(a.tool, "orders", key=key, seq=5)  # five NEW_ORDERs in one frame
    sent_valid = []
    orders = [frame(a.tool, "order", key=key, seq=100 + r) for r in range(a.rounds)]

    for r in range(a.rounds):
        good = orders[r]
        bad_magic = b"X" + good[1:]
        bad_version = good[:4] + b"\x09" + good[5:]
        garbage = bytes([rng.randrange(256) for _ in range(rng.randrange(17, 200))])
        if garbage[:4] == b"OMSD":
            garbage = b"?" + garbage[1:]
        sends = [
            ("valid_order", lambda: send_udp(good)),
            ("valid_raft2", lambda: send_udp(raft2)),
            ("valid_batch", lambda: send_udp(batch)),
            ("bad_magic", lambda: send_udp(bad_magic)),
            ("garbage", lambda: send_udp(garbage)),
            ("truncated", lambda: send_udp(good[:10])),
            ("bad_length", lambda: send_udp(good[:-8])),
            ("bad_version", lambda: send_udp(bad_version)),
            ("wrong_mac", lambda: send_udp(wrong_mac)),
            ("no_mac", lambda: send_udp(no_mac)),
            ("bad_type", lambda: send_udp(bad_type)),
            ("bad_udp_csum", lambda: send_raw(good, bad_udp_csum=True)),
            ("bad_ip_csum", lambda: send_raw(good, bad_ip_csum=True)),
            ("ip_proto", lambda: send_raw(good, proto=253)),
            ("udp_port", lambda: send_udp(good, port=a.port + 1)),
            ("no_route", lambda: send_udp(raft9)),
            ("mixed", lambda: send_udp(mixed)),
        ]
        rng.shuffle(sends)
        for name, fn in sends:
            fn()
            if name == "valid_order":
                sent_valid.append(good)
            elif name == "valid_raft2":
                sent_valid.append(raft2)
            elif name == "valid_batch":
                sent_valid.append(batch)
        # Pace by the echoes: at most one round (17 frames) is in flight. Sent unpaced, the
        # 3,400 frames could outrun net_af_packet's receive ring while the node's io lcore
        # was descheduled on a loaded host, and the kernel dropped frames before the node saw
        # them (1 run in 5 here with four busy loops beside it) — a host limit, not what this
        # test measures.
        t = time.time() + 2
        while len(echoes) < len(sent_valid) and time.time() < t:
            drain(t)

    deadline = time.time() + 10
    while len(echoes) < len(sent_valid) and time.time() < deadline:
        drain(deadline)
    stats = read_stats(a.stats, a.pid)
    d = {k: stats.get(k, 0) - base.get(k, 0) for k in stats}
    R = a.rounds

    failures = []
    if sorted(echoes) != sorted(sent_valid):
        with open("/proc/net/snmp") as f:
            print("client kernel:", "".join(l for l in f if l.startswith("Udp:")))
        failures.append("echoes: got %d, want %d (valid frames did not all flow)"
                        % (len(echoes), len(sent_valid)))
    want = {
        "dp.frame_err.bad_magic": 2 * R,     # bad magic + garbage
        "dp.frame_err.truncated": R,
        "dp.frame_err.bad_length": R,
        "dp.frame_err.bad_version": R,
        "dp.frame_err.bad_mac": 2 * R,       # wrong key + no MAC at all
        "dp.frame_err.bad_type": R,
        "dp.frame_bad": 8 * R,
        "dp.udp_bad_csum": R,
        "dp.ip_bad_csum": R,
        "dp.ip_proto": R,
        "dp.udp_port": R,
        "dp.frame_no_route": R,
        "dp.frame_mixed": R,
        "dp.frame_ok": 5 * R,                # order, raft2, batch, no-route, mixed decode
        "dp.frame_msgs": 10 * R,             # 1 + 1 + 5 + 1 + 2
        "dp.frame_routed": 3 * R,
        "dp.frame_ring_full": 0,
        "shard.1.frames": 2 * R,
        "shard.1.msgs": 6 * R,
        "shard.1.echoed": 2 * R,
        "shard.2.frames": R,
        "shard.2.echoed": R,
        "dp.tx_arp_miss": 0,
        "dp.tx_port_full": 0,
    }
    for k, v in want.items():
        if d.get(k) != v:
            failures.append("%s moved by %s, want %d" % (k, d.get(k), v))
    for k in sorted(want):
        print("  %-26s %6d" % (k, d.get(k, 0)))
    print("echoes %d/%d" % (len(echoes), len(sent_valid)))
    if failures:
        for f in failures:
            print("FAIL:", f)
        sys.exit(1)


def echo(a):
    """Send one valid frame from --src every 300 ms until its echo comes back; print the
    number of attempts (the first may be dropped while the node resolves its next hop)."""
    kw = {"seq": 42, "shard": a.shard}
    if a.key:
        kw["key"] = a.key
    f = frame(a.tool, a.kind, **kw)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((a.src, 9001))
    s.settimeout(0.3)
    if a.expect_none:
        # The node must drop this frame: send it once and make sure nothing comes back.
        s.sendto(f, (a.dst, a.port))
        try:
            s.recv(65535)
        except socket.timeout:
            print(0)
            return
        raise SystemExit("FAIL: a frame that must be refused was echoed")
    for attempt in range(1, a.tries + 1):
        s.sendto(f, (a.dst, a.port))
        try:
            if s.recv(65535) == f:
                print(attempt)
                return
        except socket.timeout:
            pass
    raise SystemExit("FAIL: no echo after %d attempts" % a.tries)


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("csum-off")
    c.add_argument("iface")
    s = sub.add_parser("storm")
    for opt in ("iface", "node-ip", "client-ip", "node-mac", "client-mac", "tool", "stats",
                "key"):
        s.add_argument("--" + opt, required=True)
    s.add_argument("--port", type=int, default=7400)
    s.add_argument("--pid", type=int, required=True)
    s.add_argument("--rounds", type=int, default=200)
    s.add_argument("--seed", type=int, default=7)
    e = sub.add_parser("echo")
    e.add_argument("--src", required=True)
    e.add_argument("--dst", required=True)
    e.add_argument("--tool", required=True)
    e.add_argument("--port", type=int, default=7400)
    e.add_argument("--tries", type=int, default=10)
    e.add_argument("--kind", default="order")
    e.add_argument("--shard", type=int, default=1)
    e.add_argument("--key", default="")
    e.add_argument("--expect-none", action="store_true")
    a = p.parse_args()
    if a.cmd == "csum-off":
        csum_off(a.iface)
    elif a.cmd == "echo":
        echo(a)
    else:
        storm(a)


if __name__ == "__main__":
    main()
