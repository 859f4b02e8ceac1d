# SPDX-License-Identifier: Apache-2.0
"""Byte vectors from the C code for test_wire.py: captures written by omspcap and wire_ref
(the C encoder, signer and MAC), what omspcap show and wire_ref dump print about them (the
C decoder), and common/wire.h itself as tools/dissector/gen-dissector.py reads it (the
layout it checks against the header's static_asserts). Standard library only."""

import importlib.util
import os
import struct
import subprocess

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
WIRE_H = os.path.join(ROOT, "common", "wire.h")
GEN_DISSECTOR = os.path.join(ROOT, "tools", "dissector", "gen-dissector.py")

ETH_HDR, IP_HDR, UDP_HDR = 14, 20, 8


def tool(env_name):
    """The path of a C tool from the environment (meson passes them), or None."""
    path = os.environ.get(env_name)
    return path if path and os.access(path, os.X_OK) else None


def run(*argv, check=True):
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if check and p.returncode != 0:
        raise AssertionError("%s exited %d: %s" % (" ".join(argv), p.returncode, p.stderr))
    return p


def pcap_payloads(path):
    """The UDP payload of every Ethernet/IPv4/UDP packet in a classic pcap file."""
    with open(path, "rb") as f:
        data = f.read()
    magic, = struct.unpack_from("<I", data)
    assert magic == 0xA1B2C3D4, "a little-endian microsecond pcap"
    link, = struct.unpack_from("<I", data, 20)
    assert link == 1, "DLT_EN10MB"
    pos = 24
    out = []
    while pos < len(data):
        _, _, caplen, _ = struct.unpack_from("<IIII", data, pos)
        pos += 16
        pkt = data[pos:pos + caplen]
        pos += caplen
        assert pkt[12:14] == b"\x08\x00" and pkt[ETH_HDR] >> 4 == 4 and pkt[ETH_HDR + 9] == 17
        ihl = (pkt[ETH_HDR] & 0x0F) * 4
        udp = ETH_HDR + ihl
        udp_len, = struct.unpack_from("!H", pkt, udp + 4)
        out.append(pkt[udp + UDP_HDR:udp + udp_len])
    return out


def pcap_write(path, payloads):
    """A pcap of UDP datagrams 10.77.0.1:40000 -> 10.77.0.2:7400 (checksums left 0, which
    omspcap show does not look at)."""
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        for i, pl in enumerate(payloads):
            udp = struct.pack("!HHHH", 40000, 7400, UDP_HDR + len(pl), 0) + pl
            ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, IP_HDR + len(udp), i & 0xFFFF, 0x4000,
                             64, 17, 0, bytes((10, 77, 0, 1)), bytes((10, 77, 0, 2)))
            eth = bytes.fromhex("027063617000020000000001") + b"\x08\x00"
            pkt = eth + ip + udp
            f.write(struct.pack("<IIII", 1767225600, i, len(pkt), len(pkt)) + pkt)


def show_verbose(lines):
    """omspcap show --verbose: [(frame, sender, TYPE)] and {frame: error text}, and the
    figures of its last line."""
    msgs, errors, last = [], {}, {}
    for ln in lines.splitlines():
        if ln.startswith("frame "):
            head, _, what = ln.partition(": ")
            words = head.split()
            if len(words) == 4 and words[2] == "sender":
                msgs.append((int(words[1]), int(words[3]), what))
            else:
                errors[int(words[1])] = what
        elif ln.startswith("show: "):
            last = dict(kv.split("=") for kv in ln[len("show: "):].split())
            last = {k: int(v) for k, v in last.items()}
    return msgs, errors, last


def wire_ref_dump(lines):
    """wire_ref dump: [(frame, TYPE, {field: int})]."""
    out = []
    for ln in lines.splitlines():
        words = ln.split()
        fields = dict(w.split("=", 1) for w in words[2:])
        out.append((int(words[0]), words[1], {k: int(v) for k, v in fields.items()}))
    return out


def wire_h_schema():
    """common/wire.h as gen-dissector.py parses it (its layouts checked against every
    static_assert in the header, or it raises)."""
    spec = importlib.util.spec_from_file_location("gen_dissector", GEN_DISSECTOR)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with open(WIRE_H) as f:
        return mod.parse_schema(f.read())
