"""The server side of :class:`~ttsbridge.kitta.protocol.KittaProtocol`, pure: each received frame is decoded
and moves the phase table, the segments and the audio order, and emits provider-neutral events; a lost,
silent or failed connection fails the turn."""

from __future__ import annotations

import logging

from ttsbridge.engine.events import AudioReceived, Event, TurnDone
from ttsbridge.errors import TTSBridgeError, TTSSilentConnectionError
from ttsbridge.kitta.facts import Outcome, TurnFacts
from ttsbridge.kitta.models import AudioEvent, ErrorEvent, FinishEvent, ReadyEvent, UsageEvent
from ttsbridge.kitta.segments import AudioOrder, TextQueue
from ttsbridge.kitta.states import State
from ttsbridge.kitta.wire import KittaProtocolError, decode, error_from_close, error_from_event

__all__ = ["ServerEvents"]

logger = logging.getLogger("ttsbridge.kitta")


class ServerEvents:
    """Mixin of :class:`~ttsbridge.kitta.protocol.KittaProtocol`: the handling of decoded server events."""

    turn_id: str | None
    facts: TurnFacts | None
    state: State
    _last_event_at: float
    sample_rate: int | None
    units_billed: int
    finish_units: int | None
    close_request: tuple[int, str] | None
    _text: TextQueue
    _order: AudioOrder
    _events: list[Event]

    @property
    def terminal(self) -> bool:
        raise NotImplementedError

    @property
    def request_id(self) -> str:
        raise NotImplementedError

    def _step(self, event: str) -> None:
        raise NotImplementedError

    def _secrets(self) -> tuple[str, ...]:
        raise NotImplementedError

    def _fail(
        self, err: TTSBridgeError, now: float, *, close: tuple[int, str] | None, may_retry: bool = True
    ) -> None:
        raise NotImplementedError

    def receive(self, frame: str | bytes | bytearray | memoryview, now: float) -> None:
        """Feed one frame. A protocol violation fails the turn (and the connection) with
        :class:`KittaProtocolError`; an ``error`` event fails it with the server's error."""
        if self.terminal:
            return
        self._last_event_at = now
        try:
            if isinstance(frame, str):
                raise KittaProtocolError("kitta: the server sent a text frame (MessagePack expected)")
            event = decode(frame)
            if event is not None:
                self._handle(event, now)
        except KittaProtocolError as exc:
            logger.warning("kitta %s: %s", self.request_id, exc)
            self._fail(exc, now, close=(1002, "protocol error"))
        except Exception as exc:  # a bug of ours: fail the session loudly rather than hang
            logger.exception("kitta %s: unexpected error handling a server frame", self.request_id)
            err = KittaProtocolError(f"kitta: internal error: {type(exc).__name__}")
            self._fail(err, now, close=(1011, "client error"))

    def connection_lost(self, code: int | None, reason: str, now: float) -> None:
        """The socket closed. Before ``finish`` this fails the turn (retryable only for 1012/1013)."""
        if not self.terminal:
            self._fail(error_from_close(code, reason, self._secrets()), now, close=None)

    def connection_silent(self, detail: str, now: float) -> None:
        """The engine's ping went unanswered: the turn fails at once with a
        :class:`TTSSilentConnectionError`, never retried (whether the server got our last frames is unknown,
        and the page allows no new request_id for an uncertain request; the next turn starts on a fresh
        connection). A standby (no turn) just ends."""
        if not self.terminal:
            err = TTSSilentConnectionError(f"kitta {self.request_id}: {detail}", retryable=False)
            self._fail(err, now, close=None, may_retry=False)

    def _handle(self, event: object, now: float) -> None:
        if isinstance(event, ErrorEvent):
            self._deliver(self._order.drain())
            err = error_from_event(event, self.turn_id, self._secrets())
            self._fail(err, now, close=(1000, "error received"))
            return
        name = getattr(event, "event", "")
        self._step(name)
        if isinstance(event, ReadyEvent):
            if event.request_id != self.turn_id:
                raise KittaProtocolError("kitta: 'ready' for another request_id")
            self._layout(event)
        elif isinstance(event, AudioEvent):
            self._on_audio(event)
        elif isinstance(event, UsageEvent):
            self._deliver(self._order.drain())
            seg = self._text.segments.head()
            self._text.segments.usage(event.units)
            self.units_billed += event.units
            if seg is not None and self.facts is not None:  # the segment's audio is complete here
                self.facts.rendered_chars += len(seg.text)
                self.facts.rendered.append((self.facts.rendered_chars, self.facts.audio_bytes))
        elif isinstance(event, FinishEvent):
            self._on_finish(event)

    def _layout(self, event: ReadyEvent | AudioEvent) -> None:
        """The page: with ``format`` pcm (the only one this client asks), both ``ready`` and ``audio``
        include the required ``sample_rate``, ``channels`` and ``bit_depth`` (the models require them: an
        event without one is malformed when decoded); this client plays mono 16-bit."""
        if event.channels != 1 or event.bit_depth != 16:
            raise KittaProtocolError(
                f"kitta: unsupported PCM layout channels={event.channels} bit_depth={event.bit_depth} "
                "(this client handles mono 16-bit)"
            )
        if self.sample_rate is not None and event.sample_rate != self.sample_rate:
            # the session's format is set by 'ready' (the page: so the client can initialize a PCM player)
            raise KittaProtocolError(
                f"kitta: '{event.event}' sample_rate {event.sample_rate} differs from the session's "
                f"{self.sample_rate}"
            )
        self.sample_rate = event.sample_rate  # (channels and bit_depth can only be 1 and 16 here)

    def _on_audio(self, event: AudioEvent) -> None:
        if event.request_id is not None and event.request_id != self.turn_id:
            raise KittaProtocolError("kitta: audio for another request_id")
        self._layout(event)
        if event.audio:
            # Received is delivered, even while held for a sequence gap: the server committed (billed) the
            # segment at its first audio frame, so it must never be replayed.
            self._text.segments.audio()
        self._deliver(self._order.push(event))

    def _deliver(self, events: list[AudioEvent]) -> None:
        if not events:
            return
        assert self.turn_id is not None and self.facts is not None
        for ev in events:
            if ev.audio:  # its segment was marked committed when it was received (_on_audio)
                first = not self.facts.audio_bytes
                self.facts.audio_bytes += len(ev.audio)
                self._events.append(AudioReceived(self.turn_id, ev.audio, first))

    def _on_finish(self, event: FinishEvent) -> None:
        assert self.turn_id is not None and self.facts is not None
        self._deliver(self._order.drain())
        self._text.segments.finish()
        self.finish_units = event.units
        self.facts.units += event.units
        self.facts.outcome = Outcome.FINISHED
        self.close_request = (1000, "finished")
        self._events.append(TurnDone(self.turn_id))
        logger.debug("kitta %s: finished, %d units", self.turn_id, event.units)
