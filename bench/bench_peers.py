"""Whole-scenario figures, ours vs the three outside Cartesia clients, all against the same emulator.

Peers, each against ours at the same level:

* ``sdk``: the official ``cartesia`` SDK 4.2 (``AsyncCartesia`` WebSocket contexts) vs our
  ``NineninesixTurnProvider`` (framework-free);
* ``pipecat``: Pipecat's ``CartesiaTTSService`` vs our ``ttsbridge.pipecat.NineninesixTTSService``, both driven
  through a real Pipecat pipeline (``pipecat.tests.utils.run_test``) with LLM text frames and
  ``InterruptionFrame`` barge-ins; audio is observed right after the TTS service;
* ``livekit``: LiveKit's ``livekit.plugins.cartesia.TTS`` vs our ``livekit.plugins.nineninesix.TTS``, through
  ``tts.stream()`` (barge-in = ``stream.aclose()``, which is what an ``AgentSession`` does on interruption).

Scenarios:

1. **warm TTFA**: time to first audio of a conversation's turns 2..N on the warm connection (the first turn
   of each run is the warm-up and is not counted). From the moment the turn's text is handed over (SDK /
   provider: ``send``; Pipecat: the LLM response starts; LiveKit: ``stream()`` + ``push_text``) to the first
   audio the application receives. 16 kHz PCM, a rate every peer can ask the API for.
2. **barge-in then next turn**: a long turn is interrupted once ``--barge-after-ms`` of its audio has reached
   the application, and the next (short) turn starts at once. (a) stale audio: audio of the interrupted turn
   that still reaches the application after the interrupt, as the window from the interrupt to the last
   such chunk (ms; 0 = none) and its size (bytes of PCM16, or of μ-law/wire bytes for the SDK); audio in the
   next turn's stream is attributed to the interrupted turn by its tone frequency (the emulator's ``tone``
   voice gives every transcript its own frequency). (b) time to first audio of the next turn, measured from
   the interrupt (the cancel, the socket teardown and any new handshake are inside it). (c) WebSocket
   handshakes and cancel messages per barge-in, read from the emulator's counters.
3. **telephony, 8 kHz μ-law on the wire**: does the application get audio it can decode (the tone's
   frequency measured with ``dominant_frequency`` within 2 % of the emulator's) — ours decodes G.711 to
   PCM16; the SDK hands over μ-law bytes labelled as μ-law (decoded here, as an application would).
4. **output rate 24000 / 48000**: does the application get audio at all at a rate the API does not have
   (the emulator, like the spec, answers ``invalid_sample_rate``), and is it the right tone.

The emulator runs in a child process (this file with ``--child``), with realistic server behaviour: a
first-chunk latency and paced audio (flags), behind a TCP relay that gives loopback a network: ``--rtt``
(every byte takes half of it each way) and ``--handshake-delay`` (added to every new connection: TCP + TLS
set-up; the HTTP upgrade's own round trip comes from ``--rtt``). The parent reads the emulator's counters over a pipe. Medians over ``--runs``;
no assertions about speed.

    python bench/bench_peers.py [--runs 12] [--first-chunk-latency 0.08] [--realtime-factor 3.0]
                                [--rtt 0.04] [--handshake-delay 0.15] [--barge-after-ms 300]
                                [--levels sdk,pipecat,livekit]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import logging
import re
import statistics
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ttsbridge.audio.analysis import dominant_frequency
from ttsbridge.audio.g711 import ulaw_decode
from ttsbridge.emulator import TONE_VOICE_ID, tone_duration, tone_frequency

MODEL = "gepard-1.0"
RATE = 16000  # scenarios 1 and 2: a rate the API has, so every peer works
#: scenario 1
WARM_TEXT = "Sure, I can help."
#: scenario 2: a long turn (about 5 s of audio) that is interrupted, and the short turn after it
LONG_TEXT = "Let me read the whole policy to you, starting with the part about refunds and returns."
NEXT_TEXT = "Sure, go ahead."
#: scenarios 3 and 4
CHECK_TEXT = "Your call is important to us."
BOUND = 30.0  # outer bound on any single wait

# -------------------------------------------------------------------------------------------------------------
# the emulator in a child process


async def _network_relay(target_port: int, handshake_delay: float, rtt: float) -> asyncio.Server:
    """A TCP relay in front of the emulator that gives loopback a network: every new connection is held for
    ``handshake_delay`` before it reaches the server (TCP + TLS set-up), and every byte takes ``rtt / 2`` in
    each direction (pipelined: a delay, not a bandwidth limit; order is kept). The sleeps simulate the
    network; they synchronise nothing."""

    async def pipe(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def deliver() -> None:
            while True:
                due, data = await queue.get()
                if not data:
                    return
                delay = due - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
                w.write(data)
                await w.drain()

        sender = asyncio.create_task(deliver())
        try:
            while data := await r.read(1 << 16):
                queue.put_nowait((time.monotonic() + rtt / 2, data))
            queue.put_nowait((time.monotonic() + rtt / 2, b""))
            await sender
        except (ConnectionError, OSError):
            pass
        finally:
            sender.cancel()
            w.close()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if handshake_delay > 0:
            await asyncio.sleep(handshake_delay)
        try:
            up_r, up_w = await asyncio.open_connection("127.0.0.1", target_port)
        except OSError:
            writer.close()
            return
        await asyncio.gather(pipe(reader, up_w), pipe(up_r, writer), return_exceptions=True)

    return await asyncio.start_server(handle, "127.0.0.1", 0)


async def _child(
    first_chunk_latency: float, realtime_factor: float, handshake_delay: float, rtt: float
) -> None:
    """Serve the emulator behind the network relay (none when ``rtt`` and ``handshake_delay`` are 0); answer
    ``stats`` on stdin with one JSON line of counters and ``times`` with the per-context timing records
    (``{id: [first request, first chunk or null, text]}``, drained); stop on ``quit`` / EOF."""
    from ttsbridge.emulator import Emulator, EmulatorConfig

    cfg = EmulatorConfig(
        first_chunk_latency_s=first_chunk_latency,
        realtime_factor=realtime_factor,
        default_voice=TONE_VOICE_ID,
        log_messages=False,
    )
    async with Emulator(cfg) as emu:
        port = int(emu.base_url.rsplit(":", 1)[1])
        proxy = await _network_relay(port, handshake_delay, rtt) if rtt > 0 or handshake_delay > 0 else None
        pport = proxy.sockets[0].getsockname()[1] if proxy is not None else port
        info = {
            "base_url": f"http://127.0.0.1:{pport}",
            "ws_url": f"ws://127.0.0.1:{pport}/tts/websocket",
            "api_key": emu.api_key,
        }
        print(json.dumps(info), flush=True)
        loop = asyncio.get_running_loop()
        try:
            while True:
                line = (await loop.run_in_executor(None, sys.stdin.readline)).strip()
                if line == "times":
                    times, emu.stats.timings = emu.stats.timings, {}
                    out = {k: [t.first_request, t.first_chunk, t.text] for k, t in times.items()}
                    print(json.dumps(out), flush=True)
                    continue
                if line != "stats":
                    return
                s = emu.stats
                counters = {
                    "ws_connections": s.ws_connections,
                    "ws_open": s.ws_open,
                    "cancels": s.cancels,
                    "contexts_cancelled": s.contexts_cancelled,
                    "chunks_sent": s.chunks_sent,
                    "errors_sent": [code for _, code in s.errors_sent],
                    "cpu_s": time.process_time(),  # the server's own CPU (bench_capacity: is it the limit?)
                }
                print(json.dumps(counters), flush=True)
        finally:
            if proxy is not None:
                proxy.close()


class EmulatorProcess:
    """The parent's handle on the child emulator: URLs, key and ``await stats()``."""

    def __init__(self, proc: asyncio.subprocess.Process, info: dict[str, str]) -> None:
        self._proc = proc
        self.base_url = info["base_url"]
        self.ws_url = info["ws_url"]
        self.api_key = info["api_key"]
        self._lock = asyncio.Lock()

    async def stats(self) -> dict[str, Any]:
        assert self._proc.stdin is not None and self._proc.stdout is not None
        async with self._lock:
            self._proc.stdin.write(b"stats\n")
            await self._proc.stdin.drain()
            return json.loads(await asyncio.wait_for(self._proc.stdout.readline(), BOUND))

    async def times(self) -> dict[str, list[Any]]:
        """The server's per-context timing records since the last call: ``{id: [first request, first chunk
        or None, text]}`` (seconds on the child's ``perf_counter``)."""
        assert self._proc.stdin is not None and self._proc.stdout is not None
        async with self._lock:
            self._proc.stdin.write(b"times\n")
            await self._proc.stdin.drain()
            line = await asyncio.wait_for(self._proc.stdout.readline(), BOUND)
            return json.loads(line)


@contextlib.asynccontextmanager
async def emulator_process(
    first_chunk_latency: float, realtime_factor: float, handshake_delay: float, rtt: float
) -> AsyncIterator[EmulatorProcess]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        __file__,
        "--child",
        "--first-chunk-latency",
        str(first_chunk_latency),
        "--realtime-factor",
        str(realtime_factor),
        "--handshake-delay",
        str(handshake_delay),
        "--rtt",
        str(rtt),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        limit=1 << 24,  # the ``times`` answer of a 200-stream round is one long line
    )
    try:
        assert proc.stdout is not None
        info = json.loads(await asyncio.wait_for(proc.stdout.readline(), BOUND))
        yield EmulatorProcess(proc, info)
    finally:
        if proc.stdin is not None:
            proc.stdin.write(b"quit\n")
            with contextlib.suppress(ConnectionError):
                await proc.stdin.drain()
            proc.stdin.close()
        try:
            await asyncio.wait_for(proc.wait(), 10)
        except asyncio.TimeoutError:
            proc.terminate()
            await asyncio.wait_for(proc.wait(), 10)


# -------------------------------------------------------------------------------------------------------------
# results


@dataclass
class BargeRun:
    """One barge-in: what reached the application after the interrupt, and the next turn's first audio."""

    stale_ms: float
    stale_bytes: int
    next_ttfa_ms: float


@dataclass
class Figures:
    """Everything measured for one client (ours or a peer) at one level."""

    warm_ttfa_ms: list[float] = field(default_factory=list)
    barge: list[BargeRun] = field(default_factory=list)
    handshakes_per_barge: float = float("nan")
    cancels_per_barge: float = float("nan")
    #: scenarios 3 and 4: label -> (passed, detail)
    checks: dict[str, tuple[bool, str]] = field(default_factory=dict)


def now() -> float:
    return time.perf_counter()


def of_text(pcm: bytes, rate: int, text: str, other: str) -> bool:
    """True if ``pcm`` (PCM16) is closer to ``text``'s tone than to ``other``'s (at least 5 ms to judge)."""
    if len(pcm) // 2 < rate // 200:
        return False
    f = dominant_frequency(pcm, rate)
    return abs(f - tone_frequency(text)) < abs(f - tone_frequency(other))


def tone_check(pcm: bytes, rate: int, text: str, what: str = "") -> tuple[bool, str]:
    """Pass if there is audio of about the right length at the tone's frequency (within 2 %)."""
    if not pcm:
        return False, f"no audio{': ' + what if what else ''}"
    got = dominant_frequency(pcm, rate)
    want = tone_frequency(text)
    secs = len(pcm) / 2 / rate
    ok = abs(got - want) <= 0.02 * want and 0.8 * tone_duration(text) <= secs <= tone_duration(text) + 0.3
    return ok, f"{got:.0f} Hz (want {want:.0f}), {secs:.2f} s{'; ' + what if what else ''}"


def stale_of(
    turn_chunks: Sequence[tuple[float, bytes]],
    next_chunks: Sequence[tuple[float, bytes]],
    t_int: float,
    rate: int,
) -> tuple[float, int]:
    """(window ms, bytes) of the interrupted turn's audio that reached the application after ``t_int``."""
    late = [(t, b) for t, b in turn_chunks if t > t_int]
    late += [(t, b) for t, b in next_chunks if of_text(b, rate, LONG_TEXT, NEXT_TEXT)]
    if not late:
        return 0.0, 0
    return (max(t for t, _ in late) - t_int) * 1000, sum(len(b) for _, b in late)


async def barge_counters(
    emu: EmulatorProcess, runs: int, body: Callable[[], Awaitable[None]]
) -> tuple[float, float]:
    before = await emu.stats()
    await body()
    # the peer's cancel (if any) may still be in flight: the next stats call is behind it on the same loop
    after = await emu.stats()
    return (
        (after["ws_connections"] - before["ws_connections"]) / runs,
        (after["cancels"] - before["cancels"]) / runs,
    )


#: after the interrupt, a reader that gets nothing for this long concludes the interrupted turn is over
IDLE_AFTER_INTERRUPT = 0.25


async def play(
    it: AsyncIterator[bytes],
    chunks: list[tuple[float, bytes]],
    heard: asyncio.Event,
    heard_bytes: int,
    interrupted: asyncio.Event,
) -> None:
    """An application's audio output: takes the turn's chunks and plays them in real time (a simulated
    clock; the sleep is playback, not synchronisation). Records when each chunk was handed over; sets
    ``heard`` once ``heard_bytes`` were played and waits there for ``interrupted``. Ends when the iterator ends or fails, or when nothing comes
    for ``IDLE_AFTER_INTERRUPT`` after the interrupt."""
    played, clock = 0, now()
    try:
        while True:
            wait = IDLE_AFTER_INTERRUPT if interrupted.is_set() else BOUND
            try:
                pcm = await asyncio.wait_for(it.__anext__(), wait)
            except (StopAsyncIteration, asyncio.TimeoutError):
                return
            except Exception:  # a stream closed under the reader is an end too
                return
            t = now()
            chunks.append((t, pcm))
            clock = max(clock, t) + len(pcm) / 2 / RATE
            await asyncio.sleep(max(0.0, clock - now()))
            played += len(pcm)
            if played >= heard_bytes and not heard.is_set():
                heard.set()
                # the barge-in lands here, at a chunk boundary, before the player asks for more: what the
                # client hands over from now on came after the interrupt was issued
                await asyncio.wait_for(interrupted.wait(), BOUND)
    finally:
        aclose = getattr(it, "aclose", None)
        if aclose is not None:
            with contextlib.suppress(Exception):
                await aclose()


async def barge_run(
    start: Callable[[str], Awaitable[tuple[AsyncIterator[bytes], Callable[[], Awaitable[None]]]]],
    barge_after_ms: float,
) -> BargeRun:
    """Scenario 2 for one client: ``start(text)`` opens a turn and returns (PCM16 chunks, interrupt)."""
    it, interrupt = await start(LONG_TEXT)
    chunks: list[tuple[float, bytes]] = []
    heard, interrupted = asyncio.Event(), asyncio.Event()
    reader = asyncio.create_task(play(it, chunks, heard, int(barge_after_ms / 1000 * RATE * 2), interrupted))
    await asyncio.wait_for(heard.wait(), BOUND)
    t_int = now()
    interrupted.set()
    # awaited directly (not through wait_for, which would start it a loop iteration late and let the reader
    # take one more chunk first); every interrupt here is bounded inside its client, and the whole run by
    # the caller
    await interrupt()
    it2, _ = await start(NEXT_TEXT)
    nxt: list[tuple[float, bytes]] = []

    async def read_next() -> None:
        async for pcm in it2:
            nxt.append((now(), pcm))

    await asyncio.wait_for(read_next(), BOUND)
    await asyncio.wait_for(reader, BOUND)
    stale_ms, stale_bytes = stale_of(chunks, nxt, t_int, RATE)
    return BargeRun(stale_ms, stale_bytes, (nxt[0][0] - t_int) * 1000 if nxt else float("nan"))


# -------------------------------------------------------------------------------------------------------------
# SDK level: cartesia SDK vs our provider


async def sdk_level(emu: EmulatorProcess, runs: int, barge_after_ms: float) -> tuple[Figures, Figures]:
    from cartesia import AsyncCartesia

    from ttsbridge.nineninesix import NineninesixOptions, NineninesixTurnProvider

    voice = {"mode": "id", "id": TONE_VOICE_ID}

    def raw(rate: int, encoding: str = "pcm_s16le") -> dict[str, Any]:
        return {"container": "raw", "encoding": encoding, "sample_rate": rate}

    def sdk_client() -> AsyncCartesia:
        return AsyncCartesia(
            api_key=emu.api_key,
            base_url=emu.base_url,
            websocket_base_url=emu.base_url.replace("http://", "ws://"),
            max_retries=0,
            timeout=10.0,
        )

    def provider(encoding: str = "pcm_s16le") -> NineninesixTurnProvider:
        return NineninesixTurnProvider(
            emu.api_key,
            base_url=emu.base_url,
            options=NineninesixOptions(voice=TONE_VOICE_ID, encoding=encoding),
        )

    ours, peer = Figures(), Figures()

    # --- SDK: one connection for the whole conversation
    async def sdk_turn(conn: Any, text: str, fmt: dict[str, Any]) -> tuple[float | None, bytes, list[str]]:
        t0 = now()
        ctx = conn.context(model_id=MODEL, voice=voice, output_format=fmt)
        await ctx.push(text)
        await ctx.no_more_inputs()
        first, audio, errors = None, b"", []

        async def read() -> None:
            nonlocal first, audio
            async for ev in ctx.receive():
                if ev.type == "chunk":
                    first = first or now() - t0
                    audio += base64.b64decode(ev.data)
                elif ev.type == "error":
                    errors.append(str(getattr(ev, "error", None) or getattr(ev, "title", "") or ev))

        await asyncio.wait_for(read(), BOUND)
        return first, audio, errors

    async def ours_turn(
        p: NineninesixTurnProvider, text: str, rate: int, **overrides: Any
    ) -> tuple[float | None, bytes, list[str]]:
        t0 = now()
        first, audio, errors = None, b"", []
        try:
            turn = await p.open_turn(sample_rate=rate, **overrides)
            await turn.send(text)
            await turn.end()

            async def read() -> None:
                nonlocal first, audio
                async for pcm in turn:
                    first = first or now() - t0
                    audio += pcm

            await asyncio.wait_for(read(), BOUND)
        except Exception as exc:  # a failed turn is a result here
            errors.append(f"{type(exc).__name__}: {exc}")
        return first, audio, errors

    client = sdk_client()
    try:
        async with client.tts.websocket_connect() as conn:
            for i in range(runs + 1):
                first, _, _ = await sdk_turn(conn, WARM_TEXT, raw(RATE))
                if i and first is not None:
                    peer.warm_ttfa_ms.append(first * 1000)

            async def sdk_barges() -> None:
                await sdk_turn(conn, WARM_TEXT, raw(RATE))  # warm-up
                for _ in range(runs):
                    peer.barge.append(await sdk_barge(conn))

            async def sdk_barge(conn: Any) -> BargeRun:
                async def start(text: str) -> tuple[AsyncIterator[bytes], Callable[[], Awaitable[None]]]:
                    ctx = conn.context(model_id=MODEL, voice=voice, output_format=raw(RATE))
                    await ctx.push(text)
                    await ctx.no_more_inputs()

                    async def audio() -> AsyncIterator[bytes]:
                        async for ev in ctx.receive():
                            if ev.type == "chunk":
                                yield base64.b64decode(ev.data)
                            elif ev.type == "error":
                                raise RuntimeError(str(ev))

                    return audio(), ctx.cancel

                return await asyncio.wait_for(barge_run(start, barge_after_ms), BOUND * 2)

            peer.handshakes_per_barge, peer.cancels_per_barge = await barge_counters(emu, runs, sdk_barges)

            # the same conversation switching to μ-law: the API fixes output_format per connection (by its
            # first request), so the SDK gets the connection's PCM16 labelled as what it asked for
            _, mulaw, errors = await sdk_turn(conn, CHECK_TEXT, raw(8000, "pcm_mulaw"))
            ok, detail = tone_check(ulaw_decode(mulaw), 8000, CHECK_TEXT, "; ".join(errors))
            peer.checks["8 kHz mu-law, same socket"] = (ok, detail + " (after 16 kHz PCM turns)")
    finally:
        await client.close()
    # scenario 3: μ-law at 8 kHz on a fresh connection, decoded by the application; scenario 4: each rate on
    # its own connection (the server closes the socket on invalid_sample_rate)
    for label, fmt in [
        ("8 kHz mu-law", raw(8000, "pcm_mulaw")),
        ("24000 out", raw(24000)),
        ("48000 out", raw(48000)),
    ]:
        client = sdk_client()
        rate = fmt["sample_rate"]
        try:
            async with client.tts.websocket_connect() as conn:
                _, audio, errors = await sdk_turn(conn, CHECK_TEXT, fmt)
            if fmt["encoding"] == "pcm_mulaw":
                audio = ulaw_decode(audio)  # the SDK hands over μ-law bytes; the application decodes them
            peer.checks[label] = tone_check(audio, rate, CHECK_TEXT, "; ".join(errors)[:100])
        except Exception as exc:
            peer.checks[label] = (False, f"{type(exc).__name__}: {exc}"[:80])
        finally:
            await client.close()

    # --- ours
    p = provider()
    try:
        await p.prewarm(RATE)
        for i in range(runs + 1):
            first, _, _ = await ours_turn(p, WARM_TEXT, RATE)
            if i and first is not None:
                ours.warm_ttfa_ms.append(first * 1000)

        async def ours_barges() -> None:
            await ours_turn(p, WARM_TEXT, RATE)
            for _ in range(runs):
                ours.barge.append(await ours_barge())

        async def ours_barge() -> BargeRun:
            async def start(text: str) -> tuple[AsyncIterator[bytes], Callable[[], Awaitable[None]]]:
                turn = await p.open_turn(sample_rate=RATE)
                await turn.send(text)
                await turn.end()
                return turn.__aiter__(), turn.cancel

            return await asyncio.wait_for(barge_run(start, barge_after_ms), BOUND * 2)

        ours.handshakes_per_barge, ours.cancels_per_barge = await barge_counters(emu, runs, ours_barges)
        # the same provider switching to μ-law (its connections are pooled by output format)
        _, pcm, errors = await ours_turn(p, CHECK_TEXT, 8000, encoding="pcm_mulaw")
        ours.checks["8 kHz mu-law, same socket"] = tone_check(pcm, 8000, CHECK_TEXT, "; ".join(errors))
    finally:
        await p.aclose()
    p = provider("pcm_mulaw")
    try:
        _, pcm, errors = await ours_turn(p, CHECK_TEXT, 8000)
        ours.checks["8 kHz mu-law"] = tone_check(pcm, 8000, CHECK_TEXT, "; ".join(errors))
    finally:
        await p.aclose()
    p = provider()
    try:
        for rate in (24000, 48000):
            _, pcm, errors = await ours_turn(p, CHECK_TEXT, rate)
            ours.checks[f"{rate} out"] = tone_check(pcm, rate, CHECK_TEXT, "; ".join(errors))
    finally:
        await p.aclose()
    return ours, peer


# -------------------------------------------------------------------------------------------------------------
# Pipecat level: CartesiaTTSService vs NineninesixTTSService in a pipeline


def _pipecat_machinery() -> Any:
    """Pipecat classes built lazily (importing Pipecat is slow and only this level needs it)."""
    from pipecat.frames.frames import (
        ControlFrame,
        ErrorFrame,
        Frame,
        InterruptionFrame,
        LLMFullResponseEndFrame,
        LLMFullResponseStartFrame,
        LLMTextFrame,
        TTSAudioRawFrame,
        TTSStoppedFrame,
    )
    from pipecat.pipeline.pipeline import Pipeline
    from pipecat.pipeline.worker import PipelineParams
    from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
    from pipecat.tests.utils import run_test

    @dataclass
    class Stamp(ControlFrame):
        """Gate instruction: record the time under ``key`` (not forwarded)."""

        key: str = ""

    @dataclass
    class WaitFor(ControlFrame):
        """Gate instruction: hold the frames behind it until ``event`` is set."""

        event: asyncio.Event = field(default_factory=asyncio.Event)

    @dataclass
    class Interrupt(ControlFrame):
        """Gate instruction: stamp ``key`` and push an InterruptionFrame (a barge-in)."""

        key: str = ""

    class Gate(FrameProcessor):
        def __init__(self) -> None:
            super().__init__()
            self.stamps: dict[str, float] = {}

        async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
            await super().process_frame(frame, direction)
            if isinstance(frame, Stamp):
                self.stamps[frame.key] = now()
            elif isinstance(frame, WaitFor):
                await asyncio.wait_for(frame.event.wait(), BOUND)
            elif isinstance(frame, Interrupt):
                self.stamps[frame.key] = now()
                await self.push_frame(InterruptionFrame())
            else:
                await self.push_frame(frame, direction)

    class Probe(FrameProcessor):
        """Right after the TTS: times every audio frame; per turn (contexts in order of first audio) an
        event once ``heard_bytes`` of it arrived and one when its TTSStoppedFrame passes."""

        def __init__(self, turns: int, heard_bytes: int) -> None:
            super().__init__(enable_direct_mode=True)
            self.audio: list[tuple[float, str | None, bytes]] = []
            self.contexts: list[str | None] = []
            self.heard = [asyncio.Event() for _ in range(turns)]
            self.done = [asyncio.Event() for _ in range(turns)]
            self._bytes: dict[str | None, int] = {}
            self._heard_bytes = heard_bytes

        def turn_of(self, context_id: str | None) -> int:
            return self.contexts.index(context_id)

        async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
            await super().process_frame(frame, direction)
            if direction == FrameDirection.DOWNSTREAM:
                if isinstance(frame, TTSAudioRawFrame):
                    cid = frame.context_id
                    self.audio.append((now(), cid, frame.audio))
                    if cid not in self.contexts and len(self.contexts) < len(self.heard):
                        self.contexts.append(cid)
                    self._bytes[cid] = self._bytes.get(cid, 0) + len(frame.audio)
                    if cid in self.contexts and self._bytes[cid] >= self._heard_bytes:
                        self.heard[self.turn_of(cid)].set()
                elif isinstance(frame, TTSStoppedFrame) and self.contexts:
                    cid = frame.context_id if frame.context_id in self.contexts else self.contexts[-1]
                    self.done[self.turn_of(cid)].set()
            await self.push_frame(frame, direction)

    def llm_turn(text: str) -> list[Frame]:
        """An LLM response streamed in 5-character tokens."""
        return [
            LLMFullResponseStartFrame(),
            *[LLMTextFrame(text[i : i + 5]) for i in range(0, len(text), 5)],
            LLMFullResponseEndFrame(),
        ]

    async def run(
        tts: FrameProcessor, gate: FrameProcessor, probe: FrameProcessor, frames: list[Frame], rate: int
    ) -> tuple[list[Frame], list[Frame]]:
        params = PipelineParams(audio_out_sample_rate=rate)
        down, up = await asyncio.wait_for(
            run_test(
                Pipeline([gate, tts, probe]),
                frames_to_send=frames,
                pipeline_params=params,
                start_timeout=10.0,
            ),
            BOUND * 4,
        )
        return list(down), list(up)

    return {
        "Stamp": Stamp,
        "WaitFor": WaitFor,
        "Interrupt": Interrupt,
        "Gate": Gate,
        "Probe": Probe,
        "llm_turn": llm_turn,
        "run": run,
        "ErrorFrame": ErrorFrame,
        "TTSAudioRawFrame": TTSAudioRawFrame,
    }


async def pipecat_level(emu: EmulatorProcess, runs: int, barge_after_ms: float) -> tuple[Figures, Figures]:
    from pipecat.services.cartesia.tts import CartesiaTTSService

    from ttsbridge.pipecat import NineninesixTTSService

    m = _pipecat_machinery()

    def make(which: str, **kw: Any) -> Any:
        if which == "peer":
            return CartesiaTTSService(
                api_key=emu.api_key,
                url=emu.ws_url,
                settings=CartesiaTTSService.Settings(voice=TONE_VOICE_ID, model=MODEL),
                **kw,
            )
        return NineninesixTTSService(
            emu.api_key,
            base_url=emu.base_url,
            settings=NineninesixTTSService.Settings(voice=TONE_VOICE_ID),
            **kw,
        )

    figs = {"ours": Figures(), "peer": Figures()}
    for which, fig in figs.items():
        # 1. warm TTFA: runs + 1 turns in one pipeline, each waits for the previous one's TTSStoppedFrame
        gate, probe = m["Gate"](), m["Probe"](runs + 1, 1 << 30)
        frames: list[Any] = []
        for i in range(runs + 1):
            frames += [m["Stamp"](f"t{i}"), *m["llm_turn"](WARM_TEXT), m["WaitFor"](probe.done[i])]
        await m["run"](make(which), gate, probe, frames, RATE)
        firsts: dict[int, float] = {}
        for t, cid, _ in probe.audio:
            if cid in probe.contexts:
                firsts.setdefault(probe.turn_of(cid), t)
        fig.warm_ttfa_ms = [
            (firsts[i] - gate.stamps[f"t{i}"]) * 1000 for i in range(1, runs + 1) if i in firsts
        ]

        # 2. barge-in: a warm-up turn, then per run: long turn, interrupt once heard, next turn to its end
        turns = 1 + 2 * runs
        gate, probe = m["Gate"](), m["Probe"](turns, int(barge_after_ms / 1000 * RATE * 2))
        frames = [*m["llm_turn"](WARM_TEXT), m["WaitFor"](probe.done[0])]
        for r in range(runs):
            k = 1 + 2 * r
            frames += [
                *m["llm_turn"](LONG_TEXT),
                m["WaitFor"](probe.heard[k]),
                m["Interrupt"](f"int{r}"),
                *m["llm_turn"](NEXT_TEXT),
                m["WaitFor"](probe.done[k + 1]),
            ]

        async def body(
            gate: Any = gate, probe: Any = probe, frames: list[Any] = frames, which: str = which
        ) -> None:
            await m["run"](make(which), gate, probe, frames, RATE)

        fig.handshakes_per_barge, fig.cancels_per_barge = await barge_counters(emu, runs, body)
        # the warm-up turn's socket is counted in the pipeline's start: subtract the one setup() handshake
        fig.handshakes_per_barge -= 1 / runs
        for r in range(runs):
            k = 1 + 2 * r
            t_int = gate.stamps[f"int{r}"]
            long_cid, next_cid = probe.contexts[k], probe.contexts[k + 1]
            chunks = [(t, b) for t, c, b in probe.audio if c == long_cid]
            nxt = [(t, b) for t, c, b in probe.audio if c == next_cid]
            stale_ms, stale_bytes = stale_of(chunks, nxt, t_int, RATE)
            fig.barge.append(BargeRun(stale_ms, stale_bytes, (nxt[0][0] - t_int) * 1000))

        # 3. telephony: μ-law at 8 kHz on the wire
        gate, probe = m["Gate"](), m["Probe"](1, 1 << 30)
        down, up = await m["run"](
            make(which, encoding="pcm_mulaw", sample_rate=8000), gate, probe, m["llm_turn"](CHECK_TEXT), 8000
        )
        pcm = b"".join(f.audio for f in down if isinstance(f, m["TTSAudioRawFrame"]))
        errs = pipecat_errors(up, m["ErrorFrame"])
        fig.checks["8 kHz mu-law"] = tone_check(pcm, 8000, CHECK_TEXT, errs)
        # 4. the pipeline's output rate as-is
        for rate in (24000, 48000):
            gate, probe = m["Gate"](), m["Probe"](1, 1 << 30)
            down, up = await m["run"](make(which), gate, probe, m["llm_turn"](CHECK_TEXT), rate)
            pcm = b"".join(f.audio for f in down if isinstance(f, m["TTSAudioRawFrame"]))
            errs = pipecat_errors(up, m["ErrorFrame"])
            fig.checks[f"{rate} out"] = tone_check(pcm, rate, CHECK_TEXT, errs)
    return figs["ours"], figs["peer"]


# -------------------------------------------------------------------------------------------------------------
# LiveKit level: livekit.plugins.cartesia.TTS vs livekit.plugins.nineninesix.TTS


async def livekit_level(emu: EmulatorProcess, runs: int, barge_after_ms: float) -> tuple[Figures, Figures]:
    import aiohttp
    from livekit.agents import APIConnectOptions

    from livekit.plugins import cartesia, nineninesix

    fast = APIConnectOptions(max_retry=0, retry_interval=0.0, timeout=10.0)
    figs = {"ours": Figures(), "peer": Figures()}

    async with aiohttp.ClientSession() as http:

        def make(which: str, rate: int = RATE, encoding: str = "pcm_s16le") -> Any:
            if which == "peer":
                return cartesia.TTS(
                    api_key=emu.api_key,
                    base_url=emu.base_url,
                    voice=TONE_VOICE_ID,
                    model=MODEL,
                    sample_rate=rate,
                    encoding=encoding,  # type: ignore[arg-type]  # typed pcm_s16le only; sent as given
                    http_session=http,
                )
            return nineninesix.TTS(
                emu.api_key,
                base_url=emu.base_url,
                voice=TONE_VOICE_ID,
                sample_rate=rate,
                encoding=encoding,  # type: ignore[arg-type]
                http_session=http,
            )

        async def turn(t: Any, text: str, conn: APIConnectOptions = fast) -> tuple[float | None, bytes, str]:
            t0 = now()
            first, audio, err = None, b"", ""
            try:
                async with t.stream(conn_options=conn) as stream:
                    stream.push_text(text)
                    stream.end_input()

                    async def read() -> None:
                        nonlocal first, audio
                        async for ev in stream:
                            first = first or now() - t0
                            audio += ev.frame.data.tobytes()

                    await asyncio.wait_for(read(), BOUND)
            except Exception as exc:
                err = f"{type(exc).__name__}: {exc}"[:120]
            return first, audio, err

        for which, fig in figs.items():
            t = make(which)
            try:
                for i in range(runs + 1):
                    first, _, _ = await turn(t, WARM_TEXT)
                    if i and first is not None:
                        fig.warm_ttfa_ms.append(first * 1000)

                async def barge(t: Any = t) -> BargeRun:
                    async def start(text: str) -> tuple[AsyncIterator[bytes], Callable[[], Awaitable[None]]]:
                        stream = t.stream(conn_options=fast)
                        stream.push_text(text)
                        stream.end_input()

                        async def audio() -> AsyncIterator[bytes]:
                            try:
                                async for ev in stream:
                                    yield ev.frame.data.tobytes()
                            finally:
                                await stream.aclose()

                        return audio(), stream.aclose  # aclose() is what an AgentSession does on barge-in

                    return await asyncio.wait_for(barge_run(start, barge_after_ms), BOUND * 2)

                async def barges(
                    barge: Callable[[], Awaitable[BargeRun]] = barge, t: Any = t, fig: Figures = fig
                ) -> None:
                    await turn(t, WARM_TEXT)
                    for _ in range(runs):
                        fig.barge.append(await barge())

                fig.handshakes_per_barge, fig.cancels_per_barge = await barge_counters(emu, runs, barges)
            finally:
                await t.aclose()

            t = make(which, 8000, "pcm_mulaw")
            try:
                _, pcm, err = await turn(t, CHECK_TEXT)
                fig.checks["8 kHz mu-law"] = tone_check(pcm, 8000, CHECK_TEXT, err)
            finally:
                await t.aclose()
            for rate in (24000, 48000):
                t = make(which, rate)
                try:
                    t0, before = now(), await emu.stats()
                    # LiveKit's default connect options: the retries are part of what the user gets
                    _, pcm, err = await turn(t, CHECK_TEXT, APIConnectOptions())
                    if err:
                        after = await emu.stats()
                        server = after["errors_sent"][len(before["errors_sent"]) :]
                        shakes = after["ws_connections"] - before["ws_connections"]
                        err += (
                            f" after {now() - t0:.1f} s; server: {shakes} handshake(s), "
                            f"errors {', '.join(server) or 'none'}"
                        )
                    fig.checks[f"{rate} out"] = tone_check(pcm, rate, CHECK_TEXT, err)
                finally:
                    await t.aclose()
    return figs["ours"], figs["peer"]


# -------------------------------------------------------------------------------------------------------------
# report


def med(xs: Sequence[float]) -> float:
    xs = [x for x in xs if x == x]
    return statistics.median(xs) if xs else float("nan")


def ratio(a: float, b: float) -> str:
    if a != a or b != b:
        return "n/a"
    if b == 0:
        return "=" if a == 0 else "inf"
    return f"{a / b:.2f}"


CHECK_ORDER = ("8 kHz mu-law", "8 kHz mu-law, same socket", "24000 out", "48000 out")


def labels(*figs: Figures) -> list[str]:
    found = {label for f in figs for label in f.checks}
    return [x for x in CHECK_ORDER if x in found] + sorted(found - set(CHECK_ORDER))


def spread(fig: Figures) -> str:
    xs = [b.stale_bytes for b in fig.barge]
    if not xs:
        return "-"
    return (
        f"all {xs[0]}" if len(set(xs)) == 1 else f"{min(xs)}..{max(xs)} (median {statistics.median(xs):.0f})"
    )


def pipecat_errors(frames: Sequence[Any], error_frame: type) -> str:
    """ErrorFrames upstream, shortened to their error codes when they carry the server's error JSON."""
    out = []
    for f in frames:
        if isinstance(f, error_frame):
            code = re.search(r"'error_code': '(\w+)'", f.error)
            out.append(f"ErrorFrame {code.group(1)}" if code else f"ErrorFrame {f.error[:80]}")
    return "; ".join(dict.fromkeys(out))


def verdict(check: tuple[bool, str] | None) -> str:
    return "n/a" if check is None else "pass" if check[0] else "FAIL"


def report(results: dict[str, tuple[Figures, Figures]], runs: int, args: argparse.Namespace) -> None:
    peers = {
        "sdk": "cartesia SDK 4.2",
        "pipecat": "Pipecat CartesiaTTSService",
        "livekit": "LiveKit cartesia",
    }
    print(
        f"ours vs peer against the emulator (child process; first chunk {args.first_chunk_latency * 1000:.0f} ms, "
        f"realtime factor {args.realtime_factor}, RTT {args.rtt * 1000:.0f} ms, "
        f"handshake +{args.handshake_delay * 1000:.0f} ms); "
        f"medians of {runs} runs; {RATE} Hz unless stated"
    )
    w = (44, 9, 12, 12, 10)
    print(f"{'scenario':<{w[0]}} {'level':<{w[1]}} {'ours':>{w[2]}} {'peer':>{w[3]}} {'ours/peer':>{w[4]}}")
    print("-" * (sum(w) + 4))

    def row(name: str, level: str, a: float, b: float, fmt: str = "{:.1f}", rat: bool = True) -> None:
        r = ratio(a, b) if rat else "-"
        print(f"{name:<{w[0]}} {level:<{w[1]}} {fmt.format(a):>{w[2]}} {fmt.format(b):>{w[3]}} {r:>{w[4]}}")

    for level, (ours, peer) in results.items():
        row("1. warm TTFA, turns 2..N (ms)", level, med(ours.warm_ttfa_ms), med(peer.warm_ttfa_ms))
        row(
            "2a. stale audio window after barge-in (ms)",
            level,
            *(med([b.stale_ms for b in f.barge]) for f in (ours, peer)),
        )
        row(
            "2a. stale audio after barge-in (bytes)",
            level,
            *(med([b.stale_bytes for b in f.barge]) for f in (ours, peer)),
            fmt="{:.0f}",
        )
        row(
            "2b. next turn TTFA from the interrupt (ms)",
            level,
            *(med([b.next_ttfa_ms for b in f.barge]) for f in (ours, peer)),
        )
        row(
            "2c. handshakes per barge-in",
            level,
            ours.handshakes_per_barge,
            peer.handshakes_per_barge,
            "{:.2f}",
            False,
        )
        row(
            "2c. cancel messages per barge-in",
            level,
            ours.cancels_per_barge,
            peer.cancels_per_barge,
            "{:.2f}",
            False,
        )
        for label in labels(ours, peer):
            name = f"3. telephony, {label}" if "mu-law" in label else f"4. output rate {label.split()[0]}"
            o, p = (verdict(f.checks.get(label)) for f in (ours, peer))
            print(f"{name:<{w[0]}} {level:<{w[1]}} {o:>{w[2]}} {p:>{w[3]}} {'-':>{w[4]}}")
    print(
        "2a: SDK and LiveKit levels read the turn with a real-time player; Pipecat right after the TTS service.\n"
        "2b: from the interrupt, so it includes the interrupt itself: our cancel puts the cancel on the wire\n"
        "    and returns (the acknowledgement is consumed in the background); LiveKit's cartesia plugin\n"
        "    pays a new connection instead."
    )
    print()
    print("details (ours | peer):")
    for level, (ours, peer) in results.items():
        print(f"  {level} ({peers[level]})")
        print(f"    2a stale bytes per run: ours {spread(ours)} | peer {spread(peer)}")
        for label in labels(ours, peer):
            d_o, d_p = (f.checks.get(label, (False, "not run"))[1] for f in (ours, peer))
            print(f"    {label}: ours {d_o} | peer {d_p}")


async def main(args: argparse.Namespace) -> None:
    levels = [x.strip() for x in args.levels.split(",") if x.strip()]
    funcs = {"sdk": sdk_level, "pipecat": pipecat_level, "livekit": livekit_level}
    results: dict[str, tuple[Figures, Figures]] = {}
    t0 = now()
    async with emulator_process(
        args.first_chunk_latency, args.realtime_factor, args.handshake_delay, args.rtt
    ) as emu:
        for level in levels:
            t1 = now()
            results[level] = await funcs[level](emu, args.runs, args.barge_after_ms)
            print(f"[{level} done in {now() - t1:.0f} s]", file=sys.stderr, flush=True)
    report(results, args.runs, args)
    print(f"\n(total {now() - t0:.0f} s)")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=12, help="runs per scenario (medians over them)")
    ap.add_argument(
        "--first-chunk-latency", type=float, default=0.08, help="emulator: seconds to first chunk"
    )
    ap.add_argument("--realtime-factor", type=float, default=3.0, help="emulator pacing: 1.0 = real time")
    ap.add_argument(
        "--handshake-delay", type=float, default=0.15, help="seconds added to every new connection (TCP+TLS)"
    )
    ap.add_argument("--rtt", type=float, default=0.04, help="network round trip added by the relay (s)")
    ap.add_argument("--barge-after-ms", type=float, default=300.0, help="audio heard before the barge-in")
    ap.add_argument("--levels", default="sdk,pipecat,livekit", help="comma list of sdk, pipecat, livekit")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--log-level", default="CRITICAL", help="log level of the clients (noisy on failures)")
    a = ap.parse_args()
    if a.child:
        logging.getLogger("aiohttp").setLevel(logging.CRITICAL)  # clients that hang up mid-handshake
        asyncio.run(_child(a.first_chunk_latency, a.realtime_factor, a.handshake_delay, a.rtt))
    else:
        logging.basicConfig(level=a.log_level)
        with contextlib.suppress(ImportError):  # Pipecat logs through loguru
            from loguru import logger

            logger.remove()
            if a.log_level.upper() != "CRITICAL":
                logger.add(sys.stderr, level=a.log_level.upper())
        asyncio.run(main(a))
