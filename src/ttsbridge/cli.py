"""The ``ttsbridge`` command: speak text offline, run the emulator, run the Pipecat demo, list voices."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import time
from collections.abc import Sequence
from typing import Any

from ttsbridge import __version__
from ttsbridge.cli_cache import _add_cache
from ttsbridge.cli_common import _progress, _provider, _target, _target_opts
from ttsbridge.errors import TTSBridgeError
from ttsbridge.providers import NAMES

DESCRIPTION = """\
ttsbridge: streaming text-to-speech (Nineninesix, Kitta) for Pipecat and LiveKit Agents.

Without an API key or --base-url, every command runs against the built-in emulator of both APIs, so it
works offline (real speech when the `speech` extra, eSpeak NG, is installed; a test tone otherwise).
"""

EPILOG = """\
examples:
  ttsbridge say "Hello there. How can I help you today?" --out hello.wav
  ttsbridge say --provider kitta "Hi!" --out hi.wav --sample-rate 8000
  ttsbridge emulator --port 8765            # then point any Cartesia-style client at http://127.0.0.1:8765
  ttsbridge demo --out demo.wav             # a Pipecat pipeline: scripted LLM -> our TTS -> WAV
  ttsbridge voices
  ttsbridge cache warm --sqlite phrases.db --voice V "Hello! How can I help?" "Goodbye!"
"""


async def _say(args: argparse.Namespace) -> int:
    from ttsbridge.audio.wav import write_wav
    from ttsbridge.policy.usage import UsageTotals
    from ttsbridge.text import split_sentences

    text = " ".join(args.text) if args.text else sys.stdin.read()
    sentences = split_sentences(text)
    if not sentences:
        print("error: nothing to say (empty text)", file=sys.stderr)
        return 2
    async with _target(args) as (base_url, key, emu):
        if emu is not None:
            print(f"using the built-in emulator at {emu.base_url}", file=sys.stderr)
        provider = _provider(args, base_url, key, emu)
        try:
            t0 = time.perf_counter()
            turn = await provider.open_turn(sample_rate=args.sample_rate)
            ttfa: float | None = None
            pcm = bytearray()
            long_text = len(sentences) > 3 or len(text) > 200
            shown = 0.0

            async def feed() -> None:
                for s in sentences:
                    await turn.send(s + " ")
                await turn.end()

            feeder = asyncio.create_task(feed())
            try:
                async for chunk in turn:
                    if ttfa is None:
                        ttfa = time.perf_counter() - t0
                    pcm += chunk
                    secs = len(pcm) / 2 / args.sample_rate
                    step = 0.5 if sys.stderr.isatty() else 5.0
                    if long_text and secs - shown >= step:
                        shown = secs
                        _progress(f"{secs:6.1f} s of audio received ({len(sentences)} sentences)")
                await feeder
            finally:
                if not feeder.done():
                    feeder.cancel()
                    with contextlib.suppress(BaseException):
                        await feeder
            total = time.perf_counter() - t0
            if turn.outcome == "done":
                turn.note_heard(turn.characters_sent)  # no playback here: the file holds the whole turn
            usage = UsageTotals.of([turn.usage])
        finally:
            await provider.aclose()
    if len(sentences) > 3 and sys.stderr.isatty():
        sys.stderr.write("\n")
    write_wav(args.out, bytes(pcm), args.sample_rate)
    seconds = len(pcm) / 2 / args.sample_rate
    print(
        f"wrote {args.out}: {seconds:.2f} s of audio at {args.sample_rate} Hz, {len(sentences)} sentence(s)"
    )
    print(f"time to first audio: {1000 * (ttfa or 0):.0f} ms; total: {1000 * total:.0f} ms")
    print(f"usage: {usage.report()}")
    return 0


async def _emulator(args: argparse.Namespace) -> int:
    from ttsbridge.emulator import Emulator, EmulatorConfig

    cfg = EmulatorConfig(
        host=args.host,
        port=args.port,
        realtime_factor=args.realtime_factor,
        first_chunk_latency_s=args.first_chunk_latency,
        log_messages=False,  # a long-running server keeps no message log
    )
    async with Emulator(cfg) as emu:
        print(f"ttsbridge emulator listening on {emu.base_url}")
        print(f"  Nineninesix WebSocket: {emu.ws_url}?api_key={emu.api_key}")
        print(f"  Nineninesix HTTP:      {emu.base_url}/tts/bytes, /tts/sse, /voices")
        print(f"  Kitta v2:              {emu.kitta_url} ({emu.config.kitta.formats_note()})")
        print(f"  {emu.config.keys_line()}")
        print("press Ctrl+C to stop", flush=True)
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.Event().wait()
    return 0


async def _voices(args: argparse.Namespace) -> int:
    from ttsbridge import providers

    list_voices = providers.get(args.provider).list_voices
    assert list_voices is not None  # main() refused the others
    async with _target(args) as (base_url, key, _emu):
        voices = await list_voices(key, base_url)
    for v in voices:
        print(f"{v.get('id', ''):40} {v.get('name', '')}  {v.get('language', '')}")
    return 0


async def _demo(args: argparse.Namespace) -> int:
    try:
        from ttsbridge.demo import run_demo
    except ImportError as exc:
        print(
            f"error: the demo needs the pipecat extra: pip install 'ttsbridge[pipecat]' ({exc})",
            file=sys.stderr,
        )
        return 2
    if not args.verbose:
        from loguru import logger as loguru_logger

        loguru_logger.remove()  # Pipecat logs every frame at DEBUG; keep the terminal for the result
        loguru_logger.add(sys.stderr, level="WARNING")
    stats = await run_demo(
        text=" ".join(args.text) if args.text else None,
        out_path=args.out,
        base_url=args.base_url,
        api_key=args.api_key,
        voice=args.voice,
        provider=args.provider,
        sample_rate=args.sample_rate,
    )
    print(f"wrote {stats.out_path}: {stats.audio_seconds:.2f} s of audio at {stats.sample_rate} Hz")
    if stats.first_audio_s is not None:
        print(
            f"time to first audio (first LLM token -> first audio frame): {1000 * stats.first_audio_s:.0f} ms"
        )
    print(f"endpoint: {stats.endpoint}; voice: {stats.voice or 'default'}")
    print(f"transcript (word frames, as heard): {stats.transcript}")
    print(f"usage: {stats.usage.report()}")
    for err in stats.errors:
        print(f"error: {err}", file=sys.stderr)
    return 0 if stats.ok else 1


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="ttsbridge",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=f"ttsbridge {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for add in (_add_say, _add_emulator, _add_voices, _add_demo, _add_cache):
        add(sub)
    return p


def _add_say(sub: Any) -> None:  # argparse's _SubParsersAction
    say = sub.add_parser(
        "say",
        help="speak text through one streaming turn and write a WAV",
        description="Stream the sentences of TEXT through one turn (one server context), write a WAV, "
        "and print the time to first audio and the audio length. Reads stdin when TEXT is omitted.",
    )
    say.add_argument("text", nargs="*", help="the text to speak")
    say.add_argument("--out", "-o", default="out.wav", help="WAV file to write (default: out.wav)")
    say.add_argument("--sample-rate", type=int, default=24000, help="output sample rate (default: 24000)")
    say.add_argument(
        "--encoding",
        choices=("pcm_s16le", "pcm_mulaw", "pcm_alaw"),
        default="pcm_s16le",
        help="wire encoding (Nineninesix); audio is always decoded to PCM16 for the WAV",
    )
    _target_opts(say)
    say.set_defaults(func=_say)


def _add_emulator(sub: Any) -> None:  # argparse's _SubParsersAction
    emu = sub.add_parser("emulator", help="run the local emulator of both APIs")
    emu.add_argument("--host", default="127.0.0.1")
    emu.add_argument("--port", type=int, default=8765)
    emu.add_argument("--realtime-factor", type=float, default=1.0, help="1.0 = real-time pacing, 0 = unpaced")
    emu.add_argument(
        "--first-chunk-latency", type=float, default=0.0, help="seconds before a context's audio"
    )
    emu.set_defaults(func=_emulator)


def _add_voices(sub: Any) -> None:  # argparse's _SubParsersAction
    voices = sub.add_parser("voices", help="list Nineninesix voices (Kitta has no voice listing)")
    _target_opts(voices)
    voices.set_defaults(func=_voices, parser=voices)


def _add_demo(sub: Any) -> None:  # argparse's _SubParsersAction
    demo = sub.add_parser("demo", help="Pipecat pipeline: scripted LLM tokens -> our TTS -> WAV")
    demo.add_argument("text", nargs="*", help="what the scripted LLM says (default: a short dialogue turn)")
    demo.add_argument("--out", "-o", default="demo.wav")
    demo.add_argument("--api-key")
    demo.add_argument("--base-url")
    demo.add_argument("--voice")
    demo.add_argument("--provider", choices=NAMES, default=NAMES[0])
    demo.add_argument("--sample-rate", type=int, default=24000, help="pipeline output rate (default: 24000)")
    demo.add_argument("--verbose", "-v", action="store_true", help="show Pipecat's debug log")
    demo.set_defaults(func=_demo)


def _refuse_without_voice_listing(parser: argparse.ArgumentParser, provider: str) -> None:
    """``voices --provider P`` where P's API has no voice listing: a usage error, as argparse words one."""
    from ttsbridge import providers

    if providers.get(provider).list_voices is None:
        listing = ", ".join(repr(n) for n in NAMES if providers.get(n).list_voices is not None)
        parser.error(f"argument --provider: invalid choice: {provider!r} (choose from {listing})")


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    if args.func is _voices:
        _refuse_without_voice_listing(args.parser, args.provider)
    try:
        return asyncio.run(args.func(args))
    except KeyboardInterrupt:
        return 130
    except TTSBridgeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
