"""asyncio client for Kitta Realtime TTS v2 over ``websockets``.

* :class:`KittaSession` is one WebSocket connection = one server session. It connects, authenticates and
  starts in a background task as soon as it is created; commands queue in its sans-I/O
  :class:`~ttsbridge.kitta.protocol.KittaProtocol` until the server is ``ready``. A *deferred* session
  (:meth:`KittaClient.preconnect`) connects and authenticates but holds ``start`` until
  :meth:`KittaSession.begin`: a warm connection with no server session behind it.
* :class:`KittaGeneration` is one user-intended generation: it owns a session and, on a retryable failure
  (``retryable: true``, close 1012/1013, a retryable handshake answer), moves to a fresh session with a
  derived ``request_id`` (``<id>.r1``, ``<id>.r2``...) and replays only segments none of whose audio was
  delivered.
* :class:`KittaClient` holds the key, the URL and the knobs, and makes both.

The key travels only in the ``Authorization`` header (or the in-band ``auth`` frame with ``auth="frame"``),
never in the URL, and never reaches a log line: the ``websockets`` logger of our connections redacts it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import random
import time
import uuid
import weakref
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import Any, Final, NamedTuple
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus, InvalidURI
from websockets.frames import Frame
from websockets.typing import Subprotocol

from ttsbridge._redact import mask_key, redact, register_secret
from ttsbridge.errors import (
    TTSAPIError,
    TTSBridgeError,
    TTSConnectionError,
    TTSInvalidOptionError,
    TTSTimeoutError,
)
from ttsbridge.kitta.models import (
    DEFAULT_BASE_URL,
    PATH,
    SUBPROTOCOL,
    AudioEvent,
    AuthenticatedEvent,
    FinishEvent,
    KittaLimits,
    KittaOptions,
    ReadyEvent,
)
from ttsbridge.kitta.protocol import KittaProtocol, KittaProtocolError, SegmentStatus, State

__all__ = ["KittaAudio", "KittaClient", "KittaGeneration", "KittaSession", "build_url", "retry_request_id"]

log = logging.getLogger("ttsbridge.kitta")

_RETRYABLE_HTTP: Final = frozenset({408, 425, 429, 500, 502, 503, 504})
_HTTP_CODES: Final = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    429: "rate_limited",
}
_KEY_PARAMS: Final = frozenset({"token", "api_key", "apikey", "key", "access_token"})
_END: Final = object()
#: A retry's connection is opened this long before its backoff ends (its handshake overlaps the backoff).
_PRECONNECT_LEAD: Final = 2.0

# Keys registered by live clients: the websockets logger of our connections masks them (it logs handshake
# headers at DEBUG, Authorization included).
_SECRETS: set[str] = set()


def _holds_secret(data: bytes | bytearray | memoryview) -> bool:
    raw = bytes(data)
    return any(secret.encode() in raw for secret in _SECRETS)


class _RedactFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple) and any(
            isinstance(a, Frame) and _holds_secret(a.data) for a in record.args
        ):
            # websockets logs frames at DEBUG with their payload shown as hex: the in-band auth frame would
            # put the key's bytes in the log, where a text mask cannot see them. Show the frame's size only.
            record.args = tuple(
                f"{a.opcode.name} *** [{len(a.data)} bytes, credential masked]"
                if isinstance(a, Frame) and _holds_secret(a.data)
                else a
                for a in record.args
            )
        try:
            text = record.getMessage()
        except Exception:  # a broken format string is not ours to fix
            return True
        clean = redact(text, _SECRETS)
        if clean != text:
            record.msg = clean
            record.args = None
        return True


_ws_log = logging.getLogger("ttsbridge.kitta.websockets")
_ws_log.addFilter(_RedactFilter())


API_KEY_ENV = "KITTA_API_KEY"


def resolve_api_key(api_key: str | None) -> str:
    """The key from the argument or ``$KITTA_API_KEY``, registered with the redactor; a clear error if none."""
    key = api_key if api_key is not None else os.environ.get(API_KEY_ENV)
    register_secret(key)
    if not key or not key.strip():
        raise TTSInvalidOptionError(
            "api_key", None, f"a Kitta API key, passed as api_key= or set in ${API_KEY_ENV}"
        )
    return key


class KittaAudio(NamedTuple):
    """PCM16 LE mono audio at ``sample_rate`` (the server's rate for this session)."""

    pcm: bytes
    sample_rate: int


def _safe_url(url: str) -> str:
    """``url`` for an error message: no user info, no query (either may hold a credential)."""
    try:
        parts = urlsplit(url)
        host = parts.netloc.rpartition("@")[2]
        return urlunsplit((parts.scheme, host, parts.path, "", "")) + ("?…" if parts.query else "")
    except ValueError:
        return "<unparsable URL>"


def build_url(base_url: str) -> str:
    """``base_url`` -> the ``/v2/tts/live`` WebSocket URL (http -> ws, https -> wss). A key in the URL is
    refused (:class:`TTSInvalidOptionError`): Kitta keys never travel in a URL."""
    parts = urlsplit(base_url)
    shown = _safe_url(base_url)
    scheme = {"http": "ws", "https": "wss", "ws": "ws", "wss": "wss"}.get(parts.scheme.lower())
    if scheme is None or not parts.netloc:
        raise TTSInvalidOptionError("base_url", shown, "an absolute ws://, wss://, http:// or https:// URL")
    if any(k.lower() in _KEY_PARAMS for k, _ in parse_qsl(parts.query, keep_blank_values=True)):
        raise TTSInvalidOptionError(
            "base_url", shown, "a URL without credentials", hint="pass the key as api_key="
        )
    if "@" in parts.netloc:
        raise TTSInvalidOptionError("base_url", shown, "a URL without user:password")
    path = parts.path.rstrip("/")
    if not path.endswith(PATH):
        path += PATH
    return urlunsplit((scheme, parts.netloc, path, parts.query, ""))


def retry_request_id(base: str, attempt: int) -> str:
    """``request_id`` of retry ``attempt`` (1, 2...) of the generation first started as ``base``.

    The first id is burnt server-side once its session was created (reuse -> ``invalid_state``), so a retry
    needs a new one. Deriving it (``<base>.r<attempt>``) keeps the duplicate protection meaningful: one
    attempt of one generation can never be started twice, and support can trace the lineage."""
    suffix = f".r{attempt}"
    return base[: 128 - len(suffix)] + suffix


def _handshake_error(exc: InvalidStatus, api_key: str) -> TTSAPIError:
    response = exc.response
    status = response.status_code
    code = _HTTP_CODES.get(status, "server_error" if status >= 500 else f"http_{status}")
    message = f"handshake rejected with HTTP {status}"
    try:
        body = json.loads(response.body or b"{}")
        if isinstance(body, dict):
            if isinstance(body.get("error"), str):
                code = body["error"]
            if isinstance(body.get("message"), str):
                message = body["message"]
    except ValueError:
        pass
    retry_after: float | None = None
    raw = response.headers.get("Retry-After")
    if raw:
        with contextlib.suppress(ValueError):
            retry_after = max(0.0, float(raw))
    return TTSAPIError(
        redact(message, (api_key,)),  # the body is the server's text: it may echo the key it was given
        provider="kitta",
        error_code=redact(code, (api_key,)),
        status_code=status,
        retryable=status in _RETRYABLE_HTTP,
        closes_connection=True,
        retry_after=retry_after,
    )


# ------------------------------------------------------------------------------------------------ session


class KittaSession:
    """One WebSocket connection = one Kitta session. Starts connecting at construction (needs a running loop).

    Received events land in :attr:`inbox` (then the end marker); :attr:`wakeup` is set on each arrival.
    """

    def __init__(self, client: KittaClient, proto: KittaProtocol) -> None:
        self.client = client
        self.proto = proto
        self.inbox: deque[Any] = deque()
        self.wakeup = asyncio.Event()
        self.authenticated = asyncio.Event()  # set on authenticated, and on end
        self.ready = asyncio.Event()  # set on ready, and on end
        self.ended = False
        #: When the outcome became known (monotonic): a retry's backoff counts from here.
        self.ended_at: float | None = None
        self.error: TTSBridgeError | None = None
        self.ws: ClientConnection | None = None
        self.created_at = time.monotonic()
        #: When the server last sent something (or the session was created): silence is measured from here.
        self.last_event_at = self.created_at
        self._send_lock = asyncio.Lock()
        self._pumps: set[asyncio.Task[None]] = set()
        #: Set by the generation once it is done: nobody will read the inbox again.
        self.abandoned = False
        self._closing = False
        client._sessions.add(self)
        self._task = asyncio.create_task(self._run(), name=f"kitta-session-{proto.request_id}")

    def __repr__(self) -> str:
        state = self.proto.state.value
        return f"KittaSession(request_id={self.request_id!r}, state={state}, ended={self.ended})"

    @property
    def request_id(self) -> str:
        return self.proto.request_id

    @property
    def age(self) -> float:
        return time.monotonic() - self.created_at

    @property
    def alive(self) -> bool:
        """Not ended and not failed/closed (it may still be connecting)."""
        return not self.ended and not self.proto.terminal and not self._closing

    @property
    def task(self) -> asyncio.Task[None]:
        return self._task

    async def _run(self) -> None:
        try:
            try:
                ws = await self.client._handshake()
            except TTSBridgeError as exc:
                self.proto.fail(exc)
                return
            if self._closing:
                await _close_draining(ws, 1000, "closed", self.client.close_timeout)
                return
            self.ws = ws
            log.debug("kitta %s: connected (auth=%s)", self.request_id, self.proto.auth)
            await self.pump()
            code, reason = await self._read(ws)
            if code is not None:
                # The outcome is decided (finish, error event, protocol error): report it now, then finish
                # the close in the background of this task, bounded, reading and discarding what still comes.
                self._mark_ended()
                await _close_draining(ws, code, reason, self.client.close_timeout)
        finally:
            self._mark_ended()
            self._release()

    def _release(self) -> None:
        """The task is over: the socket goes; so does the inbox once its reader is done with it."""
        self.ws = None
        if self.abandoned:
            self.inbox.clear()
        self.client._sessions.discard(self)

    async def _read(self, ws: ClientConnection) -> tuple[int | None, str]:
        """Read until the outcome is known; returns the close to send (None: the socket is closed)."""
        try:
            async for message in ws:
                if isinstance(message, str):
                    raise KittaProtocolError("kitta: the server sent a text frame (MessagePack expected)")
                self.last_event_at = time.monotonic()
                events = self.proto.receive(message)
                if events:
                    for event in events:
                        self.inbox.append(event)
                        if isinstance(event, AuthenticatedEvent):
                            self.authenticated.set()
                        elif isinstance(event, ReadyEvent):
                            self.ready.set()
                    self.wakeup.set()
                await self.pump()
                if self.proto.state is State.FINISHED:
                    return 1000, "finished"
                if self.proto.state is State.FAILED:
                    # The error event decides the outcome (the close that should follow changes nothing).
                    return 1000, "error received"
        except ConnectionClosed:
            pass
        except KittaProtocolError as exc:
            self.proto.fail(exc)
            log.warning("kitta %s: %s", self.request_id, exc)
            return 1002, "protocol error"
        except Exception as exc:  # a bug of ours: fail the session loudly rather than hang
            log.exception("kitta %s: unexpected error in the session reader", self.request_id)
            self.proto.fail(KittaProtocolError(f"kitta: internal error: {type(exc).__name__}"))
            return 1011, "client error"
        return None, ""

    def _mark_ended(self) -> None:
        """The session is over: record why and wake every waiter (authenticated, ready, inbox)."""
        if self.ended:
            return
        code: int | None = None
        reason = ""
        if self.ws is not None:
            code = self.ws.close_code
            reason = self.ws.close_reason or ""
        self.error = self.proto.connection_lost(code, reason)
        if self.error is not None:
            log.debug("kitta %s: session ended: %s", self.request_id, self.error)
        self.ended = True
        self.ended_at = time.monotonic()
        self.authenticated.set()
        self.ready.set()
        if not self.abandoned:
            self.inbox.append(_END)
        self.wakeup.set()

    def begin(self, request_id: str | None = None, options: KittaOptions | None = None) -> None:
        """Send the held ``start`` of a deferred (pre-connected) session, for ``request_id``/``options``."""
        request = options.start_request() if options is not None else None
        self.proto.begin(request_id, request)
        if request_id is not None:
            self._task.set_name(f"kitta-session-{request_id}")
        self.last_event_at = time.monotonic()  # the server owes us 'ready' from now on
        if self.proto.has_data_to_send:
            self._pump_soon()

    def _pump_soon(self) -> None:
        task = asyncio.create_task(self.pump(), name=f"kitta-pump-{self.request_id}")
        self._pumps.add(task)
        task.add_done_callback(self._pumps.discard)

    async def pump(self) -> None:
        """Write whatever the protocol allows now, in order."""
        ws = self.ws
        if ws is None or not self.proto.has_data_to_send:
            return
        async with self._send_lock:
            for frame in self.proto.data_to_send():
                try:
                    await ws.send(frame)
                except ConnectionClosed:
                    return  # the reader sees the close

    async def wait_ready(self, timeout: float) -> None:
        """Until ``ready``; raises the session's error, or :class:`TTSTimeoutError` (and closes)."""
        try:
            await asyncio.wait_for(self.ready.wait(), timeout)
        except asyncio.TimeoutError:
            await self.close(1000, "ready timeout")
            raise TTSTimeoutError(f"kitta: no 'ready' within {timeout:g} s") from None
        if not self.proto.is_ready:
            raise self.error or TTSConnectionError("kitta: session closed before 'ready'")

    async def wait_authenticated(self, timeout: float) -> None:
        """Until ``authenticated`` (a warm connection); raises the session's error, or a timeout."""
        try:
            await asyncio.wait_for(self.authenticated.wait(), timeout)
        except asyncio.TimeoutError:
            await self.close(1000, "authentication timeout")
            raise TTSTimeoutError(f"kitta: no 'authenticated' within {timeout:g} s") from None
        if not self.alive:
            raise self.error or TTSConnectionError("kitta: connection closed before 'authenticated'")

    async def close(self, code: int = 1000, reason: str = "", *, wait: bool = True) -> None:
        """Close the socket (bounded); nothing more is sent or delivered. Idempotent.

        A session whose outcome is already known (``ended``) finishes its close in its own task, bounded;
        ``wait=False`` returns at once instead of waiting for that."""
        self._closing = True
        self.proto.close()
        ws = self.ws
        if ws is None and not self._task.done():
            self._task.cancel()  # still handshaking
        elif ws is not None and not self.ended:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(ws.close(code, reason), self.client.close_timeout + 1.0)
        if not self._task.done() and (wait or not self.ended):
            done, _ = await asyncio.wait({self._task}, timeout=self.client.close_timeout + 2.0)
            if not done:
                self._task.cancel()
                await asyncio.wait({self._task}, timeout=1.0)
        if self._task.done() and not self._task.cancelled():
            self._task.exception()  # retrieved: never "exception was never retrieved"
        # A task cancelled before its first step never ran _run's finally: end the session here, or
        # wait_ready() and the generation's iterator would wait for their timeouts.
        self._mark_ended()
        if self._task.done():
            self._release()


async def _close_draining(ws: ClientConnection, code: int, reason: str, timeout: float) -> None:
    """Close ``ws`` within ``timeout``: read and discard what the server still sends (so its close reply is
    not stuck behind unread frames), abort the transport if the close handshake does not complete."""

    async def drain() -> None:
        with contextlib.suppress(Exception):
            async for _ in ws:
                await asyncio.sleep(0)  # a server that never stops must not starve the loop

    drainer = asyncio.create_task(drain(), name="kitta-close-drain")
    try:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(ws.close(code, reason), timeout)
    finally:
        drainer.cancel()
        await asyncio.wait({drainer}, timeout=1.0)
        if ws.close_code is None:
            ws.transport.abort()


# --------------------------------------------------------------------------------------------- generation


class KittaGeneration:
    """One user-intended generation (text in, PCM out), with bounded retries across sessions.

    ``send()`` may be called before the session is ready (text queues). Iterate for :class:`KittaAudio` in
    order; iteration ends after ``finish`` (following :meth:`stop`) or after :meth:`cancel`, and raises a
    :class:`TTSBridgeError` when the generation fails.
    """

    def __init__(
        self,
        client: KittaClient,
        options: KittaOptions,
        *,
        request_id: str | None = None,
        session: KittaSession | None = None,
    ) -> None:
        self._client = client
        self.options = options
        rid = request_id or str(uuid.uuid4())
        if session is not None and session.proto.deferred:
            session.begin(rid, options)  # a pre-connected session: its start goes out now, for this id
            self._session = session
        elif session is not None:
            self._session = session
        else:
            self._session = KittaSession(client, client._new_protocol(rid, options))
        self._proto = self._session.proto
        self.base_request_id = self._proto.request_id
        #: Every request_id this generation used, the first one first.
        self.request_ids: list[str] = [self.base_request_id]
        self.retries = 0
        self.units = 0
        self.characters_sent = 0
        self.audio_bytes = 0
        self._backlog: list[tuple[str, str]] = []
        self._cancelled = False
        self._wake = asyncio.Event()  # cuts a retry backoff short: cancel() or the client's aclose()
        self._last_sent = 0.0
        #: Set once the first audio is yielded, or the generation finished, failed or was cancelled.
        self.first_audio_or_done = asyncio.Event()
        self._finished = False
        self._error: TTSBridgeError | None = None
        self._done_callbacks: list[Callable[[KittaGeneration], None]] = []
        client._generations.add(self)

    def add_done_callback(self, fn: Callable[[KittaGeneration], None]) -> None:
        """Call ``fn(self)`` once the generation is done (finished, failed or cancelled)."""
        if self.done:
            fn(self)
        else:
            self._done_callbacks.append(fn)

    def _settle(self) -> None:
        """The generation is done: wake its waiters, run the done callbacks, drop what it buffered."""
        self.first_audio_or_done.set()
        self._wake.set()
        self._backlog.clear()
        self._session.abandoned = True
        self._session.inbox.clear()  # what is left is nobody's (the end marker, audio after a cancel)
        callbacks, self._done_callbacks = self._done_callbacks, []
        for fn in callbacks:
            try:
                fn(self)
            except Exception:  # a callback's bug must not break the turn
                log.exception("kitta %s: done callback failed", self.request_id)

    def __repr__(self) -> str:
        return f"KittaGeneration(request_id={self.request_id!r}, retries={self.retries}, done={self.done})"

    # ------------------------------------------------------------------------------------------ properties

    @property
    def request_id(self) -> str:
        """The current session's request_id (changes on a retry)."""
        return self._proto.request_id

    @property
    def sample_rate(self) -> int | None:
        return self._proto.sample_rate

    @property
    def audio_started(self) -> bool:
        return self.audio_bytes > 0

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    @property
    def finished(self) -> bool:
        return self._finished

    @property
    def error(self) -> TTSBridgeError | None:
        return self._error

    @property
    def done(self) -> bool:
        return self._finished or self._cancelled or self._error is not None

    @property
    def session(self) -> KittaSession:
        return self._session

    # -------------------------------------------------------------------------------------------- commands

    def _usable(self) -> bool:
        if self._error is not None:
            raise self._error
        return not (self._cancelled or self._finished)

    async def send(self, text: str, *, flush: bool = True) -> None:
        """Send text (split/flushed as the limits require); ``flush=True`` closes the segment after it.

        Raises :class:`~ttsbridge.kitta.protocol.KittaLimitError` before sending anything if the session
        would exceed its unit limit. A no-op after :meth:`cancel`."""
        if not self._usable():
            return
        if self._proto.terminal:  # failed, the retry has not been set up yet: keep it for the next session
            if text:
                self._backlog.append(("text", text))
            if flush:
                self._backlog.append(("flush", ""))
            self.characters_sent += len(text)
            return
        self._proto.send_text(text)
        self.characters_sent += len(text)
        if flush:
            self._proto.flush()
        await self._pump()

    async def flush(self) -> None:
        if not self._usable():
            return
        if self._proto.terminal:
            self._backlog.append(("flush", ""))
            return
        self._proto.flush()
        await self._pump()

    async def stop(self) -> None:
        """No more text; the server renders what is left and sends ``finish``."""
        if not self._usable():
            return
        if self._proto.terminal:
            self._backlog.append(("stop", ""))
            return
        self._proto.stop()
        await self._pump()

    async def _pump(self) -> None:
        self._last_sent = time.monotonic()
        if self._session.proto is self._proto:
            await self._session.pump()

    async def cancel(self) -> None:
        """Close the session now: no audio is yielded after this returns, unflushed text is never billed.
        Idempotent; never raises."""
        if self._cancelled or self._finished or self._error is not None:
            return
        self._cancelled = True
        self._settle()
        session = self._session
        session.wakeup.set()
        with contextlib.suppress(Exception):
            await session.close(1000, "cancelled", wait=False)

    async def aclose(self) -> None:
        if not self.done:
            await self.cancel()
        with contextlib.suppress(Exception):
            await self._session.close(1000, "closed")

    async def _fail(self, err: TTSBridgeError) -> None:
        if self._error is None:
            self._error = err
        self._settle()
        session = self._session
        with contextlib.suppress(Exception):
            # an ended session (error event, protocol error) finishes its close in the background, bounded
            await session.close(1000, "failed", wait=False)

    def _owes(self) -> bool:
        """Whether the server owes us something (so its silence is bounded by ``event_timeout``)."""
        proto = self._proto
        if not proto.is_ready:
            return True
        return proto.stop_requested or any(s.status is not SegmentStatus.DONE for s in proto.segments)

    def _silent_since(self, session: KittaSession) -> float:
        return max(self._last_sent, session.last_event_at)

    def _overdue(self, session: KittaSession, timeout: float) -> bool:
        """The server owes us something and has been silent for ``timeout`` since it began to."""
        return self._owes() and time.monotonic() - self._silent_since(session) >= timeout

    def _wait_budget(self, session: KittaSession, timeout: float) -> float:
        if not self._owes():
            return timeout
        return max(0.01, self._silent_since(session) + timeout - time.monotonic())

    # ----------------------------------------------------------------------------------------------- audio

    def __aiter__(self) -> AsyncIterator[KittaAudio]:
        return self._audio()

    async def _audio(self) -> AsyncIterator[KittaAudio]:
        timeout = self._client.event_timeout
        try:
            while True:
                if self._cancelled:
                    return
                if self._error is not None:
                    raise self._error
                session = self._session
                if not session.inbox:
                    session.wakeup.clear()
                    if session.inbox or self._cancelled:
                        continue
                    try:
                        await asyncio.wait_for(session.wakeup.wait(), self._wait_budget(session, timeout))
                    except asyncio.TimeoutError:
                        if (
                            self._overdue(session, timeout)
                            and not self._cancelled
                            and self._session is session
                        ):
                            err = TTSTimeoutError(
                                f"kitta {self.request_id}: no server event for {timeout:g} s "
                                f"(state {self._proto.state.value})"
                            )
                            await self._fail(err)
                            raise err from None
                    continue
                item = session.inbox.popleft()
                if item is _END:
                    if self._cancelled or self._finished:
                        return
                    if self._error is not None:
                        raise self._error
                    ended_with = session.error
                    if ended_with is None:  # closed locally without finish
                        return
                    await self._retry_or_fail(ended_with)
                    continue
                if isinstance(item, AudioEvent):
                    if self._cancelled:
                        return
                    if item.audio:
                        self.audio_bytes += len(item.audio)
                        self.first_audio_or_done.set()
                        yield KittaAudio(item.audio, self._proto.sample_rate or item.sample_rate or 0)
                elif isinstance(item, FinishEvent):
                    self.units += item.units
                    self._finished = True
                    self._settle()
                    log.debug("kitta %s: finished, %d units", self.request_id, item.units)
                    await session.close(1000, "finished", wait=False)
                    return
        finally:
            if not self.done:
                # The consumer left early (break, or its task was cancelled): nobody will read this audio.
                await self.cancel()

    async def _retry_or_fail(self, err: TTSBridgeError) -> None:
        client = self._client
        old = self._session
        reason = ""
        if not err.retryable:
            reason = "not retryable"
        elif not old.proto.can_resume():
            reason = "audio of the failed segment was already delivered (never replayed)"
        elif self.audio_started and not client.resume_after_audio:
            reason = "audio was already delivered"
        elif self.retries >= client.max_retries:
            reason = f"gave up after {self.retries} retries"
        if reason:
            log.warning("kitta %s: %s; %s", self.request_id, err, reason)
            await self._fail(err)
            raise err
        self.retries += 1
        new_id = retry_request_id(self.base_request_id, self.retries)
        new_proto = client._new_protocol(new_id, self.options, deferred=True)
        replayed = old.proto.replay_into(new_proto)
        for kind, text in self._backlog:
            if kind == "text":
                new_proto.send_text(text)
            elif kind == "flush":
                new_proto.flush()
            else:
                new_proto.stop()
        self._backlog.clear()
        self.units += old.proto.units_billed
        self._proto = new_proto  # from now on send() queues on the new session
        await old.close(1000, "retrying", wait=False)
        delay = client._backoff(self.retries, err)
        log.warning(
            "kitta %s: %s; retry %d/%d as %s in %.2f s (%d segment(s) replayed)",
            old.request_id,
            err,
            self.retries,
            client.max_retries,
            new_id,
            delay,
            replayed,
        )
        await self._start_retry((old.ended_at or time.monotonic()) + delay)

    async def _sleep_until(self, deadline: float) -> bool:
        """Wait until ``deadline`` (monotonic); False if cancelled or failed meanwhile."""
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._wake.wait(), max(0.0, deadline - time.monotonic()))
        return not (self._cancelled or self._error is not None)

    async def _start_retry(self, deadline: float) -> None:
        """Connect the retry's session during the backoff (start held), send its ``start`` at ``deadline``:
        the backoff runs from the failure to the next ``start``, whatever the connection's state."""
        client = self._client
        if not await self._sleep_until(deadline - _PRECONNECT_LEAD):
            return
        proto = self._proto
        session = self._session = KittaSession(client, proto)
        if not await self._sleep_until(deadline):
            await session.close(1000, "cancelled", wait=False)
            return
        self.request_ids.append(proto.request_id)
        if session.alive:
            session.begin()
        # else the pre-connected socket failed (e.g. a retryable handshake answer): that was this attempt,
        # and the iterator sees its end and decides (retry with backoff, or fail).


# ------------------------------------------------------------------------------------------------- client


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
        ):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < low:
                raise TTSInvalidOptionError(name, value, f"a number >= {low:g}")
        if options is not None and not isinstance(options, KittaOptions):
            raise TTSInvalidOptionError("options", type(options).__name__, "a KittaOptions")
        self._api_key = key.strip()
        _SECRETS.add(self._api_key)
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

    def _new_protocol(
        self, request_id: str, options: KittaOptions, *, deferred: bool = False
    ) -> KittaProtocol:
        return KittaProtocol(
            deferred=deferred,
            request_id=request_id,
            request=options.start_request(),
            auth=self.auth,
            token=self._api_key if self.auth == "frame" else None,
            limits=self.limits,
            secrets=(self._api_key,),
        )

    def _backoff(self, attempt: int, err: TTSBridgeError) -> float:
        cap = min(self.backoff_max, self.backoff_initial * (2 ** (attempt - 1)))
        delay = random.uniform(cap / 2, cap)  # "equal jitter": never 0, never above the cap
        retry_after = getattr(err, "retry_after", None)
        if retry_after:
            delay = max(delay, min(float(retry_after), 30.0))
        return delay

    async def _handshake(self) -> ClientConnection:
        if self._closed:
            raise TTSConnectionError("kitta: client is closed", retryable=False)
        headers: list[tuple[str, str]] = []
        if self.auth == "header":
            headers.append(("Authorization", f"Bearer {self._api_key}"))
        extra: dict[str, Any] = {}
        if self.proxy is not True:  # websockets < 15 has no proxy support (and no such argument)
            extra["proxy"] = self.proxy
        try:
            ws = await connect(
                self.url,
                subprotocols=[Subprotocol(SUBPROTOCOL)],
                additional_headers=headers,
                open_timeout=self.connect_timeout,
                close_timeout=self.close_timeout,
                ping_interval=20.0,
                ping_timeout=20.0,
                max_size=16 * 1024 * 1024,
                logger=_ws_log,
                **extra,
            )
        except InvalidStatus as exc:
            raise _handshake_error(exc, self._api_key) from None
        except InvalidURI as exc:
            raise TTSInvalidOptionError(
                "base_url", self.url, "a valid WebSocket URL", hint=str(exc)
            ) from None
        except InvalidHandshake as exc:
            raise TTSConnectionError(
                f"kitta: bad WebSocket handshake with {self.url}: {exc}", retryable=False
            ) from None
        except asyncio.TimeoutError:
            raise TTSTimeoutError(f"kitta: handshake with {self.url} timed out") from None
        except OSError as exc:
            raise TTSConnectionError(f"kitta: cannot connect to {self.url}: {exc}") from None
        if ws.subprotocol != SUBPROTOCOL:
            with contextlib.suppress(Exception):
                await ws.close(1002, "subprotocol")
            raise TTSConnectionError(
                f"kitta: the server did not select the {SUBPROTOCOL} subprotocol", retryable=False
            )
        return ws

    # ------------------------------------------------------------------------------------------------- API

    def session(self, options: KittaOptions | None = None, *, request_id: str | None = None) -> KittaSession:
        """Start a session now (connect, authenticate, start in the background).

        See :meth:`connect_session` to wait until it is ready."""
        if self._closed:
            raise TTSConnectionError("kitta: client is closed", retryable=False)
        return KittaSession(self, self._new_protocol(request_id or str(uuid.uuid4()), self._options(options)))

    def preconnect(self, options: KittaOptions | None = None) -> KittaSession:
        """A warm connection: connects and authenticates in the background but holds ``start``, so no server
        session exists until a generation adopts it (``generation(session=...)``) with its own request_id."""
        if self._closed:
            raise TTSConnectionError("kitta: client is closed", retryable=False)
        placeholder = f"standby-{uuid.uuid4().hex[:12]}"  # never sent: begin() sets the turn's request_id
        return KittaSession(self, self._new_protocol(placeholder, self._options(options), deferred=True))

    async def connect_session(
        self, options: KittaOptions | None = None, *, request_id: str | None = None
    ) -> KittaSession:
        """A session that is ``ready`` (for a warm standby); raises its error or a timeout."""
        session = self.session(options, request_id=request_id)
        try:
            await session.wait_ready(self.connect_timeout + self.event_timeout)
        except BaseException:
            await session.close()
            raise
        return session

    def generation(
        self,
        options: KittaOptions | None = None,
        *,
        request_id: str | None = None,
        session: KittaSession | None = None,
    ) -> KittaGeneration:
        """A new generation; adopts ``session`` (e.g. a ready standby) or starts connecting one now."""
        if self._closed:
            raise TTSConnectionError("kitta: client is closed", retryable=False)
        opts = self._options(options)
        if request_id is not None and not 1 <= len(request_id) <= 128:
            raise TTSInvalidOptionError("request_id", request_id, "1-128 characters")
        return KittaGeneration(self, opts, request_id=request_id, session=session)

    async def synthesize(
        self, text: str, options: KittaOptions | None = None, *, request_id: str | None = None
    ) -> AsyncIterator[bytes]:
        """One text -> PCM16 at ``options.sample_rate`` (or the server's rate when None)."""
        from ttsbridge.audio.resample import StreamResampler

        opts = self._options(options)
        gen = self.generation(opts, request_id=request_id)
        resampler: StreamResampler | None = None
        try:
            await gen.send(text, flush=True)
            await gen.stop()
            async for chunk in gen:
                out_rate = opts.sample_rate or chunk.sample_rate
                if resampler is None or resampler.in_rate != chunk.sample_rate:
                    if resampler is not None:
                        tail = resampler.flush()
                        if tail:
                            yield tail
                    resampler = StreamResampler(chunk.sample_rate, out_rate)
                pcm = resampler.process(chunk.pcm)
                if pcm:
                    yield pcm
            if resampler is not None and gen.finished:
                tail = resampler.flush()
                if tail:
                    yield tail
        finally:
            await gen.aclose()

    async def aclose(self) -> None:
        """Close every session; open generations fail with a connection error."""
        self._closed = True
        for gen in list(self._generations):
            if not gen.done:
                gen._error = TTSConnectionError("kitta: client closed", retryable=False)
                gen._settle()  # a generation waiting to retry fails now, and starts no session
                gen._session.wakeup.set()
        sessions = list(self._sessions)
        if sessions:
            await asyncio.gather(*(s.close(1000, "client closed") for s in sessions), return_exceptions=True)

    async def __aenter__(self) -> KittaClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
