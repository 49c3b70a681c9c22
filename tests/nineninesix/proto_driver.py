"""Drive a :class:`NineninesixProtocol` frame by frame in the protocol tests (no sockets, clock passed in).

``d = Driver(NineninesixProtocol(OutputFormat()))``: ``d.open(cid)``, ``d.send(cid, text)`` / ``d.end(cid)`` /
``d.cancel(cid)`` return the frames the command queued (as JSON), ``d.rx(frame)`` the events one received frame
produced, ``d.state(cid)`` the context's state (also once the protocol dropped the finished context).
"""

from __future__ import annotations

import json
from typing import Any

from ttsbridge.engine import Event
from ttsbridge.nineninesix.facts import ContextFacts, NineninesixRequest
from ttsbridge.nineninesix.protocol import NineninesixProtocol
from ttsbridge.nineninesix.states import ContextState


class Driver:
    def __init__(self, protocol: NineninesixProtocol, now: float = 0.0) -> None:
        self.p = protocol
        self.now = now
        self.facts: dict[str, ContextFacts] = {}

    def open(self, cid: str, **kw: Any) -> ContextFacts:
        request = NineninesixRequest(self.p.output_format, **kw)
        self.facts[cid] = self.p.open_turn(cid, request, self.now)
        return self.facts[cid]

    def frames(self) -> list[dict[str, Any]]:
        return [json.loads(f) for f in self.p.data_to_send()]

    def send(self, cid: str, text: str) -> list[dict[str, Any]]:
        self.p.send_text(cid, text, self.now)
        return self.frames()

    def end(self, cid: str) -> list[dict[str, Any]]:
        self.p.end_turn(cid, self.now)
        return self.frames()

    def cancel(self, cid: str) -> list[dict[str, Any]]:
        self.p.cancel_turn(cid, self.now)
        return self.frames()

    def rx(self, frame: str | bytes) -> list[Event]:
        self.p.receive(frame, self.now)
        return self.p.events_received()

    def lost(self, reason: str = "connection lost") -> list[Event]:
        self.p.connection_lost(None, reason, self.now)
        return self.p.events_received()

    def state(self, cid: str) -> ContextState:
        return self.facts[cid].state
