"""The emulator's stats: typed per API (``emu.stats.nineninesix``, ``emu.stats.kitta``), with the flat names
older code reads (``emu.stats.ws_connections``, ``emu.stats.kitta_sessions``...) kept as aliases."""

from __future__ import annotations

from typing import Any, Generic, TypeVar, overload

from ttsbridge.emulator.connlog import ConnectionRecord
from ttsbridge.emulator.kitta.stats import KittaStats
from ttsbridge.emulator.nineninesix.stats import NineninesixStats
from ttsbridge.emulator.timings import ContextTiming, ContextTimings

__all__ = ["EmulatorStats"]

T = TypeVar("T")


class _Alias(Generic[T]):
    """``stats.<name>`` reads and writes ``stats.<part>.<name>`` (``kitta_<name>`` -> ``kitta.<name>``)."""

    def __init__(self, part: str) -> None:
        self.part = part
        self.attr = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.attr = name.removeprefix(f"{self.part}_")

    @overload
    def __get__(self, obj: None, owner: type) -> _Alias[T]: ...
    @overload
    def __get__(self, obj: EmulatorStats, owner: type) -> T: ...
    def __get__(self, obj: EmulatorStats | None, owner: type) -> Any:
        if obj is None:
            return self
        return getattr(getattr(obj, self.part), self.attr)

    def __set__(self, obj: EmulatorStats, value: T) -> None:
        setattr(getattr(obj, self.part), self.attr, value)


_N = "nineninesix"
_K = "kitta"


class EmulatorStats:
    """Counters and logs of one emulator: :class:`NineninesixStats` as ``nineninesix``, :class:`KittaStats`
    as ``kitta``. The flat names below are aliases of theirs (Kitta's with a ``kitta_`` prefix)."""

    def __init__(self) -> None:
        shared = ContextTimings()
        self.nineninesix = NineninesixStats(timings=shared)
        self.kitta = KittaStats(timings=shared)
        self._timings = shared
        #: Every accepted WebSocket of both APIs, in order (emulator/connlog.py): the server's own count.
        self.connections: list[ConnectionRecord] = []

    def sockets(self, api: str | None = None) -> list[ConnectionRecord]:
        """The connection records of ``api`` (``"nineninesix"``, ``"kitta"``; None: both)."""
        return [r for r in self.connections if api is None or r.api == api]

    def open_sockets(self, api: str | None = None) -> int:
        """How many WebSockets of ``api`` are open now, as the server counts them."""
        return sum(1 for r in self.sockets(api) if r.open)

    @property
    def timings(self) -> dict[str, ContextTiming]:
        """Per ``context_id`` (Nineninesix) / ``request_id`` (Kitta) timing records, both APIs in one dict
        (assignable: a bench swaps in ``{}`` between rounds)."""
        return self._timings.records

    @timings.setter
    def timings(self, records: dict[str, ContextTiming]) -> None:
        self._timings.records = records

    def mark_request(self, key: str, text: str) -> None:
        """Record the first request of ``key`` (see :class:`ContextTimings`)."""
        self._timings.mark_request(key, text)

    def mark_chunk(self, key: str) -> None:
        """Record the first chunk sent for ``key``."""
        self._timings.mark_chunk(key)

    def messages_of(self, connection_no: int) -> list[dict[str, Any]]:
        """The Nineninesix client messages of one connection, in order."""
        return self.nineninesix.messages_of(connection_no)

    def __repr__(self) -> str:
        return f"EmulatorStats(nineninesix={self.nineninesix!r}, kitta={self.kitta!r})"

    # -- Nineninesix (see NineninesixStats)
    ws_connections = _Alias[int](_N)
    ws_rejected = _Alias[int](_N)
    ws_open = _Alias[int](_N)
    messages = _Alias[list[tuple[int, dict[str, Any]]]](_N)
    cancels = _Alias[int](_N)
    contexts_started = _Alias[int](_N)
    contexts_done = _Alias[int](_N)
    contexts_cancelled = _Alias[int](_N)
    contexts_failed = _Alias[int](_N)
    contexts_rejected = _Alias[int](_N)
    chunks_sent = _Alias[int](_N)
    errors_sent = _Alias[list[tuple[int | None, str]]](_N)
    close_codes = _Alias[list[tuple[int, int]]](_N)
    drops = _Alias[int](_N)
    faults_fired = _Alias[list[str]](_N)
    http_requests = _Alias[int](_N)
    credits_charged = _Alias[int](_N)
    credits_refunded = _Alias[int](_N)

    # -- Kitta (see KittaStats)
    kitta_handshakes = _Alias[int](_K)
    kitta_handshake_urls = _Alias[list[str]](_K)
    kitta_rejected_handshakes = _Alias[list[int]](_K)
    kitta_connections = _Alias[int](_K)
    kitta_auth_modes = _Alias[list[str]](_K)
    kitta_sessions = _Alias[int](_K)
    kitta_request_ids = _Alias[list[str]](_K)
    kitta_segments = _Alias[int](_K)
    kitta_segment_texts = _Alias[list[str]](_K)
    kitta_segments_refunded = _Alias[int](_K)
    kitta_units_committed = _Alias[int](_K)
    kitta_units_refunded = _Alias[int](_K)
    kitta_audio_frames = _Alias[int](_K)
    kitta_errors = _Alias[list[str]](_K)
    kitta_server_closes = _Alias[list[int]](_K)
    kitta_client_closes = _Alias[int](_K)
    kitta_finished = _Alias[int](_K)
    kitta_drops = _Alias[int](_K)
    kitta_open = _Alias[int](_K)
    kitta_events = _Alias[list[tuple[float, str]]](_K)
