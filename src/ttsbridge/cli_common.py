"""What the ``ttsbridge`` subcommands share: the target (real service or emulator), its options, the provider."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import AsyncIterator
from typing import Any

from ttsbridge.errors import TTSInvalidOptionError
from ttsbridge.providers import NAMES


def _progress(msg: str) -> None:
    if sys.stderr.isatty():
        sys.stderr.write("\r\033[K" + msg)
    else:
        sys.stderr.write(msg + "\n")
    sys.stderr.flush()


@contextlib.asynccontextmanager
async def _target(args: argparse.Namespace) -> AsyncIterator[tuple[str, str | None, Any]]:
    """(base_url, api_key, emulator or None): the real service given a key or URL, else the emulator."""
    from ttsbridge import providers

    spec = providers.get(args.provider)
    key = args.api_key or os.environ.get(spec.key_env)
    if args.base_url or (key and not args.emulator):
        yield (args.base_url or spec.default_base_url), key, None
        return
    from ttsbridge.emulator import Emulator, EmulatorConfig

    async with Emulator(EmulatorConfig(realtime_factor=args.realtime_factor, log_messages=False)) as emu:
        yield emu.base_url, emu.api_key_for(spec.name), emu


def _provider(args: argparse.Namespace, base_url: str, key: str | None, emu: Any = None) -> Any:
    from ttsbridge import providers

    spec = providers.get(args.provider)
    voice = args.voice
    if not spec.has_default_voice:
        if not voice and emu is not None:
            from ttsbridge.emulator import SPEECH_VOICE_ID, TONE_VOICE_ID, speech_available

            voice = SPEECH_VOICE_ID if speech_available() else TONE_VOICE_ID
        if not voice:
            name = spec.display_name
            raise TTSInvalidOptionError("--voice", None, f"a {name} voice id ({name} has no default voice)")
    return spec.turn_provider(key, base_url=base_url, voice=voice, encoding=args.encoding)


def _target_opts(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("--provider", choices=NAMES, default=NAMES[0])
    sp.add_argument("--api-key", help="API key (default: $NINENINESIX_API_KEY / $KITTA_API_KEY)")
    sp.add_argument("--base-url", help="service URL; with neither key nor URL the built-in emulator is used")
    sp.add_argument("--emulator", action="store_true", help="use the built-in emulator even if a key is set")
    sp.add_argument("--voice", help="voice id (default: the service's default voice)")
    sp.add_argument(
        "--realtime-factor",
        type=float,
        default=0.0,
        help="emulator pacing: 1.0 streams audio in real time, 0 as fast as it is made (default)",
    )
