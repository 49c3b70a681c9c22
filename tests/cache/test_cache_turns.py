"""The phrase cache on the framework-free providers (wrapped: ``CachedProvider``), against the emulator: a hit sends
nothing (the emulator's request log), plays the live render's samples and bills nothing; a miss is stored
only when it completed cleanly; changing a keyed setting misses; ``warm()`` and ``ttsbridge cache warm``."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from ttsbridge.cache import CachedProvider, CachedTurn, PhraseCache, RecordingTurn
from ttsbridge.cli import main
from ttsbridge.emulator import TONE_VOICE_ID, Emulator, Fault
from ttsbridge.errors import TTSBridgeError, TTSInvalidOptionError
from ttsbridge.kitta import KittaOptions, KittaTurnProvider
from ttsbridge.nineninesix import NineninesixOptions, NineninesixTurnProvider
from ttsbridge.turns import Turn, TurnProvider

TEXT = "Hello! How can I help?"
RATE = 24000
WAIT = 10.0


def cached(provider: TurnProvider[Any], cache: PhraseCache | None) -> Any:
    """``provider`` through ``cache`` (a :class:`CachedProvider` around it), or itself without one."""
    return provider if cache is None else CachedProvider(provider, cache)


def nns(emu: Emulator, cache: PhraseCache | None, **options: Any) -> Any:
    opts = NineninesixOptions(voice=TONE_VOICE_ID, **options)
    return cached(NineninesixTurnProvider(emu.api_key, base_url=emu.base_url, options=opts), cache)


def kitta(emu: Emulator, cache: PhraseCache | None) -> Any:
    key = emu.config.kitta.a_valid_key()
    options = KittaOptions(voice_id=TONE_VOICE_ID)
    return cached(KittaTurnProvider(key, base_url=emu.base_url, options=options, standby=False), cache)


def requests(emu: Emulator) -> int:
    return emu.stats.http_requests + len(emu.stats.messages) + emu.stats.kitta_sessions


async def speak(p: Any, text: str = TEXT) -> bytes:
    return b"".join([c async for c in p.synthesize(text, sample_rate=RATE)])


async def turn_of(p: Any, text: str = TEXT, **kw: Any) -> tuple[Any, bytes]:
    turn = await p.open_phrase(text, sample_rate=RATE, **kw)
    await turn.send(text)
    await turn.end()
    pcm = b"".join([c async for c in turn])
    return turn, pcm


@pytest.mark.parametrize("make", [nns, kitta], ids=["nineninesix", "kitta"])
async def test_a_repeated_synthesis_sends_nothing_and_gives_the_same_samples(
    emu: Emulator, make: Any
) -> None:
    cache = PhraseCache.memory(max_bytes=8 << 20)
    p = make(emu, cache)
    live_p = make(emu, None)
    try:
        plain = await speak(live_p)  # the same settings without a cache
        live = await speak(p)
        await cache.flush()
        made = requests(emu)
        synthesis = p.synthesize(TEXT, sample_rate=RATE)
        hit = b"".join([c async for c in synthesis])
        assert requests(emu) == made
    finally:
        await p.aclose()
        await live_p.aclose()
    assert hit == live == plain != b""
    assert synthesis.cache == "hit"
    usage = synthesis.usage
    assert usage is not None and usage.characters_billed == 0 and usage.characters_cached == len(TEXT)
    assert (cache.stats().hits, cache.stats().misses) == (1, 1)


@pytest.mark.parametrize("make", [nns, kitta], ids=["nineninesix", "kitta"])
async def test_a_phrase_turn_hit_is_a_turn_that_sends_nothing(emu: Emulator, make: Any) -> None:
    cache = PhraseCache.memory(max_bytes=8 << 20)
    p = make(emu, cache)
    try:
        first, live = await turn_of(p)
        await cache.flush()
        made = requests(emu)
        second, hit = await turn_of(p)
        assert requests(emu) == made
    finally:
        await p.aclose()
    assert isinstance(first, RecordingTurn) and isinstance(second, CachedTurn)
    assert isinstance(first, Turn) and isinstance(second, Turn)  # what the adapters are typed against
    inner = first.inner  # a recording is the live turn's facts, not a copy of them
    assert (first.id, first.retries, first.outcome) == (inner.id, inner.retries, inner.outcome)
    assert first.usage == inner.usage and first.sample_rate == inner.sample_rate == RATE
    assert hit == live
    assert second.outcome == "done" and second.done and second.error is None
    assert second.usage.characters_billed == 0 and first.usage.characters_billed > 0
    assert second.wire_format == first.wire_format != ""
    assert second.usage.audio_seconds == pytest.approx(len(hit) / 2 / RATE)


@pytest.mark.parametrize("make", [nns, kitta], ids=["nineninesix", "kitta"])
async def test_a_text_that_differs_only_in_inner_whitespace_is_rendered_live(
    emu: Emulator, make: Any
) -> None:
    """The servers trim a text and keep the rest: "Hello  there." is other audio than "Hello there." (the
    emulator's tone depends on every character), so it must not be served the other's entry."""
    cache = PhraseCache.memory(max_bytes=8 << 20)
    p = make(emu, cache)
    live_p = make(emu, None)
    try:
        await speak(p, "Hello there.")
        await cache.flush()
        made = requests(emu)
        spaced = await speak(p, "Hello  there.")
        assert requests(emu) > made  # a miss: rendered by the server
        assert spaced == await speak(live_p, "Hello  there.")
        await cache.flush()
        made = requests(emu)
        assert await speak(p, " Hello  there.\n") == spaced  # trimmed as the server trims: a hit
        assert requests(emu) == made
    finally:
        await p.aclose()
        await live_p.aclose()


async def test_a_cached_provider_wraps_a_provider_and_a_phrase_cache(emu: Emulator) -> None:
    live = NineninesixTurnProvider(emu.api_key, base_url=emu.base_url)
    with pytest.raises(TTSInvalidOptionError, match="cache"):
        CachedProvider(live, object())  # type: ignore[arg-type]
    with pytest.raises(TTSInvalidOptionError, match="provider"):
        CachedProvider(object(), PhraseCache.memory())  # type: ignore[arg-type]
    p = CachedProvider(live, PhraseCache.memory())
    p.update_options(voice="another-voice")  # the options are the wrapped provider's: one place
    assert live.options.voice == p.options.voice == "another-voice" and p.provider == "nineninesix"
    await p.aclose()  # closes the wrapped provider


async def test_open_turn_is_never_cached(emu: Emulator) -> None:
    cache = PhraseCache.memory(max_bytes=8 << 20)
    p = nns(emu, cache)
    try:
        for _ in range(2):
            turn = await p.open_turn(sample_rate=RATE)
            await turn.send(TEXT)
            await turn.end()
            assert [c async for c in turn]
    finally:
        await p.aclose()
    assert len(cache) == 0 and cache.stats().misses == 0


async def test_changing_a_keyed_setting_misses(emu: Emulator) -> None:
    clone = emu.voices.clone(name="other", clip=b"a clip that is not a wav")
    cache = PhraseCache.memory(max_bytes=8 << 20)
    p = nns(emu, cache)
    try:
        await speak(p)
        await cache.flush()
        for change in (
            {"voice": clone.id},
            {"encoding": "pcm_mulaw"},
            {"sample_rate": 16000},
            {"language": "de"},
        ):
            p.update_options(**change)
            made = emu.stats.http_requests
            await speak(p)
            await cache.flush()
            assert emu.stats.http_requests == made + 1, change
        made = emu.stats.http_requests
        await speak(p, TEXT)
        assert emu.stats.http_requests == made  # the last settings are cached now
        assert (await speak(p, TEXT)) != b""
        p.update_options(voice=TONE_VOICE_ID, encoding="pcm_s16le", sample_rate=None, language=None)
        await speak(p)
        assert emu.stats.http_requests == made  # back to the first settings: their entry
        made = emu.stats.http_requests
        assert await speak(p) and b"".join([c async for c in p.synthesize(TEXT, sample_rate=16000)])
        assert emu.stats.http_requests == made + 1  # another output rate misses
    finally:
        await p.aclose()


async def test_a_cancelled_turn_is_not_stored(emu: Emulator) -> None:
    emu.config.realtime_factor = 2.0  # still streaming when cancelled
    cache = PhraseCache.memory(max_bytes=8 << 20)
    p = nns(emu, cache)
    try:
        turn = await p.open_phrase(TEXT, sample_rate=RATE)
        await turn.send(TEXT)
        await turn.end()
        async for _ in turn:
            await turn.cancel()
        await cache.flush()
        assert turn.outcome == "cancelled" and len(cache) == 0
        turn = await p.open_phrase(TEXT, sample_rate=RATE)
        await turn.send(TEXT)
        await turn.end()
        async for _ in turn:
            break  # the consumer left early: the turn is cancelled, nothing stored
        await cache.flush()
        assert len(cache) == 0
    finally:
        await p.aclose()


async def test_a_failed_turn_is_not_stored(emu: Emulator) -> None:
    emu.add_fault(
        Fault(trigger="Hello", action="error", error_code="generation_failed", after_chunks=2, times=2)
    )
    cache = PhraseCache.memory(max_bytes=8 << 20)
    p = nns(emu, cache)
    try:
        with pytest.raises(TTSBridgeError):
            await asyncio.wait_for(speak(p), WAIT)
        with pytest.raises(TTSBridgeError):
            await asyncio.wait_for(turn_of(p), WAIT)
        await cache.flush()
        assert len(cache) == 0
        assert await speak(p)  # the fault fired twice (after audio); a clean render is stored
        await cache.flush()
    finally:
        await p.aclose()
    assert len(cache) == 1


async def test_a_turn_sent_other_text_than_its_key_is_not_stored(emu: Emulator) -> None:
    cache = PhraseCache.memory(max_bytes=8 << 20)
    p = nns(emu, cache)
    try:
        turn = await p.open_phrase(TEXT, sample_rate=RATE)
        await turn.send("Something else entirely.")
        await turn.end()
        assert [c async for c in turn]
        await cache.flush()
    finally:
        await p.aclose()
    assert len(cache) == 0


async def test_warm_renders_once_skips_what_is_cached_and_reports(emu: Emulator) -> None:
    cache = PhraseCache.memory(max_bytes=8 << 20)
    p = nns(emu, None)  # warm() needs no phrase_cache on the provider: it fills the cache it is called on
    seen: list[tuple[int, int, str, str]] = []
    try:
        texts = [TEXT, "Goodbye!", "  "]
        first = await cache.warm(p, texts, sample_rate=RATE, progress=lambda *a: seen.append(a))
        made = requests(emu)
        second = await cache.warm(p, texts, sample_rate=RATE)
        assert requests(emu) == made
    finally:
        await p.aclose()
    assert (first.stored, first.cached, first.failed) == (2, 0, 0)
    assert (second.stored, second.cached, second.failed) == (0, 2, 0)
    assert seen == [(1, 2, TEXT, "stored"), (2, 2, "Goodbye!", "stored")]
    q = nns(emu, cache)
    try:
        made = requests(emu)
        assert await speak(q) and requests(emu) == made  # what warm() stored is what synthesize() looks up
    finally:
        await q.aclose()


async def test_warm_counts_a_failed_phrase_and_goes_on(emu: Emulator) -> None:
    emu.add_fault(Fault(trigger="Broken", action="error", error_code="generation_failed"))
    cache = PhraseCache.memory(max_bytes=8 << 20)
    p = nns(emu, None)
    try:
        report = await cache.warm(p, ["Broken phrase.", TEXT], sample_rate=RATE)
    finally:
        await p.aclose()
    assert (report.stored, report.failed) == (1, 1) and len(cache) == 1


async def test_the_cli_warms_a_shared_sqlite_cache(emu: Emulator, tmp_path: Path, capsys: Any) -> None:
    db = tmp_path / "phrases.db"
    phrases = tmp_path / "phrases.txt"
    phrases.write_text(f"# fixed prompts\n{TEXT}\n\nGoodbye!\n", encoding="utf-8")
    args = ["cache", "warm", "--sqlite", str(db), "--file", str(phrases), "--sample-rate", str(RATE)]
    args += ["--base-url", emu.base_url, "--api-key", emu.api_key, "--voice", TONE_VOICE_ID]
    assert await asyncio.to_thread(main, args) == 0
    assert await asyncio.to_thread(main, [*args, "One more."]) == 0
    out = capsys.readouterr()
    assert "2 stored, 0 already cached" in out.out and "1 stored, 2 already cached" in out.out
    assert (
        "[1/3] stored One more." in out.err
        and "[3/3] cached" in out.err
        and emu.api_key not in out.out + out.err
    )
    cache = PhraseCache.sqlite(db)
    p = nns(emu, cache)
    try:
        made = requests(emu)
        assert await speak(p) and await speak(p, "Goodbye!")
        assert requests(emu) == made
    finally:
        await p.aclose()
        await cache.aclose()
    assert await asyncio.to_thread(main, ["cache", "stats", "--sqlite", str(db)]) == 0
    assert "3 entries" in capsys.readouterr().out


async def test_the_cli_warms_with_the_workers_options_and_scope(
    emu: Emulator, tmp_path: Path, capsys: Any
) -> None:
    """A worker whose provider sets a keyed option (``language``) and whose cache has a ``scope``: the CLI
    must key the entries as it does, or the worker never hits what was warmed for it."""
    db = tmp_path / "phrases.db"
    args = ["cache", "warm", "--sqlite", str(db), "--sample-rate", str(RATE), "--scope", "acme-prod"]
    args += ["--base-url", emu.base_url, "--api-key", emu.api_key, "--voice", TONE_VOICE_ID]
    assert await asyncio.to_thread(main, [*args, "--option", "language=de", TEXT]) == 0
    assert "1 stored" in capsys.readouterr().out
    made = requests(emu)
    assert await asyncio.to_thread(main, [*args, "--option", "model=no-such-model", "Other text."]) == 1
    assert "invalid model='no-such-model'" in capsys.readouterr().err  # refused naming the field
    assert requests(emu) == made  # before anything was rendered
    cache = PhraseCache.sqlite(db, scope="acme-prod")
    p = nns(emu, cache, language="de")
    try:
        made = requests(emu)
        assert await speak(p)
        assert requests(emu) == made  # the worker's settings and scope: what the CLI stored
    finally:
        await p.aclose()
        await cache.aclose()
