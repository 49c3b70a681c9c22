"""The emulator's Kitta output formats (pcm, wav, mp3) and its key policy, over a raw v2 client.

The audio frames of a session are concatenated, as the page says, and decoded with PyAV.
"""

from __future__ import annotations

import io
import struct
from typing import Any

import av
import numpy as np
import pytest
from test_kitta_emulator_endpoint import authed, raw

from ttsbridge.audio.analysis import dominant_frequency
from ttsbridge.emulator import TONE_VOICE_ID, Emulator, tone_duration, tone_frequency
from ttsbridge.emulator import encoders as encoders_module
from ttsbridge.emulator.kitta import KittaConfig

RATE = 24_000
MP3_FRAME = 576  # samples per MPEG-2 Layer III frame (24 kHz)
MP3_PRIMING = 1105  # LAME's encoder + decoder delay; a raw mp3 stream has no LAME tag to trim it
TEXTS = ["Hello from Realtime TTS v2.", "A second segment, flushed on its own."]


async def session_audio(url: str, key: str, fmt: str, texts: list[str]) -> tuple[dict[str, Any], list[bytes]]:
    """One session: start in ``fmt``, one text + flush per entry, stop; (ready event, audio frames)."""
    frames: list[bytes] = []
    async with authed(url, key) as r:
        ready = await r.start(f"r-{fmt}-{len(texts)}", format=fmt)
        assert ready["event"] == "ready", ready
        for text in texts:
            await r.send(event="text", text=text)
            await r.send(event="flush")
        await r.send(event="stop")
        for ev in await r.recv_until("finish"):
            assert ev["event"] != "error", ev
            if ev["event"] == "audio":
                assert ev["seq"] == len(frames) and ev["audio"], "frames in order, none empty"
                frames.append(ev["audio"])
    return ready, frames


def decode(data: bytes, fmt: str) -> np.ndarray:
    """All samples of ``data`` (mono int16) decoded by FFmpeg through PyAV."""
    with av.open(io.BytesIO(data), format=fmt) as container:
        chunks = [frame.to_ndarray().reshape(-1) for frame in container.decode(audio=0)]
        assert container.streams.audio[0].sample_rate == RATE
    samples = np.concatenate(chunks)
    if samples.dtype.kind == "f":
        samples = np.round(samples * 32767)
    return samples.astype("<i2")


def n_samples(text: str) -> int:
    return round(tone_duration(text) * RATE)


async def test_mp3_streams_in_chunks_and_decodes_to_the_expected_duration(
    kitta_url: str, kitta_key: str
) -> None:
    ready, frames = await session_audio(kitta_url, kitta_key, "mp3", TEXTS[:1])
    assert (ready["sample_rate"], ready["channels"]) == (RATE, 1) and "bit_depth" not in ready
    assert len(frames) > 2, "mp3 is encoded and sent per audio frame, not as one blob"
    pcm = decode(b"".join(frames), "mp3")
    expected = n_samples(TEXTS[0]) + MP3_PRIMING
    assert abs(pcm.size - expected) <= MP3_FRAME, (pcm.size, expected)
    assert dominant_frequency(pcm.tobytes(), RATE) == pytest.approx(tone_frequency(TEXTS[0]), abs=15)


async def test_mp3_segments_are_flushed_so_the_concatenation_decodes(kitta_url: str, kitta_key: str) -> None:
    _, frames = await session_audio(kitta_url, kitta_key, "mp3", TEXTS)
    pcm = decode(b"".join(frames), "mp3")
    # each segment: its samples + priming, padded up to a whole frame
    expected = sum(-(-(n_samples(t) + MP3_PRIMING) // MP3_FRAME) * MP3_FRAME for t in TEXTS)
    assert abs(pcm.size - expected) <= MP3_FRAME, (pcm.size, expected)
    first = n_samples(TEXTS[0]) + MP3_PRIMING
    assert dominant_frequency(pcm[first - n_samples(TEXTS[0]) // 2 : first].tobytes(), RATE) == pytest.approx(
        tone_frequency(TEXTS[0]), abs=15
    )
    assert dominant_frequency(pcm[-n_samples(TEXTS[1]) : -MP3_FRAME].tobytes(), RATE) == pytest.approx(
        tone_frequency(TEXTS[1]), abs=15
    )


def wav_header(data: bytes) -> tuple[tuple[int, int, int, int], int]:
    """((format tag, channels, rate, bits), offset of the PCM) of a streamed WAV; asserts its structure."""
    riff, _riff_size, wave = struct.unpack_from("<4sI4s", data, 0)
    assert (riff, wave) == (b"RIFF", b"WAVE")
    offset, fmt = 12, None
    while True:
        cid, size = struct.unpack_from("<4sI", data, offset)
        if cid == b"fmt ":
            tag, channels, rate, _byte_rate, _align, bits = struct.unpack_from("<HHIIHH", data, offset + 8)
            fmt = (tag, channels, rate, bits)
        if cid == b"data":
            assert fmt is not None, "fmt chunk before data"
            return fmt, offset + 8
        offset += 8 + size + (size & 1)


async def test_wav_has_one_valid_header_then_the_pcm(kitta_url: str, kitta_key: str) -> None:
    ready, frames = await session_audio(kitta_url, kitta_key, "wav", TEXTS)
    assert (ready["sample_rate"], ready["channels"], ready["bit_depth"]) == (RATE, 1, 16)
    _, pcm_frames = await session_audio(kitta_url, kitta_key, "pcm", TEXTS)
    data = b"".join(frames)
    fmt, offset = wav_header(data)
    assert fmt == (1, 1, RATE, 16)  # PCM, mono, 24 kHz, 16-bit
    assert data[offset:] == b"".join(pcm_frames), "after the one header: exactly the session's PCM"
    assert decode(data, "wav").size == sum(n_samples(t) for t in TEXTS)


async def test_missing_pyav_is_a_clear_unsupported_parameter(
    monkeypatch: pytest.MonkeyPatch, kitta_url: str, kitta_key: str
) -> None:
    def no_av() -> Any:
        raise ImportError("No module named 'av'")

    monkeypatch.setattr(encoders_module, "_import_av", no_av)
    note = KittaConfig().formats_note()
    assert note.startswith("formats pcm; ") and "PyAV" in note and "ttsbridge[emulator]" in note
    for fmt in ("mp3", "wav"):
        async with authed(kitta_url, kitta_key) as r:
            await r.send(
                event="start",
                request_id=f"r-noav-{fmt}",
                request={"voice_id": TONE_VOICE_ID, "model": "fishaudio-s21pro-flash", "format": fmt},
            )
            err, close = await r.error_and_close()
        assert err["code"] == "unsupported_parameter" and close == 1008
        assert "PyAV" in err["message"] and "ttsbridge[emulator]" in err["message"]
    _, frames = await session_audio(kitta_url, kitta_key, "pcm", TEXTS[:1])
    assert frames, "pcm needs no PyAV"


# ------------------------------------------------------------------------------------------------ key policy


@pytest.mark.parametrize("key", ["whatever-the-user-has", "sk_live_123", "x"])
async def test_any_non_empty_key_is_accepted_by_default(kemu: Emulator, kitta_url: str, key: str) -> None:
    assert kemu.config.kitta.api_keys is None
    async with authed(kitta_url, key) as r:
        assert (await r.start("r-anykey"))["event"] == "ready"
    async with raw(kitta_url, None) as r:  # the auth frame too
        await r.send(event="auth", token=key)
        assert await r.recv() == {"event": "authenticated"}


async def test_an_explicit_key_set_is_strict(kemu: Emulator, kitta_url: str) -> None:
    kemu.config.kitta.api_keys = {"the-only-key"}
    async with authed(kitta_url, "the-only-key") as r:
        assert (await r.start("r-strict-ok"))["event"] == "ready"
    async with raw(kitta_url, None) as r:
        await r.send(event="auth", token="another-key")
        err, close = await r.error_and_close()
    assert err["code"] == "unauthorized" and close == 1008


def test_keys_and_formats_lines() -> None:
    from ttsbridge.emulator import EmulatorConfig

    line = EmulatorConfig().keys_line()
    assert line.count("any non-empty key") == 2 and "Nineninesix" in line and "Kitta" in line
    strict = EmulatorConfig(api_keys={"sk_996_secret_a"}, kitta=KittaConfig(api_keys={"secret_b", "c"}))
    line = strict.keys_line()
    assert "only the 1 configured key;" in line and "only the 2 configured keys" in line
    assert "secret" not in line
    assert KittaConfig().formats_note() == "formats pcm, wav, mp3"
