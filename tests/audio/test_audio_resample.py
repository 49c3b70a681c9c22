"""StreamResampler / resample_oneshot: frequency preservation, seamless chunking, lengths, turns."""

from __future__ import annotations

import random

import numpy as np
import pytest
import soxr
from hypothesis import given, settings
from hypothesis import strategies as st

from ttsbridge.audio import StreamResampler, dominant_frequency, resample_oneshot, tone
from ttsbridge.audio.resample import QUALITIES, _head_margin

# Max abs difference (in LSB of int16; full scale 32767) between output streamed in any chunks and one-shot
# output of the whole turn (= the stream-only output the resampler produced before it emitted the turn's
# start early). After the turn's start the samples are the stream's own, bit-identical to one-shot; the
# early samples come from one-shots of the input so far, whose float values differ from the stream's by
# float32 round-off (<= 0.02 LSB measured, full-scale noise) plus the cut-off filter tail (< 0.1 LSB worst
# case, see test_head_margin_covers_the_filter_reach). Rounded to int16 that is at most 1 LSB, on the few
# samples whose exact value lies next to a rounding boundary (measured: 0-31 per turn, all before the join).
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
    assert streamed.size == out.size
    assert np.abs(streamed - out).max() <= MAX_CHUNKING_DIFF_LSB
    assert streamed.max() == 32767 and streamed.min() == -32768


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


# --- Turn start: the first chunk's audio comes out on the first process() ---------------------------------

# Every rate pair the project resamples between (wire rates 8000/16000/22050/24000/44100 -> pipeline rates).
TURN_START_PAIRS = [*RATE_PAIRS, (24000, 8000), (24000, 16000), (44100, 22050), (48000, 22050)]


def _oneshot_float32(pcm: bytes, in_rate: int, out_rate: int, quality: str = "HQ") -> np.ndarray:
    """The stream-only (old) output of a whole turn: soxr one-shot in float32, rounded like the resampler."""
    y = soxr.resample(_samples(pcm).astype(np.float32), in_rate, out_rate, quality=quality)
    return np.clip(np.rint(y), -32768, 32767).astype(np.int64)


def _stream_chunks(resampler: StreamResampler, pcm: bytes, chunk_bytes: int) -> list[bytes]:
    outs = [resampler.process(pcm[i : i + chunk_bytes]) for i in range(0, len(pcm), chunk_bytes)]
    outs.append(resampler.flush())
    return outs


@pytest.mark.parametrize(("in_rate", "out_rate"), TURN_START_PAIRS)
@pytest.mark.parametrize("chunk_ms", [20, 40])
def test_first_process_of_a_turn_returns_audio(in_rate: int, out_rate: int, chunk_ms: int) -> None:
    chunk = 2 * round(in_rate * chunk_ms / 1000)
    pcm = tone(440.0, 0.4, in_rate)
    r = StreamResampler(in_rate, out_rate)
    ref = _oneshot_float32(pcm, in_rate, out_rate)
    for turn in range(3):  # a fresh resampler, after flush(), after reset()
        outs = _stream_chunks(r, pcm, chunk)
        first = len(outs[0]) // 2
        # At least the chunk minus the filter's reach into the next chunk (half of it, to be robust).
        assert first >= (chunk // 2 * out_rate // in_rate - _head_margin(in_rate, out_rate, "HQ")) // 2 > 0
        out = _samples(b"".join(outs))
        assert out.size == ref.size
        assert np.abs(out - ref).max() <= MAX_CHUNKING_DIFF_LSB
        if turn == 1:
            r.process(pcm[: chunk + 1])  # a half-finished turn (and a carried byte), then barge-in
            r.reset()


@pytest.mark.parametrize(("in_rate", "out_rate"), TURN_START_PAIRS)
def test_turn_matches_the_stream_only_output_for_any_chunking(in_rate: int, out_rate: int) -> None:
    # Speech-like: two tones with an envelope, plus a hard switch (a real discontinuity in the input).
    n = round(0.3 * in_rate)
    t = np.arange(n) / in_rate
    env = 0.5 + 0.5 * np.sin(2 * np.pi * 4 * t)
    sig = env * (0.45 * np.sin(2 * np.pi * 210 * t) + 0.2 * np.sin(2 * np.pi * 1330 * t))
    pcm = np.round(sig * 32767).astype("<i2").tobytes() + tone(2500.0, 0.1, in_rate, amplitude=0.9)
    ref = _oneshot_float32(pcm, in_rate, out_rate)
    rng = random.Random(in_rate * 7 + out_rate)
    chunkings: list[list[int]] = [
        [1],  # 1 byte at a time (half samples carried)
        [2],  # 1 sample at a time
        [3, 5, 1],  # odd byte counts
        [2 * round(in_rate * 0.02) + 1],  # 20 ms plus one byte
        [rng.randint(1, 3000) for _ in range(200)],
    ]
    for sizes in chunkings:
        r = StreamResampler(in_rate, out_rate)
        out = _samples(_stream(r, pcm, sizes))
        assert out.size == ref.size, sizes[:3]
        assert np.abs(out - ref).max() <= MAX_CHUNKING_DIFF_LSB, sizes[:3]


@pytest.mark.parametrize("quality", QUALITIES)
@pytest.mark.parametrize(("in_rate", "out_rate"), [(22050, 24000), (8000, 48000), (24000, 8000)])
def test_turn_start_for_every_quality(in_rate: int, out_rate: int, quality: str) -> None:
    pcm = tone(440.0, 0.3, in_rate) + tone(1800.0, 0.2, in_rate, amplitude=0.8)
    ref = _oneshot_float32(pcm, in_rate, out_rate, quality)
    for chunk_ms in (20, 40):
        outs = _stream_chunks(
            StreamResampler(in_rate, out_rate, quality=quality), pcm, 2 * in_rate * chunk_ms // 1000
        )
        assert outs[0], (quality, chunk_ms)
        out = _samples(b"".join(outs))
        assert out.size == ref.size
        assert np.abs(out - ref).max() <= MAX_CHUNKING_DIFF_LSB


@pytest.mark.parametrize(("in_rate", "out_rate"), TURN_START_PAIRS)
@pytest.mark.parametrize("chunk_ms", [20, 40])
def test_turn_start_keeps_frequency_and_adds_no_click(in_rate: int, out_rate: int, chunk_ms: int) -> None:
    freq = 1000.0
    pcm = tone(freq, 0.5, in_rate, amplitude=0.8)
    outs = _stream_chunks(StreamResampler(in_rate, out_rate), pcm, 2 * round(in_rate * chunk_ms / 1000))
    out = _samples(b"".join(outs))
    assert abs(dominant_frequency(b"".join(outs), out_rate) - freq) / freq < 0.01
    # The early (one-shot) part and the stream's part meet at a chunk boundary of the output; so do the
    # one-shot parts among themselves. No boundary may have a sample-to-sample jump beyond the tone's own.
    jumps = np.abs(np.diff(out))
    edge = _head_margin(in_rate, out_rate, "HQ")  # skip the turn's own fade-in/fade-out
    steady = jumps[edge : jumps.size - edge].max()
    boundaries = np.cumsum([len(o) // 2 for o in outs[:-1]])
    for b in boundaries:
        if edge + 3 <= b <= out.size - edge - 3:
            assert jumps[b - 3 : b + 3].max() <= steady + MAX_CHUNKING_DIFF_LSB, b


def test_one_shot_work_happens_only_at_the_start_of_a_turn(monkeypatch: pytest.MonkeyPatch) -> None:
    # 8000 -> 48000 HQ has the longest stream block (6440 samples, 7 chunks of 20 ms before its first output).
    import ttsbridge.audio.resample as mod

    calls: list[int] = []
    chunk_index = [0]
    real = mod.soxr.resample

    def counting(*args: object, **kwargs: object) -> np.ndarray:
        calls.append(chunk_index[0])
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(mod.soxr, "resample", counting)
    pcm = tone(300.0, 2.0, 8000)
    r = StreamResampler(8000, 48000)
    for _turn in range(2):
        calls.clear()
        for k, i in enumerate(range(0, len(pcm), 320)):
            chunk_index[0] = k
            r.process(pcm[i : i + 320])
        r.flush()
        assert calls == list(range(len(calls)))  # one per chunk, consecutive, from the first chunk
        assert 1 <= len(calls) <= 8  # ...and only until the stream's first block (chunk 8 of 100)


def test_short_turns_and_flush_or_reset_inside_the_turn_start() -> None:
    # Turns shorter than the stream's first block: everything after the early part comes from flush().
    r = StreamResampler(8000, 48000)
    for n_samples in (1, 37, 160, 500):
        pcm = tone(440.0, n_samples / 8000, 8000)
        ref = _oneshot_float32(pcm, 8000, 48000)
        out = _samples(_stream(r, pcm, [320]))
        assert out.size == ref.size
        assert np.abs(out - ref).max() <= MAX_CHUNKING_DIFF_LSB
    # reset() inside the turn start, then a full turn: as from a fresh resampler.
    pcm = tone(440.0, 0.3, 8000)
    fresh = _stream(StreamResampler(8000, 48000), pcm, [320])
    assert r.process(pcm[:320])  # early output: the turn start is under way
    r.reset()
    assert _stream(r, pcm, [320]) == fresh


@pytest.mark.parametrize(
    ("in_rate", "out_rate", "quality"),
    [
        (22050, 24000, "HQ"),
        (22050, 48000, "HQ"),
        (8000, 24000, "HQ"),
        (24000, 8000, "HQ"),
        (8000, 48000, "VHQ"),
    ],
)
def test_head_margin_covers_the_filter_reach(in_rate: int, out_rate: int, quality: str) -> None:
    # Worst case over all int16 inputs of |one-shot of a prefix - one-shot of the whole| at the last emitted
    # sample and before: full scale times the absolute sum of the responses to every later input sample.
    margin = _head_margin(in_rate, out_rate, quality)
    reach_in = 2 * margin * in_rate // out_rate + 16  # later input samples that could matter (2x margin)
    n = reach_in
    x = np.zeros((n + reach_in, reach_in), dtype=np.float32)
    x[n + np.arange(reach_in), np.arange(reach_in)] = 1.0  # one impulse per channel, after the prefix
    y = soxr.resample(x, in_rate, out_rate, quality=quality)
    n_out = soxr.resample(np.zeros(n, dtype=np.float32), in_rate, out_rate, quality=quality).size
    bound = 32768.0 * np.abs(y[: n_out - margin]).sum(axis=1)
    assert bound.max() < 0.1
    # ...and the margin is not needlessly large: just inside it the tail still matters.
    assert 32768.0 * np.abs(y[n_out - margin // 2]).sum() > 0.5


def test_flush_with_nothing_pending_does_not_crash() -> None:
    # python-soxr 1.0 raises MemoryError on a last=True call when the stream's delay is slightly negative
    # (QQ 48000->22050 after exactly 960 samples); flush() must just return the (empty) tail.
    pcm = tone(440.0, 960 / 48000, 48000)
    r = StreamResampler(48000, 22050, quality="QQ")
    out = r.process(pcm) + r.flush()
    assert len(out) // 2 == _oneshot_float32(pcm, 48000, 22050, "QQ").size == 441
