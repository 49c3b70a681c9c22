"""asyncio client for Kitta Realtime TTS v2, on the shared turn engine: the key, the URL and the knobs.

It makes the connections (:class:`~ttsbridge.kitta.connection.KittaConnection`: one WebSocket = one server
session, each with its :class:`~ttsbridge.kitta.protocol.KittaProtocol`) that the provider's turns
(:class:`~ttsbridge.engine.turn.EngineTurn`) run on: :meth:`KittaClient.connect` for a turn's attempt,
:meth:`KittaClient.preconnect` for a warm standby whose ``start`` is held until a turn adopts it.

The key travels only in the ``Authorization`` header (or the in-band ``auth`` frame with ``auth="frame"``),
never in the URL, and never reaches a log line: the engine's websockets logger masks it, frames included.
"""

from __future__ import annotations

import asyncio
import ssl as ssl_module
import uuid

from ttsbridge import _keys
from ttsbridge._redact import mask_key
from ttsbridge.engine.connection import PING_AFTER_SILENCE, PONG_TIMEOUT, check_liveness_knobs
from ttsbridge.engine.proxy import check_proxy
from ttsbridge.errors import TTSConnectionError, TTSInvalidOptionError
from ttsbridge.kitta.catalog import build_url, retry_request_id
from ttsbridge.kitta.connection import ConnectSettings, KittaConnection
from ttsbridge.kitta.models import DEFAULT_BASE_URL, KittaLimits, KittaOptions, StartRequest
from ttsbridge.kitta.protocol import KittaProtocol

__all__ = ["KittaClient", "KittaConnection", "build_url", "resolve_api_key", "retry_request_id"]

API_KEY_ENV = "KITTA_API_KEY"


def resolve_api_key(api_key: str | None) -> str:
    """The key from the argument or ``$KITTA_API_KEY``, registered with the redactor; a clear error if none."""
    return _keys.resolve_api_key(api_key, env=API_KEY_ENV, what="a Kitta API key")


class KittaClient:
    """Kitta Realtime TTS v2 client.

    Args:
        api_key: the key; defaults to ``$KITTA_API_KEY``.
        base_url: ``wss://realtime.fishaudio.org`` by default; http(s) URLs are mapped to ws(s); the path
            ``/v2/tts/live`` is appended unless present. Must not carry a key.
        options: default :class:`KittaOptions` for generations.
        auth: ``"header"`` (``Authorization: Bearer`` on the handshake) or ``"frame"`` (an in-band ``auth``
            event first, for proxies that strip headers).
        max_retries: retries of one generation (retryable errors, close 1012/1013, retryable handshakes).
        backoff_initial / backoff_max: exponential backoff with jitter between retries (seconds).
        connect_timeout: TCP + TLS + HTTP upgrade.
        event_timeout: longest server silence while it owes us something (authenticated, ready, audio,
            usage, finish).
        close_timeout: closing handshake.
        limits: client-side protocol limits.
        resume_after_audio: on a retryable failure after some segments completed (``usage`` received),
            continue the remaining, never-delivered segments on a new session. Never replays a segment
            whose audio was delivered either way.
        proxy: ``True`` (default): from the environment (``WSS_PROXY``/``HTTPS_PROXY``, ``NO_PROXY``: websockets'
            own reading); ``None``: direct; a URL (``http://proxy:3128``): that proxy, whatever the environment says.
        ssl: the TLS context for ``wss://`` (default: the shared verifying context, docs/production.md).
        ping_interval: a connection with nothing owed (the warm standby) silent this long gets a keepalive
            ping (2 s: a turn that takes a dead standby loses its turn, so a standby is checked often within
            its ``standby_max_age``, and one with a ping unanswered is not taken but replaced); None disables.
        ping_after_silence: a session the server owes something (``ready``, audio, ``finish``) that has been
            silent this long gets a WebSocket ping, and so does a turn's ``start`` on a standby silent this
            long; None disables the check (then only ``event_timeout`` notices a dead connection).
        pong_timeout: nothing at all within this long after such a ping: the connection is dead and the turn
            fails with :class:`~ttsbridge.errors.TTSSilentConnectionError` (not retried: the page allows no new
            request_id for an uncertain request); the next turn starts on a fresh connection.
    """

    provider = "kitta"

    def __init__(
        self,
        api_key: str | None = None,
        *,
        base_url: str = DEFAULT_BASE_URL,
        options: KittaOptions | None = None,
        auth: str = "header",
        max_retries: int = 3,
        backoff_initial: float = 0.25,
        backoff_max: float = 4.0,
        connect_timeout: float = 10.0,
        event_timeout: float = 20.0,
        close_timeout: float = 2.0,
        limits: KittaLimits | None = None,
        resume_after_audio: bool = True,
        proxy: str | bool | None = True,
        ping_interval: float | None = 2.0,
        ping_after_silence: float | None = PING_AFTER_SILENCE,
        pong_timeout: float = PONG_TIMEOUT,
        ssl: ssl_module.SSLContext | None = None,
    ) -> None:
        key = resolve_api_key(api_key)
        if auth not in ("header", "frame"):
            raise TTSInvalidOptionError("auth", auth, ["header", "frame"])
        for name, value, low in (
            ("max_retries", max_retries, 0),
            ("backoff_initial", backoff_initial, 0),
            ("backoff_max", backoff_max, 0),
            ("connect_timeout", connect_timeout, 1e-3),
            ("event_timeout", event_timeout, 1e-3),
            ("close_timeout", close_timeout, 1e-3),
            ("pong_timeout", pong_timeout, 1e-3),
        ):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < low:
                raise TTSInvalidOptionError(name, value, f"a number >= {low:g}")
        check_liveness_knobs(ping_interval=ping_interval, ping_after_silence=ping_after_silence)
        if options is not None and not isinstance(options, KittaOptions):
            raise TTSInvalidOptionError("options", type(options).__name__, "a KittaOptions")
        self._api_key = key.strip()
        self.url = build_url(base_url)
        self.options = options
        self.auth = auth
        self.max_retries = int(max_retries)
        self.backoff_initial = float(backoff_initial)
        self.backoff_max = float(backoff_max)
        self.connect_timeout = float(connect_timeout)
        self.event_timeout = float(event_timeout)
        self.close_timeout = float(close_timeout)
        self.limits = limits or KittaLimits()
        self.resume_after_audio = resume_after_audio
        self.proxy = check_proxy(proxy)
        self.ssl = ssl
        self.ping_interval = ping_interval
        self.ping_after_silence = ping_after_silence
        self.pong_timeout = float(pong_timeout)
        self._connections: set[KittaConnection] = set()
        self._closed = False

    def __repr__(self) -> str:
        return f"KittaClient(url={self.url!r}, auth={self.auth!r}, api_key={mask_key(self._api_key)})"

    # ---------------------------------------------------------------------------------------------- plumbing

    def _options(self, options: KittaOptions | None) -> KittaOptions:
        opts = options or self.options
        if opts is None:
            raise TTSInvalidOptionError(
                "options", None, "KittaOptions(voice_id=...) on the client or the call"
            )
        return opts

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def settings(self) -> ConnectSettings:
        """The knobs each new connection is made with."""
        return ConnectSettings(
            self.connect_timeout, self.close_timeout, self.ping_interval, self.ping_after_silence,
            self.pong_timeout, self.proxy, self.ssl,
        )  # fmt: skip

    def _new_protocol(self, label: str, request: StartRequest) -> KittaProtocol:
        """A protocol for one new connection (no turn on it yet); ``label`` names it in logs."""
        return KittaProtocol(
            request=request,
            auth=self.auth,
            token=self._api_key,
            limits=self.limits,
            secrets=(self._api_key,),
            url=self.url,
            event_timeout=self.event_timeout,
            max_retries=self.max_retries,
            backoff_initial=self.backoff_initial,
            backoff_max=self.backoff_max,
            resume_after_audio=self.resume_after_audio,
            label=label,
        )

    # ------------------------------------------------------------------------------------------------- API

    def connect(self, label: str, options: KittaOptions | None = None) -> KittaConnection:
        """A new connection, connecting and authenticating in the background; a turn opens on it at once
        (its text waits in the protocol until the socket is up). ``label`` names it until then."""
        if self._closed:
            raise TTSConnectionError("kitta: client is closed", retryable=False)
        proto = self._new_protocol(label, self._options(options).start_request())
        conn = KittaConnection(self.settings, proto, closed=lambda: self._closed, on_release=self._release)
        self._connections.add(conn)
        return conn

    def preconnect(self, options: KittaOptions | None = None) -> KittaConnection:
        """A warm connection: connects and authenticates in the background but holds ``start``, so no server
        session exists until a turn opens on it with its own request_id."""
        return self.connect(f"standby-{uuid.uuid4().hex[:12]}", options)  # the label is never sent

    def _release(self, conn: KittaConnection) -> None:
        self._connections.discard(conn)

    async def aclose(self) -> None:
        """Close every connection; a turn on one fails with a connection error (not retried)."""
        self._closed = True
        err = TTSConnectionError("kitta: client closed", retryable=False)
        conns = list(self._connections)
        if conns:
            await asyncio.gather(*(c.abort(err) for c in conns), return_exceptions=True)

    async def __aenter__(self) -> KittaClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
