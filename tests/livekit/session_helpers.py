"""A LiveKit ``AgentSession`` without a room: a scripted LLM, a sink that plays audio in real time, and the
transcript synchronizer LiveKit's room output uses, so the chat context gets what was heard.

The pattern is livekit/agents' own tests (``fake_io.py`` / ``fake_llm.py``), written again for these tests.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from livekit.agents import Agent, AgentSession, llm, tokenize, tts
from livekit.agents.types import DEFAULT_API_CONNECT_OPTIONS, NOT_GIVEN, APIConnectOptions, NotGivenOr
from livekit.agents.voice.io import AudioOutput, AudioOutputCapabilities, TextOutput
from livekit.agents.voice.transcription.synchronizer import TranscriptSynchronizer

from livekit import rtc
from livekit.plugins import kitta, nineninesix
from ttsbridge.emulator import TONE_VOICE_ID, Emulator

BOUND = 10.0  # outer bound on any wait of these tests


# ----------------------------------------------------------------------------------------------------
# the LLM


class ScriptedLLM(llm.LLM):
    """Answers each user message with a scripted reply, streamed a word at a time like an LLM's tokens.

    ``replies`` maps the user's text to the reply; an unknown text gets ``default``. Every chat context the
    session sends is kept in ``requests`` (what the LLM would see: the heard prefix after a barge-in).
    """

    def __init__(self, replies: dict[str, str], *, default: str = "") -> None:
        super().__init__()
        self.replies = dict(replies)
        self.default = default
        self.requests: list[llm.ChatContext] = []

    def chat(
        self,
        *,
        chat_ctx: llm.ChatContext,
        tools: list[llm.Tool] | None = None,
        conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS,
        parallel_tool_calls: NotGivenOr[bool] = NOT_GIVEN,
        tool_choice: NotGivenOr[llm.ToolChoice] = NOT_GIVEN,
        extra_kwargs: NotGivenOr[dict[str, Any]] = NOT_GIVEN,
    ) -> llm.LLMStream:
        self.requests.append(chat_ctx.copy())
        user = next((m.text_content or "" for m in reversed(chat_ctx.messages()) if m.role == "user"), "")
        reply = self.replies.get(user, self.default)
        return _ScriptedStream(self, reply, chat_ctx=chat_ctx, tools=tools or [], conn_options=conn_options)


class _ScriptedStream(llm.LLMStream):
    def __init__(self, owner: ScriptedLLM, reply: str, **kw: Any) -> None:
        super().__init__(owner, **kw)
        self._reply = reply

    async def _run(self) -> None:
        words = self._reply.split(" ")
        for i, word in enumerate(words):
            token = word if i == len(words) - 1 else word + " "
            self._event_ch.send_nowait(
                llm.ChatChunk(id=str(id(self)), delta=llm.ChoiceDelta(role="assistant", content=token))
            )
            await asyncio.sleep(0)  # let the TTS read tokens as they come


# ----------------------------------------------------------------------------------------------------
# the audio sink


@dataclass
class PlayedSegment:
    """One playback segment (one reply's audio) as the sink played it."""

    frames: list[rtc.AudioFrame] = field(default_factory=list)
    captured: float = 0.0  # seconds of audio handed to the sink
    played: float = 0.0  # seconds actually played (a cut frame counts its played part)
    interrupted: bool = False
    finished: bool = False
    flushed: bool = False

    @property
    def pcm(self) -> bytes:
        return b"".join(f.data.tobytes() for f in self.frames)


_END = object()


class RealtimePlayer(AudioOutput):
    """An audio sink playing what it captures in real time, as a sound card does.

    Frames queue up as LiveKit captures them (faster than real time); a player task takes one at a time and
    holds it for its duration (the device clock). ``clear_buffer()`` (a barge-in) cuts the frame playing,
    drops the rest and reports the position reached, to the sample's time.
    """

    def __init__(self, *, sample_rate: int | None = None) -> None:
        super().__init__(
            label="RealtimePlayer",
            capabilities=AudioOutputCapabilities(pause=False),
            sample_rate=sample_rate,
        )
        self.segments: list[PlayedSegment] = []
        self._queue: deque[Any] = deque()
        self._wake = asyncio.Event()
        self._changed = asyncio.Event()
        self._cut: asyncio.Future[None] | None = None
        self._frame_started = 0.0
        self._current_duration = 0.0
        self._open: PlayedSegment | None = None  # the segment being captured
        self._task: asyncio.Task[None] | None = None

    # -- AudioOutput

    async def capture_frame(self, frame: rtc.AudioFrame) -> None:
        await super().capture_frame(frame)
        if self._open is None:
            self._open = PlayedSegment()
            self.segments.append(self._open)
        self._open.captured += frame.duration
        self._queue.append((self._open, frame))
        self._start()
        self._wake.set()

    def flush(self) -> None:
        super().flush()
        if self._open is None:
            return
        self._open.flushed = True
        self._queue.append((self._open, _END))
        self._open = None
        self._wake.set()

    def clear_buffer(self) -> None:
        playing = self._playing_segment()
        self._queue.clear()
        self._open = None
        if playing is None:
            return
        if self._cut is not None and not self._cut.done():
            playing.played += min(time.monotonic() - self._frame_started, self._current_duration)
            self._cut.set_result(None)
        self._finish(playing, interrupted=True)

    # -- the player

    def _playing_segment(self) -> PlayedSegment | None:
        for seg in self.segments:
            if not seg.finished and (seg.frames or seg.captured or seg.flushed):
                return seg
        return None

    def _start(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._play(), name="RealtimePlayer.play")

    async def _play(self) -> None:
        while True:
            while not self._queue:
                self._wake.clear()
                await self._wake.wait()
            seg, item = self._queue.popleft()
            if seg.finished:
                continue
            if item is _END:
                self._finish(seg, interrupted=False)
                continue
            if not seg.frames and seg.played == 0.0:
                self.on_playback_started(created_at=time.time())
            self._current_duration = item.duration
            self._frame_started = time.monotonic()
            self._cut = asyncio.get_running_loop().create_future()
            await asyncio.wait({self._cut}, timeout=item.duration)  # the device clock
            if self._cut.done():  # cut by clear_buffer: its played part is already counted
                continue
            self._cut.cancel()
            seg.frames.append(item)
            seg.played += item.duration
            self._notify()

    def _finish(self, seg: PlayedSegment, *, interrupted: bool) -> None:
        seg.finished, seg.interrupted = True, interrupted
        self.on_playback_finished(playback_position=seg.played, interrupted=interrupted)
        self._notify()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    # -- for the tests

    async def wait_until(self, cond: Callable[[], bool], timeout: float = BOUND) -> None:
        """Wait (bounded) until ``cond()`` holds; re-checked whenever a frame has played or a segment ended."""

        async def _wait() -> None:
            while not cond():
                await self._changed.wait()

        await asyncio.wait_for(_wait(), timeout)

    async def wait_played(self, seconds: float, timeout: float = BOUND) -> PlayedSegment:
        """Wait until the segment playing now has played ``seconds`` of audio; return it."""
        await self.wait_until(lambda: bool(self.segments) and self.segments[-1].played >= seconds, timeout)
        return self.segments[-1]

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None


class TextCollector(TextOutput):
    """The transcript as the synchronizer forwards it (word by word, in time with the audio)."""

    def __init__(self) -> None:
        super().__init__(label="TextCollector", next_in_chain=None)
        self.pending = ""
        self.segments: list[str] = []

    async def capture_text(self, text: str) -> None:
        self.pending += text

    def flush(self) -> None:
        self.segments.append(self.pending)
        self.pending = ""


# ----------------------------------------------------------------------------------------------------
# the session


@dataclass
class Harness:
    session: AgentSession[None]
    player: RealtimePlayer
    text: TextCollector
    llm: ScriptedLLM
    sync: TranscriptSynchronizer

    def assistant_messages(self) -> list[llm.ChatMessage]:
        return [m for m in self.session.history.messages() if m.role == "assistant"]


@contextlib.asynccontextmanager
async def agent_session(t: tts.TTS, replies: dict[str, str], **session_kw: Any) -> AsyncIterator[Harness]:
    """A started ``AgentSession`` speaking through ``t`` into a :class:`RealtimePlayer` (no room, no STT/VAD).

    Replies are started with ``session.generate_reply(user_input=...)`` / ``session.say(...)``; the user's
    barge-in is ``session.interrupt()``. Closes the session, the synchronizer and the player at the end (the
    TTS is the caller's).
    """
    scripted = ScriptedLLM(replies)
    session_kw.setdefault("use_tts_aligned_transcript", True)  # False: LiveKit's own estimate
    session: AgentSession[None] = AgentSession(
        llm=scripted, tts=t, vad=None, user_away_timeout=None, **session_kw
    )
    player = RealtimePlayer()
    text = TextCollector()
    sync = TranscriptSynchronizer(next_in_chain_audio=player, next_in_chain_text=text)
    session.output.audio = sync.audio_output
    session.output.transcription = sync.text_output
    await session.start(Agent(instructions="You are a test agent."), record=False)
    try:
        yield Harness(session, player, text, scripted, sync)
    finally:
        with contextlib.suppress(RuntimeError):
            await asyncio.wait_for(session.aclose(), BOUND)
        await asyncio.wait_for(sync.aclose(), BOUND)
        await asyncio.wait_for(player.aclose(), BOUND)


# ----------------------------------------------------------------------------------------------------
# the two providers, and what was heard


FAST_KITTA_CLIENT = {"backoff_initial": 0.01, "backoff_max": 0.05, "event_timeout": 5.0}


def make_provider_tts(emu: Emulator, provider: str, **kw: Any) -> tts.TTS:
    """``nineninesix.TTS`` or ``kitta.TTS`` on the emulator, with the tone voice."""
    kw.setdefault("voice", TONE_VOICE_ID)
    if provider == "kitta":
        kw.setdefault("client_options", dict(FAST_KITTA_CLIENT))
        return kitta.TTS(emu.config.kitta.a_valid_key(), base_url=emu.base_url, **kw)
    return nineninesix.TTS(emu.api_key, base_url=emu.base_url, **kw)


def sentences(text: str) -> list[str]:
    """The sentences the plugins send for ``text`` (LiveKit's default tokenizer, blingfire)."""
    return tokenize.blingfire.SentenceTokenizer().tokenize(text)
