"""One user-intended Kitta generation (text in, PCM out) over one or more sessions.

:class:`KittaGeneration` keeps no turn state of its own: its facts (request ids, retries, characters, audio,
outcome) live in the protocol's :class:`~ttsbridge.kitta.retry.TurnFacts`, and whether a failed attempt is
retried is the protocol's decision (:attr:`KittaProtocol.successor`). The connection's dispatch feeds the
generation's :class:`~ttsbridge.engine.stream.TurnStream` directly; on a retried failure the generation moves
to the successor's session, which connects near the end of the backoff and starts at its end.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, NamedTuple

from ttsbridge.engine.events import AudioReceived, TurnEvent, TurnFailed
from ttsbridge.engine.stream import TurnStream
from ttsbridge.errors import TTSBridgeError
from ttsbridge.kitta.models import KittaOptions
from ttsbridge.kitta.protocol import KittaProtocol, Outcome
from ttsbridge.kitta.retry import TurnFacts
from ttsbridge.kitta.session import KittaSession

if TYPE_CHECKING:
    from ttsbridge.kitta.client import KittaClient

__all__ = ["KittaAudio", "KittaGeneration"]

log = logging.getLogger("ttsbridge.kitta")


class KittaAudio(NamedTuple):
    """PCM16 LE mono audio at ``sample_rate`` (the server's rate for this session)."""

    pcm: bytes
    sample_rate: int


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
        not_before: float | None = None,
    ) -> None:
        self._client = client
        self.options = options
        rid = request_id or str(uuid.uuid4())
        if session is not None and session.proto.deferred:
            session.begin(rid, options, not_before=not_before)  # a pre-connected session: start goes out now
        elif session is None:
            proto = client._new_protocol(rid, options)
            proto.open_turn(rid, asyncio.get_running_loop().time(), not_before=not_before)
            session = KittaSession(client, proto)
        self._session = session
        self._first = session.proto
        facts = session.proto.facts
        assert facts is not None
        self._facts: TurnFacts = facts
        #: Set once the first audio arrives, or the generation finished, failed or was cancelled.
        self.first_audio_or_done = asyncio.Event()
        self._stream: TurnStream | None = TurnStream()
        self._done_callbacks: list[Callable[[KittaGeneration], None]] = []
        session.attach(self._deliver)
        client.track(self)

    def __repr__(self) -> str:
        return f"KittaGeneration(request_id={self.request_id!r}, retries={self.retries}, done={self.done})"

    # ------------------------------------------------------------------------------- asked of the protocol

    @property
    def _proto(self) -> KittaProtocol:
        return self._session.proto

    @property
    def request_id(self) -> str:
        """The current session's request_id (changes on a retry)."""
        return self._proto.request_id

    @property
    def base_request_id(self) -> str:
        return self._facts.base_id

    @property
    def request_ids(self) -> list[str]:
        """Every request_id this generation used, the first one first."""
        return list(self._facts.ids)

    @property
    def retries(self) -> int:
        return self._facts.retries

    @property
    def units(self) -> int:
        return self._facts.units

    @property
    def characters_sent(self) -> int:
        return self._facts.characters_sent

    @property
    def audio_bytes(self) -> int:
        return self._facts.audio_bytes

    @property
    def rendered(self) -> list[tuple[int, int]]:
        """(characters of text, audio bytes delivered) at each segment's ``usage`` (see ``TurnFacts``)."""
        return self._facts.rendered

    @property
    def audio_started(self) -> bool:
        return self._facts.audio_bytes > 0

    @property
    def sample_rate(self) -> int | None:
        return self._proto.sample_rate

    @property
    def cancelled(self) -> bool:
        return self._facts.outcome is Outcome.CANCELLED

    @property
    def finished(self) -> bool:
        return self._facts.outcome is Outcome.FINISHED

    @property
    def error(self) -> TTSBridgeError | None:
        return self._facts.error

    @property
    def done(self) -> bool:
        return self._facts.outcome is not None

    @property
    def session(self) -> KittaSession:
        return self._session

    def pending(self) -> int:
        """Events delivered but not consumed yet (none once a cancelled or consumed turn is over)."""
        return self._stream.pending() if self._stream is not None else 0

    def not_before_next(self, current: float) -> float:
        """When the provider's next turn may start (see :func:`ttsbridge.kitta.retry.not_before_next`)."""
        return self._proto.not_before_next(current)

    def add_done_callback(self, fn: Callable[[KittaGeneration], None]) -> None:
        """Call ``fn(self)`` once the generation is done (finished, failed or cancelled)."""
        if self.done:
            fn(self)
        else:
            self._done_callbacks.append(fn)

    # ------------------------------------------------------------------------------------------ dispatch

    def _deliver(self, event: TurnEvent) -> None:
        """The connection's dispatch: straight into the stream (or on to the protocol's next attempt)."""
        if isinstance(event, TurnFailed) and self._proto.successor is not None:
            successor = self._proto.successor
            self._session = KittaSession(self._client, successor, connect_at=successor.connect_at())
            self._session.attach(self._deliver)
            if self._stream is not None:
                self._stream.feed(event)  # where the consumer moves on to the next attempt's audio
            return
        if isinstance(event, AudioReceived):
            self.first_audio_or_done.set()
        if self._stream is not None:
            self._stream.feed(event)
        if not isinstance(event, AudioReceived):
            self._settle()

    def _settle(self) -> None:
        """The generation is done: wake its waiters, run the done callbacks."""
        self.first_audio_or_done.set()
        callbacks, self._done_callbacks = self._done_callbacks, []
        for fn in callbacks:
            try:
                fn(self)
            except Exception:  # a callback's bug must not break the turn
                log.exception("kitta %s: done callback failed", self.request_id)

    # -------------------------------------------------------------------------------------------- commands

    def _usable(self) -> bool:
        if self.error is not None:
            raise self.error
        return not self.done

    def _now(self) -> float:
        return asyncio.get_running_loop().time()

    async def send(self, text: str, *, flush: bool = True) -> None:
        """Send text (split/flushed as the limits require); ``flush=True`` closes the segment after it.

        Raises :class:`~ttsbridge.kitta.protocol.KittaLimitError` before sending anything if the session
        would exceed its unit limit. A no-op after :meth:`cancel`."""
        if not self._usable():
            return
        session, proto, now = self._session, self._proto, self._now()
        assert proto.turn_id is not None
        proto.send_text(proto.turn_id, text, now)
        if flush:
            proto.flush(proto.turn_id, now)
        await session.pump()

    async def flush(self) -> None:
        if self._usable():
            assert self._proto.turn_id is not None
            self._proto.flush(self._proto.turn_id, self._now())
            await self._session.pump()

    async def stop(self) -> None:
        """No more text; the server renders what is left and sends ``finish``."""
        if self._usable():
            assert self._proto.turn_id is not None
            self._proto.end_turn(self._proto.turn_id, self._now())
            await self._session.pump()

    async def cancel(self) -> None:
        """Close the session now: no audio is yielded after this returns, unflushed text is never billed.
        Idempotent; never raises."""
        session, proto = self._session, self._proto
        assert proto.turn_id is not None
        if self.done:
            if self._stream is not None and self._stream.pending():  # an end its consumer has not seen
                proto.withdraw_turn(proto.turn_id)
                self._stream, stream = None, self._stream
                stream.stop()
            return
        stream, self._stream = self._stream, None  # nothing more is yielded, nothing is kept
        proto.cancel_turn(proto.turn_id, self._now())
        if stream is not None:
            stream.stop()
        self._settle()
        with contextlib.suppress(Exception):
            await session.close(1000, "cancelled", wait=False)

    async def abort(self, error: TTSBridgeError) -> None:
        """Fail the generation with ``error`` now (the client is shutting down): no retry."""
        if not self.done:
            self._proto.abort(error, self._now())
            await self._session.pump()

    async def aclose(self) -> None:
        if not self.done:
            await self.cancel()
        with contextlib.suppress(Exception):
            await self._session.close(1000, "closed")

    # ----------------------------------------------------------------------------------------------- audio

    def take_ready(self, max_bytes: int) -> bytes:
        """The wire PCM of the whole audio chunks already received and not yet yielded, at most ``max_bytes``,
        in order (``TurnStream.take_ready``); ``b""`` once cancelled or after the iteration ended. Never waits,
        never raises, never consumes the end, an error or a retry boundary (the chunks are at the rate of the
        attempt being read)."""
        stream = self._stream
        if stream is None or self.cancelled:
            return b""
        return stream.take_ready(max_bytes)

    def __aiter__(self) -> AsyncIterator[KittaAudio]:
        return self._audio()

    async def _audio(self) -> AsyncIterator[KittaAudio]:
        stream = self._stream
        proto = self._first  # the attempt whose audio is read now (its rate is the audio's)
        try:
            while stream is not None and not self.cancelled:
                if not stream.pending() and self.done:
                    if self.error is not None:
                        raise self.error
                    return
                event = await stream.get()
                if self.cancelled:
                    return
                if isinstance(event, AudioReceived):
                    yield KittaAudio(event.pcm, proto.sample_rate or 0)
                elif isinstance(event, TurnFailed) and proto.successor is not None:
                    proto = proto.successor  # that attempt failed and was retried: its audio is over
                elif isinstance(event, TurnFailed):
                    raise event.error
                else:
                    return
        finally:
            if not self.done:
                # The consumer left early (break, or its task was cancelled): nobody will read this audio.
                await self.cancel()
