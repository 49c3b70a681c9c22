"""asyncio client for Kitta Realtime TTS v2, on the shared turn engine.

* :class:`~ttsbridge.kitta.session.KittaSession` is one WebSocket connection = one server session, on the
  engine's :class:`~ttsbridge.engine.Connection`; a *deferred* session (:meth:`KittaClient.preconnect`)
  connects and authenticates but holds ``start`` until a generation opens its turn on it.
* :class:`~ttsbridge.kitta.generation.KittaGeneration` is one user-intended generation; its retries (derived
  ``request_id``, replay of never-delivered segments, backoff from the failure) are decided by the protocol.
* :class:`KittaClient` holds the key, the URL and the knobs, and makes both.

The key travels only in the ``Authorization`` header (or the in-band ``auth`` frame with ``auth="frame"``),
never in the URL, and never reaches a log line: the engine's websockets logger masks it, frames included.
"""

from __future__ import annotations

import asyncio
import uuid
import weakref
from collections.abc import AsyncIterator

from ttsbridge import _keys
from ttsbridge._redact import mask_key
from ttsbridge.engine.connection import PING_AFTER_SILENCE, PONG_TIMEOUT, check_liveness_knobs
from ttsbridge.errors import TTSConnectionError, TTSInvalidOptionError
from ttsbridge.kitta.generation import KittaAudio, KittaGeneration
from ttsbridge.kitta.handshake import build_url, retry_request_id
from ttsbridge.kitta.models import DEFAULT_BASE_URL, KittaLimits, KittaOptions
from ttsbridge.kitta.protocol import KittaProtocol
from ttsbridge.kitta.session import KittaSession

__all__ = ["KittaAudio", "KittaClient", "KittaGeneration", "KittaSession", "build_url", "retry_request_id"]

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
        proxy: passed to ``websockets.connect`` (True = from the environment, None = direct).
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
        self.proxy = proxy
        self.ping_interval = ping_interval
        self.ping_after_silence = ping_after_silence
        self.pong_timeout = float(pong_timeout)
        self._sessions: set[KittaSession] = set()
        self._generations: weakref.WeakSet[KittaGeneration] = weakref.WeakSet()
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

    def track(self, item: KittaSession | KittaGeneration) -> None:
        """Register a live session or generation (so that :meth:`aclose` reaches it)."""
        if isinstance(item, KittaSession):
            self._sessions.add(item)
        else:
            self._generations.add(item)

    def untrack(self, session: KittaSession) -> None:
        """A session whose task is over: nothing of it is kept."""
        self._sessions.discard(session)

    def _new_protocol(self, label: str, options: KittaOptions) -> KittaProtocol:
        """A protocol for one new connection (no turn on it yet); ``label`` names it in logs."""
        return KittaProtocol(
            request=options.start_request(),
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

    def session(self, options: KittaOptions | None = None, *, request_id: str | None = None) -> KittaSession:
        """Start a session now (connect, authenticate, start in the background); ``wait_ready`` waits until it
        is ready."""
        if self._closed:
            raise TTSConnectionError("kitta: client is closed", retryable=False)
        rid = request_id or str(uuid.uuid4())
        proto = self._new_protocol(rid, self._options(options))
        proto.open_turn(rid, asyncio.get_running_loop().time())
        return KittaSession(self, proto)

    def preconnect(self, options: KittaOptions | None = None) -> KittaSession:
        """A warm connection: connects and authenticates in the background but holds ``start``, so no server
        session exists until a generation adopts it (``generation(session=...)``) with its own request_id."""
        if self._closed:
            raise TTSConnectionError("kitta: client is closed", retryable=False)
        placeholder = f"standby-{uuid.uuid4().hex[:12]}"  # never sent: begin() sets the turn's request_id
        return KittaSession(self, self._new_protocol(placeholder, self._options(options)))

    def generation(
        self,
        options: KittaOptions | None = None,
        *,
        request_id: str | None = None,
        session: KittaSession | None = None,
        not_before: float | None = None,
    ) -> KittaGeneration:
        """A new generation; adopts ``session`` (e.g. a ready standby) or starts connecting one now. Its
        ``start`` goes out no earlier than ``not_before`` (loop time)."""
        if self._closed:
            raise TTSConnectionError("kitta: client is closed", retryable=False)
        opts = self._options(options)
        if request_id is not None and not 1 <= len(request_id) <= 128:
            raise TTSInvalidOptionError("request_id", request_id, "1-128 characters")
        return KittaGeneration(self, opts, request_id=request_id, session=session, not_before=not_before)

    async def synthesize(
        self, text: str, options: KittaOptions | None = None, *, request_id: str | None = None
    ) -> AsyncIterator[bytes]:
        """One text -> PCM16 at ``options.sample_rate`` (or the server's rate when None). A failure after audio
        first yields all the audio received (the resampler's tail too), then raises."""
        from ttsbridge.kitta.turn import resampled

        opts = self._options(options)
        gen = self.generation(opts, request_id=request_id)
        try:
            await gen.send(text, flush=True)
            await gen.stop()
            async for pcm in resampled(gen, opts.sample_rate):
                yield pcm
        finally:
            await gen.aclose()

    async def aclose(self) -> None:
        """Close every session; open generations fail with a connection error."""
        self._closed = True
        err = TTSConnectionError("kitta: client closed", retryable=False)
        for gen in list(self._generations):
            await gen.abort(err)  # a generation waiting to retry fails now, and starts no session
        sessions = list(self._sessions)
        if sessions:
            await asyncio.gather(*(s.close(1000, "client closed") for s in sessions), return_exceptions=True)

    async def __aenter__(self) -> KittaClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
