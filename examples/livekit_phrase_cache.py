"""A LiveKit voice agent whose greeting and fixed prompts come from a phrase cache shared by every job process
(docs/cache.md): rendered once per host, then spoken with no request and no bill.

Needs a LiveKit server and real keys (as examples/livekit_agent.py)::

    export LIVEKIT_URL=... LIVEKIT_API_KEY=... LIVEKIT_API_SECRET=... NINENINESIX_API_KEY=sk_996_...
    export NINENINESIX_VOICE=<voice id> PHRASE_CACHE=/var/cache/agent/phrases.db   # or redis://host:6379/0
    python examples/livekit_phrase_cache.py dev

``prewarm`` (LiveKit's ``setup_fnc``, once per job process, before any job) renders the phrases the shared
cache lacks; each job builds its TTS on the same cache, so ``session.say(GREETING)`` is a hit.
"""

from __future__ import annotations

import asyncio
import logging
import os

from livekit.agents import Agent, AgentServer, AgentSession, JobContext, JobProcess, cli

from livekit.plugins import nineninesix
from ttsbridge.cache import PhraseCache

logger = logging.getLogger("phrase-cache-agent")

GREETING = "Hello! Thanks for calling Acme. How can I help?"
PHRASES = [GREETING, "One moment while I look that up.", "Thank you for calling. Goodbye!"]


def open_cache() -> PhraseCache:
    where = os.environ.get("PHRASE_CACHE", "phrases.db")
    if where.startswith(("redis://", "rediss://", "unix://")):
        return PhraseCache.redis(where, ttl=7 * 86400)
    return PhraseCache.sqlite(where, max_bytes=256 << 20)


def build_tts(cache: PhraseCache) -> nineninesix.TTS:
    return nineninesix.TTS(
        base_url=os.environ.get("NINENINESIX_BASE_URL", "https://api.nineninesix.ai"),
        voice=os.environ.get("NINENINESIX_VOICE") or None,
        sample_rate=24000,
        phrase_cache=cache,
    )


def prewarm(proc: JobProcess) -> None:
    """Render what the shared cache lacks (a process that finds every phrase cached is done at once)."""

    async def warm() -> None:
        cache = open_cache()
        tts = build_tts(cache)
        try:
            report = await cache.warm(tts, PHRASES)
            logger.info("phrase cache warmed: %s", report)
            proc.userdata["phrase_cache_warm"] = report
        finally:
            await tts.aclose()
            await cache.aclose()

    asyncio.run(warm())  # setup_fnc runs before the process' event loop; each job makes its own cache


server = AgentServer(setup_fnc=prewarm)


@server.rtc_session()
async def entrypoint(ctx: JobContext) -> None:
    cache = open_cache()
    session: AgentSession = AgentSession(
        stt="deepgram/nova-3",
        llm="openai/gpt-4.1-mini",
        tts=build_tts(cache),
        use_tts_aligned_transcript=True,
    )
    ctx.add_shutdown_callback(cache.aclose)
    await session.start(
        agent=Agent(instructions="You are a friendly voice assistant. Keep answers short."),
        room=ctx.room,
    )
    session.say(GREETING)  # from the cache: no request, first audio at once


if __name__ == "__main__":
    cli.run_app(server)
