"""A Pipecat pipeline speaking through Nineninesix into a WAV file.

A scripted LLM streams its reply as tokens (like a real LLM service), ``NineninesixTTSService`` speaks every
sentence on one server context (or ``KittaTTSService`` on one session), and the audio is written to a WAV
file.

Offline (starts the local emulator; eSpeak NG speech if available, no key, no network)::

    python examples/pipecat_bot.py --out demo.wav

The same pipeline over Kitta Realtime v2 (``KittaTTSService``, warm standby session per turn)::

    python examples/pipecat_bot.py --provider kitta --out demo.wav

Against the real API::

    NINENINESIX_API_KEY=sk_996_... python examples/pipecat_bot.py --base-url https://api.nineninesix.ai \\
        --voice a0e99841-438c-4a64-b679-ae501e7d6091 --out demo.wav
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from loguru import logger

from ttsbridge.demo import DEMO_TEXT, run_demo


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--text", default=DEMO_TEXT, help="what the scripted LLM says")
    parser.add_argument("--out", default="pipecat-demo.wav", help="WAV file to write")
    parser.add_argument("--provider", default="nineninesix", choices=["nineninesix", "kitta"])
    parser.add_argument("--base-url", default=None, help="API base URL (default: the local emulator)")
    parser.add_argument(
        "--api-key", default=None, help="API key (default: $NINENINESIX_API_KEY / $KITTA_API_KEY)"
    )
    parser.add_argument("--voice", default=None, help="voice id (default: the server's default voice)")
    parser.add_argument("--rate", type=int, default=24000, help="pipeline output sample rate")
    parser.add_argument("--encoding", default="pcm_s16le", choices=["pcm_s16le", "pcm_mulaw", "pcm_alaw"])
    parser.add_argument("--token-delay", type=float, default=0.02, help="seconds between LLM tokens")
    parser.add_argument("-v", "--verbose", action="store_true", help="show Pipecat's debug log")
    args = parser.parse_args(argv)

    logger.remove()
    logger.add(sys.stderr, level="DEBUG" if args.verbose else "WARNING")

    stats = asyncio.run(
        run_demo(
            args.text,
            args.out,
            base_url=args.base_url,
            api_key=args.api_key,
            voice=args.voice,
            sample_rate=args.rate,
            encoding=args.encoding,
            token_delay_s=args.token_delay,
            provider=args.provider,
        )
    )
    print(f"endpoint:      {stats.endpoint}")
    print(f"wrote:         {stats.out_path} ({stats.audio_seconds:.2f} s at {stats.sample_rate} Hz)")
    if stats.first_audio_s is not None:
        print(f"first audio:   {stats.first_audio_s * 1000:.0f} ms after the first LLM token")
    print(f"spoken words:  {stats.transcript}")
    for err in stats.errors:
        print(f"error:         {err}", file=sys.stderr)
    return 0 if stats.ok else 1


if __name__ == "__main__":
    sys.exit(main())
