"""Configuration of the local emulator. Every knob is read live: change ``emu.config.<knob>`` at any time.

:class:`EmulatorConfig` is the Nineninesix API's typed knobs (:class:`NineninesixConfig`, inherited, so
``EmulatorConfig(realtime_factor=1.0)`` and ``emu.config.api_keys`` keep working; ``emu.config.nineninesix``
names the same object) plus the shared socket (``host``, ``port``) and the Kitta endpoint's
:class:`~ttsbridge.emulator.kitta.KittaConfig` as ``emu.config.kitta``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ttsbridge.emulator.keys import describe_keys
from ttsbridge.emulator.kitta.config import DEFAULT_KITTA_KEY, KittaConfig
from ttsbridge.emulator.nineninesix.config import (
    DEFAULT_API_KEY,
    MODEL_ID,
    NATIVE_SAMPLE_RATE,
    NineninesixConfig,
)

__all__ = [
    "DEFAULT_API_KEY",
    "MODEL_ID",
    "NATIVE_SAMPLE_RATE",
    "EmulatorConfig",
]


@dataclass
class EmulatorConfig(NineninesixConfig):
    """Knobs of the emulator (both APIs): the Nineninesix ones (see :class:`NineninesixConfig`), and

    Attributes:
        host: interface to bind (loopback by default).
        port: TCP port; 0 picks a free one (see ``Emulator.base_url``).
        kitta: knobs of the Kitta endpoint.
    """

    host: str = "127.0.0.1"
    port: int = 0
    kitta: KittaConfig = field(default_factory=KittaConfig)

    @property
    def nineninesix(self) -> NineninesixConfig:
        """The Nineninesix knobs (this object: they are inherited, for the flat ``emu.config.<knob>`` API)."""
        return self

    def keys_line(self) -> str:
        """One line saying which keys each API accepts (the ``ttsbridge emulator`` start-up line)."""
        nns = describe_keys(self.api_keys, DEFAULT_API_KEY)
        kitta = describe_keys(self.kitta.api_keys, DEFAULT_KITTA_KEY)
        return f"keys: Nineninesix {nns}; Kitta {kitta}"
