"""The emulator server: one aiohttp app serving the Nineninesix API and the Kitta endpoint on loopback.

Shared plumbing of both APIs: lifecycle, addresses, the open connections, waiting on stats changes. The
concurrency slots and credits are the Nineninesix API's (its contexts and HTTP requests share them)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Callable
from types import TracebackType
from typing import Any

from aiohttp import web

from ttsbridge.emulator.config import EmulatorConfig
from ttsbridge.emulator.host import Connection
from ttsbridge.emulator.kitta import setup_kitta_routes
from ttsbridge.emulator.nineninesix import EMULATOR_KEY, setup_nineninesix_routes
from ttsbridge.emulator.nineninesix.faults import Fault, FaultBook
from ttsbridge.emulator.stats import EmulatorStats
from ttsbridge.emulator.timings import TIMINGS_KEPT, ContextTiming
from ttsbridge.emulator.voices import VoiceRegistry

__all__ = ["TIMINGS_KEPT", "ContextTiming", "Emulator", "EmulatorStats", "build_app", "run_forever", "serve"]

log = logging.getLogger("ttsbridge.emulator")


class Emulator:
    """The local Nineninesix + Kitta server.

    ``async with Emulator(EmulatorConfig(...)) as emu:`` binds ``config.host`` on ``config.port`` (0 = a free
    port) and serves until the block ends. Everything in ``emu.config`` is read live.
    """

    def __init__(
        self, config: EmulatorConfig | None = None, *, ssl_context: ssl.SSLContext | None = None
    ) -> None:
        self.config = config if config is not None else EmulatorConfig()
        #: Serve TLS (``https://`` and ``wss://``) with this server context (a test CA's certificate).
        self.ssl_context = ssl_context
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
        site = web.TCPSite(runner, self.config.host, self.config.port, ssl_context=self.ssl_context)
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
    def _tls(self) -> str:
        return "s" if self.ssl_context is not None else ""

    @property
    def base_url(self) -> str:
        """``http://HOST:PORT`` (``https://`` with TLS; clients derive ``ws(s)://`` from it)."""
        return f"http{self._tls}://{self._url_host}:{self._port}"

    @property
    def ws_url(self) -> str:
        """``ws://HOST:PORT/tts/websocket`` (``wss://`` with TLS; no key: add ``?api_key=`` yourself)."""
        return f"ws{self._tls}://{self._url_host}:{self._port}/tts/websocket"

    @property
    def kitta_url(self) -> str:
        """``ws://HOST:PORT/v2/tts/live`` (``wss://`` with TLS): the Kitta endpoint."""
        return f"ws{self._tls}://{self._url_host}:{self._port}/v2/tts/live"

    @property
    def api_key(self) -> str:
        """A key this emulator accepts (for the Nineninesix API)."""
        return self.config.a_valid_key()

    def api_key_for(self, provider: str) -> str:
        """A key this emulator accepts for ``provider``'s API, by the provider registry's names
        (``"nineninesix"``, ``"kitta"``: the emulator's own wiring, it never imports the registry)."""
        keys = {"nineninesix": self.config.a_valid_key, "kitta": self.config.kitta.a_valid_key}
        if provider not in keys:
            raise ValueError(f"the emulator serves {sorted(keys)}, not {provider!r}")
        return keys[provider]()

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
        self.stats.nineninesix.credits_charged += chars
        return True

    def refund(self, chars: int) -> None:
        if chars <= 0:
            return
        if self.config.credits is not None:
            self.config.credits += chars
        self.stats.nineninesix.credits_refunded += chars
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
