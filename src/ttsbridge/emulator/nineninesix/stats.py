"""Counters and logs of the Nineninesix API (``emu.stats.nineninesix``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ttsbridge.emulator.timings import ContextTimings

__all__ = ["NineninesixStats"]


@dataclass
class NineninesixStats:
    """Counters and logs of the Nineninesix API.

    Attributes:
        ws_connections: WebSocket handshakes accepted.
        ws_rejected: handshakes refused (401).
        ws_open: WebSockets open now.
        messages: ``(connection_no, message)`` for every client->server JSON message (invalid ones as
            ``{"<invalid json>": text}`` / ``{"<not an object>": value}`` / ``{"<binary>": size}``).
        cancels: cancel messages received.
        contexts_started / contexts_done / contexts_cancelled / contexts_failed / contexts_rejected: context
            (and HTTP TTS request) lifecycle counts; rejected = refused by the concurrency limit.
        chunks_sent: WebSocket ``chunk`` frames written.
        errors_sent: ``(connection_no or None for HTTP, error_code)`` of every error sent.
        close_codes: ``(connection_no, code)`` of every close the server initiated.
        drops: connections cut without a close frame (faults, ``drop_connections``).
        faults_fired: labels of fired faults (``"drop"``, ``"stall"``, ``"close"``, ``"error:<code>"``).
        http_requests: HTTP requests (TTS and voices), including refused ones.
        credits_charged / credits_refunded: characters billed and credited back.
        timings: per-context timing records (shared with Kitta's stats; see ``ContextTimings``).
    """

    ws_connections: int = 0
    ws_rejected: int = 0
    ws_open: int = 0
    messages: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    cancels: int = 0
    contexts_started: int = 0
    contexts_done: int = 0
    contexts_cancelled: int = 0
    contexts_failed: int = 0
    contexts_rejected: int = 0
    chunks_sent: int = 0
    errors_sent: list[tuple[int | None, str]] = field(default_factory=list)
    close_codes: list[tuple[int, int]] = field(default_factory=list)
    drops: int = 0
    faults_fired: list[str] = field(default_factory=list)
    http_requests: int = 0
    credits_charged: int = 0
    credits_refunded: int = 0
    timings: ContextTimings = field(default_factory=ContextTimings)

    def messages_of(self, connection_no: int) -> list[dict[str, Any]]:
        """The client messages of one connection, in order."""
        return [m for n, m in self.messages if n == connection_no]
