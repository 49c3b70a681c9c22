"""A LiveKit voice agent that speaks through Nineninesix (``livekit.plugins.nineninesix``).

Needs a LiveKit server and real keys::

    export LIVEKIT_URL=wss://<your-project>.livekit.cloud LIVEKIT_API_KEY=... LIVEKIT_API_SECRET=...
    export NINENINESIX_API_KEY=sk_996_...      # NINENINESIX_VOICE=<voice id> (optional)
    python examples/livekit_agent.py dev         # or: console / start

STT and LLM go through LiveKit Inference (model strings), so no other plugin is needed. Swapping
``cartesia.TTS(...)`` for ``nineninesix.TTS(...)`` is the whole integration: sockets are pooled across turns,
a barge-in cancels the context on the server and the next turn reuses the socket, and the transcript follows
the audio with estimated word timing (``use_tts_aligned_transcript=True``).

To try it without keys, point it at the local emulator: ``python -m ttsbridge emulator`` in another shell, then
``NINENINESIX_BASE_URL=http://127.0.0.1:<port> NINENINESIX_API_KEY=sk_996_emulator_test_key``.
"""

from __future__ import annotations

import logging
import os

from livekit.agents import Agent, AgentServer, AgentSession, JobContext, cli

from livekit.plugins import nineninesix

logger = logging.getLogger("nineninesix-agent")

server = AgentServer()


def build_tts() -> nineninesix.TTS:
    return nineninesix.TTS(
        base_url=os.environ.get("NINENINESIX_BASE_URL", "https://api.nineninesix.ai"),
        voice=os.environ.get("NINENINESIX_VOICE") or None,
        sample_rate=24000,  # what LiveKit plays; the API's 22050 Hz is resampled locally
    )


@server.rtc_session()
async def entrypoint(ctx: JobContext) -> None:
    tts = build_tts()
    session: AgentSession = AgentSession(
        stt="deepgram/nova-3",
        llm="openai/gpt-4.1-mini",
        tts=tts,
        use_tts_aligned_transcript=True,
    )

    @session.on("metrics_collected")
    def _on_metrics(ev: object) -> None:
        logger.debug("metrics: %s", ev)

    await session.start(
        agent=Agent(instructions="You are a friendly voice assistant. Keep answers short."),
        room=ctx.room,
    )
    await session.generate_reply(instructions="Greet the user and offer your help.")


if __name__ == "__main__":
    cli.run_app(server)
