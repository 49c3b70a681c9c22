"""The emulator server: one aiohttp app serving the Nineninesix API and the Kitta endpoint on loopback."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Protocol

from aiohttp import web

from ttsbridge.emulator.config import EmulatorConfig
from ttsbridge.emulator.faults import Fault, FaultBook
from ttsbridge.emulator.kitta import setup_kitta_routes
from ttsbridge.emulator.nineninesix import EMULATOR_KEY, setup_nineninesix_routes
from ttsbridge.emulator.voices import VoiceRegistry

__all__ = ["ContextTiming", "Emulator", "EmulatorStats", "build_app", "run_forever", "serve"]

#: how many per-context timing records :class:`EmulatorStats` keeps (the oldest go first)
TIMINGS_KEPT = 4096

log = logging.getLogger("ttsbridge.emulator")


class Connection(Protocol):
    """An open socket the emulator can drop or shut down (Nineninesix and Kitta connections alike)."""

    def abort(self) -> None: ...

    async def shutdown(self, code: int = 1001, reason: str = "") -> None: ...


@dataclass
class ContextTiming:
    """When the server got a context's first request and sent its first chunk (``time.perf_counter()``)."""

    first_request: float
    first_chunk: float | None = None
    #: the first request's text (up to 80 characters): lets a bench match a record to its turn
    text: str = ""


@dataclass
class EmulatorStats:
    """Counters and logs of one emulator. Plain attributes: the Kitta endpoint adds its own ``kitta_*``.

    Attributes:
        ws_connections: Nineninesix WebSocket handshakes accepted.
        ws_rejected: handshakes refused (401).
        ws_open: Nineninesix WebSockets open now.
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
        http_requests: HTTP requests to the Nineninesix API (TTS and voices), including refused ones.
        credits_charged / credits_refunded: characters billed and credited back.
        timings: per ``context_id`` (Nineninesix) / ``request_id`` (Kitta), the server's own time from the
            first request (Kitta: first ``text``) to the first chunk sent; the newest ``TIMINGS_KEPT``.
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
    timings: dict[str, ContextTiming] = field(default_factory=dict)

    def mark_request(self, key: str, text: str) -> None:
        """Record the first request of ``key`` (later ones are ignored)."""
        if key not in self.timings:
            self.timings[key] = ContextTiming(time.perf_counter(), None, text[:80])
            while len(self.timings) > TIMINGS_KEPT:
                self.timings.pop(next(iter(self.timings)))

    def mark_chunk(self, key: str) -> None:
        """Record the first chunk sent for ``key`` (after its first request)."""
        t = self.timings.get(key)
        if t is not None and t.first_chunk is None:
            t.first_chunk = time.perf_counter()

    def messages_of(self, connection_no: int) -> list[dict[str, Any]]:
        """The client messages of one connection, in order."""
        return [m for n, m in self.messages if n == connection_no]


class Emulator:
    """The local Nineninesix + Kitta server.

    ``async with Emulator(EmulatorConfig(...)) as emu:`` binds ``config.host`` on ``config.port`` (0 = a free
    port) and serves until the block ends. Everything in ``emu.config`` is read live.
    """

    def __init__(self, config: EmulatorConfig | None = None) -> None:
        self.config = config if config is not None else EmulatorConfig()
        self.stats = EmulatorStats()
        self.faults = FaultBook()
        self.voices = VoiceRegistry(self.config.default_voice)
        self.stopping = False
        self._runner: web.AppRunner | None = None
        self._port = 0
        self._connections: set[Connection] = set()
        self._connection_no = 0
        self._active = 0
        self._changed: asyncio.Event | None = None

    # -- lifecycle

    async def start(self) -> Emulator:
        if self._runner is not None:
            return self
        self.voices.set_default(self.config.default_voice)
        app = build_app(self)
        # access_log=None: request lines carry ?api_key=..., which must never reach a log.
        runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=1.0)
        await runner.setup()
        site = web.TCPSite(runner, self.config.host, self.config.port)
        await site.start()
        self._runner = runner
        addresses = runner.addresses
        self._port = int(addresses[0][1]) if addresses else self.config.port
        self.stopping = False
        log.info("emulator listening on %s", self.base_url)
        return self

    async def stop(self) -> None:
        if self._runner is None:
            return
        self.stopping = True
        conns = list(self._connections)
        if conns:
            await asyncio.gather(
                *(c.shutdown(1001, "server shutting down") for c in conns), return_exceptions=True
            )
            with contextlib.suppress(asyncio.TimeoutError):
                await self.wait_until(lambda: not self._connections, timeout=3.0)
        for c in list(self._connections):
            c.abort()
        runner, self._runner = self._runner, None
        await runner.cleanup()

    async def __aenter__(self) -> Emulator:
        return await self.start()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    # -- addresses

    @property
    def port(self) -> int:
        return self._port

    @property
    def _url_host(self) -> str:
        host = self.config.host
        if host in ("", "0.0.0.0"):
            return "127.0.0.1"
        if host == "::":
            return "[::1]"
        return f"[{host}]" if ":" in host else host

    @property
    def base_url(self) -> str:
        """``http://HOST:PORT`` (clients derive ``ws://`` from it)."""
        return f"http://{self._url_host}:{self._port}"

    @property
    def ws_url(self) -> str:
        """``ws://HOST:PORT/tts/websocket`` (no key: add ``?api_key=`` yourself)."""
        return f"ws://{self._url_host}:{self._port}/tts/websocket"

    @property
    def kitta_url(self) -> str:
        """``ws://HOST:PORT/v2/tts/live``: the Kitta endpoint."""
        return f"ws://{self._url_host}:{self._port}/v2/tts/live"

    @property
    def api_key(self) -> str:
        """A key this emulator accepts."""
        return self.config.a_valid_key()

    # -- faults

    def add_fault(self, fault: Fault) -> Fault:
        """Arm a fault (see :class:`Fault`); returns it (``fault.fired`` counts its firings)."""
        return self.faults.add(fault)

    def clear_faults(self) -> None:
        self.faults.clear()

    async def drop_connections(self, timeout: float = 5.0) -> int:
        """Cut every open WebSocket now (no close frame: a dead network); wait until their handlers are gone.
        Returns how many were dropped."""
        conns = list(self._connections)
        for c in conns:
            c.abort()
        with contextlib.suppress(asyncio.TimeoutError):
            await self.wait_until(lambda: not any(c in self._connections for c in conns), timeout=timeout)
        return len(conns)

    # -- for the endpoints (Nineninesix and Kitta)

    def register_connection(self, conn: Connection) -> None:
        self._connections.add(conn)

    def unregister_connection(self, conn: Connection) -> None:
        self._connections.discard(conn)
        self.notify()

    def next_connection_number(self) -> int:
        self._connection_no += 1
        return self._connection_no

    @property
    def active_contexts(self) -> int:
        """Contexts (and HTTP TTS requests) holding a concurrency slot now."""
        return self._active

    def acquire_slot(self) -> bool:
        """Take a concurrency slot; False when ``max_concurrent_contexts`` is reached."""
        limit = self.config.max_concurrent_contexts
        if limit is not None and self._active >= limit:
            return False
        self._active += 1
        return True

    def release_slot(self) -> None:
        self._active = max(0, self._active - 1)

    def charge(self, chars: int) -> bool:
        """Bill ``chars`` characters; False (nothing billed) if the credits don't cover them."""
        credits = self.config.credits
        if credits is not None:
            if credits < chars:
                return False
            self.config.credits = credits - chars
        self.stats.credits_charged += chars
        return True

    def refund(self, chars: int) -> None:
        if chars <= 0:
            return
        if self.config.credits is not None:
            self.config.credits += chars
        self.stats.credits_refunded += chars
        self.notify()

    # -- waiting on the emulator (tests)

    def notify(self) -> None:
        """Wake :meth:`wait_until` waiters (called whenever stats change)."""
        ev = self._changed
        if ev is not None:
            self._changed = None
            ev.set()

    async def wait_until(self, predicate: Callable[[], bool], timeout: float = 5.0) -> None:
        """Wait until ``predicate()`` is true (re-checked on every stats change); TimeoutError after
        ``timeout`` seconds."""

        async def _wait() -> None:
            while not predicate():
                if self._changed is None:
                    self._changed = asyncio.Event()
                await self._changed.wait()

        await asyncio.wait_for(_wait(), timeout)

    def __repr__(self) -> str:
        return f"Emulator(base_url={self.base_url!r}, open={len(self._connections)})"


def build_app(emulator: Emulator) -> web.Application:
    """The aiohttp app of ``emulator``: Nineninesix routes plus the Kitta endpoint."""
    app = web.Application(client_max_size=32 * 1024 * 1024)
    app[EMULATOR_KEY] = emulator
    setup_nineninesix_routes(app)
    setup_kitta_routes(app, emulator)
    return app


async def serve(
    config: EmulatorConfig | None = None, *, ready: Callable[[Emulator], Any] | None = None
) -> None:
    """Run an emulator until cancelled (the CLI's ``ttsbridge emulator``). ``ready(emu)`` is called once it
    listens (e.g. to print ``emu.base_url``)."""
    async with Emulator(config) as emu:
        if ready is not None:
            ready(emu)
        await asyncio.get_running_loop().create_future()


def run_forever(host: str = "127.0.0.1", port: int = 8765, **config: Any) -> None:
    """Blocking: serve an emulator on ``host:port`` until Ctrl-C. Extra keyword arguments are
    :class:`EmulatorConfig` fields."""

    def _ready(emu: Emulator) -> None:
        print(
            f"ttsbridge emulator: Nineninesix {emu.base_url} (WebSocket {emu.ws_url}), Kitta {emu.kitta_url}; "
            f"{emu.config.keys_line()}. Ctrl-C stops.",
            flush=True,
        )

    config.setdefault("log_messages", False)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(EmulatorConfig(host=host, port=port, **config), ready=_ready))
