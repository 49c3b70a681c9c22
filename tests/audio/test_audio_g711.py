"""G.711 codecs: exhaustive comparison with audioop (when importable) and an independent pure-Python
reference, plus round-trip properties."""

from __future__ import annotations

import itertools
import struct
import warnings
from types import ModuleType

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ttsbridge.audio import g711

try:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import audioop as _audioop
    audioop: ModuleType | None = _audioop
except ImportError:  # Python >= 3.13
    audioop = None

ALL_SAMPLES = list(range(-32768, 32768))
ALL_PCM = struct.pack(f"<{len(ALL_SAMPLES)}h", *ALL_SAMPLES)
ALL_CODES = bytes(range(256))


# --- Pure-Python reference (ITU-T G.711 / Sun reference g711.c, as used by CPython's audioop) ---------


def _search(val: int, table: list[int]) -> int:
    for i, end in enumerate(table):
        if val <= end:
            return i
    return len(table)


_SEG_UEND = [0x3F, 0x7F, 0xFF, 0x1FF, 0x3FF, 0x7FF, 0xFFF, 0x1FFF]
_SEG_AEND = [0x1F, 0x3F, 0x7F, 0xFF, 0x1FF, 0x3FF, 0x7FF, 0xFFF]


def ref_lin2ulaw(sample: int) -> int:
    pcm_val = sample >> 2  # 14-bit
    if pcm_val < 0:
        pcm_val = -pcm_val
        mask = 0x7F
    else:
        mask = 0xFF
    pcm_val = min(pcm_val, 8159) + (0x84 >> 2)
    seg = _search(pcm_val, _SEG_UEND)
    if seg >= 8:
        return 0x7F ^ mask
    return ((seg << 4) | ((pcm_val >> (seg + 1)) & 0xF)) ^ mask


def ref_ulaw2lin(code: int) -> int:
    u = ~code & 0xFF
    t = (((u & 0x0F) << 3) + 0x84) << ((u & 0x70) >> 4)
    return 0x84 - t if u & 0x80 else t - 0x84


def ref_lin2alaw(sample: int) -> int:
    pcm_val = sample >> 3  # 13-bit
    if pcm_val >= 0:
        mask = 0xD5
    else:
        mask = 0x55
        pcm_val = -pcm_val - 1
    seg = _search(pcm_val, _SEG_AEND)
    if seg >= 8:
        return 0x7F ^ mask
    aval = seg << 4
    aval |= (pcm_val >> 1 if seg < 2 else pcm_val >> seg) & 0xF
    return aval ^ mask


def ref_alaw2lin(code: int) -> int:
    a = code ^ 0x55
    t = (a & 0x0F) << 4
    seg = (a & 0x70) >> 4
    if seg == 0:
        t += 8
    elif seg == 1:
        t += 0x108
    else:
        t = (t + 0x108) << (seg - 1)
    return t if a & 0x80 else -t


def _pcm(samples: list[int]) -> bytes:
    return struct.pack(f"<{len(samples)}h", *samples)


REF_ULAW_ENC = bytes(ref_lin2ulaw(s) for s in ALL_SAMPLES)
REF_ALAW_ENC = bytes(ref_lin2alaw(s) for s in ALL_SAMPLES)
REF_ULAW_DEC = _pcm([ref_ulaw2lin(c) for c in ALL_CODES])
REF_ALAW_DEC = _pcm([ref_alaw2lin(c) for c in ALL_CODES])


# --- Exhaustive bit-exactness --------------------------------------------------------------------------


def test_reference_matches_known_g711_values() -> None:
    # Spot values from the G.711 tables: silence codes, extremes.
    assert ref_lin2ulaw(0) == 0xFF and ref_ulaw2lin(0xFF) == 0
    assert ref_ulaw2lin(0x00) == -32124 and ref_ulaw2lin(0x80) == 32124
    assert ref_lin2alaw(0) == 0xD5 and ref_alaw2lin(0xD5) == 8 and ref_alaw2lin(0x55) == -8
    assert ref_alaw2lin(0xAA) == 32256 and ref_alaw2lin(0x2A) == -32256


def test_ulaw_encode_all_int16_matches_reference() -> None:
    assert g711.ulaw_encode(ALL_PCM) == REF_ULAW_ENC


def test_alaw_encode_all_int16_matches_reference() -> None:
    assert g711.alaw_encode(ALL_PCM) == REF_ALAW_ENC


def test_ulaw_decode_all_codes_matches_reference() -> None:
    assert g711.ulaw_decode(ALL_CODES) == REF_ULAW_DEC


def test_alaw_decode_all_codes_matches_reference() -> None:
    assert g711.alaw_decode(ALL_CODES) == REF_ALAW_DEC


@pytest.mark.skipif(audioop is None, reason="audioop not importable (Python >= 3.13)")
def test_all_values_match_audioop() -> None:
    assert audioop is not None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        assert g711.ulaw_encode(ALL_PCM) == audioop.lin2ulaw(ALL_PCM, 2)
        assert g711.alaw_encode(ALL_PCM) == audioop.lin2alaw(ALL_PCM, 2)
        assert g711.ulaw_decode(ALL_CODES) == audioop.ulaw2lin(ALL_CODES, 2)
        assert g711.alaw_decode(ALL_CODES) == audioop.alaw2lin(ALL_CODES, 2)
        # The written-out reference agrees with audioop too, so it is a valid oracle on 3.13+.
        assert audioop.lin2ulaw(ALL_PCM, 2) == REF_ULAW_ENC
        assert audioop.alaw2lin(ALL_CODES, 2) == REF_ALAW_DEC


def test_every_code_survives_decode_encode() -> None:
    # A-law has no duplicate codes; μ-law 0x7F ("negative zero") decodes to 0, which encodes as 0xFF.
    assert g711.alaw_encode(g711.alaw_decode(ALL_CODES)) == ALL_CODES
    expected_u = bytes(0xFF if c == 0x7F else c for c in ALL_CODES)
    assert g711.ulaw_encode(g711.ulaw_decode(ALL_CODES)) == expected_u


@pytest.mark.parametrize(
    ("enc", "dec"), [(g711.ulaw_encode, g711.ulaw_decode), (g711.alaw_encode, g711.alaw_decode)]
)
def test_companding_is_monotonic(enc: object, dec: object) -> None:
    out = struct.unpack(f"<{len(ALL_SAMPLES)}h", dec(enc(ALL_PCM)))  # type: ignore[operator]
    assert all(a <= b for a, b in itertools.pairwise(out))


# --- Properties ------------------------------------------------------------------------------------------

samples_st = st.lists(st.integers(-32768, 32767), max_size=400)


@given(samples_st)
def test_ulaw_roundtrip_error_bounded(samples: list[int]) -> None:
    pcm = _pcm(samples)
    enc = g711.ulaw_encode(pcm)
    assert len(enc) == len(samples)
    back = struct.unpack(f"<{len(samples)}h", g711.ulaw_decode(enc))
    for x, y in zip(samples, back, strict=True):
        # Quantisation error grows with magnitude (log companding); |x|/32 + 8 holds for every int16.
        assert abs(x - y) <= abs(x) / 32 + 8
    # Decoded values are fixed points of the codec.
    assert g711.ulaw_encode(g711.ulaw_decode(enc)) == enc


@given(samples_st)
def test_alaw_roundtrip_error_bounded(samples: list[int]) -> None:
    pcm = _pcm(samples)
    enc = g711.alaw_encode(pcm)
    assert len(enc) == len(samples)
    back = struct.unpack(f"<{len(samples)}h", g711.alaw_decode(enc))
    for x, y in zip(samples, back, strict=True):
        assert abs(x - y) <= abs(x) / 32 + 8
    assert g711.alaw_encode(g711.alaw_decode(enc)) == enc


@given(st.binary(max_size=300), st.integers(0, 300))
def test_codecs_are_chunking_independent(data: bytes, cut: int) -> None:
    cut = min(cut, len(data))
    for dec in (g711.ulaw_decode, g711.alaw_decode):
        assert dec(data) == dec(data[:cut]) + dec(data[cut:])
    pcm = data[: len(data) - len(data) % 2]
    c2 = min(cut - cut % 2, len(pcm))
    for enc in (g711.ulaw_encode, g711.alaw_encode):
        assert enc(pcm) == enc(pcm[:c2]) + enc(pcm[c2:])


# --- Dispatch by encoding name and input checks ----------------------------------------------------------


def test_decode_to_pcm16_dispatch() -> None:
    assert g711.decode_to_pcm16(ALL_CODES, "pcm_mulaw") == REF_ULAW_DEC
    assert g711.decode_to_pcm16(ALL_CODES, "pcm_alaw") == REF_ALAW_DEC
    assert g711.decode_to_pcm16(bytearray(b"\x01\x02"), "pcm_s16le") == b"\x01\x02"


def test_encode_from_pcm16_dispatch() -> None:
    assert g711.encode_from_pcm16(ALL_PCM, "pcm_mulaw") == REF_ULAW_ENC
    assert g711.encode_from_pcm16(ALL_PCM, "pcm_alaw") == REF_ALAW_ENC
    assert g711.encode_from_pcm16(b"\x01\x02", "pcm_s16le") == b"\x01\x02"


@pytest.mark.parametrize("func", [g711.decode_to_pcm16, g711.encode_from_pcm16])
def test_unknown_encoding_names_allowed_values(func: object) -> None:
    with pytest.raises(ValueError, match="pcm_s16le, pcm_mulaw, pcm_alaw") as info:
        func(b"\x00\x00", "pcm_f32le")  # type: ignore[operator]
    assert "pcm_f32le" in str(info.value)


@pytest.mark.parametrize(
    "call",
    [
        lambda: g711.ulaw_encode(b"\x00\x00\x01"),
        lambda: g711.alaw_encode(b"\x01"),
        lambda: g711.encode_from_pcm16(b"\x00\x00\x01", "pcm_mulaw"),
        lambda: g711.encode_from_pcm16(b"\x00", "pcm_s16le"),
        lambda: g711.decode_to_pcm16(b"\x00\x00\x01", "pcm_s16le"),
    ],
)
def test_odd_pcm16_length_raises_value_error(call: object) -> None:
    with pytest.raises(ValueError, match="whole 2-byte samples"):
        call()  # type: ignore[operator]


def test_encoded_input_has_no_alignment_constraint_and_empty_is_fine() -> None:
    assert len(g711.ulaw_decode(b"\x00\x01\x02")) == 6
    assert g711.ulaw_encode(b"") == b"" and g711.alaw_decode(b"") == b""
    assert g711.decode_to_pcm16(memoryview(b"\xff"), "pcm_mulaw") == b"\x00\x00"
