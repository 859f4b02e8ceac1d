#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A stand-in for systemd's notification socket (sd_notify(3)), for test_notify.sh.

  notify_listen.py SOCKET LOG

Binds a unix datagram socket at SOCKET and appends every datagram it receives to LOG as one
line: the monotonic time in milliseconds, a space, the datagram with its newlines written
as '|' (READY=1|STATUS=...). Runs until killed.
"""
import os
import socket
import sys
import time


def main():
    path, log = sys.argv[1], sys.argv[2]
    if os.path.exists(path):
        os.unlink(path)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(path)
    os.chmod(path, 0o777)  # a node run as another user sends here too
    with open(log, "a", buffering=1) as out:
        while True:
            data = s.recv(4096)
            text = data.decode("utf-8", "replace").rstrip("\n").replace("\n", "|")
            out.write("%d %s\n" % (time.monotonic_ns() // 1000000, text))


if __name__ == "__main__":
    main()
