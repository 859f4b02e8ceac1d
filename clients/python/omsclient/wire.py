# SPDX-License-Identifier: Apache-2.0
"""The omsd wire protocol in pure Python: the client-facing half of common/wire.h.

A UDP datagram carries one frame (docs/wire.md):

    wire_frame_hdr (16 B) | msg | msg | ... | [MAC, 16 B, when FRAME_F_MAC]

Every message starts with wire_msg_hdr {type u16, length u16, shard u16, flags u16} and is
its struct's size (the types with a variable tail are not client-facing: they are walked,
never decoded here). Versions are major.minor (docs/wire.md, "Versions"): a frame of another
major, or of a minor more than one away from ours, is refused; a frame of the next minor may
carry fixed-size messages longer than their struct (fields that minor appended, in 8-byte
steps, at most MSG_EXT_MAX): they decode as their struct, the rest is skipped. All integers
are little-endian; padding is written out as `reserved` fields that must be zero. The MAC
is SipHash-2-4 with a 128-bit output over the header and the messages, under a 128-bit key
(k0, k1): the frame key of a client session (auth.session_key) or a shared key written as 32
hex digits (Key.from_hex).

The layouts below are copied from common/wire.h; each message's struct size is asserted at
import (struct.calcsize against the C static_assert), and tests/test_wire.py checks every
field's name, offset and width against the header itself and decodes frames the C code wrote.
"""

import collections
import struct

MAGIC = 0x44534D4F  # "OMSD" little-endian
VERSION_MAJOR = 7  # WIRE_VERSION_MAJOR: another major is refused
VERSION_MINOR = 0  # WIRE_VERSION_MINOR_RELEASE: what this client speaks
MINOR_WINDOW = 1  # WIRE_MINOR_WINDOW: a peer's minor may differ from ours by this much
MSG_EXT_MAX = 64  # WIRE_MSG_EXT_MAX: bytes a minor may append to a fixed-size message
FRAME_F_MAC = 0x01  # a 16-byte SipHash-2-4-128 tag follows the last message
FRAME_F_SESSION = 0x02  # a client session's frame: SESSION_HDR first, MAC under its key
MAC_SIZE = 16
FRAME_MAX = 9000  # largest frame a node takes
FRAME_MSGS_MAX = 256  # messages in one frame
# magic, version_major, flags, msg_count, sender_id, length, version_minor, reserved
FRAME_HDR = struct.Struct("<IBBHIHBB")
MSG_HDR = struct.Struct("<HHHH")  # type, length, shard, flags
assert FRAME_HDR.size == 16, "wire_frame_hdr"
assert MSG_HDR.size == 8, "wire_msg_hdr"

TRANSFER_F_ROUTE = 0x0001  # TRANSFER hdr.flags: the gateway routes it to the owner shard
SESSION_REJECT_F_WARN = 0x0001  # SESSION_REJECT hdr.flags: a warning, nothing refused
# EXEC_REPORT hdr.flags: the order's last report (nothing of it is live, its reservation is
# released, no report of it follows); only on a FILL, CANCELLED, AMENDED, REJECTED or DONE.
REPORT_F_DONE = 0x0001
REPLAY_MAX = 256  # answers re-sent for one REPORT_REPLAY
LOGON_SIG_SIZE = 32  # HMAC-SHA256
USER_SEQ_MAX = (1 << 48) - 1
U64 = (1 << 64) - 1

# ------------------------------------------------------------------------------------------
# Enumerations (value -> short name, as the C tools print them).
# ------------------------------------------------------------------------------------------

SIDE_BUY, SIDE_SELL = 1, 2
SIDES = {1: "buy", 2: "sell"}
ORD_LIMIT, ORD_MARKET = 1, 2
ORD_TYPES = {1: "limit", 2: "market"}
TIF_GTC, TIF_IOC, TIF_FOK, TIF_GTD, TIF_POST_ONLY = 1, 2, 3, 4, 5
TIFS = {1: "gtc", 2: "ioc", 3: "fok", 4: "gtd", 5: "post_only"}
STPS = {0: "none", 1: "expire_taker", 2: "expire_maker", 3: "expire_both"}

# WIRE_REASONS(X): one list for every NAK and reject; MAX (47) is the sentinel.
REASONS = {
    0: "NONE", 1: "BAD_REQUEST", 2: "UNKNOWN_SYMBOL", 3: "HALTED", 4: "OFF_TICK",
    5: "OFF_LOT", 6: "BELOW_MIN_QTY", 7: "BELOW_MIN_NOTIONAL", 8: "OUTSIDE_BAND",
    9: "POST_ONLY_WOULD_CROSS", 10: "FOK_NOT_FILLABLE", 11: "DUPLICATE_ID_MISMATCH",
    12: "CAPACITY", 13: "UNKNOWN_ORDER", 14: "NOT_OWNER", 15: "NOT_LEADER",
    16: "BACKPRESSURE", 17: "RATE_LIMITED", 18: "INSUFFICIENT_FUNDS", 19: "PARKED_FULL",
    20: "OVERFLOW", 21: "SYMBOL_NOT_OWNED", 22: "AMEND_NOT_DOWN", 23: "TOO_LATE",
    24: "STALE_EPOCH", 25: "OWNED_ELSEWHERE", 26: "DB_ERROR", 27: "CONFLICT",
    28: "DUPLICATE_REQUEST", 29: "UNKNOWN_USER", 30: "KILLED", 31: "NOT_FOUND",
    32: "STALE_REQUEST", 33: "BAD_KEY", 34: "BAD_SIGNATURE", 35: "STALE_LOGON",
    36: "NONCE_REUSED", 37: "UNKNOWN_SESSION", 38: "SEQ_GAP", 39: "SEQ_REPEAT",
    40: "KEY_REVOKED", 41: "NOT_ENTITLED", 42: "NO_PERMISSION", 43: "SESSION_IN_USE",
    44: "NO_SESSION", 45: "MSG_RATE", 46: "SESSION_IDLE", 47: "SYMBOL_MOVING",
}
REASON_MAX = 48
REASON = {name: value for value, name in REASONS.items()}  # "BAD_KEY" -> 33

# enum wire_exec: client execution report kinds (client_exec_name's short names).
EXECS = {1: "pending", 2: "open", 3: "rejected", 4: "fill", 5: "cancelled", 6: "done",
         7: "amended", 8: "cancel_rejected"}
EXEC_MAX = 9
EXEC = {name: value for value, name in EXECS.items()}
# The kinds that may say REPORT_F_DONE (the report that leaves nothing of the order live).
REPORT_DONE_EXECS = frozenset((EXEC["fill"], EXEC["cancelled"], EXEC["amended"],
                               EXEC["rejected"], EXEC["done"]))
# enum wire_cause: why a live order stopped being live without filling (client_cause_name).
CAUSES = {1: "user", 2: "ioc", 3: "fok", 4: "stp", 5: "expired", 6: "halt", 7: "kill_switch",
          8: "no_liquidity", 9: "replaced", 10: "reconcile"}
CAUSE_MAX = 11


def reason_name(reason):
    """"NOT_OWNER" for 14, "?" outside the list (wire_reason_name)."""
    return REASONS.get(reason, "?") if 0 <= reason < REASON_MAX else "?"


def exec_name(kind):
    return EXECS.get(kind, "?")


def cause_name(cause):
    return CAUSES.get(cause, "-")


def enum_value(table, value, what):
    """An enum given by value or by short name ("buy", "ioc"): its value."""
    if isinstance(value, str):
        for v, n in table.items():
            if n == value.lower():
                return v
        raise ValueError("%s: unknown name %r (one of %s)" % (what, value,
                                                              ", ".join(table.values())))
    if value not in table:
        raise ValueError("%s: unknown value %r" % (what, value))
    return value


# ------------------------------------------------------------------------------------------
# Every message type (WIRE_TYPES: name, value, fixed size, has_tail), so any frame a node
# writes can be walked; only the client-facing ones below are decoded field by field.
# ------------------------------------------------------------------------------------------

TYPES = {
    1: ("NEW_ORDER", 72, False), 2: ("CANCEL", 40, False), 3: ("AMEND", 48, False),
    4: ("CANCEL_REPLACE", 56, False), 5: ("ACK", 56, False), 6: ("NAK", 48, False),
    7: ("EXEC_REPORT", 112, False), 8: ("REPORT_REPLAY", 32, False), 9: ("LOGON", 72, False),
    10: ("LOGON_REPLY", 48, False), 11: ("SESSION_HDR", 24, False),
    12: ("SESSION_REJECT", 32, False), 13: ("LOGOUT", 16, False), 14: ("HEARTBEAT", 24, False),
    16: ("SUBMIT", 72, False), 17: ("CANCEL_TO_ME", 72, False), 18: ("AMEND_TO_ME", 72, False),
    19: ("REPLACE_TO_ME", 72, False), 20: ("ME_EVENT", 120, False),
    21: ("ME_RESULT", 56, False), 22: ("STREAM_ACK", 24, False),
    23: ("REPLAY_REQUEST", 24, False), 24: ("ORDER_QUERY", 24, False),
    25: ("OPEN_ORDERS_QUERY", 32, False), 26: ("OPEN_ORDERS_SNAPSHOT", 680, False),
    27: ("REBIND_TO_ME", 80, False), 32: ("HYDRATE_REQUEST", 24, False),
    33: ("HYDRATE_USER", 872, False), 34: ("BEGIN_DEHYDRATE", 864, False),
    35: ("FLUSH_COMPLETE", 40, False), 36: ("RELEASE_CLAIM", 32, False),
    37: ("RELEASE_DONE", 32, False), 38: ("TRANSFER_LOOKUP", 32, False),
    39: ("TRANSFER_FOUND", 72, False), 48: ("ROUTING_CONFIG", 920, False),
    49: ("SYMBOL_CONFIG", 88, False), 50: ("SYMBOL_STATUS", 16, False),
    51: ("KILL_SWITCH", 24, False), 52: ("TRANSFER", 40, False), 53: ("WHALE_PIN", 24, False),
    54: ("USER_ADMIN", 24, False), 55: ("SNAPSHOT_REQUEST", 16, False), 56: ("TICK", 8, False),
    57: ("ADMIN_REPLY", 32, False), 58: ("SYMBOL_MOVE", 56, False),
    59: ("BOOK_CHUNK", 32, True), 64: ("REQUEST_VOTE", 40, False),
    65: ("VOTE_REPLY", 24, False), 66: ("APPEND_ENTRIES", 56, True),
    67: ("APPEND_REPLY", 64, False), 68: ("INSTALL_SNAPSHOT", 64, True),
    69: ("SNAPSHOT_REPLY", 40, False), 70: ("TIMEOUT_NOW", 24, False),
    71: ("INGRESS", 16, True), 72: ("FORWARDED_ADMIN", 24, True),
    73: ("FORWARDED_REPLY", 56, True), 74: ("MEMBER_CHANGE", 16, False),
    75: ("LEADER_TRANSFER", 16, False),
}
TYPE = {name: value for value, (name, _, _) in TYPES.items()}  # "NEW_ORDER" -> 1
for _v, (_n, _size, _tail) in TYPES.items():
    assert _size % 8 == 0, _n  # every message keeps the next one 8-byte aligned
# The types a gateway takes off the wire (class GATEWAY): a session may send only these.
GATEWAY_TYPES = frozenset((1, 2, 3, 4, 8, 9, 11, 13, 14))


def type_name(mtype):
    """"NEW_ORDER" for 1, "?" for an unknown type (wire_type_name)."""
    return TYPES[mtype][0] if mtype in TYPES else "?"


# ------------------------------------------------------------------------------------------
# Errors: the causes of WIRE_ERRS, by name.
# ------------------------------------------------------------------------------------------

ERRS = collections.OrderedDict((
    ("OK", "ok"),
    ("TRUNCATED", "shorter than its header or declared length"),
    ("BAD_MAGIC", "bad magic"),
    ("BAD_VERSION", "unsupported version"),
    ("BAD_FLAGS", "unknown frame flags"),
    ("BAD_LENGTH", "declared length does not match"),
    ("BAD_COUNT", "message count zero, over the limit or not matching"),
    ("BAD_TYPE", "unknown message type"),
    ("BAD_MSG_LENGTH", "message length wrong for its type"),
    ("BAD_ENUM", "enum field out of range"),
    ("BAD_RESERVED", "reserved field not zero"),
    ("BAD_VALUE", "field value out of range"),
    ("BAD_MAC", "MAC missing or wrong"),
    ("TRAILING", "bytes after the last message"),
))


class WireError(ValueError):
    """A frame or message the decoder refuses; err is a WIRE_ERRS name ("BAD_MAC")."""

    def __init__(self, err, detail=""):
        self.err = err
        self.text = ERRS[err]
        super().__init__("%s: %s%s" % (err, self.text, (" (%s)" % detail) if detail else ""))


# ------------------------------------------------------------------------------------------
# SipHash-2-4 with a 128-bit output (Aumasson & Bernstein), exactly wire_siphash128: the
# 128-bit variant's 0xee / 0xdd constants, the two 64-bit halves written little-endian.
# ------------------------------------------------------------------------------------------

_M64 = U64


def _rotl(x, b):
    return ((x << b) | (x >> (64 - b))) & _M64


def siphash128(k0, k1, data):
    """SipHash-2-4-128 of data (bytes) under the key (k0, k1): 16 bytes."""
    v0 = 0x736F6D6570736575 ^ k0
    v1 = 0x646F72616E646F6D ^ k1 ^ 0xEE
    v2 = 0x6C7967656E657261 ^ k0
    v3 = 0x7465646279746573 ^ k1
    n = len(data)
    full = n & ~7

    def rounds(v0, v1, v2, v3, count):
        for _ in range(count):
            v0 = (v0 + v1) & _M64
            v1 = _rotl(v1, 13) ^ v0
            v0 = _rotl(v0, 32)
            v2 = (v2 + v3) & _M64
            v3 = _rotl(v3, 16) ^ v2
            v0 = (v0 + v3) & _M64
            v3 = _rotl(v3, 21) ^ v0
            v2 = (v2 + v1) & _M64
            v1 = _rotl(v1, 17) ^ v2
            v2 = _rotl(v2, 32)
        return v0, v1, v2, v3

    for (m,) in struct.iter_unpack("<Q", data[:full]):
        v3 ^= m
        v0, v1, v2, v3 = rounds(v0, v1, v2, v3, 2)
        v0 ^= m
    b = ((n & 0xFF) << 56) | int.from_bytes(data[full:], "little")
    v3 ^= b
    v0, v1, v2, v3 = rounds(v0, v1, v2, v3, 2)
    v0 ^= b
    v2 ^= 0xEE
    v0, v1, v2, v3 = rounds(v0, v1, v2, v3, 4)
    h0 = v0 ^ v1 ^ v2 ^ v3
    v1 ^= 0xDD
    v0, v1, v2, v3 = rounds(v0, v1, v2, v3, 4)
    h1 = v0 ^ v1 ^ v2 ^ v3
    return struct.pack("<QQ", h0, h1)


class Key(collections.namedtuple("Key", "k0 k1")):
    """A 128-bit SipHash key (struct wire_key). The zero key means "no MAC"."""

    __slots__ = ()

    @classmethod
    def from_bytes(cls, b):
        """The key's 16 bytes in order; k0, k1 their little-endian halves."""
        if len(b) != 16:
            raise ValueError("a key is 16 bytes")
        return cls(*struct.unpack("<QQ", b))

    @classmethod
    def from_hex(cls, text):
        """32 hex digits, either case (wire_key_parse_hex, omsd's [keys] and --key)."""
        if not isinstance(text, str) or len(text) != 32:
            raise ValueError("a key is 32 hex digits")
        try:
            return cls.from_bytes(bytes.fromhex(text))
        except ValueError as exc:
            raise ValueError("a key is 32 hex digits") from exc

    def to_bytes(self):
        return struct.pack("<QQ", self.k0, self.k1)

    def __bool__(self):
        return (self.k0 | self.k1) != 0

    def __repr__(self):  # never print a key
        return "Key(...)"


def mac(key, data):
    """The frame MAC of data (header and messages) under key."""
    return siphash128(key.k0, key.k1, bytes(data))


def mac_ok(frame, key):
    """Whether the frame's trailing tag is the MAC of the rest under key (wire_frame_mac_ok);
    compared without an early exit."""
    if not key or len(frame) < FRAME_HDR.size + MAC_SIZE:
        return False
    want = mac(key, frame[:-MAC_SIZE])
    diff = 0
    for a, b in zip(want, frame[-MAC_SIZE:]):
        diff |= a ^ b
    return diff == 0


# ------------------------------------------------------------------------------------------
# Messages. A field is (name, code): a struct code, "oid" (struct wire_oid: two u64) or
# "32s" (bytes). Names are wire.h's; `reserved*` fields must be zero.
# ------------------------------------------------------------------------------------------


class Oid(collections.namedtuple("Oid", "user shard_seq")):
    """The 128-bit orderId {user, oms_shard << 48 | user_seq} (struct wire_oid)."""

    __slots__ = ()

    @classmethod
    def make(cls, oms_shard, user, user_seq):
        return cls(user, (oms_shard << 48) | (user_seq & USER_SEQ_MAX))

    @property
    def shard(self):
        return self.shard_seq >> 48

    @property
    def seq(self):
        return self.shard_seq & USER_SEQ_MAX

    def __str__(self):  # as omsctl prints it: user:shard:seq
        return "%d:%d:%d" % (self.user, self.shard, self.seq)


def _codes(fields):
    return "".join("QQ" if c == "oid" else c for _, c in fields)


class Msg:
    """One message. Subclasses (NewOrder, Ack, ...) carry their wire.h fields as attributes;
    shard and flags are the message header's."""

    TYPE = 0
    NAME = "?"
    SIZE = 0
    FIELDS = ()
    _ST = None
    __slots__ = ("shard", "flags")

    def __init__(self, shard=0, flags=0, **fields):
        self.shard = shard
        self.flags = flags
        for name, code in self.FIELDS:
            if code == "oid":
                default = Oid(0, 0)
            elif code.endswith("s"):
                default = bytes(int(code[:-1]))
            else:
                default = 0
            setattr(self, name, fields.pop(name, default))
        if fields:
            raise TypeError("%s has no field %s" % (self.NAME, ", ".join(sorted(fields))))

    def values(self):
        """The fields as (name, value) pairs in wire order."""
        return [(name, getattr(self, name)) for name, _ in self.FIELDS]

    def as_dict(self):
        d = {"type": self.NAME, "shard": self.shard, "flags": self.flags}
        d.update(self.values())
        return d

    def encode(self):
        """The message's bytes, header included (length = SIZE)."""
        vals = []
        for name, code in self.FIELDS:
            v = getattr(self, name)
            if code == "oid":
                vals.extend((v[0], v[1]))
            else:
                vals.append(v)
        return self._ST.pack(self.TYPE, self.SIZE, self.shard, self.flags, *vals)

    @classmethod
    def decode(cls, buf, off=0):
        """The message at buf[off:] (its header already checked for type and length)."""
        raw = cls._ST.unpack_from(buf, off)
        m = cls.__new__(cls)
        m.shard, m.flags = raw[2], raw[3]
        i = 4
        for name, code in cls.FIELDS:
            if code == "oid":
                setattr(m, name, Oid(raw[i], raw[i + 1]))
                i += 2
            else:
                setattr(m, name, raw[i])
                i += 1
        return m

    def check(self):
        """The body checks of wire_msg_check (common/wire.c body_check), in its order:
        raises WireError."""
        if self.ENUMS_FIRST:
            self._check_enums()
        for name, _ in self.FIELDS:
            if name.startswith("reserved") and getattr(self, name) != 0:
                raise WireError("BAD_RESERVED", "%s.%s" % (self.NAME, name))
        self._check_enums()
        if self.flags & ~self._allowed_flags():
            raise WireError("BAD_RESERVED", "%s flags 0x%x" % (self.NAME, self.flags))

    ALLOWED_FLAGS = 0  # hdr.flags bits the type defines; others must be zero
    ENUMS_FIRST = False  # body_check looks at the enums before the reserved fields

    def _check_enums(self):
        pass

    def _allowed_flags(self):
        """The hdr.flags bits this message may carry: its type's, or fewer by its fields."""
        return self.ALLOWED_FLAGS

    def __eq__(self, other):
        return (type(self) is type(other) and self.shard == other.shard and
                self.flags == other.flags and self.values() == other.values())

    def __repr__(self):
        parts = ["%s=%r" % (n, v) for n, v in self.values()]
        if self.shard:
            parts.insert(0, "shard=%d" % self.shard)
        if self.flags:
            parts.insert(0, "flags=0x%x" % self.flags)
        return "%s(%s)" % (type(self).__name__, ", ".join(parts))


def _message(cls_name, name, fields, check=None, allowed_flags=0, enums_first=False,
             flags_of=None):
    value = TYPE[name]
    size = TYPES[value][1]
    st = struct.Struct("<HHHH" + _codes(fields))
    # The C static_assert: a layout that disagrees with wire.h stops the import.
    assert st.size == size, "%s: %d bytes, wire.h says %d" % (name, st.size, size)
    attrs = {"TYPE": value, "NAME": name, "SIZE": size, "FIELDS": tuple(fields), "_ST": st,
             "ALLOWED_FLAGS": allowed_flags, "ENUMS_FIRST": enums_first,
             "__slots__": tuple(f for f, _ in fields)}
    if check is not None:
        attrs["_check_enums"] = check
    if flags_of is not None:  # the bits allowed depend on the message's fields
        attrs["_allowed_flags"] = flags_of
    return type(cls_name, (Msg,), attrs)


def _bad(what, ok, err="BAD_ENUM"):
    if not ok:
        raise WireError(err, what)


def _reason_ok(r):
    return 0 <= r < REASON_MAX


def _check_order(m):
    _bad("side", m.side in SIDES)
    _bad("ord_type", m.ord_type in ORD_TYPES)
    _bad("tif", m.tif in TIFS)
    _bad("stp", m.stp in STPS)


def _check_nak(m):
    _bad("reason", _reason_ok(m.reason))


def _check_logon(m):
    _bad("key_id", m.key_id != 0, "BAD_VALUE")
    _bad("session_id", m.session_id != 0, "BAD_VALUE")


def _check_session_hdr(m):
    _bad("session_id", m.session_id != 0, "BAD_VALUE")
    _bad("seq", m.seq != 0, "BAD_VALUE")


def _check_session_reject(m):
    _bad("reason", m.reason != 0 and _reason_ok(m.reason))


def _check_exec(m):
    _bad("exec", 1 <= m.exec < EXEC_MAX)
    _bad("side", m.side in SIDES or (m.exec == EXEC["cancel_rejected"] and m.side == 0))
    _bad("liquidity", m.liquidity <= 2)
    _bad("cause", m.cause < CAUSE_MAX)
    _bad("reason", _reason_ok(m.reason))


def _exec_flags(m):
    """REPORT_F_DONE rides only on the kinds that can end an order (common/wire.c)."""
    return REPORT_F_DONE if m.exec in REPORT_DONE_EXECS else 0


def report_done(m):
    """Whether the EXEC_REPORT m says REPORT_F_DONE."""
    return bool(m.flags & REPORT_F_DONE)


def report_final(m):
    """Whether the EXEC_REPORT m is its order's last report (wire_report_final): it says
    REPORT_F_DONE, or it is a DONE or a REJECTED (a node of an earlier release, which never
    set the flag, sent a DONE of its own after an order's last FILL, CANCELLED or AMENDED)."""
    return report_done(m) or m.exec in (EXEC["done"], EXEC["rejected"])


NewOrder = _message("NewOrder", "NEW_ORDER", [
    ("user", "Q"), ("cl_ord_id", "Q"), ("symbol", "I"), ("side", "B"), ("ord_type", "B"),
    ("tif", "B"), ("stp", "B"), ("px", "q"), ("qty", "q"), ("quote_qty", "q"),
    ("expire_ns", "Q"), ("route_epoch", "Q"),
], _check_order)
Cancel = _message("Cancel", "CANCEL", [
    ("user", "Q"), ("cl_ord_id", "Q"), ("orig_cl_ord_id", "Q"), ("route_epoch", "Q"),
])
Amend = _message("Amend", "AMEND", [
    ("user", "Q"), ("cl_ord_id", "Q"), ("orig_cl_ord_id", "Q"), ("qty", "q"),
    ("route_epoch", "Q"),
])
CancelReplace = _message("CancelReplace", "CANCEL_REPLACE", [
    ("user", "Q"), ("cl_ord_id", "Q"), ("orig_cl_ord_id", "Q"), ("px", "q"), ("qty", "q"),
    ("route_epoch", "Q"),
])
Ack = _message("Ack", "ACK", [
    ("user", "Q"), ("cl_ord_id", "Q"), ("oid", "oid"), ("seq", "Q"), ("time_ns", "Q"),
])
Nak = _message("Nak", "NAK", [
    ("user", "Q"), ("cl_ord_id", "Q"), ("reason", "H"), ("owner_shard", "H"),
    ("leader_node", "I"), ("route_epoch", "Q"), ("seq", "Q"),
], _check_nak)
ExecReport = _message("ExecReport", "EXEC_REPORT", [
    ("user", "Q"), ("cl_ord_id", "Q"), ("oid", "oid"), ("seq", "Q"), ("time_ns", "Q"),
    ("symbol", "I"), ("exec", "B"), ("side", "B"), ("liquidity", "B"), ("cause", "B"),
    ("reason", "H"), ("reserved0", "H"), ("reserved1", "I"), ("last_px", "q"),
    ("last_qty", "q"), ("cum_qty", "q"), ("leaves_qty", "q"), ("fee", "q"),
], _check_exec, REPORT_F_DONE, enums_first=True, flags_of=_exec_flags)
ExecReport.done = property(report_done, doc="hdr.flags says REPORT_F_DONE")
ExecReport.final = property(report_final, doc="the order's last report (report_final)")
ReportReplay = _message("ReportReplay", "REPORT_REPLAY", [
    ("user", "Q"), ("from_seq", "Q"), ("to_seq", "Q"),
])
Logon = _message("Logon", "LOGON", [
    ("key_id", "Q"), ("ts_ns", "Q"), ("nonce", "Q"), ("session_id", "I"),
    ("heartbeat_ms", "I"), ("sig", "32s"),
], _check_logon)
LogonReply = _message("LogonReply", "LOGON_REPLY", [
    ("key_id", "Q"), ("session_id", "I"), ("reason", "H"), ("reserved0", "H"),
    ("next_seq", "Q"), ("ts_ns", "Q"), ("heartbeat_ms", "I"), ("reserved1", "I"),
], _check_nak)
SessionHdr = _message("SessionHdr", "SESSION_HDR", [
    ("session_id", "I"), ("reserved", "I"), ("seq", "Q"),
], _check_session_hdr)
SessionReject = _message("SessionReject", "SESSION_REJECT", [
    ("session_id", "I"), ("reason", "H"), ("reserved", "H"), ("seq", "Q"),
    ("expected_seq", "Q"),
], _check_session_reject, SESSION_REJECT_F_WARN)
Logout = _message("Logout", "LOGOUT", [
    ("session_id", "I"), ("reason", "H"), ("reserved", "H"),
], _check_nak)
Heartbeat = _message("Heartbeat", "HEARTBEAT", [
    ("session_id", "I"), ("reserved", "I"), ("ts_ns", "Q"),
])
Transfer = _message("Transfer", "TRANSFER", [
    ("user", "Q"), ("transfer_id", "Q"), ("asset", "I"), ("reserved", "I"), ("amount", "q"),
], None, TRANSFER_F_ROUTE)
AdminReply = _message("AdminReply", "ADMIN_REPLY", [
    ("req_id", "Q"), ("reason", "H"), ("reserved0", "H"), ("leader_node", "I"),
    ("value", "Q"),
], _check_nak)

# The decoded (client-facing) messages by type.
CLASSES = {c.TYPE: c for c in (NewOrder, Cancel, Amend, CancelReplace, Ack, Nak, ExecReport,
                               ReportReplay, Logon, LogonReply, SessionHdr, SessionReject,
                               Logout, Heartbeat, Transfer, AdminReply)}


class RawMsg:
    """A message of a type this package does not decode: its header and body bytes."""

    __slots__ = ("type", "shard", "flags", "body")

    def __init__(self, mtype, shard, flags, body):
        self.type = mtype
        self.shard = shard
        self.flags = flags
        self.body = body

    @property
    def NAME(self):  # noqa: N802 (the same attribute as Msg's)
        return type_name(self.type)

    def encode(self):
        return MSG_HDR.pack(self.type, MSG_HDR.size + len(self.body), self.shard,
                            self.flags) + self.body

    def as_dict(self):
        return {"type": self.NAME, "shard": self.shard, "flags": self.flags,
                "body": self.body.hex()}

    def __eq__(self, other):
        return isinstance(other, RawMsg) and self.encode() == other.encode()

    def __repr__(self):
        return "RawMsg(%s, %d bytes)" % (self.NAME, len(self.body) + MSG_HDR.size)


def msg_type(m):
    return m.TYPE if isinstance(m, Msg) else m.type


def decode_msg(buf, off=0, end=None, check=True, minor=None):
    """The message at buf[off:end]: (message, its length). Checks as wire_msg_check: the
    header, the length for its type, and (check) every enum and reserved field of a decoded
    type. minor: the sending frame's version_minor; a fixed-size message is exactly its
    struct from a sender of our minor (or older), may be longer from the next one, and may be
    longer whatever its writer when minor is None (a message on its own, as in a log entry).
    A longer message decodes as its struct; its length covers the rest. Raises WireError."""
    end = len(buf) if end is None else end
    avail = end - off
    if avail < MSG_HDR.size:
        raise WireError("TRUNCATED", "message header")
    mtype, length, shard, flags = MSG_HDR.unpack_from(buf, off)
    if mtype not in TYPES:
        raise WireError("BAD_TYPE", "type %d" % mtype)
    name, fixed, tail = TYPES[mtype]
    if length < fixed:
        raise WireError("BAD_MSG_LENGTH", "%s of %d bytes" % (name, length))
    if length > avail:
        raise WireError("TRUNCATED", name)
    if tail:
        if length % 8 != 0:
            raise WireError("BAD_MSG_LENGTH", "%s of %d bytes" % (name, length))
    else:
        extra = length - fixed
        may_grow = minor is None or minor > VERSION_MINOR
        if extra % 8 != 0 or extra > MSG_EXT_MAX or (extra and not may_grow):
            raise WireError("BAD_MSG_LENGTH", "%s of %d bytes" % (name, length))
    cls = CLASSES.get(mtype)
    if cls is None:
        return RawMsg(mtype, shard, flags, bytes(buf[off + MSG_HDR.size:off + length])), length
    m = cls.decode(buf, off)
    if check:
        m.check()
    return m, length


# ------------------------------------------------------------------------------------------
# Frames.
# ------------------------------------------------------------------------------------------


class Frame:
    """A decoded frame: header fields, the messages, and the MAC (or None)."""

    __slots__ = ("flags", "sender_id", "msgs", "mac", "length", "minor")

    def __init__(self, flags, sender_id, msgs, tag, length, minor=VERSION_MINOR):
        self.flags = flags
        self.sender_id = sender_id
        self.msgs = msgs
        self.mac = tag
        self.length = length
        self.minor = minor  # the sender's version_minor

    @property
    def session(self):
        return bool(self.flags & FRAME_F_SESSION)

    def __repr__(self):
        return "Frame(sender=%d flags=0x%x %s)" % (
            self.sender_id, self.flags, ", ".join(type_name(msg_type(m)) for m in self.msgs))


def encode_frame(msgs, sender_id, key=None, session=False):
    """One frame of msgs (Msg objects or encoded message bytes). With a (non-zero) key the
    frame carries the MAC; session marks a client session's frame, whose first message
    must be its SESSION_HDR and which always carries the MAC (under the session key)."""
    body = b"".join(m if isinstance(m, (bytes, bytearray)) else m.encode() for m in msgs)
    count = len(msgs)
    if not 1 <= count <= FRAME_MSGS_MAX:
        raise ValueError("a frame carries 1..%d messages" % FRAME_MSGS_MAX)
    flags = FRAME_F_SESSION if session else 0
    keyed = key is not None and bool(key)
    if session and not keyed:
        raise ValueError("a session frame needs the session key")
    if keyed:
        flags |= FRAME_F_MAC
    length = FRAME_HDR.size + len(body) + (MAC_SIZE if keyed else 0)
    if length > FRAME_MAX:
        raise ValueError("a frame of %d bytes (at most %d)" % (length, FRAME_MAX))
    out = FRAME_HDR.pack(MAGIC, VERSION_MAJOR, flags, count, sender_id, length, VERSION_MINOR,
                         0) + body
    if keyed:
        out += mac(key, out)
    return out


def frame_flags(buf):
    """The flags byte of the frame at buf (0 when shorter than a header)."""
    return buf[5] if len(buf) >= FRAME_HDR.size else 0


def decode_frame(buf, key=None, session=None, check=True):
    """Decode and check one frame as common/wire.c frame_decode does. Raises WireError.

    session None: a frame with FRAME_F_SESSION is taken as a client session's frame
    (wire_session_frame_decode: flags exactly MAC|SESSION, SESSION_HDR first and nowhere
    else, naming the sender), any other as a plain one (wire_frame_decode); session False
    refuses session frames (BAD_FLAGS), True requires one.
    key: a plain frame must carry a MAC exactly when a (non-zero) key is given, and it must
    verify; a session frame's MAC is verified when key is given (wire_frame_mac_ok)."""
    buf = bytes(buf)
    n = len(buf)
    if n < FRAME_HDR.size:
        raise WireError("TRUNCATED", "frame header")
    magic, major, flags, count, sender, length, minor, reserved = FRAME_HDR.unpack_from(buf)
    if magic != MAGIC:
        raise WireError("BAD_MAGIC")
    if major != VERSION_MAJOR or abs(minor - VERSION_MINOR) > MINOR_WINDOW:
        raise WireError("BAD_VERSION", "version %d.%d, want %d.%d (minor within %d)" % (
            major, minor, VERSION_MAJOR, VERSION_MINOR, MINOR_WINDOW))
    if reserved != 0:
        raise WireError("BAD_RESERVED", "frame header")
    is_session = bool(flags & FRAME_F_SESSION) if session is None else session
    if is_session:
        if flags != FRAME_F_MAC | FRAME_F_SESSION:
            raise WireError("BAD_FLAGS", "0x%x" % flags)
    elif flags & ~FRAME_F_MAC:
        raise WireError("BAD_FLAGS", "0x%x" % flags)
    if length != n or length > FRAME_MAX:
        raise WireError("BAD_LENGTH", "header says %d, datagram %d" % (length, n))
    if count == 0 or count > FRAME_MSGS_MAX:
        raise WireError("BAD_COUNT", "%d messages" % count)
    has_mac = bool(flags & FRAME_F_MAC)
    keyed = key is not None and bool(key)
    if not is_session and has_mac != keyed:
        raise WireError("BAD_MAC", "MAC present but no key" if has_mac else "no MAC")
    body_end = n
    tag = None
    if has_mac:
        if n < FRAME_HDR.size + MAC_SIZE:
            raise WireError("TRUNCATED", "MAC")
        body_end = n - MAC_SIZE
        tag = buf[body_end:]
        if keyed and not mac_ok(buf, key):
            raise WireError("BAD_MAC")
    pos = FRAME_HDR.size
    msgs = []
    for i in range(count):
        if pos >= body_end:
            raise WireError("BAD_COUNT", "%d messages declared, %d found" % (count, i))
        m, mlen = decode_msg(buf, pos, body_end, check, minor)
        # SESSION_HDR opens a session frame and appears nowhere else.
        if (msg_type(m) == SessionHdr.TYPE) != (is_session and i == 0):
            raise WireError("BAD_TYPE", "SESSION_HDR out of place")
        msgs.append(m)
        pos += mlen
    if pos != body_end:
        raise WireError("TRAILING")
    if is_session and msgs[0].session_id != sender:
        raise WireError("BAD_VALUE", "SESSION_HDR names another session")
    return Frame(flags, sender, msgs, tag, n, minor)
