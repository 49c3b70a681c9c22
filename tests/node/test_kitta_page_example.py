"""The Kitta page's own "Minimal Node.js client", verbatim but for the URL, against a real ``ttsbridge
emulator`` process: it must write ``realtime-output.mp3``, and that mp3 must decode to the spoken audio."""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import re
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import av
import numpy as np
import pytest

from ttsbridge.audio.analysis import dominant_frequency
from ttsbridge.emulator import (
    KITTA_EXAMPLE_VOICE_ID,
    TONE_VOICE_ID,
    speech_available,
    synthesize,
    tone_duration,
    tone_frequency,
)

SPOKEN = "Hello from Realtime TTS v2."  # the text the example sends
RATE = 24_000
MP3_FRAME, MP3_PRIMING = 576, 1105  # see tests/kitta/test_kitta_emulator_formats.py
PAGE = Path("/work/shared/specs/kitta-realtime-tts-v2.txt")
WAIT_S = 60.0


@contextlib.asynccontextmanager
async def emulator_process() -> AsyncIterator[tuple[str, str]]:
    """``ttsbridge emulator --port 0`` in a subprocess; yields (Kitta URL, its start-up text)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    cmd = [sys.executable, "-m", "ttsbridge", "emulator", "--port", "0", "--realtime-factor", "0"]
    proc = await asyncio.create_subprocess_exec(
        *cmd, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, env=env
    )
    assert proc.stdout is not None
    try:
        lines: list[str] = []

        async def startup() -> None:
            while not lines or "Ctrl+C" not in lines[-1]:
                line = (await proc.stdout.readline()).decode()  # type: ignore[union-attr]
                assert line, "the emulator exited early:\n" + "".join(lines)
                lines.append(line)

        await asyncio.wait_for(startup(), WAIT_S)
        text = "".join(lines)
        match = re.search(r"Kitta v2:\s+(ws://\S+)", text)
        assert match, text
        drain = asyncio.create_task(proc.stdout.read())  # keep the pipe from filling while we wait
        try:
            yield match.group(1), text
        finally:
            drain.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await drain
    finally:
        if proc.returncode is None:
            proc.terminate()
            try:
                await asyncio.wait_for(proc.wait(), 10)
            except asyncio.TimeoutError:
                proc.kill()
                await proc.wait()


def decode_mp3(data: bytes) -> np.ndarray:
    with av.open(io.BytesIO(data), format="mp3") as container:
        frames = list(container.decode(audio=0))
    assert frames and all(f.sample_rate == RATE for f in frames)
    samples = np.concatenate([f.to_ndarray().reshape(-1) for f in frames])
    return np.round(samples * 32767).astype("<i2") if samples.dtype.kind == "f" else samples.astype("<i2")


@pytest.mark.parametrize("voice_id", [KITTA_EXAMPLE_VOICE_ID, TONE_VOICE_ID], ids=["pages-voice-id", "tone"])
async def test_the_pages_node_example_writes_a_decodable_mp3(
    node_example: Path, tmp_path: Path, voice_id: str
) -> None:
    async with emulator_process() as (kitta_url, startup):
        assert "keys: Nineninesix any non-empty key" in startup and "Kitta any non-empty key" in startup
        env = {
            **os.environ,
            "KITTA_URL": kitta_url,
            "API_KEY": "the-key-this-user-happens-to-have",  # no format is defined: any non-empty key works
            "VOICE_ID": voice_id,  # the page's own example id, as a user pastes it; and the tone voice
        }
        node = await asyncio.create_subprocess_exec(
            "node",
            str(node_example),
            cwd=tmp_path,
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            out, err = await asyncio.wait_for(node.communicate(), WAIT_S)
        except asyncio.TimeoutError:
            node.kill()
            await asyncio.wait_for(node.wait(), 5.0)
            raise
    report = f"stdout: {out.decode()}\nstderr: {err.decode()}"
    assert node.returncode == 0, report
    assert not err, report  # the example prints errors (e.g. 'unauthorized', 'unsupported_parameter') there
    assert re.search(r"units: 27\b", out.decode()), report  # the finish event's units: the text's characters
    mp3 = (tmp_path / "realtime-output.mp3").read_bytes()
    pcm = decode_mp3(mp3)
    if (
        voice_id == TONE_VOICE_ID or not speech_available()
    ):  # the page's voice speaks like tone without eSpeak
        expected = round(tone_duration(SPOKEN) * RATE) + MP3_PRIMING
        assert abs(pcm.size - expected) <= MP3_FRAME, (pcm.size, expected)
        assert dominant_frequency(pcm.tobytes(), RATE) == pytest.approx(tone_frequency(SPOKEN), abs=15)
    else:  # it speaks: the length of the emulator's speech for the text, and not silence
        spoken = await synthesize("speech-en", SPOKEN, RATE)
        expected = len(spoken) // 2 + MP3_PRIMING
        assert abs(pcm.size - expected) <= MP3_FRAME, (pcm.size, expected)
        assert float(np.sqrt(np.mean(pcm.astype(np.float64) ** 2))) > 300.0


def test_the_stored_example_is_the_pages_verbatim_but_for_the_url() -> None:
    if not PAGE.is_file():
        pytest.skip(f"the page's text is not on this machine ({PAGE})")
    page = PAGE.read_text()
    code = page[page.index("import { randomUUID }") : page.index("\nLimits, billing, and retries")].rstrip()
    stored = (Path(__file__).parent / "kitta_realtime_example.mjs").read_text().rstrip()
    assert stored == code.replace("'wss://realtime.fishaudio.org/v2/tts/live'", "process.env.KITTA_URL")
