#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Storage damage for the chaos scenario `corrupt-restart` (docs/testing.md "Chaos").

Run against a stopped node's shard directory (<data_dir>/shardN), one kind of damage each:

  damage.py synced-flip DIR   flip one data byte of a record well before the end of the
                              file log (50 entries or more back: a record the log's
                              checkpoint names as synced), so the node must refuse to start
  damage.py torn-tail DIR     append what a crash in the middle of the next batch's write
                              leaves: the header of the next record (a CRC that does not
                              match) and 100 bytes of its data; the node must cut and report it
  damage.py snapshot-flip DIR flip one byte in the middle of the newest snapshot file; the node
                              must skip it (counted, kept as .corrupt) or refuse, naming it

Prints one line saying what it changed (file, offset, entry), or exits 1 when there is
nothing of that kind to damage. The record layout is docs/persist.md "Format": a 32-byte
segment header, then records of a 40-byte header <crc u32, magic u32, index u64, term u64,
time u64, kind u32, len u32> and len data bytes padded to 8.
"""
import glob
import os
import struct
import sys

REC_MAGIC = 0x45545350
REC_HDR = struct.Struct("<IIQQQII")


def records(path):
    """(offset, index, data length, end offset) of every record of one segment."""
    with open(path, "rb") as f:
        d = f.read()
    out = []
    off = 32
    while off + REC_HDR.size <= len(d):
        _crc, magic, index, _term, _t, _kind, dlen = REC_HDR.unpack_from(d, off)
        if magic != REC_MAGIC or index == 0:
            break
        end = off + REC_HDR.size + ((dlen + 7) & ~7)
        if end > len(d):
            break
        out.append((off, index, dlen, end))
        off = end
    return out


def segments(shard_dir):
    return sorted(glob.glob(os.path.join(shard_dir, "log", "*.log")))


def flip(path, at):
    with open(path, "r+b") as f:
        f.seek(at)
        b = f.read(1)
        f.seek(at)
        f.write(bytes([b[0] ^ 0x20]))
        f.flush()
        os.fsync(f.fileno())


def synced_flip(shard_dir):
    segs = [(s, records(s)) for s in segments(shard_dir)]
    total = [r for _, recs in segs for r in recs]
    if len(total) < 60:
        return None
    last_index = total[-1][1]
    # The newest record at least 50 entries back that carries data: batches are a few
    # entries, so it was synced long before the kill (its checkpoint names a later index).
    for seg, recs in reversed(segs):
        for off, index, dlen, _end in reversed(recs):
            if index + 50 <= last_index and dlen > 0:
                at = off + REC_HDR.size + dlen - 1
                flip(seg, at)
                return "synced-flip: %s offset %d: entry %d (of %d): byte %d flipped" % (
                    seg, off, index, last_index, at)
    return None


def torn_tail(shard_dir):
    segs = segments(shard_dir)
    for seg in reversed(segs):
        recs = records(seg)
        if not recs:
            continue
        _off, index, _dlen, end = recs[-1]
        hdr = REC_HDR.pack(0x12345678, REC_MAGIC, index + 1, 1, 0, 1, 400)
        with open(seg, "r+b") as f:
            f.seek(end)
            f.write(hdr + b"\xa5" * 100)
            f.flush()
            os.fsync(f.fileno())
        return "torn-tail: %s offset %d: a partial record of entry %d (140 bytes)" % (
            seg, end, index + 1)
    return None


def snapshot_flip(shard_dir):
    # snap-<index, 20 digits>-<term, 20 digits>.snap: the newest has the highest index.
    snaps = [p for p in glob.glob(os.path.join(shard_dir, "snap", "snap-*-*.snap"))
             if os.path.getsize(p) > 64]
    if not snaps:
        return None
    newest = max(snaps)
    at = os.path.getsize(newest) // 2
    flip(newest, at)
    return "snapshot-flip: %s: byte %d of %d flipped" % (newest, at, os.path.getsize(newest))


def main():
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        print("usage: damage.py synced-flip|torn-tail|snapshot-flip SHARD_DIR", file=sys.stderr)
        return 2
    kind, shard_dir = sys.argv[1], sys.argv[2]
    fn = {"synced-flip": synced_flip, "torn-tail": torn_tail,
          "snapshot-flip": snapshot_flip}.get(kind)
    if fn is None:
        print("damage.py: unknown kind %s" % kind, file=sys.stderr)
        return 2
    what = fn(shard_dir)
    if what is None:
        print("damage.py: %s: nothing to damage in %s" % (kind, shard_dir), file=sys.stderr)
        return 1
    print(what)
    return 0


if __name__ == "__main__":
    sys.exit(main())
