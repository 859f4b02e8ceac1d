#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The chaos harness's malformed-datagram nemesis (tests/chaos/run --scenario garbage).

For --seconds, sends a seeded mix at a node's UDP port: random bytes of random length (0 to
1,500), frames with a good header whose lengths lie (msg_count, frame length, message
length), frames cut short, and well-formed NEW_ORDER frames with one to eight bits flipped.
The users in these frames are far outside any run's users (bit flips cannot bring them
near), so a frame that a flip leaves valid touches nobody the checker counts. The node must
count and drop what is malformed and keep serving; the checker then finds the run intact.
"""
import argparse
import os
import random
import socket
import struct
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))
import e2e_trade as wire  # noqa: E402

FAR_USER = 0x7000_0000_0000_0000


def good_frame(rng):
    user = FAR_USER + rng.randrange(1 << 20)
    return wire.frame([wire.new_order(user, rng.randrange(1, 1 << 40), 1, wire.BUY,
                                      100, 1)])


def flip(rng, data, bits):
    b = bytearray(data)
    for _ in range(bits):
        i = rng.randrange(len(b) * 8)
        b[i // 8] ^= 1 << (i % 8)
    return bytes(b)


def one(rng):
    kind = rng.randrange(5)
    if kind == 0:
        return os.urandom(rng.randrange(0, 1501)), "random"
    if kind == 1:
        f = bytearray(good_frame(rng))
        struct.pack_into("<H", f, 6, rng.choice([0, 2, 255, 256, 65535]))  # msg_count
        return bytes(f), "bad_count"
    if kind == 2:
        f = bytearray(good_frame(rng))
        struct.pack_into("<H", f, 12, rng.choice([0, 15, 17, 9000, 0xFFFF]))  # length
        return bytes(f), "bad_length"
    if kind == 3:
        f = good_frame(rng)
        return f[:rng.randrange(0, len(f))], "truncated"
    return flip(rng, good_frame(rng), rng.randrange(1, 9)), "bitflip"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--host", required=True)
    p.add_argument("--port", type=int, default=7400)
    p.add_argument("--seconds", type=float, default=10)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--rate", type=int, default=2000, help="datagrams per second")
    a = p.parse_args()
    rng = random.Random(a.seed)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    counts = {}
    end = time.monotonic() + a.seconds
    gap = 1.0 / a.rate
    while time.monotonic() < end:
        data, kind = one(rng)
        try:
            s.sendto(data, (a.host, a.port))
        except OSError:
            pass
        counts[kind] = counts.get(kind, 0) + 1
        time.sleep(gap)
    print("garbage: " + " ".join("%s=%d" % kv for kv in sorted(counts.items())))


if __name__ == "__main__":
    main()
