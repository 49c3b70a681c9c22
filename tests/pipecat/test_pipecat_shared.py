"""The Pipecat service over every provider, the same way (see tests/chirp/envs.py)."""

from __future__ import annotations

from pc_helpers import S1, S2, Gate, InterruptWhen, Probe, audio_of, errors_of, pipeline, run
from pipecat.frames.frames import InterruptionFrame, TTSAudioRawFrame, TTSSpeakFrame, TTSStoppedFrame

from chirp.envs import FAIL, RATE, Env, env

__all__ = ["env"]


async def test_pipecat_speaks_a_phrase(env: Env) -> None:
    down, up = await run(env.pipecat(), [TTSSpeakFrame(S1)], rate=RATE)
    assert audio_of(down) and any(isinstance(f, TTSStoppedFrame) for f in down)
    assert not errors_of(up)


async def test_pipecat_reports_a_failed_turn_as_an_error_frame(env: Env) -> None:
    _, up = await run(env.pipecat(), [TTSSpeakFrame(f"{S1} {FAIL[env.name]}")], rate=RATE)
    assert errors_of(up)


async def test_pipecat_barge_in_drops_the_cut_turn_and_speaks_the_next(env: Env) -> None:
    gate, probe = Gate(), Probe()
    frames = [TTSSpeakFrame(" ".join([S1] * 4)), InterruptWhen(probe.first_audio), TTSSpeakFrame(S2)]
    _, up = await run(pipeline(gate, env.pipecat(), probe), frames, rate=RATE)
    assert gate.fired.is_set() and not errors_of(up)
    seen = probe.frames
    cut = next(i for i, f in enumerate(seen) if isinstance(f, InterruptionFrame))
    contexts = list(dict.fromkeys(f.context_id for f in seen if isinstance(f, TTSAudioRawFrame)))
    assert len(contexts) == 2
    assert not [f for f in seen[cut + 1 :] if isinstance(f, TTSAudioRawFrame) and f.context_id == contexts[0]]
    assert audio_of(seen[cut + 1 :], contexts[1])
