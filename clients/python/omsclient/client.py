# SPDX-License-Identifier: Apache-2.0
"""The order-entry client: the Python counterpart of tools/client.h (docs/tools.md, "The
client library"), over one connected kernel UDP socket.

- Requests (NEW_ORDER, CANCEL, AMEND, CANCEL_REPLACE, TRANSFER) are tracked by (user,
  cl_ord_id), transfers by (TRANSFER_USER, transfer_id), until released. Until an answer
  names one (ACK, NAK, an EXEC_REPORT or ADMIN_REPLY) it is sent again byte for byte, with
  the same id (the node dedups on them), after retry_first_ms, doubling up to retry_cap_ms;
  after retries_max resends or give_up_ms it is reported once as a "gave_up" event.
- Requests are appended to the frame being built; flush(), poll() and tick() send it. A
  frame never mixes order entry with shard-addressed messages (the node refuses it).
- The node numbers what it says about a user (ACK, NAK, EXEC_REPORT) with a per-user egress
  seq. Per user the client keeps contig (every seq up to it seen), newest, and which of the
  SEQ_WINDOW seqs above contig were seen; events carry seq_gap / seq_fill / seq_repeat. A
  hole open for replay_after_ms is asked for with REPORT_REPLAY {user, contig + 1, newest},
  then every replay_every_ms while it stays. replay_tail() asks for answers never seen.
- Sessions (docs/security.md): with an API key (key_file, or key_id and secret) logon()
  sends a signed LOGON and waits for the LOGON_REPLY; then every frame is a session frame
  (SESSION_HDR {session id, seq}, MAC under the session key). SEQ_GAP / SEQ_REPEAT rejects
  re-number and resend what is unanswered at once; MSG_RATE takes the seq and leaves the
  requests to their back-off; UNKNOWN_SESSION or a LOGOUT from the node ends the session
  (with relogon, tick() logs on again and resends). Idle for the agreed heartbeat, tick()
  sends a HEARTBEAT.

Time is injected where it matters (tick(now_ns), rx(buf, now_ns)); poll() reads
time.monotonic_ns(). Not thread-safe: one thread per client.
"""

import errno
import heapq
import secrets
import select
import socket
import time

from . import auth, wire

DEFAULT_HOST = "10.77.0.2"  # deploy/omsd.ini [node] ip
DEFAULT_PORT = 7400
FRAME_DEFAULT = 1472  # UDP payload of a 1500-byte MTU
RX_BURST = 64  # datagrams drained per poll
TICK_MAX = 256  # retransmits / give-ups handled per tick
TRANSFER_USER = wire.U64  # key space of transfers: ADMIN_REPLY names no user
SEQ_WINDOW = 1024  # seqs above contig tracked per user
REPLAY_TICK_MAX = 64  # automatic REPORT_REPLAYs per tick
REPLAY_SCAN_MAX = 4096  # users visited per tick looking for holes
LOGON_RETRY_MS = 500
HEARTBEAT_MS = 1000  # when the node's reply names none
NS_PER_MS = 1000000
DUE_NONE = 1 << 64

# Request states.
SENT = "sent"  # no answer yet: resent when due
ANSWERED = "answered"  # ACK, EXEC_REPORT or ADMIN_REPLY (reason NONE) seen
NAKED = "naked"  # NAK seen, or an ADMIN_REPLY with a reason
GAVE_UP = "gave_up"  # resends and time exhausted without an answer

# Session states (client.c enum sess_state).
_OFF, _DOWN, _LOGON, _UP = "off", "down", "logon", "up"

_REQUEST_TYPES = (wire.NewOrder, wire.Cancel, wire.Amend, wire.CancelReplace, wire.Transfer)
_SESSION_TYPES = frozenset((wire.LogonReply.TYPE, wire.SessionReject.TYPE, wire.Logout.TYPE,
                            wire.Heartbeat.TYPE))


class ClientError(Exception):
    """A refused call: errno is the C client's (EEXIST, ENOSPC, ENOTCONN, EINVAL, ...)."""

    def __init__(self, err, what):
        self.errno = err
        super().__init__("%s: %s" % (errno.errorcode.get(err, str(err)), what))


class LogonRefused(ClientError):
    """The node refused the LOGON: reason (wire.REASONS), e.g. BAD_KEY, BAD_SIGNATURE."""

    def __init__(self, reason):
        self.reason = reason
        self.reason_name = wire.reason_name(reason)
        super().__init__(errno.EACCES, "logon refused: " + self.reason_name)


class Request:
    """One tracked request. Read-only for the caller but for tag."""

    __slots__ = ("user", "id", "tag", "type", "msg", "state", "reason", "tries", "first_ns",
                 "next_ns", "answer_ns", "send_error", "_live", "_token")

    def __init__(self, user, rid, tag, mtype, msg, now_ns):
        self.user = user  # account, TRANSFER_USER for transfers
        self.id = rid  # cl_ord_id, or transfer_id
        self.tag = tag  # the caller's
        self.type = mtype  # wire type of the request
        self.msg = msg  # its bytes, resent as they are
        self.state = SENT
        self.reason = 0  # NAK / reject / ADMIN_REPLY reason
        self.tries = 1  # sends, the first included
        self.first_ns = now_ns
        self.next_ns = now_ns
        self.answer_ns = 0
        self.send_error = 0  # the first send's: 0, or -ENOTCONN (goes once logged on), ...
        self._live = True
        self._token = 0

    @property
    def name(self):
        return wire.type_name(self.type)

    @property
    def reason_name(self):
        return wire.reason_name(self.reason)

    def __repr__(self):
        return "Request(%s user=%d id=%d %s%s tries=%d)" % (
            self.name, self.user, self.id, self.state,
            (" " + self.reason_name) if self.reason else "", self.tries)


class Event:
    """Something that happened: kind is
      "ack", "nak", "exec", "admin_reply"  msg is that message; req the request it names
      "session"        a LOGON_REPLY, SESSION_REJECT or LOGOUT from the node (msg)
      "session_ended"  the same, and it ended the session for good (no relogon)
      "other"          any other message (msg)
      "gave_up"        req gave up (msg None)
    seq_gap: egress seqs missing just before this message; seq_fill: it filled a hole;
    seq_repeat: seen before (a duplicate or a re-sent report)."""

    __slots__ = ("kind", "msg", "req", "now_ns", "seq_gap", "seq_repeat", "seq_fill",
                 "session_ended")

    def __init__(self, kind, msg=None, req=None, now_ns=0):
        self.kind = kind
        self.msg = msg
        self.req = req
        self.now_ns = now_ns
        self.seq_gap = 0
        self.seq_repeat = False
        self.seq_fill = False
        self.session_ended = False

    @property
    def type(self):
        return None if self.msg is None else self.msg.NAME

    @property
    def reason(self):
        return getattr(self.msg, "reason", 0)

    @property
    def reason_name(self):
        return wire.reason_name(self.reason)

    @property
    def exec(self):
        """The execution report's kind ("open", "fill", "cancelled", ...), else None."""
        return wire.exec_name(self.msg.exec) if self.kind == "exec" else None

    @property
    def done(self):
        """An execution report that says REPORT_F_DONE: its order's last one."""
        return self.kind == "exec" and wire.report_done(self.msg)

    @property
    def final(self):
        """A last word about a request: a NAK, an ADMIN_REPLY, its order's last report (one
        that says done, or a DONE or REJECTED from a node of an earlier release), or giving
        up."""
        return self.kind in ("nak", "admin_reply", "gave_up") or \
            (self.kind == "exec" and wire.report_final(self.msg))

    def __repr__(self):
        flags = []
        if self.seq_gap:
            flags.append("gap=%d" % self.seq_gap)
        if self.seq_fill:
            flags.append("fill")
        if self.seq_repeat:
            flags.append("repeat")
        if self.session_ended:
            flags.append("session_ended")
        what = self.exec if self.kind == "exec" else self.kind
        if self.done:
            what += "(done)"
        return "Event(%s %r%s)" % (what, self.msg if self.msg is not None else self.req,
                                   (" " + " ".join(flags)) if flags else "")


class _UserTrack:
    """One user's egress seqs: contig <= newest <= contig + SEQ_WINDOW; seen holds exactly
    the seqs in (contig, newest] that were seen."""

    __slots__ = ("user", "contig", "newest", "replay_due_ns", "seen")

    def __init__(self, user, seq):
        self.user = user
        self.contig = seq
        self.newest = seq
        self.replay_due_ns = DUE_NONE
        self.seen = set()


def _stats_zero():
    s = dict.fromkeys((
        "frames_tx", "msgs_tx", "retransmits", "send_errors", "frames_rx", "msgs_rx",
        "decode_errors", "acks", "naks", "execs", "admin_replies", "other", "unmatched",
        "seq_gaps", "seq_repeats", "seq_filled", "seq_abandoned", "replay_requests",
        "gave_up", "table_full", "logons_sent", "logons", "logons_refused", "relogons",
        "session_ended", "seq_resyncs", "rate_refused", "rate_warnings", "heartbeats_tx",
        "heartbeats_rx", "rx_dropped"), 0)
    s["decode_err"] = {}  # per WIRE_ERRS name
    s["nak_reason"] = {}  # per reason name
    s["exec_kind"] = {}  # per exec kind name
    return s


def _count(d, key):
    d[key] = d.get(key, 0) + 1


def _wall_ns():
    return time.time_ns()


def now_ns():
    """The client's clock (CLOCK_MONOTONIC, as client_now_ns)."""
    return time.monotonic_ns()


class Client:
    """One UDP socket connected to a node, its request table and its session.

    key: a shared frame MAC key (wire.Key or 32 hex digits), for nodes that take
    unauthenticated client traffic; key_file, or key_id with secret (32 bytes or 64 hex
    digits): an API key to log on with (then key must be None). session_id 0 with an API key
    picks a random one. The other arguments are client_config's, in ms where named so."""

    def __init__(self, host=DEFAULT_HOST, port=DEFAULT_PORT, *, session_id=0, key=None,
                 key_file=None, key_id=0, secret=None, relogon=False, heartbeat_ms=0,
                 bind=None, frame_max=FRAME_DEFAULT, requests_max=1024, users_max=1024,
                 retry_first_ms=200, retry_cap_ms=2000, retries_max=8, give_up_ms=10000,
                 replay_after_ms=100, replay_every_ms=300, replay_off=False,
                 seq_from_one=False, drop_rx_permille=0, drop_seed=0,
                 logon_retry_ms=LOGON_RETRY_MS):
        if isinstance(key, str):
            key = wire.Key.from_hex(key)
        self._key = key if key else None
        if key_file is not None:
            key_id, secret = auth.load_key_file(key_file)
        if isinstance(secret, str):
            secret = bytes.fromhex(secret)
        self._logon_cfg = key_id != 0
        if self._logon_cfg and (secret is None or len(secret) != auth.SECRET_SIZE):
            raise ClientError(errno.EINVAL, "an API key needs a %d-byte secret" %
                              auth.SECRET_SIZE)
        if self._logon_cfg and self._key is not None:
            raise ClientError(errno.EINVAL, "an API key and a shared MAC key")
        if not 128 <= frame_max <= wire.FRAME_MAX:
            raise ClientError(errno.EINVAL, "frame_max 128..%d" % wire.FRAME_MAX)
        while self._logon_cfg and session_id == 0:
            session_id = secrets.randbits(32)
        self.session_id = session_id
        self.key_id = key_id
        self._secret = bytearray(secret) if self._logon_cfg else bytearray()
        self.relogon = relogon
        self.heartbeat_ms_asked = heartbeat_ms
        self.frame_max = frame_max & ~7
        self.requests_max = requests_max
        self.users_max = users_max
        self.retry_first_ms = retry_first_ms
        self.retry_cap_ms = retry_cap_ms
        self.retries_max = retries_max
        self.give_up_ms = give_up_ms
        self.replay_after_ns = replay_after_ms * NS_PER_MS
        self.replay_every_ns = replay_every_ms * NS_PER_MS
        self.replay_off = replay_off
        self.seq_from_one = seq_from_one
        self.drop_rx_permille = drop_rx_permille  # tests: throw away this many per 1000 rx
        self.drop_seed = drop_seed
        self.logon_retry_ns = logon_retry_ms * NS_PER_MS

        self._reqs = {}  # (user, id) -> Request
        self._heap = []  # (next_ns, token, Request), stale entries skipped
        self._token = 0
        self.unanswered = 0
        self._users = {}  # user -> _UserTrack
        self._user_list = []  # the same, in arrival order (round-robin replay)
        self._holed = 0  # users with contig < newest
        self._replay_cursor = 0
        self._last_id = {}  # user -> last cl_ord_id handed out
        self._last_xfer = {}  # user -> last transfer_id handed out
        self.stats = _stats_zero()
        self._pending = []  # events not yet returned

        self._building = False
        self._frame_class = 0
        self._frame_msgs = []
        self._frame_len = 0

        self._sess = _DOWN if self._logon_cfg else _OFF
        self._relogging = False
        self.logon_reason = 0  # the last refusal's reason
        self._logon = None  # the last LOGON sent: its fields derive the session key
        self._sess_key = None
        self._tx_seq = 0
        self._hb_ns = 0
        self._clock_ns = now_ns()
        self._last_tx_ns = 0
        self._logon_first_ns = 0
        self._logon_next_ns = 0
        self._rebase_seq = 0
        self._rebase_ns = 0

        self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
            if bind is not None:
                self._sock.bind(bind)
            self._sock.connect((host, port))
            self._sock.setblocking(False)
        except OSError:
            self._sock.close()
            raise

    # -------------------------------------------------------------------------------------
    # Lifetime.
    # -------------------------------------------------------------------------------------

    def close(self):
        """Close the socket and forget the secret and what was derived from it."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        for i in range(len(self._secret)):
            self._secret[i] = 0
        self._sess_key = None
        self._logon = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self._sess == _UP:
            try:
                self.logout()
            except (OSError, ClientError):
                pass
        self.close()

    def fileno(self):
        return self._sock.fileno()

    @property
    def local_port(self):
        return self._sock.getsockname()[1]

    @property
    def session_up(self):
        return self._sess == _UP

    @property
    def session_seq(self):
        """The seq the next session frame will carry (0 before the first logon)."""
        return self._tx_seq

    @property
    def heartbeat_ms(self):
        """The interval the node agreed to (0 before the first logon)."""
        return self._hb_ns // NS_PER_MS

    @property
    def tracked(self):
        return len(self._reqs)

    # -------------------------------------------------------------------------------------
    # Requests.
    # -------------------------------------------------------------------------------------

    def _next_id(self, table, user):
        """Increasing per user: microseconds of wall time, above the last one handed out
        (the node refuses a clientOrderId at or below a user's forgotten ones)."""
        rid = max(table.get(user, 0) + 1, _wall_ns() // 1000)
        table[user] = rid
        return rid

    def new_order(self, user, symbol, side, qty=0, px=0, *, ord_type="limit", tif="gtc",
                  stp="none", quote_qty=0, expire_ns=0, cl_ord_id=None, tag=None):
        """Track and queue a NEW_ORDER (side "buy"/"sell", ord_type "limit"/"market", tif
        "gtc"/"ioc"/"fok"/"gtd"/"post_only", or the wire values). Returns its Request
        (req.id is the cl_ord_id)."""
        m = wire.NewOrder(user=user, symbol=symbol,
                          cl_ord_id=cl_ord_id if cl_ord_id else self._next_id(self._last_id,
                                                                              user),
                          side=wire.enum_value(wire.SIDES, side, "side"),
                          ord_type=wire.enum_value(wire.ORD_TYPES, ord_type, "ord_type"),
                          tif=wire.enum_value(wire.TIFS, tif, "tif"),
                          stp=wire.enum_value(wire.STPS, stp, "stp"),
                          px=px, qty=qty, quote_qty=quote_qty, expire_ns=expire_ns)
        return self.submit(m, tag)

    def cancel(self, user, orig_cl_ord_id, *, cl_ord_id=None, tag=None):
        """Track and queue a CANCEL of the user's order orig_cl_ord_id."""
        return self.submit(wire.Cancel(user=user, orig_cl_ord_id=orig_cl_ord_id,
                                       cl_ord_id=cl_ord_id or self._next_id(self._last_id,
                                                                            user)), tag)

    def amend(self, user, orig_cl_ord_id, qty, *, cl_ord_id=None, tag=None):
        """Track and queue an AMEND: the order's new total qty (must go down)."""
        return self.submit(wire.Amend(user=user, orig_cl_ord_id=orig_cl_ord_id, qty=qty,
                                      cl_ord_id=cl_ord_id or self._next_id(self._last_id,
                                                                           user)), tag)

    def cancel_replace(self, user, orig_cl_ord_id, px, qty, *, cl_ord_id=None, tag=None):
        """Track and queue a CANCEL_REPLACE: the replacement's id is the request's."""
        return self.submit(wire.CancelReplace(
            user=user, orig_cl_ord_id=orig_cl_ord_id, px=px, qty=qty,
            cl_ord_id=cl_ord_id or self._next_id(self._last_id, user)), tag)

    def transfer(self, user, asset, amount, *, transfer_id=None, shard=None, tag=None):
        """Track and queue a TRANSFER: a deposit (amount > 0) or a withdrawal (< 0). Routed
        by the gateway to the user's owner shard, or with shard straight to that OMS shard
        (the treasury path). Answered by an ADMIN_REPLY whose value is the new total."""
        tid = transfer_id or self._next_id(self._last_xfer, user)
        if shard is None:
            m = wire.Transfer(user=user, transfer_id=tid, asset=asset, amount=amount,
                              flags=wire.TRANSFER_F_ROUTE)
        else:
            m = wire.Transfer(user=user, transfer_id=tid, asset=asset, amount=amount,
                              shard=shard)
        return self.submit(m, tag)

    def submit(self, msg, tag=None, now=None):
        """Track a request message (NEW_ORDER, CANCEL, AMEND, CANCEL_REPLACE, TRANSFER) and
        append it to the frame being built. Returns its Request; raises ClientError EEXIST
        (that (user, id) is tracked), ENOSPC (table full), EINVAL (not a request). Not
        logged on, it is tracked and goes once the session is up (req.send_error
        -ENOTCONN)."""
        if not isinstance(msg, _REQUEST_TYPES):
            raise ClientError(errno.EINVAL, "not a request: %r" % (msg,))
        now = now_ns() if now is None else now
        self._clock_ns = now
        if msg.TYPE == wire.Transfer.TYPE:
            rkey = (TRANSFER_USER, msg.transfer_id)
        else:
            rkey = (msg.user, msg.cl_ord_id)
        if rkey in self._reqs:
            raise ClientError(errno.EEXIST, "request %d/%d is tracked" % rkey)
        if len(self._reqs) >= self.requests_max:
            self.stats["table_full"] += 1
            raise ClientError(errno.ENOSPC, "request table full")
        req = Request(rkey[0], rkey[1], tag, msg.TYPE, msg.encode(), now)
        self._reqs[rkey] = req
        self._schedule(req, now + self._backoff_ns(1))
        self.unanswered += 1
        req.send_error = self._frame_add(req.msg)
        return req

    def find(self, user, rid):
        """The tracked request (user, cl_ord_id), or (TRANSFER_USER, transfer_id); None."""
        return self._reqs.get((user, rid))

    def release(self, req):
        """Forget a request (after its final report)."""
        if not req._live:
            return
        req._live = False
        del self._reqs[(req.user, req.id)]
        if req.state == SENT:
            self.unanswered -= 1

    def _schedule(self, req, next_ns):
        self._token += 1
        req.next_ns = next_ns
        req._token = self._token
        heapq.heappush(self._heap, (next_ns, self._token, req))

    def _heap_top(self):
        while self._heap:
            next_ns, token, req = self._heap[0]
            if req._live and req.state == SENT and req._token == token:
                return req
            heapq.heappop(self._heap)
        return None

    def next_due_ns(self):
        """The earliest retransmit deadline, or DUE_NONE."""
        req = self._heap_top()
        return req.next_ns if req is not None else DUE_NONE

    def _backoff_ns(self, tries):
        ms = self.retry_first_ms
        i = 1
        while i < tries and ms < self.retry_cap_ms:
            ms *= 2
            i += 1
        return min(ms, self.retry_cap_ms) * NS_PER_MS

    def _answered(self, req, state, reason, now):
        if req.state != SENT:
            return
        self.unanswered -= 1
        req.state = state
        req.reason = reason
        req.answer_ns = now

    def _requests_due_now(self, now):
        """After a resync or a logon nothing in flight was acted on: resend it all now."""
        live = [r for r in self._reqs.values() if r.state == SENT]
        self._heap = []
        for r in live:
            self._schedule(r, now)

    # -------------------------------------------------------------------------------------
    # Sending.
    # -------------------------------------------------------------------------------------

    def _sendable(self):
        return self._sess in (_OFF, _UP)

    @staticmethod
    def _class_of(raw):
        mtype, _, shard, flags = wire.MSG_HDR.unpack_from(raw)
        if mtype in wire.GATEWAY_TYPES:
            return 1
        if mtype == wire.Transfer.TYPE and flags & wire.TRANSFER_F_ROUTE:
            return 1  # routed by the gateway, like an order
        return 2 + shard  # per destination shard

    def _frame_start(self, cls):
        self._building = True
        self._frame_class = cls
        self._frame_msgs = []
        self._frame_len = wire.FRAME_HDR.size
        if self._sess == _UP:
            self._frame_len += wire.SessionHdr.SIZE

    def _frame_add(self, raw):
        """Append an encoded message to the frame being built: 0 or -errno."""
        if not self._sendable():
            return -errno.ENOTCONN
        cls = self._class_of(raw)
        if self._building and cls != self._frame_class:
            err = self.flush()
            if err < 0:
                return err
        for _ in range(2):
            if not self._building:
                self._frame_start(cls)
            # Room is kept for the MAC, as wire_builder_add does.
            if (len(self._frame_msgs) + (self._sess == _UP) < wire.FRAME_MSGS_MAX and
                    self._frame_len + len(raw) + wire.MAC_SIZE <= self.frame_max):
                self._frame_msgs.append(raw)
                self._frame_len += len(raw)
                return 0
            if not self._frame_msgs:
                return -errno.EMSGSIZE
            err = self.flush()
            if err < 0:
                return err
        return -errno.EMSGSIZE

    def send_untracked(self, msg):
        """Append any message without tracking it (raw senders, tests). 0 or -errno."""
        return self._frame_add(msg if isinstance(msg, (bytes, bytearray)) else msg.encode())

    def flush(self):
        """Send the frame being built, if any. 0 or -errno."""
        if not self._building:
            return 0
        self._building = False
        if not self._frame_msgs:
            return 0
        msgs = self._frame_msgs
        self._frame_msgs = []
        session = self._sess == _UP
        if session:
            # The seq is stamped as the frame leaves (client.c client_flush).
            sh = wire.SessionHdr(session_id=self.session_id, seq=self._tx_seq)
            frame = wire.encode_frame([sh.encode()] + msgs, self.session_id, self._sess_key,
                                      session=True)
        else:
            frame = wire.encode_frame(msgs, self.session_id, self._key)
        if self._send(frame) < 0:
            return -errno.EIO  # the seq is not used up: the node never saw it
        if session:
            self._tx_seq += 1
        self._last_tx_ns = self._clock_ns
        self.stats["msgs_tx"] += len(msgs)
        return 0

    def _send(self, frame):
        try:
            n = self._sock.send(frame)
        except OSError as exc:
            self.stats["send_errors"] += 1
            return -(exc.errno or errno.EIO)
        if n != len(frame):
            self.stats["send_errors"] += 1
            return -errno.EIO
        self.stats["frames_tx"] += 1
        return 0

    # -------------------------------------------------------------------------------------
    # Receiving.
    # -------------------------------------------------------------------------------------

    def _drain(self):
        out = self._pending
        self._pending = []
        return out

    def poll(self, timeout=0.1):
        """Send what is built, wait up to timeout seconds for datagrams (not past the next
        retransmit or heartbeat), handle at most RX_BURST of them, then tick(). Returns the
        events, in order."""
        self.flush()
        wait = max(0.0, timeout)
        if wait > 0:
            due = min(self.next_due_ns(), self._session_due_ns())
            if due != DUE_NONE:
                wait = min(wait, max(0, due - now_ns()) / 1e9)
        readable, _, _ = select.select([self._sock], [], [], wait)
        if readable:
            self._rx_burst()
        self._tick(now_ns())
        return self._drain()

    def poll_until(self, pred, timeout=5.0):
        """poll() until pred(event) holds for one of the events, for at most timeout seconds.
        Returns every event seen (the matching one last of its batch); raises TimeoutError
        (its .events holds what was seen) when none matched."""
        seen = []
        end = time.monotonic() + timeout
        while True:
            left = end - time.monotonic()
            batch = self.poll(min(max(left, 0), 0.05))
            seen.extend(batch)
            if any(pred(ev) for ev in batch):
                return seen
            if left <= 0:
                err = TimeoutError("no matching event within %.1f s" % timeout)
                err.events = seen
                raise err

    def _rx_burst(self):
        handled = 0
        for _ in range(RX_BURST):
            try:
                buf = self._sock.recv(wire.FRAME_MAX + 64)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                break  # ECONNREFUSED from an ICMP: nothing to read
            if self.drop_rx_permille:
                self.drop_seed = (self.drop_seed * 6364136223846793005 +
                                  1442695040888963407) & wire.U64
                if (self.drop_seed >> 33) % 1000 < self.drop_rx_permille:
                    self.stats["rx_dropped"] += 1
                    continue
            handled += self._rx(buf, now_ns())
        return handled

    def rx(self, buf, now=None):
        """Handle one received datagram (tests, or a caller that reads the socket itself).
        Returns the events."""
        self._rx(buf, now_ns() if now is None else now)
        return self._drain()

    def _rx(self, buf, now):
        self.stats["frames_rx"] += 1
        self._clock_ns = now
        try:
            if self._sess == _OFF:
                frame = wire.decode_frame(buf, self._key, session=False)
                msgs = frame.msgs
            else:
                msgs = self._session_decode(buf)
        except wire.WireError as exc:
            self.stats["decode_errors"] += 1
            _count(self.stats["decode_err"], exc.err)
            return 0
        self.stats["msgs_rx"] += len(msgs)
        for m in msgs:
            self._dispatch(m, now)
        return len(msgs)

    def _session_decode(self, buf):
        """A frame to a session client: MAC'd under the session key, or one of the two the
        node sends without (it knows no key for them)."""
        if wire.frame_flags(buf) & wire.FRAME_F_MAC:
            return wire.decode_frame(buf, self._sess_key, session=False).msgs
        msgs = wire.decode_frame(buf, None, session=False).msgs
        if len(msgs) == 1 and self._unkeyed_ok(msgs[0]):
            return msgs
        raise wire.WireError("BAD_MAC", "un-MAC'd frame in a session")

    @staticmethod
    def _unkeyed_ok(m):
        if m.TYPE == wire.LogonReply.TYPE:
            return m.reason != 0
        if m.TYPE == wire.SessionReject.TYPE:
            return m.reason == wire.REASON["UNKNOWN_SESSION"]
        return False

    def _dispatch(self, m, now):
        mtype = wire.msg_type(m)
        if self._sess != _OFF and mtype in _SESSION_TYPES:
            self._session_msg(m, now)
            return
        ev = Event("other", m, None, now)
        st = self.stats
        if mtype == wire.Ack.TYPE:
            ev.kind = "ack"
            st["acks"] += 1
            self._seq_note(m.user, m.seq, now, ev)
            ev.req = self._reqs.get((m.user, m.cl_ord_id))
            if ev.req is not None:
                self._answered(ev.req, ANSWERED, 0, now)
        elif mtype == wire.Nak.TYPE:
            ev.kind = "nak"
            st["naks"] += 1
            _count(st["nak_reason"], wire.reason_name(m.reason))
            self._seq_note(m.user, m.seq, now, ev)
            ev.req = self._reqs.get((m.user, m.cl_ord_id))
            if ev.req is not None:
                self._answered(ev.req, NAKED, m.reason, now)
        elif mtype == wire.ExecReport.TYPE:
            ev.kind = "exec"
            st["execs"] += 1
            _count(st["exec_kind"], wire.exec_name(m.exec))
            self._seq_note(m.user, m.seq, now, ev)
            ev.req = self._reqs.get((m.user, m.cl_ord_id))
            if ev.req is not None:
                # A report about the request proves the node has it (the ACK may be lost).
                self._answered(ev.req, ANSWERED, 0, now)
                if m.exec in (wire.EXEC["rejected"], wire.EXEC["cancel_rejected"]):
                    ev.req.reason = m.reason
        elif mtype == wire.AdminReply.TYPE:
            ev.kind = "admin_reply"
            st["admin_replies"] += 1
            ev.req = self._reqs.get((TRANSFER_USER, m.req_id))
            if ev.req is not None:
                self._answered(ev.req, ANSWERED if m.reason == 0 else NAKED, m.reason, now)
        else:
            st["other"] += 1
        if ev.req is None and ev.kind != "other":
            st["unmatched"] += 1
        self._pending.append(ev)

    # -------------------------------------------------------------------------------------
    # Egress seqs and report replay.
    # -------------------------------------------------------------------------------------

    def user_seq(self, user):
        """The newest egress seq seen for user, 0 if none."""
        t = self._users.get(user)
        return t.newest if t is not None else 0

    def user_contig(self, user):
        """The seq up to which every one was seen (or abandoned) for user, 0 if none."""
        t = self._users.get(user)
        return t.contig if t is not None else 0

    def _window_slide(self, t, floor):
        """Move contig up to floor: the passed seqs never seen are abandoned."""
        passed = [s for s in t.seen if s <= floor]
        for s in passed:
            t.seen.discard(s)
        self.stats["seq_abandoned"] += floor - t.contig - len(passed)
        t.contig = floor

    def _seq_note(self, user, seq, now, ev):
        """Per-user egress seq (client.c seq_note): the first seen is the baseline (or, with
        seq_from_one, what came before it is a hole); at or below contig is a repeat."""
        if seq == 0 or user == TRANSFER_USER:
            return  # a NAK for a user that is not resident: unsequenced
        st = self.stats
        t = self._users.get(user)
        if t is None:
            if len(self._users) >= self.users_max:
                return  # table full: that user is not tracked
            t = _UserTrack(user, seq)
            self._users[user] = t
            self._user_list.append(t)
            if not self.seq_from_one or seq == 1:
                return
            t.contig = t.newest = 0  # numbered from 1: 1..seq-1 is a hole
        if seq <= t.contig:
            ev.seq_repeat = True
            st["seq_repeats"] += 1
            return
        if seq == t.contig + 1 and t.contig == t.newest:
            t.contig = t.newest = seq  # in order, no hole: the common case
            return
        was_holed = t.contig < t.newest
        contig_before = t.contig
        if seq > t.newest:
            if seq - t.newest > 1:
                ev.seq_gap = seq - t.newest - 1
                st["seq_gaps"] += ev.seq_gap
            t.newest = seq
            if seq - t.contig > SEQ_WINDOW:
                self._window_slide(t, seq - SEQ_WINDOW)
        elif seq in t.seen:
            ev.seq_repeat = True
            st["seq_repeats"] += 1
            return
        else:
            ev.seq_fill = True
            st["seq_filled"] += 1
        t.seen.add(seq)
        while t.contig < t.newest and (t.contig + 1) in t.seen:
            t.contig += 1
            t.seen.discard(t.contig)
        holed = t.contig < t.newest
        if holed and not was_holed:
            self._holed += 1
        elif not holed and was_holed:
            self._holed -= 1
        # The timer runs from when the oldest hole became the oldest.
        if not holed:
            t.replay_due_ns = DUE_NONE
        elif not was_holed or t.contig != contig_before:
            t.replay_due_ns = now + self.replay_after_ns

    def replay(self, user, from_seq, to_seq=0):
        """Ask the node again for user's numbered answers in [from_seq, to_seq] (to_seq 0:
        up to the newest it keeps): one REPORT_REPLAY, sent with the next flush. The re-sent
        answers arrive as usual. 0 or -errno; raises ClientError on a bad range or when a
        session client is not logged on."""
        if from_seq == 0 or (to_seq != 0 and to_seq < from_seq):
            raise ClientError(errno.EINVAL, "replay range %d..%d" % (from_seq, to_seq))
        if not self._sendable():
            raise ClientError(errno.ENOTCONN, "not logged on")
        self.stats["replay_requests"] += 1
        return self._frame_add(wire.ReportReplay(user=user, from_seq=from_seq,
                                                 to_seq=to_seq).encode())

    def replay_tail(self):
        """For every tracked user, REPORT_REPLAY {contig + 1, 0}: the answers never seen
        (e.g. a final report lost with no later seq to reveal it). Flushes. Returns how many
        were sent."""
        sent = 0
        if self._sendable():
            for t in self._user_list:
                self.replay(t.user, t.contig + 1, 0)
                sent += 1
        self.flush()
        return sent

    def _replay_due(self, now):
        if self.replay_off or self._holed == 0 or not self._sendable():
            return 0
        sent = 0
        users = self._user_list
        for _ in range(min(len(users), REPLAY_SCAN_MAX)):
            if sent >= REPLAY_TICK_MAX:
                break
            if self._replay_cursor >= len(users):
                self._replay_cursor = 0
            t = users[self._replay_cursor]
            self._replay_cursor += 1
            if t.contig == t.newest or t.replay_due_ns > now:
                continue
            self.replay(t.user, t.contig + 1, t.newest)
            t.replay_due_ns = now + self.replay_every_ns
            sent += 1
        return sent

    # -------------------------------------------------------------------------------------
    # The tick: retransmits, give-ups, replays, heartbeats.
    # -------------------------------------------------------------------------------------

    def tick(self, now=None):
        """Resend due requests and give up on exhausted ones (at most TICK_MAX), send the due
        automatic REPORT_REPLAYs, a heartbeat when idle, then flush. Returns the events."""
        self._tick(now_ns() if now is None else now)
        return self._drain()

    def _tick(self, now):
        give_up_ns = self.give_up_ms * NS_PER_MS
        self._clock_ns = now
        self._relogon_due(now)
        handled = 0
        while handled < TICK_MAX:
            r = self._heap_top()
            if r is None or r.next_ns > now:
                break
            heapq.heappop(self._heap)
            handled += 1
            if r.tries > self.retries_max or now - r.first_ns >= give_up_ns:
                r.state = GAVE_UP
                self.unanswered -= 1
                self.stats["gave_up"] += 1
                self._pending.append(Event("gave_up", None, r, now))
                continue
            r.tries += 1
            # Give up on time, not later.
            self._schedule(r, min(now + self._backoff_ns(r.tries), r.first_ns + give_up_ns))
            # Logged off it is not sent: the logon makes every unanswered request due.
            if self._frame_add(r.msg) != -errno.ENOTCONN:
                self.stats["retransmits"] += 1
        self._replay_due(now)
        self._heartbeat_due(now)  # after the rest: a frame built above makes it needless
        self.flush()
        return handled

    # -------------------------------------------------------------------------------------
    # Sessions.
    # -------------------------------------------------------------------------------------

    def logon(self, timeout=5.0):
        """Log on with the API key: send LOGON and wait up to timeout seconds for the
        LOGON_REPLY, sending it again with a fresh nonce every logon_retry_ms. Messages
        other than the reply that arrive meanwhile are not delivered. Raises LogonRefused
        (.reason, .reason_name), TimeoutError, or ClientError EINVAL without a key. Already
        logged on: returns at once."""
        if self._sess == _OFF:
            raise ClientError(errno.EINVAL, "no API key to log on with")
        if self._sess == _UP:
            return
        now = now_ns()
        end = now + int(timeout * 1e9)
        self._clock_ns = now
        self._sess = _LOGON
        self._relogging = False
        self.logon_reason = 0
        self._logon_first_ns = now
        self._logon_next_ns = now
        kept = self._pending
        self._pending = []
        try:
            while self._sess == _LOGON:
                now = now_ns()
                if now >= end:
                    break
                self._clock_ns = now
                if now >= self._logon_next_ns:
                    self._logon_send(now)  # a failed send waits for the resend
                wake = min(self._logon_next_ns, end)
                readable, _, _ = select.select([self._sock], [], [], max(0, wake - now) / 1e9)
                if readable:
                    self._rx_burst()
        finally:
            self._pending = kept
        if self._sess == _UP:
            return
        if self._sess == _LOGON:
            self._sess = _DOWN
            raise TimeoutError("no LOGON_REPLY within %.1f s" % timeout)
        raise LogonRefused(self.logon_reason)

    def logout(self):
        """Send what is built, then LOGOUT {session id, reason 0}: the session is over (no
        relogon). Raises ClientError ENOTCONN when not logged on."""
        if self._sess != _UP:
            raise ClientError(errno.ENOTCONN, "not logged on")
        err = self.flush()  # what was built goes first, in the session
        rc = self._frame_add(wire.Logout(session_id=self.session_id).encode())
        if rc == 0:
            rc = self.flush()
        self._sess = _DOWN
        self._relogging = False
        return err if err < 0 else rc

    def _logon_send(self, now):
        """One LOGON in a frame of its own, without a MAC (the signature is the proof), with
        a fresh nonce and timestamp; the session key becomes this LOGON's."""
        m = wire.Logon(key_id=self.key_id, ts_ns=_wall_ns(), nonce=secrets.randbits(64),
                       session_id=self.session_id, heartbeat_ms=self.heartbeat_ms_asked)
        auth.logon_sign(bytes(self._secret), m)  # last: it covers every field above
        self._logon = m
        self._sess_key = auth.session_key(bytes(self._secret), m)
        self._logon_next_ns = now + self.logon_retry_ns
        self.stats["logons_sent"] += 1
        if self._send(wire.encode_frame([m], self.session_id)) < 0:
            return
        self._last_tx_ns = now
        self.stats["msgs_tx"] += 1

    def _session_due_ns(self):
        if self._sess == _LOGON and self._relogging:
            return self._logon_next_ns
        if self._sess == _UP:
            return self._last_tx_ns + self._hb_ns
        return DUE_NONE

    def _relogon_due(self, now):
        if self._sess != _LOGON or not self._relogging or now < self._logon_next_ns:
            return
        if now - self._logon_first_ns >= self.give_up_ms * NS_PER_MS:
            self._sess = _DOWN
            self._relogging = False
            self.stats["session_ended"] += 1
            return
        self._logon_send(now)

    def _heartbeat_due(self, now):
        if self._sess != _UP or self._building or now < self._last_tx_ns + self._hb_ns:
            return
        m = wire.Heartbeat(session_id=self.session_id, ts_ns=_wall_ns())
        if self._frame_add(m.encode()) == 0:
            self.stats["heartbeats_tx"] += 1

    def _seq_rebase(self, expected, now):
        """Take the seq the node expects from a SESSION_REJECT, but not the same one twice
        within half of retry_first_ms: every frame sent before the first reject arrived
        echoes it, and taking an echo would rewind over frames the node accepted since."""
        if expected == 0:
            return False
        if (expected == self._rebase_seq and
                now - self._rebase_ns < self.retry_first_ms * NS_PER_MS // 2):
            return False
        self._tx_seq = expected
        self._rebase_seq = expected
        self._rebase_ns = now
        return True

    def _session_lost(self, now):
        """The node ended the session. Returns whether that is for good."""
        self._building = False  # its seq and key are the old session's; requests go again
        self._frame_msgs = []
        if self.relogon:
            self._sess = _LOGON
            self._relogging = True
            self._logon_first_ns = now
            self._logon_next_ns = now  # tick sends it
            return False
        self._sess = _DOWN
        self.stats["session_ended"] += 1
        return True

    def _logon_reply(self, m, now):
        if self._sess != _LOGON or m.key_id != self.key_id or m.session_id != self.session_id:
            return False  # a late answer to a settled logon
        if m.reason == wire.REASON["NONCE_REUSED"]:
            # A duplicate of our own LOGON refused as a replay while the original may have
            # been accepted: the resend (a fresh nonce) settles it.
            self.logon_reason = m.reason
            return False
        if m.reason != 0:
            self.stats["logons_refused"] += 1
            self.logon_reason = m.reason
            self._sess = _DOWN
            if not self._relogging:
                return False  # logon() raises the refusal
            self._relogging = False
            self.stats["session_ended"] += 1
            return True
        # Reason NONE came MAC'd under this LOGON's key (_session_decode): the node knows it.
        self._sess = _UP
        self.logon_reason = 0
        self._tx_seq = m.next_seq or 1
        self._hb_ns = (m.heartbeat_ms or HEARTBEAT_MS) * NS_PER_MS
        self._last_tx_ns = now
        self._rebase_seq = 0
        self.stats["logons"] += 1
        if self._relogging:
            self.stats["relogons"] += 1
        self._relogging = False
        self._requests_due_now(now)  # none of them reached a session the node still has
        return False

    def _session_reject(self, m, now):
        if m.session_id != self.session_id:
            return False
        if m.flags & wire.SESSION_REJECT_F_WARN:
            self.stats["rate_warnings"] += 1  # nothing refused: slow down
            return False
        name = wire.reason_name(m.reason)
        if name in ("SEQ_GAP", "SEQ_REPEAT"):
            # Nothing in the frame was acted on: resend what is unanswered, at once.
            if self._sess == _UP and self._seq_rebase(m.expected_seq, now):
                self.stats["seq_resyncs"] += 1
                self._requests_due_now(now)
            return False
        if name == "MSG_RATE":
            self.stats["rate_refused"] += 1
            if self._sess == _UP:
                self._seq_rebase(m.expected_seq, now)
            return False
        if name == "UNKNOWN_SESSION":
            return self._sess == _UP and self._session_lost(now)
        return False

    def _session_msg(self, m, now):
        ev = Event("session", m, None, now)
        mtype = m.TYPE
        if mtype == wire.Heartbeat.TYPE:
            self.stats["heartbeats_rx"] += 1
            return
        if mtype == wire.LogonReply.TYPE:
            ev.session_ended = self._logon_reply(m, now)
        elif mtype == wire.SessionReject.TYPE:
            ev.session_ended = self._session_reject(m, now)
        elif mtype == wire.Logout.TYPE:
            if m.session_id == self.session_id and self._sess == _UP:
                ev.session_ended = self._session_lost(now)
        if ev.session_ended:
            ev.kind = "session_ended"
        self._pending.append(ev)


__all__ = ["Client", "ClientError", "LogonRefused", "Request", "Event", "now_ns",
           "SENT", "ANSWERED", "NAKED", "GAVE_UP", "TRANSFER_USER", "SEQ_WINDOW"]
