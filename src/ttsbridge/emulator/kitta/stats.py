"""Counters and logs of the Kitta endpoint (``emu.stats.kitta``; also ``emu.stats.kitta_<name>``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ttsbridge.emulator.timings import ContextTimings

__all__ = ["KittaStats"]


@dataclass
class KittaStats:
    """Counters and logs of the Kitta endpoint.

    Attributes:
        handshakes / handshake_urls: upgrade requests seen (and their path with query).
        rejected_handshakes: HTTP statuses of refused upgrades.
        connections / auth_modes: WebSockets accepted, and how each authenticated (``header`` | ``frame``).
        open: Kitta WebSockets open now.
        sessions / request_ids: ``start`` events accepted, and their request ids.
        segments / segment_texts: flushed segments (markers removed) queued for synthesis.
        segments_refunded / units_committed / units_refunded: billing.
        audio_frames: ``audio`` events sent.
        errors / server_closes / client_closes: error codes sent, closes the server sent, closes the client sent.
        finished: sessions that ended with ``finish``.
        drops: connections cut without a close frame.
        events: ``(time.monotonic(), "connect" | "start" | "error")``, in order.
        timings: per-request timing records (shared with Nineninesix's stats; see ``ContextTimings``).
    """

    handshakes: int = 0
    handshake_urls: list[str] = field(default_factory=list)
    rejected_handshakes: list[int] = field(default_factory=list)
    connections: int = 0
    auth_modes: list[str] = field(default_factory=list)
    sessions: int = 0
    request_ids: list[str] = field(default_factory=list)
    segments: int = 0
    segment_texts: list[str] = field(default_factory=list)
    segments_refunded: int = 0
    units_committed: int = 0
    units_refunded: int = 0
    audio_frames: int = 0
    errors: list[str] = field(default_factory=list)
    server_closes: list[int] = field(default_factory=list)
    client_closes: int = 0
    finished: int = 0
    drops: int = 0
    open: int = 0
    events: list[tuple[float, str]] = field(default_factory=list)
    timings: ContextTimings = field(default_factory=ContextTimings)
