#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Checks for test_dissector.sh: what tshark and omsd.lua show (PDML) against the references.

  compare.py fields PDML SHOW REF   omspcap capture: frames, per-frame type sequence and
                                    sender, per-type counts (omspcap show --verbose) and
                                    every field wire_ref dump prints; no expert item at all
  compare.py layout PDML REF        wire_ref all capture: one frame per type; type and length
                                    as wire_ref says; the leaf fields tile each datagram
                                    exactly and every integer shown equals its bytes; no
                                    malformed item (reserved warnings are expected there)
  compare.py truncate IN OUT        write OUT: damaged copies of IN's first multi-message
                                    datagram (cut inside a message, inside a message header,
                                    inside the frame header, and a length/count mismatch)
  compare.py malformed PDML N       each of the N frames carries omsd.malformed; no Lua error
"""

import struct
import sys
import xml.etree.ElementTree as ET

LEAF_CONTAINERS = {"omsd.tail", "omsd.entry.data"}  # byte items that hold parsed messages


def fail(msg):
    print("FAIL:", msg, file=sys.stderr)
    sys.exit(1)


def load_pdml(path):
    with open(path, encoding="utf-8", errors="replace") as fh:
        text = fh.read()
    if "Lua Error" in text or "_ws.lua.error" in text:  # (_ws.lua.fake is always there)
        i = max(text.find("Lua Error"), text.find("_ws.lua.error"))
        fail(f"{path}: a Lua error while dissecting: {text[i:i + 200]!r}")
    return ET.fromstring(text)


def packets(root):
    for pkt in root.iter("packet"):
        num = None
        for f in pkt.iter("field"):
            if f.get("name") == "num":
                num = int(f.get("show"))
                break
        yield num, pkt, [p for p in pkt.findall("proto") if p.get("name") == "omsd"]


def experts(proto):
    return [f for f in proto.iter("field")
            if (f.get("name") or "").startswith(("_ws.expert", "_ws.malformed", "omsd.malformed",
                                                  "omsd.reserved_nonzero", "omsd.version"))]


def type_name(msg):
    for f in msg.findall("field"):
        if f.get("name") == "omsd.msg.type":
            return f.get("showname").split(": ", 1)[1].rsplit(" (", 1)[0]
    return None


def msg_values(msg):
    """Direct members of a message by short name (header fields as length/shard/flags)."""
    vals = {}
    for f in msg.findall("field"):
        n = f.get("name") or ""
        if n.startswith("omsd.msg."):
            n = n[len("omsd.msg."):]
        elif n.startswith("omsd."):
            n = n[len("omsd."):]
        vals.setdefault(n, f.get("show"))
    return vals


def as_int(s):
    return int(s, 0) if s is not None else None


def top_msgs(proto):
    return [f for f in proto.findall("field") if f.get("name") == "omsd.msg"]


def cmd_fields(pdml, show_path, ref_path):
    root = load_pdml(pdml)
    frames = []  # (num, sender, [msg elements])
    for num, pkt, protos in packets(root):
        if len(protos) != 1:
            fail(f"frame {num}: {len(protos)} omsd trees")
        p = protos[0]
        ex = experts(p)
        if ex:
            fail(f"frame {num}: expert info on a valid capture: "
                 f"{[e.get('showname') for e in ex][:3]}")
        hdr = {f.get("name"): f.get("show") for f in p.iter("field")
               if (f.get("name") or "").startswith("omsd.frame.")}
        frames.append((num, int(hdr["omsd.frame.sender_id"]), top_msgs(p)))

    show = open(show_path, encoding="utf-8").read().splitlines()
    want_seq = {}
    want_counts = {}
    for ln in show:
        w = ln.split()
        if ln.startswith("frame ") and " sender " in ln:
            fr = int(w[1])
            want_seq.setdefault(fr, []).append((int(w[3].rstrip(":")), w[4]))
        elif w and w[0] == "type":
            want_counts[w[1]] = int(w[2])
        elif ln.startswith("show: "):
            kv = dict(x.split("=") for x in w[1:])
    if int(kv["frames"]) != len(frames):
        fail(f"omspcap show: {kv['frames']} frames, tshark dissected {len(frames)}")
    got_counts = {}
    for i, (num, sender, msgs) in enumerate(frames, 1):
        got = [(sender, type_name(m)) for m in msgs]
        if got != want_seq.get(i):
            fail(f"frame {num}: dissector {got}, omspcap show {want_seq.get(i)}")
        for _, t in got:
            got_counts[t] = got_counts.get(t, 0) + 1
    if got_counts != want_counts:
        fail(f"per-type counts: dissector {got_counts}, omspcap show {want_counts}")
    if sum(got_counts.values()) != int(kv["msgs"]):
        fail(f"messages: dissector {sum(got_counts.values())}, omspcap show {kv['msgs']}")

    by_frame = {num: msgs for num, _, msgs in frames}
    pos = {}
    checked_msgs = checked_fields = 0
    per_type_fields = {}
    for ln in open(ref_path, encoding="utf-8"):
        w = ln.split()
        if len(w) >= 2 and w[1] == "error":
            fail(f"wire_ref: frame {w[0]} does not decode: {ln.strip()}")
        fr, tname = int(w[0]), w[1]
        k = pos.get(fr, 0)
        pos[fr] = k + 1
        msgs = by_frame.get(fr, [])
        if k >= len(msgs):
            fail(f"frame {fr}: wire_ref has message {k + 1}, the dissector {len(msgs)}")
        m = msgs[k]
        if type_name(m) != tname:
            fail(f"frame {fr} message {k + 1}: dissector {type_name(m)}, wire_ref {tname}")
        vals = msg_values(m)
        for kv_ in w[2:]:
            name, want = kv_.split("=")
            got = vals.get(name)
            if got is None or as_int(got) != int(want):
                fail(f"frame {fr} message {k + 1} {tname}: {name} dissector {got}, "
                     f"wire_ref {want}")
            checked_fields += 1
            per_type_fields.setdefault(tname, set()).add(name)
        checked_msgs += 1
    if checked_msgs != sum(got_counts.values()):
        fail(f"wire_ref printed {checked_msgs} messages, the dissector shows "
             f"{sum(got_counts.values())}")
    print(f"fields: {len(frames)} frames, {checked_msgs} messages, {checked_fields} field "
          f"values equal; types {sorted(got_counts.items())}; sequence and sender of every "
          f"frame as omspcap show; 0 expert items")
    for t, names in sorted(per_type_fields.items()):
        print(f"  {t}: {' '.join(sorted(names))}")


def leaves(el, out):
    for f in el.findall("field"):
        n = f.get("name") or ""
        if n.startswith("_ws."):
            continue
        if f.get("value") and n not in LEAF_CONTAINERS:
            out.append(f)  # its own children (shard_seq's parts) repeat its bytes
        else:
            leaves(f, out)
    return out


def cmd_layout(pdml, ref_path):
    root = load_pdml(pdml)
    ref = [ln.split() for ln in open(ref_path, encoding="utf-8")]
    got = list(packets(root))
    if len(got) != len(ref):
        fail(f"{len(got)} frames dissected, wire_ref wrote {len(ref)}")
    nleaves = nints = 0
    for (num, _, protos), (rnum, rtype, rlen) in zip(got, ref):
        if len(protos) != 1:
            fail(f"frame {num}: {len(protos)} omsd trees")
        p = protos[0]
        # The pattern fills reserved fields, so reserved warnings are expected here.
        bad = [e.get("showname") for e in experts(p)
               if e.get("name") in ("omsd.malformed", "_ws.malformed", "omsd.version_mismatch")]
        if bad:
            fail(f"frame {num} ({rtype}): expert info {bad[:3]}")
        msgs = top_msgs(p)
        if len(msgs) != 1 or type_name(msgs[0]) != rtype or \
                as_int(msg_values(msgs[0])["length"]) != int(rlen):
            fail(f"frame {num}: dissector {[type_name(m) for m in msgs]}, wire_ref {rtype} "
                 f"length {rlen}")
        lv = sorted(leaves(p, []), key=lambda f: int(f.get("pos")))
        at = int(p.get("pos"))
        end = at + int(p.get("size"))
        for f in lv:
            fpos, fsize = int(f.get("pos")), int(f.get("size"))
            if fpos != at:
                fail(f"frame {num} ({rtype}): {f.get('name')} at {fpos}, expected {at} "
                     f"(a gap or an overlap)")
            at += fsize
            raw = bytes.fromhex(f.get("value"))
            if len(raw) != fsize:
                fail(f"frame {num}: {f.get('name')} value is {len(raw)} bytes, size {fsize}")
            show = f.get("show") or ""
            if ":" not in show and show and fsize <= 8:
                u = int.from_bytes(raw, "little")
                s = int.from_bytes(raw, "little", signed=True)
                if as_int(show) not in (u, s):
                    fail(f"frame {num} ({rtype}): {f.get('name')} shows {show}, bytes "
                         f"{raw.hex()}")
                nints += 1
            nleaves += 1
        if at != end:
            fail(f"frame {num} ({rtype}): leaves end at {at}, datagram at {end}")
    print(f"layout: {len(got)} frames (one per type), {nleaves} leaf fields tile every "
          f"datagram, {nints} integers equal their little-endian bytes")


def read_pcap(path):
    data = open(path, "rb").read()
    hdr, recs, off = data[:24], [], 24
    while off + 16 <= len(data):
        ts_s, ts_u, incl, orig = struct.unpack_from("<IIII", data, off)
        recs.append((ts_s, ts_u, data[off + 16:off + 16 + incl]))
        off += 16 + incl
    return hdr, recs


def with_payload(pkt, payload):
    """The Ethernet/IPv4/UDP packet pkt carrying payload instead (lengths fixed, UDP checksum
    0 = none, IPv4 checksum recomputed)."""
    ihl = (pkt[14] & 0x0f) * 4
    head = bytearray(pkt[:14 + ihl + 8])
    ip = 14
    struct.pack_into(">H", head, ip + 2, ihl + 8 + len(payload))
    struct.pack_into(">H", head, ip + 10, 0)
    s = sum(struct.unpack_from(">%dH" % (ihl // 2), head, ip))
    while s >> 16:
        s = (s & 0xffff) + (s >> 16)
    struct.pack_into(">H", head, ip + 10, ~s & 0xffff)
    struct.pack_into(">HH", head, ip + ihl + 4, 8 + len(payload), 0)
    return bytes(head) + payload


def cmd_truncate(src, dst):
    hdr, recs = read_pcap(src)
    for ts_s, ts_u, pkt in recs:
        ihl = (pkt[14] & 0x0f) * 4
        payload = pkt[14 + ihl + 8:]
        if struct.unpack_from("<H", payload, 6)[0] >= 2:
            break
    else:
        fail(f"{src}: no datagram with two messages")
    first_len = struct.unpack_from("<H", payload, 16 + 2)[0]
    variants = [
        payload[:len(payload) - 20],             # the last message cut short
        payload[:16 + first_len + 4],            # cut inside the second message's header
        payload[:10],                            # shorter than the frame header
        payload[:16] + payload[16 + first_len:],  # count and length disagree with the body
    ]
    with open(dst, "wb") as out:
        out.write(hdr)
        for i, v in enumerate(variants):
            p = with_payload(pkt, v)
            out.write(struct.pack("<IIII", ts_s, ts_u + i, len(p), len(p)) + p)
    print(f"truncate: {len(variants)} damaged datagrams from a {len(payload)}-byte frame")


def cmd_malformed(pdml, n):
    root = load_pdml(pdml)
    got = list(packets(root))
    if len(got) != n:
        fail(f"{len(got)} frames, expected {n}")
    for num, _, protos in got:
        if len(protos) != 1:
            fail(f"frame {num}: {len(protos)} omsd trees")
        names = [f.get("name") for f in protos[0].iter("field")]
        if "omsd.malformed" not in names:
            fail(f"frame {num}: damaged datagram not flagged malformed")
        texts = [f.get("showname") for f in protos[0].iter("field")
                 if f.get("name") == "omsd.malformed"]
        print(f"malformed: frame {num}: {texts[0]}")


def main():
    a = sys.argv[1:]
    if a[:1] == ["fields"] and len(a) == 4:
        cmd_fields(*a[1:])
    elif a[:1] == ["layout"] and len(a) == 3:
        cmd_layout(*a[1:])
    elif a[:1] == ["truncate"] and len(a) == 3:
        cmd_truncate(*a[1:])
    elif a[:1] == ["malformed"] and len(a) == 3:
        cmd_malformed(a[1], int(a[2]))
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
