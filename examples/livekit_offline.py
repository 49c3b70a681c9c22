"""Offline: ``nineninesix.TTS().stream()`` (or ``kitta.TTS``) against the embedded emulator, to a WAV file.

    python examples/livekit_offline.py [out.wav] [--rate 24000] [--encoding pcm_mulaw] [--provider kitta]

No keys, no network: the emulator runs in-process on loopback (an eSpeak NG voice when the ``speech`` extra is
installed, a tone per sentence otherwise). The text is pushed word by word like an LLM's tokens; the second
stream is interrupted after its first audio frame (a barge-in), and the third starts clean: on Nineninesix it
reuses the same socket (the interrupted context was cancelled), on Kitta it adopts the warm standby session
(the interrupted session was closed).
"""

from __future__ import annotations

import argparse
import asyncio

from livekit.agents import tts
from livekit.agents.types import USERDATA_TIMED_TRANSCRIPT

from livekit import rtc
from livekit.plugins import kitta, nineninesix
from ttsbridge.emulator import SPEECH_VOICE_ID, TONE_VOICE_ID, Emulator, EmulatorConfig, speech_available

TEXT = (
    "Hello! Thanks for calling the front desk. Your table for four is booked for eight tonight. "
    "Is there anything else I can help you with?"
)


async def speak(t: tts.TTS, text: str, *, interrupt_after_first_frame: bool = False) -> list[rtc.AudioFrame]:
    frames: list[rtc.AudioFrame] = []
    async with t.stream() as stream:
        for word in text.split(" "):
            stream.push_text(word + " ")
        stream.end_input()
        async for ev in stream:
            frames.append(ev.frame)
            for w in ev.frame.userdata.get(USERDATA_TIMED_TRANSCRIPT, []):
                print(f"  {w.start_time:6.2f}-{w.end_time:6.2f}s  {w.strip()}")
            if interrupt_after_first_frame:
                print("  -- barge-in: closing the stream (the server context is cancelled)")
                break
    return frames


async def main() -> tuple[rtc.AudioFrame, str]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", nargs="?", default="livekit_offline.wav")
    ap.add_argument("--rate", type=int, default=24000)
    ap.add_argument("--encoding", default="pcm_s16le", choices=["pcm_s16le", "pcm_mulaw", "pcm_alaw"])
    ap.add_argument("--provider", default="nineninesix", choices=["nineninesix", "kitta"])
    args = ap.parse_args()

    async with Emulator(EmulatorConfig(realtime_factor=0)) as emu:
        t: tts.TTS
        if args.provider == "kitta":
            voice = SPEECH_VOICE_ID if speech_available() else TONE_VOICE_ID
            t = kitta.TTS(
                emu.config.kitta.a_valid_key(), voice=voice, base_url=emu.base_url, sample_rate=args.rate
            )
            t.prewarm()
        else:
            t = nineninesix.TTS(
                emu.api_key, base_url=emu.base_url, sample_rate=args.rate, encoding=args.encoding
            )
        t.on(
            "metrics_collected",
            lambda m: print(f"  metrics: ttfb={m.ttfb * 1000:.0f} ms audio={m.audio_duration:.2f} s"),
        )
        try:
            print("turn 1")
            frames = await speak(t, TEXT)
            print("turn 2 (interrupted)")
            await speak(
                t,
                "This answer is cut short by the caller, who has another question.",
                interrupt_after_first_frame=True,
            )
            print("turn 3")
            frames += await speak(t, "Of course. What else would you like to know?")
        finally:
            await t.aclose()
        if args.provider == "kitta":
            print(
                f"Kitta sessions: {emu.stats.kitta_sessions}, closed by the client: {emu.stats.kitta_client_closes}"
            )
        else:
            print(
                f"WebSocket connections opened: {emu.stats.ws_connections}, cancels sent: {emu.stats.cancels}"
            )

    return rtc.combine_audio_frames(frames), args.out


def write(audio: rtc.AudioFrame, path: str) -> None:
    with open(path, "wb") as f:
        f.write(audio.to_wav_bytes())
    print(f"wrote {path}: {audio.duration:.2f} s at {audio.sample_rate} Hz")


if __name__ == "__main__":
    write(*asyncio.run(main()))
