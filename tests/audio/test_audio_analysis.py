"""tone / rms / dominant_frequency."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ttsbridge.audio import dominant_frequency, rms, tone


@pytest.mark.parametrize("rate", [8000, 16000, 22050, 24000, 44100, 48000])
@pytest.mark.parametrize("freq", [100.0, 261.6, 440.0, 997.0, 3100.0])
def test_dominant_frequency_of_100ms_tone_within_0_1_percent(rate: int, freq: float) -> None:
    measured = dominant_frequency(tone(freq, 0.1, rate), rate)
    assert abs(measured - freq) / freq < 0.001


def test_dominant_frequency_picks_the_stronger_tone_and_ignores_dc() -> None:
    rate = 16000
    a = np.frombuffer(tone(500.0, 0.2, rate, 0.2), "<i2").astype(np.int32)
    b = np.frombuffer(tone(1800.0, 0.2, rate, 0.5), "<i2").astype(np.int32)
    mix = (a + b + 3000).astype("<i2").tobytes()  # plus a DC offset
    assert dominant_frequency(mix, rate) == pytest.approx(1800.0, rel=0.005)


def test_dominant_frequency_edge_cases() -> None:
    assert dominant_frequency(b"\x00\x00" * 100, 8000) == 0.0
    assert dominant_frequency(b"\x10\x00" * 100, 8000) == 0.0  # pure DC
    with pytest.raises(ValueError):
        dominant_frequency(b"\x00\x00" * 3, 8000)
    with pytest.raises(ValueError):
        dominant_frequency(tone(440.0, 0.1, 8000), 0)


def test_tone_shape() -> None:
    pcm = tone(440.0, 0.25, 22050, amplitude=0.8)
    x = np.frombuffer(pcm, "<i2")
    assert x.size == round(0.25 * 22050)
    assert x[0] == 0
    assert abs(int(x.max()) - round(0.8 * 32767)) <= 2
    assert tone(440.0, 0.0, 8000) == b""
    with pytest.raises(ValueError):
        tone(440.0, 0.1, 8000, amplitude=1.5)


def test_rms() -> None:
    assert rms(b"") == 0.0
    assert rms(b"\x00\x00" * 50) == 0.0
    assert rms(tone(440.0, 1.0, 8000, amplitude=0.5)) == pytest.approx(0.5 / math.sqrt(2), rel=1e-3)
    full = (np.array([32767, -32768] * 10, dtype="<i2")).tobytes()
    assert rms(full) == pytest.approx(1.0, abs=1e-4)
    assert rms(b"\x00\x40\x01") == pytest.approx(0.5)  # 0x4000 = 16384 = half scale; odd byte ignored
