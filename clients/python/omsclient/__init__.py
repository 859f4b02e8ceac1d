# SPDX-License-Identifier: Apache-2.0
"""omsclient: a pure-Python client of the omsd wire protocol for operators' scripts.

    from omsclient import Client
    with Client("10.77.0.2", 7400, key_file="api.key") as c:
        c.logon()
        req = c.new_order(user=1, symbol=1, side="buy", px=100, qty=5)
        for ev in c.poll_until(lambda ev: ev.req is req and ev.final, timeout=5):
            print(ev)

wire: frames, messages, the SipHash-2-4-128 MAC (common/wire.h); auth: the LOGON signature,
the session key and key files (auth/auth.h); client: retransmission, per-user egress seq
tracking with REPORT_REPLAY of holes, sessions (tools/client.h). Standard library only.
"""

from . import auth, wire
from .client import Client, ClientError, Event, LogonRefused, Request

__all__ = ["Client", "ClientError", "Event", "LogonRefused", "Request", "auth", "wire"]
__version__ = "0.1.0"
