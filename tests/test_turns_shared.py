"""The turn interface every provider passes, the same way (see tests/chirp/envs.py)."""

from __future__ import annotations

from chirp.envs import RATE, Env, env

__all__ = ["env"]

S1 = "Hello there, it is good to hear from you."


async def test_a_turn_speaks_and_is_billed_by_its_rule(env: Env) -> None:
    provider = env.turn_provider()
    try:
        turn = await provider.open_turn(sample_rate=RATE)
        await turn.send(S1)
        await turn.end()
        pcm = b"".join([c async for c in turn])
        assert pcm and turn.outcome == "done" and turn.characters_sent == len(S1)
        assert turn.usage.characters_billed == len(S1)
        assert turn.wire_format.endswith(tuple("0123456789"))  # "<encoding>@<rate>"
    finally:
        await provider.aclose()
