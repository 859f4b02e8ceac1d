# SPDX-License-Identifier: Apache-2.0
"""Client sessions (docs/security.md, auth/auth.h): the LOGON signature, the session's
frame key and the API key file.

The signed bytes of a LOGON (48, little-endian):
    "OMSD-LOGON-1" + 4 zero bytes | key_id u64 | ts_ns u64 | nonce u64 | session_id u32 |
    heartbeat_ms u32
sig = HMAC-SHA256(secret, those bytes). The session's frame key is the first 16 bytes of
HMAC-SHA256(secret, the same bytes with "OMSD-SESSION-1" + 2 zero bytes as the label), read as
SipHash's k0, k1 little-endian: both ends derive it, it never crosses the wire.
"""

import hashlib
import hmac
import struct

from . import wire

SECRET_SIZE = 32  # bytes of an API secret (64 hex digits)
KEY_FILE_MAX = 65536  # bytes of a key file load_key_file reads (CLIENT_KEY_FILE_MAX)
LOGON_LABEL = b"OMSD-LOGON-1"
SESSION_LABEL = b"OMSD-SESSION-1"
_SIGNED = struct.Struct("<16sQQQII")
assert _SIGNED.size == 48, "the signed bytes of a LOGON"


def signed_bytes(label, logon):
    """The canonical bytes a LOGON's HMAC covers, under label."""
    return _SIGNED.pack(label.ljust(16, b"\0"), logon.key_id, logon.ts_ns, logon.nonce,
                        logon.session_id, logon.heartbeat_ms)


def _hmac(secret, label, logon):
    if len(secret) != SECRET_SIZE:
        raise ValueError("an API secret is %d bytes" % SECRET_SIZE)
    return hmac.new(bytes(secret), signed_bytes(label, logon), hashlib.sha256).digest()


def logon_sign(secret, logon):
    """Sign logon in place (auth_logon_sign): its sig covers every other field, so set them
    first. Returns the signature."""
    logon.sig = _hmac(secret, LOGON_LABEL, logon)
    return logon.sig


def logon_verify(secret, logon):
    """Whether logon's signature is the secret's (auth_logon_verify), in constant time."""
    return hmac.compare_digest(_hmac(secret, LOGON_LABEL, logon), bytes(logon.sig))


def session_key(secret, logon):
    """The session's frame key derived from the secret and the LOGON (auth_session_key)."""
    d = _hmac(secret, SESSION_LABEL, logon)
    k0, k1 = struct.unpack_from("<QQ", d)
    if (k0 | k1) == 0:
        k0 = 1  # a zero key means "no MAC"; 2^-128
    return wire.Key(k0, k1)


def _words(line):
    return line.replace("\t", " ").replace("\r", " ").split(" ")


def parse_client_key(text):
    """The API key in a key file's text (auth_client_key_parse): the first key line
    "<key_id> <secret: 64 hex digits> [perms users ...]", so one line of the node's key file
    serves; '#' starts a comment. Returns (key_id, secret bytes) or raises ValueError."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    for lineno, line in enumerate(text.split("\n"), 1):
        if "\0" in line or len(line) >= 1024:
            raise ValueError("line %d: too long or not text" % lineno)
        line = line.split("#", 1)[0]
        words = [w for w in _words(line) if w]
        if not words:
            continue
        want = "line %d: want <key_id> <secret: %d hex digits>" % (lineno, 2 * SECRET_SIZE)
        if not 2 <= len(words) <= 5 or not words[0].isdigit() or not words[0].isascii():
            raise ValueError(want)
        key_id = int(words[0])
        secret_hex = words[1]
        if key_id == 0 or key_id > wire.U64 or len(secret_hex) != 2 * SECRET_SIZE:
            raise ValueError(want)
        try:
            secret = bytes.fromhex(secret_hex)
        except ValueError:
            raise ValueError(want) from None
        if not any(secret):
            raise ValueError(want)
        return key_id, secret
    raise ValueError("no key line")


def load_key_file(path):
    """Read an API key file (client_key_file_load): (key_id, secret). Raises ValueError
    ("path: what") for a file without a valid key line or larger than KEY_FILE_MAX, OSError
    when it cannot be read."""
    with open(path, "rb") as f:
        text = f.read(KEY_FILE_MAX + 1)
    if len(text) > KEY_FILE_MAX:
        raise ValueError("%s: larger than %d bytes" % (path, KEY_FILE_MAX))
    try:
        return parse_client_key(text)
    except ValueError as exc:
        raise ValueError("%s: %s" % (path, exc)) from None
