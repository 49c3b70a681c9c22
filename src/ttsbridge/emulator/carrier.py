"""An emulated phone carrier: the carrier's side of a bidirectional media stream, played against a bot.

:class:`EmulatedCarrier` is a real WebSocket client (over loopback, or anywhere) that speaks one carrier's
media-stream protocol to a bot's WebSocket server, as the carrier does when a call is connected to it:
Twilio Media Streams, Telnyx media streaming, the Exotel Voicebot applet, Plivo audio streams. It

* opens the stream (``connected`` / ``start`` as the carrier sends them, with a stream id the bot must echo);
* plays the bot's audio in real time behind a fixed-delay jitter buffer (``jitter_buffer_s``: a chunk plays
  no earlier than that long after it arrived, and never before the chunk ahead of it has ended) and a
  one-way network delay (``network_delay_s``: every message takes that long, both ways);
* echoes a ``mark`` (Plivo: answers a ``checkpoint`` with ``playedStream``) once the audio sent before it has
  played, and never before (``echo_marks=False``: a carrier that never echoes);
* answers a ``clear`` (Plivo: ``clearAudio``) as the carrier does: the audio not played yet is dropped and
  the pending marks come back at once (Twilio, Telnyx, Exotel), or are dropped and ``clearedAudio`` is sent
  (Plivo: ``playedStream`` only for audio played);
* sends the caller's keypresses (``dtmf``) and hang-up (``stop``, then the socket closes);
* treats the bot closing the socket as the hang-up: playback stops when the close arrives.

Everything it saw is recorded (audio received and played, each mark, each clear, the hang-up, and messages
that break the protocol in :attr:`EmulatedCarrier.errors`), for tests and for ``--emulator`` examples.
It stands apart from the clients: it imports nothing of ``ttsbridge.pipecat``.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import heapq
import itertools
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, Literal

from ttsbridge.audio.g711 import alaw_decode, ulaw_decode

__all__ = [
    "CARRIERS",
    "CarrierConfig",
    "ClearRecord",
    "EmulatedCarrier",
    "HangUpRecord",
    "MarkRecord",
]

Carrier = Literal["twilio", "telnyx", "exotel", "plivo"]
CARRIERS: tuple[Carrier, ...] = ("twilio", "telnyx", "exotel", "plivo")


@dataclass(frozen=True)
class CarrierConfig:
    """One emulated carrier.

    ``sample_rate``: the rate of the media leg (Twilio and Plivo μ-law: 8000; Telnyx PCMU/PCMA: its
    bidirectional rate; Exotel 16-bit PCM: 8000, 16000 or 24000). ``encoding`` (Telnyx): ``PCMU`` or ``PCMA``.
    """

    carrier: Carrier = "twilio"
    sample_rate: int = 8000
    jitter_buffer_s: float = 0.0
    network_delay_s: float = 0.0
    echo_marks: bool = True
    stream_id: str = "MZ00000000000000000000000000000001"
    call_id: str = "CA00000000000000000000000000000001"
    encoding: str = "PCMU"

    def __post_init__(self) -> None:
        if self.carrier not in CARRIERS:
            raise ValueError(f"carrier must be one of {CARRIERS}, got {self.carrier!r}")
        if self.jitter_buffer_s < 0 or self.network_delay_s < 0:
            raise ValueError("jitter_buffer_s and network_delay_s must not be negative")


@dataclass
class MarkRecord:
    """One mark (Plivo: checkpoint) the bot sent: when it arrived, when its audio had played, what came of it."""

    name: str
    arrived_at: float
    #: when the audio sent before it had played (it is echoed then)
    due_at: float
    #: stream position (s of audio played) it stands for
    position_s: float
    echoed_at: float | None = None
    #: returned at once by a clear (its audio was not played)
    returned_by_clear: bool = False
    #: never echoed, and why: ``"clear"`` (Plivo drops its checkpoints), ``"hang-up"``, ``"no-echo"``
    #: (``echo_marks=False``)
    dropped: str | None = None


@dataclass(frozen=True)
class ClearRecord:
    at: float
    #: seconds of audio played when the clear arrived (all stretches so far)
    played_s: float
    #: seconds of audio received but dropped
    dropped_s: float


@dataclass(frozen=True)
class HangUpRecord:
    at: float
    by: Literal["bot", "caller"]
    played_s: float
    received_s: float
    #: audio received (and not cleared) that never played
    unplayed_s: float


@dataclass
class _Chunk:
    pcm: bytes
    start: float
    end: float
    cut: float | None = None  # playback stopped here (clear, hang-up)
    cut_by: str | None = None

    def played(self, t: float, rate: int) -> int:
        """Bytes of it played by ``t``."""
        until = t if self.cut is None else min(t, self.cut)
        if until <= self.start:
            return 0
        n = int((until - self.start) * rate) * 2
        return min(len(self.pcm), n)


class EmulatedCarrier:
    """One call from an emulated carrier (see the module docstring). Use :meth:`dial`."""

    def __init__(self, config: CarrierConfig) -> None:
        self.config = config
        self.rate = config.sample_rate
        self._ws: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._chunks: list[_Chunk] = []
        self._end = 0.0  # when the queued audio ends (0: nothing queued)
        self._seq = itertools.count(2)
        self._outbox: list[tuple[float, int, list[Any]]] = []
        self._outbox_wake = asyncio.Event()
        self._changed = asyncio.Event()
        self._tasks: list[asyncio.Task[Any]] = []
        self._inbox: asyncio.Queue[tuple[float, str | bytes | None]] = asyncio.Queue()
        self._pending: list[tuple[MarkRecord, list[Any]]] = []
        #: every mark the bot sent, in order
        self.marks: list[MarkRecord] = []
        self.clears: list[ClearRecord] = []
        self.hangup: HangUpRecord | None = None
        #: messages that break the carrier's protocol (wrong stream id, unknown event, bad payload)
        self.errors: list[str] = []
        #: counts of the bot's messages by event
        self.events: dict[str, int] = {}
        #: when the first audio arrived
        self.first_audio_at: float | None = None

    # -- lifecycle

    @classmethod
    @contextlib.asynccontextmanager
    async def dial(
        cls, url: str, config: CarrierConfig | None = None, **kwargs: Any
    ) -> AsyncIterator[EmulatedCarrier]:
        """Connect to the bot at ``url`` and open the media stream; the call ends (the socket closes) when the
        block exits, if neither side ended it before."""
        from websockets.asyncio.client import connect

        carrier = cls(config or CarrierConfig(**kwargs))
        async with connect(url, max_size=None) as ws:
            carrier._ws = ws
            carrier._loop = asyncio.get_running_loop()
            for message in carrier._handshake():
                await ws.send(json.dumps(message))
            carrier._tasks = [
                asyncio.create_task(carrier._read(), name="carrier-read"),
                asyncio.create_task(carrier._process(), name="carrier-process"),
                asyncio.create_task(carrier._send(), name="carrier-send"),
            ]
            try:
                yield carrier
            finally:
                for task in carrier._tasks:
                    task.cancel()
                for task in carrier._tasks:
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await task

    def now(self) -> float:
        assert self._loop is not None
        return self._loop.time()

    def _touch(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    # -- the caller

    async def press(self, digit: str) -> None:
        """The caller presses ``digit`` (it reaches the bot after the network delay)."""
        c = self.config
        if c.carrier == "twilio":
            msg: dict[str, Any] = {
                "event": "dtmf",
                "streamSid": c.stream_id,
                "sequenceNumber": str(next(self._seq)),
                "dtmf": {"track": "inbound_track", "digit": digit},
            }
        elif c.carrier == "telnyx":
            msg = {
                "event": "dtmf",
                "stream_id": c.stream_id,
                "sequence_number": str(next(self._seq)),
                "dtmf": {"digit": digit},
            }
        elif c.carrier == "exotel":
            msg = {
                "event": "dtmf",
                "stream_sid": c.stream_id,
                "sequence_number": next(self._seq),
                "dtmf": {"digit": digit, "duration": "200"},
            }
        else:
            msg = {
                "event": "dtmf",
                "sequenceNumber": next(self._seq),
                "streamId": c.stream_id,
                "dtmf": {"digit": digit},
            }
        self._post(self.now() + c.network_delay_s, msg)

    async def say(self, digit: str) -> None:
        """Press ``digit`` then ``#`` (tests' keypad STT: an utterance starts, then ends)."""
        await self.press(digit)
        await self.press("#")

    async def hang_up(self) -> None:
        """The caller hangs up: playback stops now, ``stop`` (where the carrier has one) then the socket closes."""
        now = self.now()
        c = self.config
        if self.hangup is None:
            self._stop_playback(now)
            self.hangup = self._hangup_record(now, "caller")
            self._drop_pending(now)
        make_stop = _STOPS.get(c.carrier)  # (Plivo has no stop message: the socket just closes)
        stop = make_stop(c, next(self._seq)) if make_stop is not None else None
        if stop is not None:
            self._post(now + c.network_delay_s, stop)
        self._post(now + c.network_delay_s, None)  # then the socket closes
        self._touch()

    # -- what was heard

    def played_s(self, at: float | None = None) -> float:
        """Seconds of the bot's audio played by ``at`` (default: now), all stretches."""
        t = self.now() if at is None else at
        return sum(ch.played(t, self.rate) for ch in self._chunks) / (2.0 * self.rate)

    @property
    def received_s(self) -> float:
        return sum(len(ch.pcm) for ch in self._chunks) / (2.0 * self.rate)

    def played_pcm(self, at: float | None = None) -> bytes:
        """The PCM16 the caller heard (the played part of every chunk, in order)."""
        t = self.now() if at is None else at
        return b"".join(ch.pcm[: ch.played(t, self.rate)] for ch in self._chunks)

    def received_pcm(self) -> bytes:
        return b"".join(ch.pcm for ch in self._chunks)

    def unplayed_pcm(self) -> bytes:
        """The audio received that never played and that no clear dropped: what the hang-up cut off (or what
        is still queued)."""
        t = self.now()
        return b"".join(ch.pcm[ch.played(t, self.rate) :] for ch in self._chunks if ch.cut_by != "clear")

    @property
    def playing(self) -> bool:
        return self._end > self.now() and self.hangup is None

    async def wait_until(
        self, cond: Callable[[], bool], timeout: float = 15.0, *, poll: float = 0.01
    ) -> None:
        """Wait (bounded) until ``cond()`` holds; re-checked on every change of the call and at least every
        ``poll`` seconds (for conditions on the bot's side)."""

        async def _wait() -> None:
            while not cond():
                wake = self._changed
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(wake.wait(), poll)

        await asyncio.wait_for(_wait(), timeout)

    async def wait_played(self, seconds: float, timeout: float = 15.0) -> None:
        """Wait until ``seconds`` of audio (all stretches) have played."""

        async def _wait() -> None:
            while self.played_s() + 1e-9 < seconds:
                wake = self._changed
                t = self._time_of(seconds)
                delay = None if t is None else max(0.0, t - self.now()) + 0.001
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(wake.wait(), delay)

        await asyncio.wait_for(_wait(), timeout)

    def _time_of(self, seconds: float) -> float | None:
        """When ``seconds`` of audio will have played, given what is queued now (None: not queued yet)."""
        done = 0.0
        for ch in self._chunks:
            end = ch.end if ch.cut is None else min(ch.end, ch.cut)
            length = max(0.0, end - ch.start)
            if done + length >= seconds:
                return ch.start + (seconds - done)
            done += length
        return None

    # -- the protocol

    def _handshake(self) -> list[dict[str, Any]]:
        """The carrier's opening messages (``connected`` where it sends one, then ``start``)."""
        return _HANDSHAKES[self.config.carrier](self.config)

    async def _read(self) -> None:
        try:
            async for raw in self._ws:
                await self._inbox.put((self.now(), raw))
        except Exception:  # the socket broke: the same as a close
            pass
        await self._inbox.put((self.now(), None))

    async def _process(self) -> None:
        """Each of the bot's messages takes effect when it arrives: the network delay after it was sent."""
        delay = self.config.network_delay_s
        while True:
            sent_at, raw = await self._inbox.get()
            arrive = sent_at + delay
            wait = arrive - self.now()
            if wait > 0:
                await asyncio.sleep(wait)
            if raw is None:
                if self.hangup is None:
                    self._stop_playback(arrive)
                    self.hangup = self._hangup_record(arrive, "bot")
                    self._drop_pending(arrive)
                self._touch()
                return
            if self.hangup is not None:
                continue
            try:
                self._handle(json.loads(raw), arrive)
            except (ValueError, TypeError, KeyError, AttributeError) as exc:
                self.errors.append(f"unreadable message ({type(exc).__name__}): {str(raw)[:80]}")
            self._touch()

    def _handle(self, msg: dict[str, Any], at: float) -> None:
        c = self.config
        event = msg.get("event")
        self.events[str(event)] = self.events.get(str(event), 0) + 1
        media_event = "playAudio" if c.carrier == "plivo" else "media"
        mark_event = "checkpoint" if c.carrier == "plivo" else "mark"
        clear_event = "clearAudio" if c.carrier == "plivo" else "clear"
        if event in (media_event, mark_event, clear_event):
            self._check_stream(msg)
        if event == media_event:
            self._audio(msg, at)
        elif event == mark_event:
            name = msg.get("name") if c.carrier == "plivo" else (msg.get("mark") or {}).get("name")
            if not isinstance(name, str) or not name:
                self.errors.append(f"{event} without a name: {msg}")
                return
            self._mark(name, at)
        elif event == clear_event:
            self._clear(at)
        else:
            self.errors.append(f"unknown event {event!r} for {c.carrier}")

    def _check_stream(self, msg: dict[str, Any]) -> None:
        c = self.config
        key = {"twilio": "streamSid", "exotel": "stream_sid", "plivo": "streamId"}.get(c.carrier)
        if key is not None and msg.get(key) != c.stream_id:
            self.errors.append(f"{msg.get('event')} for stream {msg.get(key)!r}, not {c.stream_id!r}")

    def _audio(self, msg: dict[str, Any], at: float) -> None:
        c = self.config
        media = msg.get("media") or {}
        payload = base64.b64decode(media["payload"])
        if c.carrier == "exotel":
            pcm = payload
        elif c.carrier == "plivo":
            if media.get("contentType") != "audio/x-mulaw" or int(media.get("sampleRate", 0)) != 8000:
                self.errors.append(f"playAudio as {media.get('contentType')}@{media.get('sampleRate')}")
            pcm = ulaw_decode(payload)
        elif c.carrier == "telnyx" and c.encoding == "PCMA":
            pcm = alaw_decode(payload)
        else:
            pcm = ulaw_decode(payload)
        if len(pcm) % 2:
            self.errors.append("odd-length PCM payload")
            pcm = pcm[:-1]
        if not pcm:
            return
        if self.first_audio_at is None:
            self.first_audio_at = at
        start = max(self._end, at + c.jitter_buffer_s)
        end = start + len(pcm) / (2.0 * self.rate)
        self._chunks.append(_Chunk(pcm, start, end))
        self._end = end

    def _mark(self, name: str, at: float) -> None:
        c = self.config
        due = max(at, self._end)
        record = MarkRecord(name, at, due, self._position_at(due))
        self.marks.append(record)
        if not c.echo_marks:
            record.dropped = "no-echo"
            return
        entry = self._post(due + c.network_delay_s, self._echo_message(name), record)
        self._pending.append((record, entry))

    def _echo_message(self, name: str) -> dict[str, Any]:
        c = self.config
        seq = next(self._seq)
        if c.carrier == "twilio":
            return {
                "event": "mark",
                "sequenceNumber": str(seq),
                "streamSid": c.stream_id,
                "mark": {"name": name},
            }
        if c.carrier == "telnyx":
            return {
                "event": "mark",
                "sequence_number": str(seq),
                "stream_id": c.stream_id,
                "mark": {"name": name},
            }
        if c.carrier == "exotel":
            return {
                "event": "mark",
                "sequence_number": seq,
                "stream_sid": c.stream_id,
                "mark": {"name": name},
            }
        return {"event": "playedStream", "sequenceNumber": seq, "streamId": c.stream_id, "name": name}

    def _clear(self, at: float) -> None:
        c = self.config
        played = self.played_s(at)
        self._stop_playback(at, "clear")
        dropped = self.received_s - played - sum(r.dropped_s for r in self.clears)
        self.clears.append(ClearRecord(at, played, max(0.0, dropped)))
        for record, entry in self._due_after(at):
            entry[2] = None  # the scheduled echo is cancelled
            if c.carrier == "plivo":
                record.dropped = "clear"  # playedStream only for audio that played
            else:
                record.returned_by_clear = True
                self._post(at + c.network_delay_s, self._echo_message(record.name), record)
        if c.carrier == "plivo":
            self._post(
                at + c.network_delay_s,
                {"event": "clearedAudio", "sequenceNumber": next(self._seq), "streamId": c.stream_id},
            )

    def _due_after(self, at: float) -> list[tuple[MarkRecord, list[Any]]]:
        out = [(r, e) for r, e in self._pending if r.due_at > at and e[2] is not None]
        self._pending = [(r, e) for r, e in self._pending if not (r.due_at > at and e[2] is not None)]
        return out

    def _drop_pending(self, at: float) -> None:
        for record, entry in self._due_after(at):
            entry[2] = None
            record.dropped = "hang-up"

    def _stop_playback(self, at: float, by: str = "hang-up") -> None:
        for ch in self._chunks:
            if ch.cut is None and ch.end > at:
                ch.cut, ch.cut_by = at, by
        self._end = 0.0 if self._end <= at else at

    def _position_at(self, t: float) -> float:
        return self.played_s(t) if t <= self.now() else self._played_when_queued_ends()

    def _played_when_queued_ends(self) -> float:
        return sum(
            (len(ch.pcm) if ch.cut is None else ch.played(ch.cut, self.rate)) for ch in self._chunks
        ) / (2.0 * self.rate)

    def _hangup_record(self, at: float, by: Literal["bot", "caller"]) -> HangUpRecord:
        played = self.played_s(at)
        cleared = sum(r.dropped_s for r in self.clears)
        return HangUpRecord(at, by, played, self.received_s, max(0.0, self.received_s - cleared - played))

    # -- the way back

    def _post(
        self, when: float, message: dict[str, Any] | None, record: MarkRecord | None = None
    ) -> list[Any]:
        """Send ``message`` (None: close the socket) at ``when``; returns its entry (``entry[2] = None``
        cancels it)."""
        entry: list[Any] = [when, record, message if message is not None else "__close__"]
        heapq.heappush(self._outbox, (when, next(self._seq), entry))
        self._outbox_wake.set()
        return entry

    async def _send(self) -> None:
        while True:
            if not self._outbox:
                self._outbox_wake.clear()
                await self._outbox_wake.wait()
                continue
            when = self._outbox[0][0]
            wait = when - self.now()
            if wait > 0:
                self._outbox_wake.clear()
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._outbox_wake.wait(), wait)
                continue
            _, _, entry = heapq.heappop(self._outbox)
            message, record = entry[2], entry[1]
            if message is None:
                continue  # cancelled
            if message == "__close__":
                await self._ws.close()
                return
            if record is not None:
                record.echoed_at = self.now()
            try:
                await self._ws.send(json.dumps(message))
            except Exception:
                return
            self._touch()


# -- each carrier's opening messages (its media-stream docs' ``connected`` / ``start``)


def _twilio_start(c: CarrierConfig) -> list[dict[str, Any]]:
    return [
        {"event": "connected", "protocol": "Call", "version": "1.0.0"},
        {
            "event": "start",
            "sequenceNumber": "1",
            "streamSid": c.stream_id,
            "start": {
                "streamSid": c.stream_id,
                "callSid": c.call_id,
                "accountSid": "AC00000000000000000000000000000001",
                "tracks": ["inbound"],
                "customParameters": {},
                "mediaFormat": {"encoding": "audio/x-mulaw", "sampleRate": 8000, "channels": 1},
            },
        },
    ]


def _telnyx_start(c: CarrierConfig) -> list[dict[str, Any]]:
    return [
        {"event": "connected", "version": "1.0.0"},
        {
            "event": "start",
            "sequence_number": "1",
            "stream_id": c.stream_id,
            "start": {
                "call_control_id": c.call_id,
                "media_format": {"encoding": c.encoding, "sample_rate": c.sample_rate, "channels": 1},
            },
        },
    ]


def _exotel_start(c: CarrierConfig) -> list[dict[str, Any]]:
    media = {"encoding": "raw/slin", "sample_rate": str(c.sample_rate), "bit_rate": "128kbps"}
    return [
        {"event": "connected"},
        {
            "event": "start",
            "sequence_number": 1,
            "stream_sid": c.stream_id,
            "start": {
                "stream_sid": c.stream_id,
                "call_sid": c.call_id,
                "account_sid": "exotel-account",
                "media_format": media,
            },
        },
    ]


def _plivo_start(c: CarrierConfig) -> list[dict[str, Any]]:
    return [
        {
            "event": "start",
            "sequenceNumber": 1,
            "start": {
                "callId": c.call_id,
                "streamId": c.stream_id,
                "accountId": "MA00000000000000000001",
                "tracks": ["inbound"],
                "mediaFormat": {"encoding": "audio/x-mulaw", "sampleRate": 8000},
            },
        }
    ]


_HANDSHAKES: dict[str, Callable[[CarrierConfig], list[dict[str, Any]]]] = {
    "twilio": _twilio_start,
    "telnyx": _telnyx_start,
    "exotel": _exotel_start,
    "plivo": _plivo_start,
}


# -- each carrier's ``stop`` (the caller hung up), from its media-stream docs


def _twilio_stop(c: CarrierConfig, seq: int) -> dict[str, Any]:
    return {
        "event": "stop",
        "sequenceNumber": str(seq),
        "streamSid": c.stream_id,
        "stop": {"callSid": c.call_id},
    }


def _telnyx_stop(c: CarrierConfig, seq: int) -> dict[str, Any]:
    stop = {"call_control_id": c.call_id}
    return {"event": "stop", "sequence_number": str(seq), "stream_id": c.stream_id, "stop": stop}


def _exotel_stop(c: CarrierConfig, seq: int) -> dict[str, Any]:
    stop = {"call_sid": c.call_id, "reason": "callended"}
    return {"event": "stop", "sequence_number": seq, "stream_sid": c.stream_id, "stop": stop}


_STOPS: dict[str, Callable[[CarrierConfig, int], dict[str, Any]]] = {
    "twilio": _twilio_stop,
    "telnyx": _telnyx_stop,
    "exotel": _exotel_stop,
}
