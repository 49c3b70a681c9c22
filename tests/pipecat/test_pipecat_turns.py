"""NineninesixTTSService turns through Pipecat's own harness (run_test) against the emulator."""

from __future__ import annotations

import asyncio

import pytest
from pc_helpers import (
    S1,
    S2,
    S3,
    Gate,
    Probe,
    WaitFor,
    audio_frames,
    audio_of,
    errors_of,
    make_tts,
    pipeline,
    run,
    segment,
    tone_len,
    words_of,
)
from pipecat.frames.frames import (
    AggregatedTextFrame,
    ErrorFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
    MetricsFrame,
    TTSAudioRawFrame,
    TTSSpeakFrame,
    TTSStartedFrame,
    TTSStoppedFrame,
    TTSTextFrame,
    TTSUpdateSettingsFrame,
)
from pipecat.metrics.metrics import TTFBMetricsData, TTSUsageMetricsData
from pipecat.services.tts_service import TextAggregationMode, WebsocketTTSService

from ttsbridge.audio.analysis import dominant_frequency
from ttsbridge.emulator import TONE_VOICE_ID, Emulator, tone_frequency
from ttsbridge.errors import TTSInvalidOptionError
from ttsbridge.pipecat import NineninesixTTSService


def tokens(text: str, size: int = 4) -> list[LLMTextFrame]:
    """``text`` as an LLM would stream it: small chunks that split words."""
    return [LLMTextFrame(text[i : i + size]) for i in range(0, len(text), size)]


def llm_turn(*sentences: str, size: int = 4) -> list:
    return [
        LLMFullResponseStartFrame(),
        *tokens(" ".join(sentences), size),
        LLMFullResponseEndFrame(),
    ]


def generation_requests(emu: Emulator) -> list[dict]:
    return [m for _, m in emu.stats.messages if "transcript" in m]


def assert_tone(pcm: bytes, rate: int, text: str, start_s: float) -> None:
    """The tone of ``text`` plays from ``start_s`` (checked in its middle, away from the joins)."""
    dur = tone_len(text)
    mid = segment(pcm, rate, start_s + 0.25 * dur, 0.5 * dur)
    assert dominant_frequency(mid, rate) == pytest.approx(tone_frequency(text), abs=15)


def test_is_a_websocket_tts_service() -> None:
    assert issubclass(NineninesixTTSService, WebsocketTTSService)
    assert NineninesixTTSService.Settings(voice="v").voice == "v"


async def test_single_sentence(emu: Emulator) -> None:
    tts = make_tts(emu)
    down, up = await run(tts, llm_turn(S1), rate=24000)

    assert not errors_of(up)
    kinds = [type(f) for f in down if not isinstance(f, (TTSAudioRawFrame, TTSTextFrame))]
    assert kinds[0] is LLMFullResponseStartFrame
    assert kinds[-2:] == [TTSStoppedFrame, LLMFullResponseEndFrame]
    assert kinds.count(TTSStartedFrame) == 1
    # audio comes between the started and stopped frames, all of one context, at the pipeline rate
    started = next(i for i, f in enumerate(down) if isinstance(f, TTSStartedFrame))
    stopped = next(i for i, f in enumerate(down) if isinstance(f, TTSStoppedFrame))
    frames = audio_frames(down)
    assert frames and all(started < down.index(f) < stopped for f in frames)
    assert {f.sample_rate for f in frames} == {24000}
    assert len({f.context_id for f in frames}) == 1
    pcm = audio_of(down)
    assert len(pcm) / 2 / 24000 == pytest.approx(tone_len(S1), abs=0.02)
    assert_tone(pcm, 24000, S1, 0.0)
    # every word reaches downstream, after the first audio frame
    assert " ".join(words_of(down)) == S1
    first_audio = down.index(frames[0])
    assert all(down.index(f) > first_audio for f in down if isinstance(f, TTSTextFrame))
    # one server context: the sentence with continue:true, then the closing continue:false
    reqs = generation_requests(emu)
    assert [r["continue"] for r in reqs] == [True, False]
    assert len({r["context_id"] for r in reqs}) == 1
    assert reqs[0]["transcript"].strip() == S1
    assert emu.stats.ws_connections == 1


async def test_multi_sentence_llm_turn_uses_one_context(emu: Emulator) -> None:
    tts = make_tts(emu)
    down, up = await run(tts, llm_turn(S1, S2, S3), rate=16000)

    assert not errors_of(up)
    reqs = generation_requests(emu)
    assert [r["transcript"].strip() for r in reqs] == [S1, S2, S3, ""]
    assert [r["continue"] for r in reqs] == [True, True, True, False]
    assert len({r["context_id"] for r in reqs}) == 1
    assert sum(isinstance(f, TTSStartedFrame) for f in down) == 1
    assert sum(isinstance(f, TTSStoppedFrame) for f in down) == 1
    assert len({f.context_id for f in audio_frames(down)}) == 1
    # the three sentences play in order, each with its own tone
    pcm = audio_of(down)
    t = 0.0
    for s in (S1, S2, S3):
        assert_tone(pcm, 16000, s, t)
        t += tone_len(s)
    assert len(pcm) / 2 / 16000 == pytest.approx(t, abs=0.03)
    # the transcript is every word, in order
    assert " ".join(words_of(down)) == f"{S1} {S2} {S3}"
    stop = next(i for i, f in enumerate(down) if isinstance(f, TTSStoppedFrame))
    assert all(i < stop for i, f in enumerate(down) if isinstance(f, TTSAudioRawFrame))


async def test_tts_speak_frame_gets_its_own_context(emu: Emulator) -> None:
    tts = make_tts(emu)
    frames = [*llm_turn(S1), TTSSpeakFrame(S2), TTSSpeakFrame(S3)]
    down, up = await run(tts, frames, rate=24000)

    assert not errors_of(up)
    reqs = generation_requests(emu)
    contexts = list(dict.fromkeys(r["context_id"] for r in reqs))
    assert len(contexts) == 3
    for ctx, text in zip(contexts, (S1, S2, S3), strict=True):
        mine = [r for r in reqs if r["context_id"] == ctx]
        assert [r["transcript"].strip() for r in mine] == [text, ""]
        assert [r["continue"] for r in mine] == [True, False]
    # three started/stopped pairs, audio of three contexts in order, one socket for all
    assert sum(isinstance(f, TTSStartedFrame) for f in down) == 3
    assert sum(isinstance(f, TTSStoppedFrame) for f in down) == 3
    pipecat_contexts = list(dict.fromkeys(f.context_id for f in audio_frames(down)))
    assert len(pipecat_contexts) == 3
    for ctx, text in zip(pipecat_contexts, (S1, S2, S3), strict=True):
        assert_tone(audio_of(down, ctx), 24000, text, 0.0)
    assert emu.stats.ws_connections == 1


async def test_token_aggregation_mode_sends_whole_clauses(emu: Emulator) -> None:
    tts = make_tts(emu, text_aggregation_mode=TextAggregationMode.TOKEN)
    text = f"{S1} {S2}"
    down, up = await run(tts, llm_turn(text, size=3), rate=24000)

    assert not errors_of(up)
    reqs = generation_requests(emu)
    transcripts = [r["transcript"] for r in reqs[:-1]]
    assert len({r["context_id"] for r in reqs}) == 1
    assert reqs[-1]["continue"] is False
    # tokens were sent as they streamed, but never as word fragments: every transcript ends a clause
    assert len(transcripts) >= 3
    assert "".join(transcripts).strip() == text
    for t in transcripts[:-1]:
        assert t.rstrip()[-1] in ",.!?;:", t
    assert audio_of(down)
    assert " ".join(words_of(down)) == text


async def test_metrics_ttfb_and_usage(emu: Emulator) -> None:
    tts = make_tts(emu)
    down, _ = await run(tts, llm_turn(S1, S2), rate=24000, metrics=True)

    data = [d for f in down if isinstance(f, MetricsFrame) for d in f.data]
    # (Pipecat reports a zero TTFB for every processor at start; ours follow the first audio)
    ttfb = [d for d in data if isinstance(d, TTFBMetricsData) and d.value > 0]
    usage = [d for d in data if isinstance(d, TTSUsageMetricsData)]
    assert ttfb and all(d.model == "gepard-1.0" for d in ttfb)
    assert sum(d.value for d in usage) == len(S1) + len(S2)


async def test_runtime_voice_update_applies_to_the_next_turn(emu: Emulator) -> None:
    clone = emu.voices.clone(name="other", clip=b"not a wav")
    tts = make_tts(emu)
    update = TTSUpdateSettingsFrame(delta=NineninesixTTSService.Settings(voice=clone.id))
    down, up = await run(tts, [*llm_turn(S1), update, *llm_turn(S2)], rate=24000)

    assert not errors_of(up)
    voices = [r["voice"]["id"] for r in generation_requests(emu) if r["transcript"].strip()]
    assert voices == [TONE_VOICE_ID, clone.id]
    contexts = list(dict.fromkeys(f.context_id for f in audio_frames(down)))
    assert len(contexts) == 2
    second = audio_of(down, contexts[1])
    mid = segment(second, 24000, 0.2 * tone_len(S2), 0.5 * tone_len(S2))
    assert dominant_frequency(mid, 24000) == pytest.approx(clone.frequency, abs=15)
    assert tts._settings.voice == clone.id


async def test_invalid_settings_update_is_refused_and_the_service_goes_on(emu: Emulator) -> None:
    tts = make_tts(emu)
    update = TTSUpdateSettingsFrame(delta=NineninesixTTSService.Settings(model="no-such-model"))
    down, up = await run(tts, [update, *llm_turn(S1)], rate=24000)

    errors = errors_of(up)
    assert len(errors) == 1 and "model" in errors[0].error
    assert tts.is_usable
    assert tts._settings.model == "gepard-1.0"
    assert all(r.get("model_id") == "gepard-1.0" for r in generation_requests(emu))
    assert_tone(audio_of(down), 24000, S1, 0.0)


def test_bad_options_raise_before_connecting() -> None:
    with pytest.raises(TTSInvalidOptionError) as info:
        NineninesixTTSService("sk_996_x", base_url="http://127.0.0.1:9", encoding="mp3")
    assert info.value.field == "encoding"
    with pytest.raises(TTSInvalidOptionError):
        NineninesixTTSService(
            "sk_996_x", base_url="http://127.0.0.1:9", settings=NineninesixTTSService.Settings(model="x")
        )


def test_api_key_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NINENINESIX_API_KEY", raising=False)
    with pytest.raises(TTSInvalidOptionError):
        NineninesixTTSService(base_url="http://127.0.0.1:9")
    monkeypatch.setenv("NINENINESIX_API_KEY", "sk_996_from_env")
    tts = NineninesixTTSService(base_url="http://127.0.0.1:9")
    assert "sk_996_from_env" not in repr(tts.provider)


async def test_aggregated_text_precedes_audio(emu: Emulator) -> None:
    tts = make_tts(emu)
    down, _ = await run(tts, llm_turn(S1, S2), rate=24000)
    announced = [f.text for f in down if type(f) is AggregatedTextFrame]
    assert announced == [S1, S2]
    assert not any(isinstance(f, ErrorFrame) for f in down)


async def test_end_frame_mid_turn_finishes_what_was_sent_and_closes(emu: Emulator) -> None:
    """An EndFrame before the LLM turn ended: the sentence already sent plays out, nothing hangs, nothing
    is left open (Pipecat's idle timeout raised so that it cannot be what ends the turn)."""
    tts = make_tts(emu, stop_frame_timeout_s=60.0)
    frames = [LLMFullResponseStartFrame(), *tokens(f"{S1} {S2}")]  # no LLMFullResponseEndFrame
    down, up = await run(tts, frames, rate=24000)

    assert not errors_of(up)
    assert len(audio_of(down)) / 2 / 24000 == pytest.approx(tone_len(S1), abs=0.02)
    assert any(isinstance(f, TTSStoppedFrame) for f in down)
    await emu.wait_until(lambda: emu.stats.ws_open == 0, timeout=5.0)
    assert emu.stats.ws_connections == 1


async def test_server_idle_close_does_not_fail_the_next_turn(emu: Emulator) -> None:
    emu.config.idle_timeout_s = 0.3
    closed = asyncio.Event()

    async def watch() -> None:
        await emu.wait_until(lambda: bool(emu.stats.close_codes), timeout=10.0)
        closed.set()

    watcher = asyncio.create_task(watch())
    # the provider replaces a pooled connection idle for longer than max_idle (set below the server's timeout)
    tts = make_tts(emu, provider_options={"max_idle": 0.1})
    gate, probe = Gate(), Probe()
    frames = [*llm_turn(S1), WaitFor(closed), *llm_turn(S2)]
    try:
        _, up = await run(pipeline(gate, tts, probe), frames, rate=24000)
    finally:
        watcher.cancel()

    assert not errors_of(up)
    assert emu.stats.close_codes and emu.stats.close_codes[0][1] == 1000  # the server did close it
    contexts = list(dict.fromkeys(f.context_id for f in probe.frames if isinstance(f, TTSAudioRawFrame)))
    assert len(contexts) == 2
    assert len(audio_of(probe.frames, contexts[1])) / 2 / 24000 == pytest.approx(tone_len(S2), abs=0.02)
    assert emu.stats.ws_connections == 2


class _ContextWatch(NineninesixTTSService):
    """Signals when Pipecat lets an audio context go."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.context_released = asyncio.Event()

    async def on_audio_context_completed(self, context_id: str) -> None:
        await super().on_audio_context_completed(context_id)
        self.context_released.set()


async def test_llm_stall_mid_turn_lets_the_context_go_and_the_turn_resumes(emu: Emulator) -> None:
    """The LLM goes quiet after sentence 1 for longer than Pipecat's idle timeout: Pipecat ends the audio
    context; sentence 2 then reopens one on the same server turn, and every word comes out once, in order."""
    tts = _ContextWatch(
        emu.api_key,
        base_url=emu.base_url,
        settings=NineninesixTTSService.Settings(voice=TONE_VOICE_ID),
        stop_frame_timeout_s=0.4,
    )
    tts.open_turn_idle_s = 0.1  # stop holding the context open soon after the LLM went quiet
    gate, probe = Gate(), Probe()
    frames = [
        LLMFullResponseStartFrame(),
        *tokens(f"{S1} "),
        LLMTextFrame("Y"),  # releases sentence 1
        WaitFor(tts.context_released),
        *tokens(S2[1:]),
        LLMFullResponseEndFrame(),
    ]
    _, up = await run(pipeline(gate, tts, probe), frames, rate=24000)

    assert not errors_of(up)
    assert " ".join(words_of(probe.frames)) == f"{S1} {S2}"
    reqs = generation_requests(emu)
    assert [r["transcript"].strip() for r in reqs] == [S1, S2, ""]
    assert len({r["context_id"] for r in reqs}) == 1  # one server turn throughout
    assert sum(isinstance(f, TTSStartedFrame) for f in probe.frames) == 2  # two audio contexts
    assert_tone(audio_of(probe.frames), 24000, S2, tone_len(S1))
