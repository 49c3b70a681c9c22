"""The plugins' ``Literal`` option types spell the provider packages' values (one place per provider)."""

from __future__ import annotations

from typing import get_args

from livekit.plugins import kitta, nineninesix
from livekit.plugins.kitta import models as kitta_models
from livekit.plugins.nineninesix import models as nns_models
from ttsbridge.kitta import models as kitta_provider
from ttsbridge.nineninesix import models as nns_provider


def test_kitta_literals_match_the_provider_values() -> None:
    assert get_args(kitta.TTSModels) == tuple(kitta_provider.MODEL_CAPABILITIES)
    assert get_args(kitta.TTSLatency) == kitta_provider.LATENCIES
    assert kitta_models.DEFAULT_MODEL is kitta_provider.DEFAULT_MODEL
    assert kitta_models.DEFAULT_BASE_URL is kitta_provider.DEFAULT_BASE_URL


def test_nineninesix_literals_match_the_provider_values() -> None:
    assert get_args(nineninesix.TTSModels) == nns_provider.MODELS
    assert get_args(nineninesix.TTSEncoding) == nns_provider.ENCODINGS
    assert get_args(nineninesix.TTSWireSampleRate) == nns_provider.SAMPLE_RATES
    assert nns_models.DEFAULT_MODEL == nns_provider.MODELS[0]
    assert nns_models.DEFAULT_BASE_URL is nns_provider.DEFAULT_BASE_URL
