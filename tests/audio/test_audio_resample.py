"""StreamResampler / resample_oneshot: frequency preservation, seamless chunking, lengths, turns."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ttsbridge.audio import StreamResampler, dominant_frequency, resample_oneshot, tone

# Max abs difference (in LSB of int16; full scale 32767) between output streamed in random chunks and
# one-shot output, after alignment. Measured: 0 LSB at lag 0 for every rate pair below (both paths run
# soxr in float32 and round identically); 1 LSB of slack for rounding ties.
MAX_CHUNKING_DIFF_LSB = 1

RATE_PAIRS = [
    (22050, 8000),
    (22050, 16000),
    (22050, 24000),
    (22050, 44100),
    (22050, 48000),
    (8000, 24000),
    (8000, 48000),
    (16000, 24000),
    (16000, 48000),
]


def _samples(pcm: bytes) -> np.ndarray:
    return np.frombuffer(pcm, dtype="<i2").astype(np.int64)


def _stream(resampler: StreamResampler, pcm: bytes, sizes: list[int]) -> bytes:
    out = bytearray()
    pos, i = 0, 0
    while pos < len(pcm):
        n = sizes[i % len(sizes)]
        chunk = resampler.process(pcm[pos : pos + n])
        assert len(chunk) % 2 == 0
        out += chunk
        pos += n
        i += 1
    tail = resampler.flush()
    assert len(tail) % 2 == 0
    return bytes(out + tail)


def _aligned_max_diff(a: np.ndarray, b: np.ndarray, max_lag: int = 16) -> tuple[int, int]:
    """Smallest max-abs-difference over lags in [-max_lag, max_lag]; returns (diff, lag)."""
    best: tuple[int, int] | None = None
    for lag in range(-max_lag, max_lag + 1):
        aa = a[lag:] if lag >= 0 else a
        bb = b if lag >= 0 else b[-lag:]
        n = min(aa.size, bb.size)
        cand = (int(np.abs(aa[:n] - bb[:n]).max()), lag)
        if best is None or cand < best:
            best = cand
    assert best is not None
    return best


def _random_sizes(seed: int) -> list[int]:
    rng = random.Random(seed)
    return [rng.choice([1, 1, 2, 3, 5, rng.randint(1, 4000)]) for _ in range(500)]


@pytest.mark.parametrize(("in_rate", "out_rate"), RATE_PAIRS)
@pytest.mark.parametrize("freq", [440.0, 1000.0, 3000.0])
def test_tone_keeps_its_frequency(in_rate: int, out_rate: int, freq: float) -> None:
    pcm = tone(freq, 0.3, in_rate)
    out = _stream(StreamResampler(in_rate, out_rate), pcm, [882])
    measured = dominant_frequency(out, out_rate)
    assert abs(measured - freq) / freq < 0.01
    one = resample_oneshot(pcm, in_rate, out_rate)
    assert abs(dominant_frequency(one, out_rate) - freq) / freq < 0.01


@pytest.mark.parametrize(("in_rate", "out_rate"), RATE_PAIRS)
def test_chunk_boundaries_add_no_clicks(in_rate: int, out_rate: int) -> None:
    # Two tones back to back (a real discontinuity in the input) fed in random chunk sizes incl. odd byte
    # counts and 1-byte chunks.
    pcm = tone(440.0, 0.25, in_rate) + tone(1250.0, 0.2, in_rate, amplitude=0.9)
    streamed = _samples(_stream(StreamResampler(in_rate, out_rate), pcm, _random_sizes(in_rate + out_rate)))
    oneshot = _samples(resample_oneshot(pcm, in_rate, out_rate))
    diff, lag = _aligned_max_diff(streamed, oneshot)
    assert diff <= MAX_CHUNKING_DIFF_LSB
    assert lag == 0  # streaming adds no offset once flushed
    assert streamed.size == oneshot.size
    # And no sample-to-sample jump beyond what the one-shot signal itself has.
    assert np.abs(np.diff(streamed)).max() <= np.abs(np.diff(oneshot)).max() + MAX_CHUNKING_DIFF_LSB


@pytest.mark.parametrize(("in_rate", "out_rate"), [*RATE_PAIRS, (24000, 8000), (48000, 22050)])
def test_total_length_after_flush(in_rate: int, out_rate: int) -> None:
    for n_samples in (1, 7, 441, 12345):
        pcm = tone(700.0, n_samples / in_rate, in_rate)
        assert len(pcm) == 2 * n_samples
        out = _stream(StreamResampler(in_rate, out_rate), pcm, [123])
        expected = n_samples * out_rate / in_rate
        assert abs(len(out) // 2 - expected) <= 2, (n_samples, len(out) // 2, expected)


def test_reset_between_turns_matches_a_fresh_resampler() -> None:
    turn1 = tone(300.0, 0.2, 22050)
    turn2 = tone(900.0, 0.2, 22050)
    fresh = _stream(StreamResampler(22050, 48000), turn2, [500])

    r = StreamResampler(22050, 48000)
    partial = r.process(turn1[:3001])  # odd: one byte carried
    assert partial  # the stream had produced output (so there was state to drop)
    r.reset()
    assert _stream(r, turn2, [500]) == fresh


def test_flush_leaves_resampler_ready_for_next_turn() -> None:
    turn = tone(500.0, 0.15, 16000)
    r = StreamResampler(16000, 24000)
    first = _stream(r, turn, [640])
    second = _stream(r, turn, [640])
    assert first == second
    assert r.flush() == b""  # nothing pending after a flush


def test_output_is_deterministic_across_instances() -> None:
    # libsoxr's own int16 path dithers with a per-instance random seed; ours must not.
    pcm = tone(523.0, 0.2, 22050)
    a, b = StreamResampler(22050, 16000), StreamResampler(22050, 16000)  # alive together: distinct addresses
    assert _stream(a, pcm, [441]) == _stream(b, pcm, [441])
    assert resample_oneshot(pcm, 22050, 8000) == resample_oneshot(pcm, 22050, 8000)


def test_loud_input_is_clipped_not_wrapped() -> None:
    # A full-scale square wave overshoots after band-limiting; samples must saturate, not wrap around.
    square = np.where(np.arange(4410) % 50 < 25, 32767, -32768).astype("<i2").tobytes()
    out = _samples(resample_oneshot(square, 22050, 48000))
    assert out.max() == 32767 and out.min() == -32768
    streamed = _samples(_stream(StreamResampler(22050, 48000), square, [777]))
    assert np.array_equal(streamed, out)


def test_without_reset_state_carries_across_chunks_of_a_turn() -> None:
    # The same chunk produces different output depending on what came before (state is kept).
    chunk = tone(440.0, 0.05, 22050)
    r = StreamResampler(22050, 16000)
    a = r.process(chunk)
    b = r.process(chunk)
    assert a != b


def test_passthrough() -> None:
    r = StreamResampler(24000, 24000)
    assert r.passthrough and r.in_rate == 24000 and r.out_rate == 24000
    pcm = tone(440.0, 0.01, 24000)
    assert r.process(pcm) == pcm
    assert r.process(b"\x01\x02\x03") == b"\x01\x02"
    assert r.process(b"\x04") == b"\x03\x04"
    assert r.process(b"\x05") == b""
    assert r.flush() == b""  # the carried half sample is dropped
    assert r.process(b"\x06\x07") == b"\x06\x07"
    assert resample_oneshot(pcm, 24000, 24000) == pcm


def test_properties_and_repr() -> None:
    r = StreamResampler(22050, 8000, quality="VHQ")
    assert (r.in_rate, r.out_rate, r.passthrough, r.quality) == (22050, 8000, False, "VHQ")
    assert "22050" in repr(r) and "8000" in repr(r)


@pytest.mark.parametrize(
    ("args", "kwargs", "match"),
    [
        ((0, 8000), {}, "in_rate"),
        ((22050, -1), {}, "out_rate"),
        ((22050.0, 8000), {}, "in_rate"),
        ((22050, 8000), {"quality": "best"}, "allowed values"),
    ],
)
def test_invalid_arguments(args: tuple[object, ...], kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        StreamResampler(*args, **kwargs)  # type: ignore[arg-type]


def test_oneshot_rejects_odd_length_and_handles_empty() -> None:
    with pytest.raises(ValueError, match="whole 2-byte samples"):
        resample_oneshot(b"\x00\x00\x00", 22050, 8000)
    assert resample_oneshot(b"", 22050, 8000) == b""


def test_empty_process_and_flush_on_fresh_resampler() -> None:
    r = StreamResampler(8000, 48000)
    assert r.process(b"") == b""
    assert r.process(b"\x01") == b""
    assert r.flush() == b""


@settings(max_examples=40, deadline=None)
@given(
    data=st.binary(min_size=0, max_size=3000),
    sizes=st.lists(st.integers(1, 700), min_size=1, max_size=30),
    pair=st.sampled_from([(22050, 8000), (8000, 48000), (16000, 24000), (24000, 24000)]),
)
def test_output_is_always_whole_samples_and_length_right(
    data: bytes, sizes: list[int], pair: tuple[int, int]
) -> None:
    in_rate, out_rate = pair
    out = _stream(StreamResampler(in_rate, out_rate), data, sizes)  # asserts even lengths per call
    n_in = len(data) // 2
    assert abs(len(out) // 2 - n_in * out_rate / in_rate) <= 2
