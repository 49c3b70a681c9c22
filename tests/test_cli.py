"""The ``ttsbridge`` command, run in-process against its embedded emulator (no key, no network)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ttsbridge.audio.wav import read_wav
from ttsbridge.cli import main


@pytest.fixture(autouse=True)
def _no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NINENINESIX_API_KEY", raising=False)
    monkeypatch.delenv("KITTA_API_KEY", raising=False)


def test_help_explains_itself(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    for word in ("say", "emulator", "demo", "voices", "offline"):
        assert word in out


@pytest.mark.parametrize(
    ("provider", "rate"), [("nineninesix", 24000), ("kitta", 16000), ("nineninesix", 8000)]
)
def test_say_writes_a_wav_and_reports_ttfa(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], provider: str, rate: int
) -> None:
    out = tmp_path / "hello.wav"
    args = ["say", "Hello there. How can I help you today?", "--out", str(out), "--provider", provider]
    args += ["--sample-rate", str(rate), "--voice", "tone"]
    assert main(args) == 0
    pcm, got_rate = read_wav(out.read_bytes())
    assert got_rate == rate
    seconds = len(pcm) / 2 / rate
    assert seconds > 1.0
    printed = capsys.readouterr().out
    assert "time to first audio" in printed and f"{seconds:.2f} s of audio" in printed


def test_say_nothing_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["say", "   ", "--out", str(tmp_path / "x.wav")]) == 2
    assert "nothing to say" in capsys.readouterr().err
    assert not (tmp_path / "x.wav").exists()


def test_bad_option_is_reported_not_raised(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = [
        "say",
        "Hi.",
        "--out",
        str(tmp_path / "x.wav"),
        "--base-url",
        "ftp://nowhere",
        "--api-key",
        "sk_996_k",
    ]
    assert main(args) == 1
    assert "base_url" in capsys.readouterr().err


def test_voices_lists_the_emulator_voices(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["voices"]) == 0
    assert "tone" in capsys.readouterr().out


@pytest.mark.parametrize("provider", ["nineninesix", "kitta"])
def test_say_prints_the_usage_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], provider: str) -> None:
    text = "Hello there. How can I help you today?"
    args = ["say", text, "--out", str(tmp_path / "u.wav"), "--provider", provider, "--voice", "tone"]
    assert main(args) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("usage: "))
    billed = len("Hello there.") + len("How can I help you today?")  # per sentence, as each is billed
    assert line.startswith(f"usage: 1 turn (done 1): {len(text) + 1} characters sent, {billed} billed,")


def test_demo_prints_the_usage_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = [
        "demo",
        "Hello there. How can I help you today?",
        "--out",
        str(tmp_path / "d.wav"),
        "--voice",
        "tone",
    ]
    assert main(args) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("usage: "))
    assert line.startswith("usage: 1 turn (done 1): ") and " billed, " in line and " heard; " in line
