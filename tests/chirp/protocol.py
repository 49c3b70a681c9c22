"""Chirp's sans-I/O protocol: a :class:`~ttsbridge.engine.protocol.TurnProtocol` (clock passed in, no I/O)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ttsbridge.engine import AudioReceived, ConnectionFailed, ConnectRequest, TurnDone, TurnFailed
from ttsbridge.engine.protocol import TurnProtocol, describe_close
from ttsbridge.errors import TTSAPIError, TTSBridgeError, TTSConnectionError, TTSTimeoutError

RATE = 16000


@dataclass(frozen=True)
class ChirpRequest:
    """The typed request of one turn: its voice, and its audio-owed deadline (None: the connection's)."""

    voice: str = "chirp"
    timeout: float | None = None


@dataclass
class ChirpFacts:
    """The protocol's record of one turn (what the engine's turn reads)."""

    timeout: float
    characters_sent: int = 0
    audio_bytes: int = 0
    retries: int = 0
    ended: bool = False
    owed_since: float | None = None  # the server owes audio (text sent, or the end) since then


class ChirpProtocol(TurnProtocol):
    provider = "chirp"
    sample_rate = RATE

    def __init__(self, url: str, timeout: float = 5.0) -> None:
        super().__init__()
        self.url, self.timeout = url, timeout
        self.turns: dict[str, ChirpFacts] = {}  # live turns only
        self._closed = False

    def connect_request(self) -> ConnectRequest:
        return ConnectRequest(self.url)

    def handshake_failed(self, status: int, body: bytes) -> TTSBridgeError:
        return TTSAPIError(
            f"chirp: HTTP {status}", provider="chirp", error_code=f"http_{status}", status_code=status
        )

    @property
    def closed(self) -> bool:
        return self._closed

    # --- commands ---

    def open_turn(self, turn_id: str, request: ChirpRequest | None, now: float) -> ChirpFacts:
        if self._closed:
            raise TTSConnectionError("chirp: the connection is closed")
        facts = self.turns[turn_id] = ChirpFacts((request and request.timeout) or self.timeout)
        return facts

    def send_text(self, turn_id: str, text: str, now: float) -> None:
        facts = self.turns[turn_id]
        facts.characters_sent += len(text)
        facts.owed_since = facts.owed_since or now
        self._send(json.dumps({"turn": turn_id, "text": text}))

    def end_turn(self, turn_id: str, now: float) -> None:
        facts = self.turns[turn_id]
        facts.ended, facts.owed_since = True, facts.owed_since or now
        self._send(json.dumps({"turn": turn_id, "end": True}))

    def cancel_turn(self, turn_id: str, now: float) -> None:
        if self.turns.pop(turn_id, None) is not None:
            self._send(json.dumps({"turn": turn_id, "cancel": True}))
            self._emit(TurnDone(turn_id, cancelled=True))

    def wire_format(self) -> str:
        return f"pcm@{RATE}"

    # --- inputs ---

    def receive(self, frame: str | bytes, now: float) -> None:
        if isinstance(frame, bytes):
            turn_id, _, pcm = frame.partition(b"\n")
            facts = self.turns.get(turn_id.decode(errors="replace"))
            if facts is not None and pcm:
                facts.owed_since = now if facts.ended else None  # caught up while text may still come
                first = not facts.audio_bytes
                facts.audio_bytes += len(pcm)
                self._emit(AudioReceived(turn_id.decode(), pcm, first))
            return
        msg: dict[str, Any] = json.loads(frame)
        facts = self.turns.pop(msg.get("turn", ""), None)
        if facts is None:
            return
        if "error" in msg:
            err = TTSAPIError(f"chirp: {msg['error']}", provider="chirp", error_code="server_error")
            self._emit(TurnFailed(msg["turn"], err))
        else:
            self._emit(TurnDone(msg["turn"]))

    def next_deadline(self) -> float | None:
        owed = [f.owed_since + f.timeout for f in self.turns.values() if f.owed_since is not None]
        return min(owed, default=None)

    def tick(self, now: float) -> None:
        for turn_id, facts in list(self.turns.items()):
            if facts.owed_since is not None and now >= facts.owed_since + facts.timeout:
                del self.turns[turn_id]
                self.timeouts += 1
                self._send(json.dumps({"turn": turn_id, "cancel": True}))
                err = TTSTimeoutError(f"chirp: no audio for turn {turn_id} within {facts.timeout:g}s")
                self._emit(TurnFailed(turn_id, err))

    def awaiting_since(self) -> float | None:
        return min((f.owed_since for f in self.turns.values() if f.owed_since is not None), default=None)

    def connection_lost(self, code: int | None, reason: str, now: float) -> None:
        if self._closed:
            return
        self._closed = True
        err = TTSConnectionError(f"chirp: {describe_close(code, reason)}")
        for turn_id in list(self.turns):
            del self.turns[turn_id]
            self._emit(TurnFailed(turn_id, err))
        self._emit(ConnectionFailed(err))
