# SPDX-License-Identifier: Apache-2.0
"""Goal: omsclient.wire and omsclient.auth speak exactly the C code's wire protocol.
Method: every expectation comes from the C side, never from the Python code under test:
  - the SipHash-2-4-128 and LOGON/session-key vectors pinned in the C unit tests
    (tests/unit/common/test_wire.c, tests/unit/auth/test_auth.c);
  - common/wire.h parsed by tools/dissector/gen-dissector.py (whose layouts must agree with
    every static_assert in the header): type numbers, sizes, every field's name, offset and
    width, the reason, exec, side, tif and stp enums, the constants;
  - captures the C code wrote: `wire_ref all` (one frame per message type, C sizeof),
    `omspcap gen` with a shared MAC key (fields printed by `wire_ref dump`, types by
    `omspcap show --verbose`) and with an API key (a LOGON signed by auth_logon_sign, session
    frames MAC'd under auth_session_key): each frame decodes, its MAC verifies with the Python
    SipHash, and re-encoding the decoded messages gives the same bytes, MAC included;
  - damaged frames judged by the C decoder (`omspcap show --verbose` names the cause), and
    key files judged by the C key-file reader (omspcap gen --key-file).
The tests that need the C tools (OMSPCAP, WIRE_REF in the environment; meson sets them) are
skipped without them.
"""

import os
import struct

import pytest

import cvectors
from omsclient import auth, wire

OMSPCAP = cvectors.tool("OMSPCAP")
WIRE_REF = cvectors.tool("WIRE_REF")
need_omspcap = pytest.mark.skipif(OMSPCAP is None, reason="OMSPCAP (omspcap binary) not set")
need_wire_ref = pytest.mark.skipif(WIRE_REF is None, reason="WIRE_REF (wire_ref binary) not set")

KEY_HEX = "000102030405060708090a0b0c0d0e0f"
SECRET_HEX = "0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20"


# ------------------------------------------------------------------------------------------
# Vectors pinned in the C unit tests.
# ------------------------------------------------------------------------------------------

def test_siphash_reference_vectors():
    """tests/unit/common/test_wire.c siphash_reference_vectors: key 00..0f, message 00..n-1."""
    k = wire.Key.from_hex(KEY_HEX)
    assert (k.k0, k.k1) == (0x0706050403020100, 0x0F0E0D0C0B0A0908)
    data = bytes(range(64))
    assert wire.siphash128(k.k0, k.k1, data[:0]).hex() == "a3817f04ba25a8e66df67214c7550293"
    assert wire.siphash128(k.k0, k.k1, data[:3]).hex() == "9c70b60c5267a94e5f33b6b02985ed51"
    assert wire.siphash128(k.k0, k.k1, data[:63]).hex() == "5150d1772f50834a503e069a973fbd7c"


def test_logon_signature_and_session_key_vectors():
    """tests/unit/auth/test_auth.c signature_and_session_key_vectors: key 1001 (secret
    01..20), session 77, nonce 0x0123456789abcdef, ts 1700000000 s, heartbeat 1000 ms."""
    secret = bytes.fromhex(SECRET_HEX)
    m = wire.Logon(key_id=1001, ts_ns=1700000000 * 10**9, nonce=0x0123456789ABCDEF,
                   session_id=77, heartbeat_ms=1000)
    assert auth.logon_sign(secret, m).hex() == (
        "56a1f444741cf138ff84772ca0da567594bb47c47c0b2a5e5a5f2c36365edfc3")
    assert auth.logon_verify(secret, m)
    assert auth.session_key(secret, m) == (0x6EB421D39B6078BD, 0xED760F0E55DE5D13)
    # Every signed field is covered (test_auth.c signature_covers_every_field).
    for field in ("key_id", "ts_ns", "nonce", "session_id", "heartbeat_ms"):
        x = wire.Logon.decode(m.encode())
        setattr(x, field, getattr(x, field) ^ 1)
        assert not auth.logon_verify(secret, x), field


# ------------------------------------------------------------------------------------------
# common/wire.h, as gen-dissector.py reads it.
# ------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def schema():
    return cvectors.wire_h_schema()


def test_constants_match_wire_h(schema):
    c = schema.consts
    assert wire.MAGIC == c["WIRE_MAGIC"]
    assert wire.VERSION_MAJOR == c["WIRE_VERSION_MAJOR"]
    assert wire.VERSION_MINOR == c["WIRE_VERSION_MINOR_RELEASE"]
    assert wire.MINOR_WINDOW == c["WIRE_MINOR_WINDOW"]
    assert wire.MSG_EXT_MAX == c["WIRE_MSG_EXT_MAX"]
    assert wire.FRAME_F_MAC == c["WIRE_FRAME_F_MAC"]
    assert wire.FRAME_F_SESSION == c["WIRE_FRAME_F_SESSION"]
    assert wire.MAC_SIZE == c["WIRE_MAC_SIZE"]
    assert wire.FRAME_MAX == c["WIRE_FRAME_MAX"]
    assert wire.FRAME_MSGS_MAX == c["WIRE_FRAME_MSGS_MAX"]
    assert wire.TRANSFER_F_ROUTE == c["WIRE_TRANSFER_F_ROUTE"]
    assert wire.SESSION_REJECT_F_WARN == c["WIRE_SESSION_REJECT_F_WARN"]
    assert wire.REPORT_F_DONE == c["WIRE_REPORT_F_DONE"]
    assert wire.REPLAY_MAX == c["WIRE_REPLAY_MAX"]
    assert wire.LOGON_SIG_SIZE == c["WIRE_LOGON_SIG_SIZE"]
    assert wire.FRAME_HDR.size == schema.structs["wire_frame_hdr"].size
    # FRAME_HDR's fields in wire.h's order, at its offsets and widths.
    fh = [(f.name, f.offset, f.size) for f in schema.structs["wire_frame_hdr"].fields]
    assert fh == [("magic", 0, 4), ("version_major", 4, 1), ("flags", 5, 1),
                  ("msg_count", 6, 2), ("sender_id", 8, 4), ("length", 12, 2),
                  ("version_minor", 14, 1), ("reserved", 15, 1)]
    assert wire.FRAME_HDR.format.lstrip("<") == "".join(
        {1: "B", 2: "H", 4: "I"}[size] for _, _, size in fh)
    assert wire.MSG_HDR.size == schema.structs["wire_msg_hdr"].size


def test_type_table_matches_wire_h(schema):
    want = {value: (name, schema.structs[st].size, tail)
            for name, value, st, tail in schema.types}
    assert wire.TYPES == want


def test_enums_match_wire_h(schema):
    e = schema.enums
    assert wire.REASONS == dict(e["wire_reason"])
    assert max(wire.REASONS) + 1 == wire.REASON_MAX
    assert {v: n.upper() for v, n in wire.EXECS.items()} == dict(e["wire_exec"])
    assert {v: n.upper() for v, n in wire.CAUSES.items()} == dict(e["wire_cause"])
    assert {v: n.upper() for v, n in wire.SIDES.items()} == dict(e["wire_side"])
    assert {v: n.upper() for v, n in wire.ORD_TYPES.items()} == dict(e["wire_ord_type"])
    assert {v: n.upper() for v, n in wire.TIFS.items()} == dict(e["wire_tif"])
    assert {v: n.upper() for v, n in wire.STPS.items()} == dict(e["wire_stp"])


def _c_fields(schema, st):
    """(name, offset, size) of a message struct's members after its header, wire_oid kept
    whole."""
    out = []
    for f in schema.structs[st].fields[1:]:
        out.append((f.name, f.offset, f.size))
    return out


def _py_fields(cls):
    out = []
    off = wire.MSG_HDR.size
    for name, code in cls.FIELDS:
        size = 16 if code == "oid" else struct.calcsize("<" + code)
        out.append((name, off, size))
        off += size
    return out


@pytest.mark.parametrize("cls", sorted(wire.CLASSES.values(), key=lambda c: c.TYPE),
                         ids=lambda c: c.NAME)
def test_message_layout_matches_wire_h(schema, cls):
    st = [s for name, _, s, _ in schema.types if name == cls.NAME][0]
    assert cls.SIZE == schema.structs[st].size
    assert _py_fields(cls) == _c_fields(schema, st)
    # Signedness too: int64_t prices and quantities are "q", uint64_t ids "Q".
    for (name, code), f in zip(cls.FIELDS, schema.structs[st].fields[1:]):
        if code not in ("oid", "32s"):
            signed = f.ctype.startswith("int")
            assert code.islower() == signed, "%s.%s" % (cls.NAME, name)


# ------------------------------------------------------------------------------------------
# Captures written by the C code.
# ------------------------------------------------------------------------------------------

@need_wire_ref
@pytest.mark.parametrize("key_hex", [None, KEY_HEX])
def test_every_type_from_wire_ref_all(tmp_path, key_hex):
    """wire_ref all: one frame per WIRE_TYPES row, the fixed part a byte pattern, its length
    the C sizeof (tails: INGRESS, APPEND_ENTRIES). Every frame walks; the client types decode
    (unchecked: the pattern is no valid enum) and re-encode to the same bytes."""
    path = str(tmp_path / "all.pcap")
    args = [WIRE_REF, "all", path] + (["--key", key_hex] if key_hex else [])
    rows = [ln.split() for ln in cvectors.run(*args).stdout.splitlines()]
    frames = cvectors.pcap_payloads(path)
    assert len(rows) == len(frames) == len(wire.TYPES)
    key = wire.Key.from_hex(key_hex) if key_hex else None
    for (n, name, length), buf in zip(rows, frames):
        value = wire.TYPE[name]
        assert wire.type_name(value) == name
        fixed, tail = wire.TYPES[value][1], wire.TYPES[value][2]
        if not tail:
            assert int(length) == fixed, name
        magic, major, flags, count, sender, flen, minor, res = wire.FRAME_HDR.unpack_from(buf)
        assert (magic, major, count, sender, flen, minor, res) == (
            wire.MAGIC, wire.VERSION_MAJOR, 1, 9, len(buf), wire.VERSION_MINOR, 0)
        m, mlen = wire.decode_msg(buf, 16, len(buf) - (16 if key else 0), check=False)
        assert wire.msg_type(m) == value and mlen == int(length)
        assert m.encode() == buf[16:16 + mlen], name
        assert wire.encode_frame([m], 9, key) == buf, name
        if key is not None:
            assert wire.mac_ok(buf, key)


def _gen(tmp_path, name, *args):
    path = str(tmp_path / name)
    cvectors.run(OMSPCAP, "gen", "--out", path, *args)
    return path


def _walk(frames, key):
    """Decode every frame (key: checked), as the C decoder would, and return
    [(frame number, sender, message)]."""
    out = []
    for i, buf in enumerate(frames, 1):
        f = wire.decode_frame(buf, key)
        out.extend((i, f.sender_id, m) for m in f.msgs)
    return out


@need_omspcap
@need_wire_ref
def test_keyed_capture_matches_c_decoders(tmp_path):
    """omspcap gen --key: every message omspcap show --verbose lists, in order, with every
    field wire_ref dump prints; the MACs verify; re-encoding gives the capture's bytes."""
    path = _gen(tmp_path, "keyed.pcap", "--count", "1500", "--seed", "7", "--users", "12",
                "--multi", "40", "--session", "31", "--key", KEY_HEX)
    key = wire.Key.from_hex(KEY_HEX)
    frames = cvectors.pcap_payloads(path)
    mine = _walk(frames, key)
    shown, errors, figures = cvectors.show_verbose(
        cvectors.run(OMSPCAP, "show", path, "--key", KEY_HEX, "--verbose").stdout)
    assert not errors
    assert figures["frames"] == len(frames) and figures["msgs"] == len(mine)
    assert [(n, s, m.NAME) for n, s, m in mine] == shown
    dumped = cvectors.wire_ref_dump(cvectors.run(WIRE_REF, "dump", path, "--key", KEY_HEX).stdout)
    assert len(dumped) == len(mine)
    kinds = set()
    for (n, _, m), (dn, dname, dfields) in zip(mine, dumped):
        assert (n, m.NAME) == (dn, dname)
        kinds.add(m.NAME)
        assert dfields.pop("length") == m.SIZE
        assert dfields.pop("shard") == m.shard and dfields.pop("flags") == m.flags
        assert dfields == {k: v for k, v in m.values() if k != "reserved"}, (n, m)
    assert {"NEW_ORDER", "CANCEL", "AMEND", "CANCEL_REPLACE", "TRANSFER"} <= kinds
    for buf in frames:
        f = wire.decode_frame(buf, key)
        assert wire.encode_frame(f.msgs, f.sender_id, key) == buf
        # One flipped bit anywhere and the MAC no longer verifies.
        bad = bytearray(buf)
        bad[len(buf) // 2] ^= 0x10
        assert not wire.mac_ok(bytes(bad), key)


@need_omspcap
def test_session_capture_matches_c(tmp_path):
    """omspcap gen --key-file: the LOGON's signature is the C signer's and verifies under the
    secret; the session key derived in Python verifies every session frame's MAC (SESSION_HDR
    first, seq 1, 2, 3, ...); the messages are the ones omspcap show --key-file lists; each
    frame re-encodes to its bytes; a frame under another key, or changed, is BAD_MAC."""
    key_file = tmp_path / "api.key"
    key_file.write_text("# id secret perms users\n4242 %s all *\n" % SECRET_HEX)
    os.chmod(key_file, 0o600)
    path = _gen(tmp_path, "session.pcap", "--count", "800", "--seed", "9", "--users", "6",
                "--session", "77", "--key-file", str(key_file),
                "--logon-ts-ns", "1700000000000000000")
    frames = cvectors.pcap_payloads(path)
    secret = bytes.fromhex(SECRET_HEX)
    assert auth.load_key_file(str(key_file)) == (4242, secret)
    first = wire.decode_frame(frames[0])  # a LOGON goes without a MAC
    assert first.flags == 0 and first.sender_id == 77 and len(first.msgs) == 1
    logon = first.msgs[0]
    assert isinstance(logon, wire.Logon)
    assert (logon.key_id, logon.session_id, logon.ts_ns) == (4242, 77, 1700000000000000000)
    assert auth.logon_verify(secret, logon)
    assert bytes(logon.sig) == auth.logon_sign(secret, wire.Logon.decode(logon.encode()))
    skey = auth.session_key(secret, logon)
    mine = [(1, 77, logon)]
    for i, buf in enumerate(frames[1:], 2):
        f = wire.decode_frame(buf, skey)
        assert f.flags == wire.FRAME_F_MAC | wire.FRAME_F_SESSION
        sh = f.msgs[0]
        assert isinstance(sh, wire.SessionHdr) and (sh.session_id, sh.seq) == (77, i - 1)
        mine.extend((i, f.sender_id, m) for m in f.msgs)
        assert wire.encode_frame(f.msgs, 77, skey, session=True) == buf
        with pytest.raises(wire.WireError) as exc:
            wire.decode_frame(buf, wire.Key(skey.k0 ^ 1, skey.k1))
        assert exc.value.err == "BAD_MAC"
        # The session decoder of a plain frame's caller refuses it whole.
        with pytest.raises(wire.WireError) as exc:
            wire.decode_frame(buf, skey, session=False)
        assert exc.value.err == "BAD_FLAGS"
        transfers = [m for m in f.msgs if isinstance(m, wire.Transfer)]
        assert all(t.flags == wire.TRANSFER_F_ROUTE and t.shard == 0 for t in transfers)
    shown, errors, figures = cvectors.show_verbose(
        cvectors.run(OMSPCAP, "show", path, "--key-file", str(key_file), "--verbose").stdout)
    assert not errors and figures["decode_errors"] == 0
    assert [(n, s, m.NAME) for n, s, m in mine] == shown


# ------------------------------------------------------------------------------------------
# The C decoder's verdict on damaged frames.
# ------------------------------------------------------------------------------------------

def _damaged(key):
    """(what, frame bytes) pairs, each wrong in one way; MAC'd under key after the damage
    where the MAC comes after the check (header checks come first in frame_decode)."""
    order = wire.NewOrder(user=5, cl_ord_id=9, symbol=1, side=1, ord_type=1, tif=1, px=100,
                          qty=3)
    good = wire.encode_frame([order], 3, key)

    def remac(body):
        return body + wire.mac(key, body)

    def edit(off, data, mac_again=True):
        b = bytearray(good[:-16])
        b[off:off + len(data)] = data
        return remac(bytes(b)) if mac_again else bytes(b) + good[-16:]

    def msg(m):
        b = m.encode()
        return remac(struct.pack("<IBBHIHBB", wire.MAGIC, wire.VERSION_MAJOR, 1, 1, 3,
                                 16 + len(b) + 16, wire.VERSION_MINOR, 0) + b)

    def msgs(*ms):
        b = b"".join(ms)
        return remac(struct.pack("<IBBHIHBB", wire.MAGIC, wire.VERSION_MAJOR, 1, 2, 3,
                                 16 + len(b) + 16, wire.VERSION_MINOR, 0) + b)

    def appended(minor, extra):
        """The NEW_ORDER of good with `extra` bytes a newer minor appended, in a frame of
        version_minor `minor`."""
        b = bytearray(order.encode() + bytes(range(1, extra + 1)))
        struct.pack_into("<H", b, 2, len(b))
        return remac(struct.pack("<IBBHIHBB", wire.MAGIC, wire.VERSION_MAJOR, 1, 1, 3,
                                 16 + len(b) + 16, minor, 0) + bytes(b))

    out = [
        ("good", good),
        ("magic", edit(0, b"OMSX")),
        ("version", edit(4, bytes([wire.VERSION_MAJOR + 1]))),
        ("minor_next", edit(14, bytes([wire.VERSION_MINOR + 1]))),
        ("minor_two_away", edit(14, bytes([wire.VERSION_MINOR + 2]))),
        ("minor_wraps", edit(14, b"\xff")),
        ("frame_reserved", edit(15, b"\x01")),
        ("appended_next_minor", appended(wire.VERSION_MINOR + 1, 16)),
        ("appended_same_minor", appended(wire.VERSION_MINOR, 8)),
        ("appended_over_max", appended(wire.VERSION_MINOR + 1, wire.MSG_EXT_MAX + 8)),
        ("flags", edit(5, b"\x05")),
        ("length", edit(12, struct.pack("<I", len(good) + 8))),
        ("count0", edit(6, b"\x00\x00")),
        ("count2", edit(6, b"\x02\x00")),
        ("mac", edit(30, b"\x07", mac_again=False)),
        ("type", edit(16, struct.pack("<H", 15))),
        ("msg_length", edit(18, struct.pack("<H", 64))),
        ("side", msg(wire.NewOrder(user=5, cl_ord_id=9, symbol=1, side=3, ord_type=1, tif=1))),
        ("tif", msg(wire.NewOrder(user=5, cl_ord_id=9, symbol=1, side=1, ord_type=1, tif=9))),
        ("msg_flags", msg(wire.NewOrder(user=5, cl_ord_id=9, symbol=1, side=1, ord_type=1,
                                        tif=1, flags=1))),
        ("transfer_reserved", msg(wire.Transfer(user=5, transfer_id=1, asset=1, amount=5,
                                                reserved=1))),
        ("transfer_route", msg(wire.Transfer(user=5, transfer_id=1, asset=1, amount=5,
                                             flags=wire.TRANSFER_F_ROUTE))),
        ("transfer_flag2", msg(wire.Transfer(user=5, transfer_id=1, asset=1, amount=5,
                                             flags=2))),
        ("logon_zero_key", msg(wire.Logon(key_id=0, session_id=4))),
        ("session_hdr_inside", msgs(order.encode(), wire.SessionHdr(session_id=3,
                                                                    seq=1).encode())),
        ("exec_reserved", msg(wire.ExecReport(user=5, cl_ord_id=9, exec=2, side=1,
                                              reserved1=1))),
        ("exec_enum", msg(wire.ExecReport(user=5, cl_ord_id=9, exec=9, side=1))),
        ("exec_cancel_rejected_no_side", msg(wire.ExecReport(user=5, cl_ord_id=9, exec=8))),
        ("exec_fill_done", msg(wire.ExecReport(user=5, cl_ord_id=9, exec=4, side=1,
                                               flags=wire.REPORT_F_DONE))),
        ("exec_rejected_done", msg(wire.ExecReport(user=5, cl_ord_id=9, exec=3, side=1,
                                                   flags=wire.REPORT_F_DONE))),
        ("exec_open_done", msg(wire.ExecReport(user=5, cl_ord_id=9, exec=2, side=1,
                                               flags=wire.REPORT_F_DONE))),
        ("exec_flag2", msg(wire.ExecReport(user=5, cl_ord_id=9, exec=5, side=1, flags=2))),
        ("nak_reason", msg(wire.Nak(user=5, cl_ord_id=9, reason=wire.REASON_MAX))),
        ("reject_zero_reason", msg(wire.SessionReject(session_id=3, reason=0))),
        ("reject_warn", msg(wire.SessionReject(session_id=3, reason=45, flags=1))),
        ("logon_reply_reserved", msg(wire.LogonReply(key_id=1, session_id=3, reserved1=2))),
        ("heartbeat_reserved", msg(wire.Heartbeat(session_id=3, reserved=1))),
        ("trailing", remac(good[:12] + struct.pack("<I", len(good) + 8) + good[16:-16] +
                           bytes(8))),
        ("truncated", good[:12]),
    ]
    return out


@need_omspcap
def test_damaged_frames_judged_like_the_c_decoder(tmp_path):
    """Frames wrong in one way each, written to a pcap: omspcap show --verbose names the
    cause the C decoder found (or lists the messages); the Python decoder must agree."""
    key = wire.Key.from_hex(KEY_HEX)
    cases = _damaged(key)
    path = str(tmp_path / "damaged.pcap")
    cvectors.pcap_write(path, [b for _, b in cases])
    shown, errors, figures = cvectors.show_verbose(
        cvectors.run(OMSPCAP, "show", path, "--key", KEY_HEX, "--verbose", check=False).stdout)
    assert figures["frames"] == len(cases)
    ok_frames = {n for n, _, _ in shown}
    verdicts = {}
    for n, (what, buf) in enumerate(cases, 1):
        try:
            f = wire.decode_frame(buf, key)
            mine = "ok:" + ",".join(m.NAME for m in f.msgs)
        except wire.WireError as exc:
            mine = exc.text
        theirs = errors.get(n)
        if theirs is None:
            assert n in ok_frames, what
            theirs = "ok:" + ",".join(t for fn, _, t in shown if fn == n)
        verdicts[what] = (mine, theirs)
    assert {w: m for w, (m, t) in verdicts.items()} == {w: t for w, (m, t) in verdicts.items()}
    # The damage did what it was meant to (not all refused for one reason).
    assert len({t for _, t in verdicts.values()}) >= 10


# ------------------------------------------------------------------------------------------
# Key files, judged by the C reader (auth_client_key_parse via omspcap gen --key-file).
# ------------------------------------------------------------------------------------------

KEY_FILES = [
    ("one line", "7 %s\n" % SECRET_HEX),
    ("node line", "# keys\n\n8 %s trade,read 1-100 \n" % SECRET_HEX),
    ("tabs and comment", "\t9\t%s\t# mine\n" % SECRET_HEX.upper()),
    ("revoked line", "10 %s all * revoked\n" % SECRET_HEX),
    ("zero id", "0 %s\n" % SECRET_HEX),
    ("short secret", "7 %s\n" % SECRET_HEX[:-2]),
    ("zero secret", "7 %s\n" % ("0" * 64)),
    ("bad hex", "7 %s\n" % ("g" + SECRET_HEX[1:])),
    ("no secret", "7\n"),
    ("six words", "7 %s a b c d\n" % SECRET_HEX),
    ("signed id", "+7 %s\n" % SECRET_HEX),
    ("empty", "# nothing\n"),
]


@need_omspcap
@pytest.mark.parametrize("what,text", KEY_FILES, ids=[k for k, _ in KEY_FILES])
def test_key_file_accepted_like_c(tmp_path, what, text):
    path = tmp_path / "k"
    path.write_text(text)
    c_ok = cvectors.run(OMSPCAP, "gen", "--out", str(tmp_path / "o.pcap"), "--count", "1",
                        "--key-file", str(path), check=False).returncode == 0
    try:
        key_id, secret = auth.load_key_file(str(path))
        py_ok = True
        assert len(secret) == 32 and key_id > 0
    except ValueError:
        py_ok = False
    assert py_ok == c_ok, what


# ------------------------------------------------------------------------------------------
# The Python side alone: round trips and refusals that need no C verdict.
# ------------------------------------------------------------------------------------------

def test_versions_major_minor():
    """docs/wire.md, "Versions": a frame of the same major and a minor at most one away is
    taken; the next minor's longer fixed-size messages decode as their struct and are
    skipped to their end; a message alone (a log entry's) may be longer whatever its
    writer; shorter, ragged or beyond MSG_EXT_MAX never."""
    order = wire.NewOrder(user=5, cl_ord_id=9, symbol=1, side=1, ord_type=1, tif=1, px=100,
                          qty=3)
    cxl = wire.Cancel(user=5, cl_ord_id=10, orig_cl_ord_id=9)
    f = wire.encode_frame([order, cxl], 3)
    assert f[4] == wire.VERSION_MAJOR and f[14] == wire.VERSION_MINOR and f[15] == 0
    assert wire.decode_frame(f).minor == wire.VERSION_MINOR

    def with_minor(buf, minor):
        return buf[:14] + bytes([minor]) + buf[15:]
    assert wire.decode_frame(with_minor(f, wire.VERSION_MINOR + 1)).minor == 1
    for far in (wire.VERSION_MINOR + 2, 255):
        with pytest.raises(wire.WireError) as e:
            wire.decode_frame(with_minor(f, far))
        assert e.value.err == "BAD_VERSION"

    longer = bytearray(order.encode() + b"\x09" * 24)
    struct.pack_into("<H", longer, 2, len(longer))
    body = bytes(longer) + cxl.encode()
    hdr = struct.pack("<IBBHIHBB", wire.MAGIC, wire.VERSION_MAJOR, 0, 2, 3, 16 + len(body),
                      wire.VERSION_MINOR + 1, 0)
    fr = wire.decode_frame(hdr + body)
    assert fr.msgs == [order, cxl]
    with pytest.raises(wire.WireError) as e:
        wire.decode_frame(with_minor(hdr + body, wire.VERSION_MINOR))
    assert e.value.err == "BAD_MSG_LENGTH"
    m, n = wire.decode_msg(bytes(longer))
    assert m == order and n == len(longer)
    for bad in (len(order.encode()) - 8, len(order.encode()) + 4,
                len(order.encode()) + wire.MSG_EXT_MAX + 8):
        b = bytearray(bytes(longer) + bytes(128))
        struct.pack_into("<H", b, 2, bad)
        with pytest.raises(wire.WireError) as e:
            wire.decode_msg(bytes(b))
        assert e.value.err == "BAD_MSG_LENGTH", bad


def test_report_done_flag():
    """REPORT_F_DONE (common/wire.h): allowed on the kinds that can end an order (FILL,
    CANCELLED, AMENDED, REJECTED, DONE), refused on the others and any other bit refused;
    final is the flag, or a DONE / REJECTED without it (a node of an earlier release)."""
    def report(kind, flags=0):
        return wire.ExecReport(user=5, cl_ord_id=9, exec=wire.EXEC[kind], side=1, flags=flags)

    for kind in ("fill", "cancelled", "amended", "rejected", "done"):
        m, _ = wire.decode_msg(report(kind, wire.REPORT_F_DONE).encode())
        assert m.flags == wire.REPORT_F_DONE and m.done and m.final, kind
    for kind in ("pending", "open", "cancel_rejected"):
        with pytest.raises(wire.WireError) as e:
            wire.decode_msg(report(kind, wire.REPORT_F_DONE).encode())
        assert e.value.err == "BAD_RESERVED", kind
    for kind in ("fill", "done"):
        with pytest.raises(wire.WireError) as e:
            wire.decode_msg(report(kind, wire.REPORT_F_DONE | 2).encode())
        assert e.value.err == "BAD_RESERVED", kind
    assert {k for k in wire.EXEC if wire.report_final(report(k))} == {"done", "rejected"}
    assert not report("fill").done and not report("done").done
    # Undecoded (check=False) the bits come through as they are.
    m, _ = wire.decode_msg(report("open", 3).encode(), check=False)
    assert m.flags == 3


def test_messages_round_trip_and_names():
    o = wire.Oid.make(3, 42, 17)
    assert (o.shard, o.seq, str(o)) == (3, 17, "42:3:17")
    ack = wire.Ack(user=42, cl_ord_id=5, oid=o, seq=9, time_ns=123)
    assert wire.Ack.decode(ack.encode()) == ack
    assert wire.reason_name(33) == "BAD_KEY" and wire.reason_name(48) == "?"
    assert wire.exec_name(4) == "fill" and wire.cause_name(9) == "replaced"
    assert wire.enum_value(wire.SIDES, "sell", "side") == 2
    with pytest.raises(ValueError):
        wire.enum_value(wire.TIFS, "day", "tif")
    with pytest.raises(TypeError):
        wire.Cancel(user=1, price=3)
    with pytest.raises(ValueError):
        wire.Key.from_hex("00" * 15)
    with pytest.raises(ValueError):
        auth.parse_client_key("")
