"""WAV helpers round trip."""

from __future__ import annotations

import io
import wave
from pathlib import Path

import pytest

from ttsbridge.audio import read_wav, tone, wav_bytes, write_wav


def test_wav_bytes_round_trip() -> None:
    pcm = tone(440.0, 0.05, 22050)
    blob = wav_bytes(pcm, 22050)
    assert blob[:4] == b"RIFF" and blob[8:12] == b"WAVE"
    assert len(blob) == 44 + len(pcm)
    assert read_wav(blob) == (pcm, 22050)
    assert read_wav(io.BytesIO(blob)) == (pcm, 22050)
    with wave.open(io.BytesIO(blob)) as w:
        assert (w.getnchannels(), w.getsampwidth(), w.getframerate()) == (1, 2, 22050)


def test_write_and_read_file(tmp_path: Path) -> None:
    pcm = tone(1000.0, 0.1, 8000)
    path = tmp_path / "out.wav"
    write_wav(path, pcm, 8000)
    assert read_wav(path) == (pcm, 8000)
    assert read_wav(str(path)) == (pcm, 8000)


def test_empty_wav_round_trip() -> None:
    assert read_wav(wav_bytes(b"", 16000)) == (b"", 16000)


def test_stereo_is_downmixed_to_mono() -> None:
    left = [1000, -2000, 30000]
    right = [3000, 2000, 32767]
    inter = b"".join(
        a.to_bytes(2, "little", signed=True) + b.to_bytes(2, "little", signed=True)
        for a, b in zip(left, right, strict=True)
    )
    pcm, rate = read_wav(wav_bytes(inter, 48000, channels=2))
    assert rate == 48000
    mono = [int.from_bytes(pcm[i : i + 2], "little", signed=True) for i in range(0, len(pcm), 2)]
    assert mono == [2000, 0, 31384]


def test_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="whole number"):
        wav_bytes(b"\x00\x00\x00", 8000)
    with pytest.raises(ValueError, match="not a readable"):
        read_wav(b"definitely not a wav file")
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(1)
        w.setframerate(8000)
        w.writeframes(b"\x80" * 10)
    with pytest.raises(ValueError, match="16-bit"):
        read_wav(buf.getvalue())
