"""Voices: the HTTP voice API (list/get/clone), the tone and eSpeak voices, and pure helpers."""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from emu_wsclient import Session

from ttsbridge.audio.analysis import dominant_frequency, rms, tone
from ttsbridge.audio.wav import wav_bytes
from ttsbridge.emulator import (
    ERROR_CATALOG,
    SPEECH_VOICE_ID,
    TONE_VOICE_ID,
    Emulator,
    Fault,
    parse_inband,
    speech_available,
    synthesize,
    tone_duration,
    tone_frequency,
    tone_pcm,
)


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session:
        yield session


def h(emu: Emulator) -> dict[str, str]:
    return {"Authorization": f"Bearer {emu.api_key}"}


async def clone(emu: Emulator, http: aiohttp.ClientSession, name: str, clip: bytes) -> dict[str, Any]:
    form = aiohttp.FormData()
    form.add_field("clip", clip, filename="clip.wav", content_type="audio/wav")
    form.add_field("name", name)
    form.add_field("language", "en")
    form.add_field("description", f"{name} clone")
    async with http.post(emu.base_url + "/voices/clone", data=form, headers=h(emu)) as r:
        assert r.status == 200, await r.text()
        return await r.json()


# --- HTTP voice API -----------------------------------------------------------------------------------------


async def test_voice_list_pagination(emulator: Emulator, http: aiohttp.ClientSession) -> None:
    for i in range(3):
        await clone(emulator, http, f"v{i}", wav_bytes(tone(200.0 + 100 * i, 0.3, 16000), 16000))
    async with http.get(emulator.base_url + "/voices", headers=h(emulator)) as r:
        everything = await r.json()
    all_ids = [v["id"] for v in everything["data"]]
    assert all_ids[0] == TONE_VOICE_ID
    assert (SPEECH_VOICE_ID in all_ids) == speech_available()
    assert everything["has_more"] is False and everything["next_page"] is None

    seen: list[str] = []
    params: dict[str, str] = {"limit": "2"}
    while True:
        async with http.get(emulator.base_url + "/voices", params=params, headers=h(emulator)) as r:
            page = await r.json()
        if not page["data"]:
            break
        assert len(page["data"]) <= 2
        seen += [v["id"] for v in page["data"]]
        assert page["has_more"] == (len(seen) < len(all_ids))
        if page["has_more"]:
            assert page["next_page"] == page["data"][-1]["id"]
        params = {"limit": "2", "starting_after": page["data"][-1]["id"]}
    assert seen == all_ids

    async with http.get(
        emulator.base_url + "/voices",
        params={"limit": "2", "ending_before": all_ids[-1]},
        headers=h(emulator),
    ) as r:
        before = await r.json()
    assert [v["id"] for v in before["data"]] == all_ids[-3:-1]

    async with http.get(emulator.base_url + "/voices", params={"is_owner": "true"}, headers=h(emulator)) as r:
        owned = await r.json()
    assert [v["name"] for v in owned["data"]] == ["v0", "v1", "v2"]
    async with http.get(emulator.base_url + "/voices", params={"limit": "0"}, headers=h(emulator)) as r:
        assert r.status == 400


async def test_voice_get(emulator: Emulator, http: aiohttp.ClientSession) -> None:
    async with http.get(emulator.base_url + "/voices/tone", headers=h(emulator)) as r:
        voice = await r.json()
    assert voice["id"] == "tone"
    for key in (
        "name",
        "description",
        "language",
        "created_at",
        "is_owner",
        "access",
        "visibility",
        "locales",
    ):
        assert key in voice
    async with http.get(emulator.base_url + "/voices/unknown", headers=h(emulator)) as r:
        assert r.status == 404
        assert (await r.json())["error"] == "voice_not_found"


async def test_clone_makes_a_usable_tone_voice(emulator: Emulator, http: aiohttp.ClientSession) -> None:
    made = await clone(emulator, http, "Beep", wav_bytes(tone(523.0, 0.5, 22050), 22050))
    assert made["name"] == "Beep" and made["emulator_tone_hz"] == 523.0
    assert made["is_owner"] is True and made["user_id"]
    async with http.get(emulator.base_url + f"/voices/{made['id']}", headers=h(emulator)) as r:
        assert (await r.json())["name"] == "Beep"
    async with await Session.open(emulator) as s:
        await s.say("c", "Any text at all.", cont=False, voice={"mode": "id", "id": made["id"]})
        t = await s.turn("c")
    assert t.final is not None and t.final["type"] == "done"
    assert t.frequency() == pytest.approx(523.0, abs=5)


async def test_clone_of_a_non_wav_clip_and_bad_requests(
    emulator: Emulator, http: aiohttp.ClientSession
) -> None:
    made = await clone(emulator, http, "Noise", b"ID3 not really an mp3")
    assert 200.0 <= made["emulator_tone_hz"] <= 200.0 + 63 * 25
    form = aiohttp.FormData()
    form.add_field("name", "no clip")
    async with http.post(emulator.base_url + "/voices/clone", data=form, headers=h(emulator)) as r:
        assert r.status == 400
    async with http.post(emulator.base_url + "/voices/clone", json={"name": "x"}, headers=h(emulator)) as r:
        assert r.status == 400


# --- the voices themselves ----------------------------------------------------------------------------------


@pytest.mark.skipif(not speech_available(), reason="eSpeak NG (espeakng-loader) is not available")
async def test_espeak_voice_speaks(emulator: Emulator) -> None:
    async with await Session.open(emulator) as s:
        await s.say(
            "sp", "Hello from the offline speech voice.", cont=False, voice={"mode": "id", "id": "speech-en"}
        )
        t = await s.turn("sp", timeout=30)
    assert t.final is not None and t.final["type"] == "done"
    assert len(t.audio) > 22050 * 2 * 0.5  # more than half a second
    assert rms(t.audio) > 0.01
    pcm16k = await synthesize(SPEECH_VOICE_ID, "Resampled speech.", 16000)
    assert rms(pcm16k) > 0.01


async def test_default_voice_is_speech_when_available(make_emulator) -> None:  # type: ignore[no-untyped-def]
    emu = await make_emulator(default_voice=None)
    assert emu.voices.default_voice_id == (SPEECH_VOICE_ID if speech_available() else TONE_VOICE_ID)


async def test_builtin_synthesize_and_unknown_voice() -> None:
    pcm = await synthesize(TONE_VOICE_ID, "Tone at 8 kHz.", 8000)
    assert len(pcm) == round(tone_duration("Tone at 8 kHz.") * 8000) * 2
    assert dominant_frequency(pcm, 8000) == pytest.approx(tone_frequency("Tone at 8 kHz."), abs=12)
    with pytest.raises(KeyError):
        await synthesize("nope", "x", 8000)


# --- pure helpers -------------------------------------------------------------------------------------------


def test_tone_frequency_is_deterministic_and_in_range() -> None:
    for text in ("a", "Hello.", "Hello. ", "x" * 300, "ünïcödé"):
        f = tone_frequency(text)
        assert f == 300 + (zlib.crc32(text.strip().encode()) % 64) * 40
        assert 300 <= f <= 2820
    assert tone_frequency("  Hello. ") == tone_frequency("Hello.")


def test_tone_duration_and_fades() -> None:
    assert tone_duration("ab") == pytest.approx(0.12)
    assert tone_duration("a") == pytest.approx(0.1)  # minimum
    pcm = tone_pcm("Some words here.", 22050)
    import numpy as np

    x = np.frombuffer(pcm, dtype="<i2")
    assert abs(int(x[0])) < 200 and abs(int(x[-1])) < 200  # faded in and out
    assert np.max(np.abs(x)) > 15000
    assert tone_pcm("   ", 22050) == b""


def test_parse_inband() -> None:
    assert parse_inband("plain text") == ("plain text", None)
    text, fault = parse_inband("Hello [[drop:2]] world")
    assert text == "Hello world" and fault is not None
    assert (fault.action, fault.after_chunks) == ("drop", 2)
    text, fault = parse_inband("[[error:not_initialized:3]]Go")
    assert text.strip() == "Go" and fault is not None
    assert (fault.action, fault.error_code, fault.after_chunks) == ("error", "not_initialized", 3)
    _, fault = parse_inband("x [[error]]")
    assert fault is not None and fault.error_code == "generation_failed"
    _, fault = parse_inband("[[stall]]")
    assert fault is not None and fault.action == "stall"


def test_fault_validation() -> None:
    with pytest.raises(ValueError):
        Fault(action="explode")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        Fault(after_chunks=-1)
    assert Fault().error_code == "generation_failed"
    assert Fault(action="drop").error_code is None


def test_error_catalog_matches_the_spec() -> None:
    expected = {
        "unknown_model": (400, True),
        "concurrent_limit": (429, False),
        "insufficient_credits": (402, True),
        "voice_not_found": (404, True),
        "unsupported_container": (400, True),
        "unsupported_encoding": (400, True),
        "invalid_sample_rate": (400, True),
        "generation_failed": (500, False),
        "not_initialized": (503, True),
        "context_not_found": (404, False),
        "missing_context_id": (400, False),
    }
    for code, (status, closes) in expected.items():
        spec = ERROR_CATALOG[code]
        assert (spec.status, spec.closes) == (status, closes), code
