"""The LiveKit examples: the worker imports and builds its TTS; the offline one runs and writes a WAV."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import wave
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_agent_example_imports_and_builds_the_tts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NINENINESIX_API_KEY", "sk_996_example_key")
    monkeypatch.setenv("NINENINESIX_VOICE", "tone")
    spec = importlib.util.spec_from_file_location("livekit_agent_example", EXAMPLES / "livekit_agent.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    tts = module.build_tts()
    assert tts.options.voice == "tone" and tts.sample_rate == 24000
    assert "sk_996_example_key" not in repr(tts)


def test_offline_example_writes_a_wav(tmp_path: Path) -> None:
    out = tmp_path / "out.wav"
    proc = subprocess.run(
        [
            sys.executable,
            str(EXAMPLES / "livekit_offline.py"),
            str(out),
            "--rate",
            "16000",
            "--encoding",
            "pcm_mulaw",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "WebSocket connections opened: 1, cancels sent: 1" in proc.stdout
    with wave.open(str(out)) as w:
        assert (w.getframerate(), w.getnchannels(), w.getsampwidth()) == (16000, 1, 2)
        assert w.getnframes() / 16000 > 2.0


def test_offline_example_with_kitta(tmp_path: Path) -> None:
    out = tmp_path / "kitta.wav"
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / "livekit_offline.py"), str(out), "--provider", "kitta"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "closed by the client: 1" in proc.stdout
    with wave.open(str(out)) as w:
        assert (w.getframerate(), w.getnchannels()) == (24000, 1)
        assert w.getnframes() / 24000 > 2.0
