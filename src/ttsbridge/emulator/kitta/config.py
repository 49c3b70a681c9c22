"""The Kitta endpoint's constants and knobs (:class:`KittaConfig`)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Final

from ttsbridge.emulator.encoders import missing_codec
from ttsbridge.emulator.keys import key_accepted

__all__ = ["DEFAULT_KITTA_KEY", "KITTA_MODELS", "KITTA_PATH", "KITTA_SUBPROTOCOL", "KittaConfig"]

KITTA_PATH: Final = "/v2/tts/live"
KITTA_SUBPROTOCOL: Final = "realtime.tts.msgpack.v2"
#: The key ``KittaConfig.a_valid_key()`` hands out when ``api_keys`` is None (then any non-empty key works:
#: the page defines no key format).
DEFAULT_KITTA_KEY: Final = "kitta_emulator_test_key"

#: Capability matrix (optional ``start.request`` fields per model), from the page's "Site capabilities".
KITTA_MODELS: Final[dict[str, frozenset[str]]] = {
    "fishaudio-s21pro-flash": frozenset(
        {"speed", "volume", "language", "emotion", "chunk_length", "latency"}
    ),
    "minimax-speech": frozenset({"speed", "volume", "language", "emotion"}),
    "qwen-tts": frozenset({"language", "emotion", "instructions", "optimize_instructions"}),
}
KNOWN_FORMATS: Final = ("pcm", "wav", "mp3", "opus")
OPTIONAL_FIELDS: Final = (
    "speed",
    "volume",
    "language",
    "emotion",
    "chunk_length",
    "latency",
    "instructions",
    "optimize_instructions",
)
MARKER = re.compile(r"\[\[kitta:([^\]]*)\]\]")

# Close codes.
CLOSE_NORMAL: Final = 1000
CLOSE_POLICY: Final = 1008
CLOSE_INTERNAL: Final = 1011


@dataclass
class KittaConfig:
    """Knobs of the Kitta endpoint. Read live: change ``emu.config.kitta.<knob>`` at any time.

    Attributes:
        auth_timeout_s: time allowed for the in-band ``auth`` frame when the handshake had no header.
        idle_timeout_s: error ``idle_timeout`` + close after this long without a client message while nothing
            is generating; None = never.
        api_keys: valid keys; None (the default) accepts any non-empty key (the page defines no key format).
        forbidden_keys: keys that authenticate but have no realtime access (HTTP 403 / ``forbidden``).
        sample_rate: native rate of the PCM output (24 kHz like the real models).
        chunk_ms: audio carried by one ``audio`` frame.
        first_chunk_latency_s: delay before the first audio frame of every segment.
        realtime_factor: 0 = no pacing; > 0 paces audio at that multiple of real time.
        handshake_delay_s: delay before answering the HTTP upgrade (a slow TLS/LB handshake).
        handshake_status: answer every upgrade with this HTTP status instead (e.g. 503); None = normal.
        retry_after_s: ``Retry-After`` sent with 429/503 handshake answers.
        max_concurrent_sessions: upgrades beyond this many open sessions get HTTP 429; None = unlimited.
        max_text_chars / max_segment_chars / max_session_units: the protocol limits.
        inband_faults: honour ``[[kitta:...]]`` markers in the text.
        session_faults: FIFO of fault specs; each new session pops one (see module docs).
        models: capability matrix (model -> optional fields it accepts).
        formats: output formats served: ``pcm``, and ``wav``/``mp3`` through PyAV (see
            ``ttsbridge.emulator.encoders``); ``opus`` is known but never served.
        max_message_bytes: largest client frame accepted.
        close_after_error: close the socket after an ``error`` event, as the page says; False emulates a
            server that forgets to (the client must still report the error at once).
    """

    auth_timeout_s: float = 5.0
    idle_timeout_s: float | None = 30.0
    api_keys: set[str] | None = field(default=None, repr=False)
    forbidden_keys: set[str] = field(default_factory=set, repr=False)
    sample_rate: int = 24_000
    chunk_ms: float = 40.0
    first_chunk_latency_s: float = 0.0
    realtime_factor: float = 0.0
    handshake_delay_s: float = 0.0
    handshake_status: int | None = None
    retry_after_s: float = 1.0
    max_concurrent_sessions: int | None = None
    max_text_chars: int = 2_000
    max_segment_chars: int = 10_000
    max_session_units: int = 100_000
    inband_faults: bool = True
    close_after_error: bool = True
    session_faults: list[str] = field(default_factory=list)
    models: dict[str, frozenset[str]] = field(default_factory=lambda: dict(KITTA_MODELS))
    formats: tuple[str, ...] = ("pcm", "wav", "mp3")
    max_message_bytes: int = 1 << 20

    def is_valid_key(self, key: str | None) -> bool:
        return key_accepted(self.api_keys, key)

    def a_valid_key(self) -> str:
        if self.api_keys is None:
            return DEFAULT_KITTA_KEY
        return sorted(self.api_keys)[0]

    def formats_note(self) -> str:
        """The formats that work here, for a start-up line (names a missing PyAV)."""
        usable = [f for f in self.formats if missing_codec(f) is None]
        missing = [f for f in self.formats if f not in usable]
        note = f"formats {', '.join(usable) or 'none'}"
        return f"{note}; {missing_codec(missing[0])}" if missing else note
