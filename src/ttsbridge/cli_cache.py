"""The ``ttsbridge cache`` subcommand: ``cache warm`` and ``cache stats`` over a SQLite or Redis phrase cache."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from ttsbridge.cli_common import _progress, _provider, _target, _target_opts
from ttsbridge.errors import TTSInvalidOptionError


def _phrase_cache(args: argparse.Namespace) -> Any:
    from ttsbridge.cache import PhraseCache

    scope = getattr(args, "scope", None)
    if args.redis:
        return PhraseCache.redis(args.redis, ttl=args.ttl, scope=scope)
    return PhraseCache.sqlite(args.sqlite, max_bytes=args.max_bytes, scope=scope)


def _option_values(pairs: Sequence[str]) -> dict[str, Any]:
    """``--option NAME=VALUE`` (repeated) as provider option fields; a value is read as JSON when it is
    (``1.2``, ``true``, ``null``), else as text (``en``)."""
    out: dict[str, Any] = {}
    for pair in pairs:
        name, sep, raw = pair.partition("=")
        if not sep or not name.strip():
            raise TTSInvalidOptionError("--option", pair, "NAME=VALUE (a provider option field)")
        try:
            value: Any = json.loads(raw)
        except ValueError:
            value = raw
        out[name.strip()] = value
    return out


def _phrases(args: argparse.Namespace) -> list[str]:
    texts = list(args.text)
    if args.file:
        with open(args.file, encoding="utf-8") as f:
            texts += [line.strip() for line in f if line.strip() and not line.lstrip().startswith("#")]
    return texts


async def _cache_warm(args: argparse.Namespace) -> int:
    texts = _phrases(args)
    if not texts:
        print("error: no phrases (give them as arguments or with --file, one a line)", file=sys.stderr)
        return 2
    cache = _phrase_cache(args)
    try:
        async with _target(args) as (base_url, key, emu):
            if emu is not None:
                print(f"using the built-in emulator at {emu.base_url}", file=sys.stderr)
            provider = _provider(args, base_url, key, emu)

            def progress(done: int, total: int, text: str, status: str) -> None:
                _progress(f"[{done}/{total}] {status:6} {text[:60]}")

            try:
                provider.update_options(**_option_values(args.option))  # validated: an error naming the field
                report = await cache.warm(provider, texts, sample_rate=args.sample_rate, progress=progress)
            finally:
                await provider.aclose()
        if sys.stderr.isatty():
            sys.stderr.write("\n")
        stats = cache.stats()
        print(
            f"{cache!r}: {report.stored} stored, {report.cached} already cached, {report.failed} failed;"
            f" {stats.entries} entries, {stats.bytes} bytes"
        )
    finally:
        await cache.aclose()
    return 1 if report.failed else 0


async def _cache_stats(args: argparse.Namespace) -> int:
    cache = _phrase_cache(args)
    try:
        stats = cache.stats()
        print(f"{cache!r}: {stats.entries} entries, {stats.bytes} bytes")
    finally:
        await cache.aclose()
    return 1 if stats.errors else 0


def _cache_opts(sp: argparse.ArgumentParser) -> None:
    where = sp.add_mutually_exclusive_group(required=True)
    where.add_argument("--sqlite", metavar="PATH", help="the SQLite file the workers share")
    where.add_argument("--redis", metavar="URL", help="redis://host:6379/0 (a password in it is never shown)")
    sp.add_argument(
        "--max-bytes", type=int, default=512 << 20, help="SQLite: bound in bytes (default 512 MiB)"
    )
    sp.add_argument(
        "--ttl", type=float, default=7 * 86400.0, help="Redis: entry lifetime, s (default 7 days)"
    )


def _add_cache(sub: Any) -> None:  # argparse's _SubParsersAction
    cache = sub.add_parser("cache", help="the phrase cache: warm it with fixed phrases, show its size")
    csub = cache.add_subparsers(dest="cache_command", metavar="ACTION", required=True)
    warm = csub.add_parser(
        "warm",
        help="render phrases into a SQLite or Redis phrase cache (skipping those it holds)",
        description="Render each phrase once, as the services would on a miss, and store it, so every worker "
        "sharing the cache speaks it at once. The provider and voice options must be those the workers use.",
    )
    warm.add_argument("text", nargs="*", help="phrases to warm")
    warm.add_argument("--file", "-f", help="a file of phrases, one a line ('#' lines skipped)")
    warm.add_argument(
        "--sample-rate", type=int, default=24000, help="the workers' output rate (default: 24000)"
    )
    warm.add_argument(
        "--encoding",
        choices=("pcm_s16le", "pcm_mulaw", "pcm_alaw"),
        default="pcm_s16le",
        help="wire encoding",
    )
    warm.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a provider option the workers set (keyed): language=en, speed=1.1, emotion=happy... (repeatable)",
    )
    warm.add_argument(
        "--scope",
        help="the workers' PhraseCache(scope=...), when they set one (default: a digest of the key)",
    )
    _cache_opts(warm)
    _target_opts(warm)
    warm.set_defaults(func=_cache_warm)
    stats = csub.add_parser("stats", help="entries and bytes in a SQLite or Redis phrase cache")
    _cache_opts(stats)
    stats.set_defaults(func=_cache_stats)
