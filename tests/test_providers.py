"""The provider registry (:mod:`ttsbridge.providers`): every registered provider is built, typed and billed
through its spec alone, against the emulator, which keeps its own wiring by the same names."""

from __future__ import annotations

import asyncio

import pytest

from ttsbridge import providers
from ttsbridge.cli import main
from ttsbridge.emulator import TONE_VOICE_ID, Emulator
from ttsbridge.errors import TTSInvalidOptionError
from ttsbridge.policy.usage import TurnEnd
from ttsbridge.turns import Turn, TurnProvider

TEXT = "Hello there, how are you? "


@pytest.mark.parametrize("name", providers.NAMES)
async def test_a_registered_provider_speaks_and_bills_one_turn_through_its_spec(
    emulator: Emulator, name: str
) -> None:
    spec = providers.get(name)
    assert spec.name == name == spec.billing.provider and spec.key_env.endswith("_API_KEY")
    provider = spec.turn_provider(emulator.api_key_for(name), base_url=emulator.base_url, voice=TONE_VOICE_ID)
    try:
        assert isinstance(provider, TurnProvider) and provider.provider == name
        assert isinstance(provider.options, spec.options) and provider.options.voice == TONE_VOICE_ID
        turn = await provider.open_turn(sample_rate=16000)
        await turn.send(TEXT)
        await turn.end()
        pcm = await asyncio.wait_for(_read(turn), 10.0)
        assert pcm and turn.outcome == "done"
        usage = turn.usage
        assert usage.provider == name and usage.ended is TurnEnd.DONE
        assert usage.characters_billed == len(TEXT.strip())  # both rules bill a finished turn's text
    finally:
        await provider.aclose()


async def _read(turn: Turn) -> bytes:
    return b"".join([pcm async for pcm in turn])


@pytest.mark.parametrize("name", providers.NAMES)
async def test_update_options_replaces_the_typed_options_with_a_validated_copy(
    emulator: Emulator, name: str
) -> None:
    spec = providers.get(name)
    provider = spec.turn_provider(emulator.api_key_for(name), base_url=emulator.base_url, voice=TONE_VOICE_ID)
    try:
        before = provider.options
        provider.update_options(voice="another-voice")
        assert provider.options.voice == "another-voice" and provider.options.model == before.model
        assert before.voice == TONE_VOICE_ID  # a copy: the old options are frozen, unchanged
        with pytest.raises(TTSInvalidOptionError, match="model"):
            provider.update_options(model="no-such-model")
        assert provider.options.voice == "another-voice"  # refused: nothing changed
    finally:
        await provider.aclose()


def test_an_unknown_provider_is_refused_naming_the_registered_ones(emulator: Emulator) -> None:
    with pytest.raises(ValueError, match=r"kitta.*nineninesix.*'cartesia'"):
        providers.get("cartesia")
    with pytest.raises(ValueError, match=r"kitta.*nineninesix.*'cartesia'"):
        emulator.api_key_for("cartesia")
    assert providers.NAMES[0] == "nineninesix"  # the command line's default


def test_voices_of_a_provider_without_a_voice_listing_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert providers.get("kitta").list_voices is None
    with pytest.raises(SystemExit) as info:
        main(["voices", "--provider", "kitta"])
    assert info.value.code == 2
    assert "invalid choice: 'kitta' (choose from 'nineninesix')" in capsys.readouterr().err
