"""AudioFramer / iter_frames / pcm_duration."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ttsbridge.audio import AudioFramer, iter_frames, pcm_duration


@pytest.mark.parametrize(
    ("rate", "ms", "expected"),
    [(8000, 20.0, 320), (16000, 20.0, 640), (22050, 20.0, 882), (24000, 20.0, 960), (48000, 20.0, 1920),
     (24000, 40.0, 1920), (48000, 10.0, 960), (8000, 0.125, 2)],
)  # fmt: skip
def test_frame_bytes(rate: int, ms: float, expected: int) -> None:
    assert AudioFramer(rate, ms).frame_bytes == expected


def test_push_returns_only_full_frames_and_carries_the_rest() -> None:
    f = AudioFramer(8000, 20.0)  # 320-byte frames
    assert f.push(b"\x01" * 319) == []
    assert f.pending == 319
    frames = f.push(b"\x02" * 700)  # 1019 bytes buffered -> 3 frames, 59 left
    assert [len(x) for x in frames] == [320, 320, 320]
    assert frames[0] == b"\x01" * 319 + b"\x02"
    assert f.pending == 59
    assert f.flush() == b"\x02" * 58  # whole samples only: the odd byte (half a sample) is dropped
    assert f.flush() is None
    assert f.pending == 0


def test_odd_bytes_are_carried_across_pushes() -> None:
    f = AudioFramer(8000, 0.25)  # 2 samples = 4-byte frames
    assert f.push(b"a") == []
    assert f.push(b"bc") == []
    assert f.push(b"de") == [b"abcd"]
    assert f.push(b"fgh") == [b"efgh"]
    assert f.flush() is None


def test_flush_never_returns_empty_frame_and_reset_drops() -> None:
    f = AudioFramer(16000)
    assert f.flush() is None
    f.push(b"\x00")
    assert f.flush() is None
    f.push(b"\x00" * 100)
    f.reset()
    assert f.pending == 0 and f.flush() is None
    assert f.push(b"\x07" * 640) == [b"\x07" * 640]


def test_push_accepts_bytearray_and_memoryview() -> None:
    f = AudioFramer(8000, 0.25)
    assert f.push(bytearray(b"ab")) == []
    assert f.push(memoryview(b"cdef")) == [b"abcd"]
    assert all(isinstance(x, bytes) for x in f.push(b"ghijkl"))


@given(
    data=st.binary(max_size=4000),
    cuts=st.lists(st.integers(0, 4000), max_size=20),
    rate=st.sampled_from([8000, 16000, 22050, 24000, 48000]),
    ms=st.sampled_from([10.0, 20.0, 40.0]),
)
def test_frames_plus_flush_reassemble_input(data: bytes, cuts: list[int], rate: int, ms: float) -> None:
    f = AudioFramer(rate, ms)
    bounds = sorted({0, len(data), *(min(c, len(data)) for c in cuts)})
    frames: list[bytes] = []
    for a, b in itertools.pairwise(bounds):
        frames += f.push(data[a:b])
    assert all(len(x) == f.frame_bytes for x in frames)
    rest = f.flush()
    if rest is not None:
        assert 0 < len(rest) < f.frame_bytes and len(rest) % 2 == 0
    whole = data[: len(data) - len(data) % 2]
    assert b"".join(frames) + (rest or b"") == whole
    assert list(iter_frames(data, rate, ms)) == [*frames, *([rest] if rest else [])]


def test_iter_frames() -> None:
    pcm = bytes(range(200)) * 5  # 1000 bytes
    frames = list(iter_frames(pcm, 8000, 20.0))
    assert [len(x) for x in frames] == [320, 320, 320, 40]
    assert b"".join(frames) == pcm
    assert list(iter_frames(b"", 8000)) == []


@pytest.mark.parametrize(("rate", "ms"), [(0, 20.0), (8000, 0.0), (8000, -5.0), (8000, 0.01)])
def test_invalid_framer_arguments(rate: int, ms: float) -> None:
    with pytest.raises(ValueError):
        AudioFramer(rate, ms)


def test_pcm_duration() -> None:
    assert pcm_duration(48000, 24000) == pytest.approx(1.0)
    assert pcm_duration(320, 8000) == pytest.approx(0.02)
    assert pcm_duration(3, 8000) == pytest.approx(1 / 8000)  # the odd byte is not a sample
    assert pcm_duration(0, 22050) == 0.0
    with pytest.raises(ValueError):
        pcm_duration(10, 0)
