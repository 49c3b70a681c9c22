"""The examples and the demo core run offline against the emulator."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from ttsbridge.audio.analysis import dominant_frequency, rms
from ttsbridge.audio.wav import read_wav
from ttsbridge.demo import run_demo
from ttsbridge.emulator import TONE_VOICE_ID, tone_frequency

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def load_example(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


async def test_run_demo_writes_the_spoken_turn(tmp_path: Path) -> None:
    text = "Hello there. This is a test."
    stats = await run_demo(text, tmp_path / "demo.wav", voice=TONE_VOICE_ID, sample_rate=16000)

    assert stats.ok, stats.errors
    assert stats.endpoint == "emulator"
    assert stats.transcript == text
    pcm, rate = read_wav(tmp_path / "demo.wav")
    assert rate == 16000
    assert len(pcm) / 2 / rate == pytest.approx(stats.audio_seconds)
    first = "Hello there."
    dur = 0.06 * len(first)
    mid = pcm[int(0.25 * dur * rate) * 2 : int(0.75 * dur * rate) * 2]
    assert dominant_frequency(mid, rate) == pytest.approx(tone_frequency(first), abs=15)


def test_pipecat_bot_example_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bot = load_example("pipecat_bot")
    out = tmp_path / "bot.wav"
    assert (
        bot.main(
            ["--text", "Short and sweet.", "--out", str(out), "--voice", TONE_VOICE_ID, "--token-delay", "0"]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert "emulator" in printed and "Short and sweet." in printed
    assert out.stat().st_size > 44


async def test_twilio_example_call_against_the_emulator(tmp_path: Path) -> None:
    twilio = load_example("pipecat_twilio_bot")
    out = tmp_path / "call.wav"
    result = await twilio.emulator_call(str(out), TONE_VOICE_ID, greeting="Hi.", reply="Bye now.")

    assert result["wire_formats"] == ["pcm_mulaw@8000"]
    assert result["events"].get("media", 0) > 0
    pcm, rate = read_wav(out)
    assert rate == 8000
    spoken = 0.18 + 0.48  # tone voice: 60 ms per character
    # the speech, then only the silence Pipecat's output transport sends at the end of a call
    assert len(pcm) / 2 / rate >= spoken
    assert rms(pcm[int(spoken * 0.9 * rate) * 2 : int(spoken * rate) * 2]) > 0.1
    assert rms(pcm[int((spoken + 0.05) * rate) * 2 :]) < 0.01
    greeting = pcm[int(0.05 * rate) * 2 : int(0.13 * rate) * 2]
    assert dominant_frequency(greeting, rate) == pytest.approx(tone_frequency("Hi."), abs=20)
    reply = pcm[int(0.3 * rate) * 2 : int(0.55 * rate) * 2]
    assert dominant_frequency(reply, rate) == pytest.approx(tone_frequency("Bye now."), abs=20)


async def test_run_demo_defaults_and_stats_as_a_mapping(tmp_path: Path) -> None:
    stats = await run_demo(None, tmp_path / "d.wav", voice=TONE_VOICE_ID)  # None: the default dialogue turn
    assert stats.ok
    assert stats.transcript.startswith("Hi, thanks for calling!")
    as_dict = dict(stats)  # what `ttsbridge demo` prints
    assert as_dict == stats.as_dict()
    assert as_dict["audio_seconds"] == stats.audio_seconds and as_dict["endpoint"] == "emulator"


def test_pipecat_bot_example_over_kitta(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bot = load_example("pipecat_bot")
    out = tmp_path / "kitta.wav"
    args = ["--provider", "kitta", "--text", "Short and sweet.", "--out", str(out), "--voice", TONE_VOICE_ID]
    assert bot.main([*args, "--token-delay", "0"]) == 0
    assert "Short and sweet." in capsys.readouterr().out
    pcm, rate = read_wav(out)
    assert len(pcm) / 2 / rate == pytest.approx(0.06 * len("Short and sweet."), abs=0.03)
