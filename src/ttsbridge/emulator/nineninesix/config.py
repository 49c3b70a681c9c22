"""The Nineninesix API's constants and knobs (:class:`NineninesixConfig`). Read live: change them at any time."""

from __future__ import annotations

from dataclasses import dataclass, field

from ttsbridge.emulator.keys import key_accepted

__all__ = ["DEFAULT_API_KEY", "MODEL_ID", "NATIVE_SAMPLE_RATE", "NineninesixConfig"]

#: The only model the Nineninesix API knows.
MODEL_ID = "gepard-1.0"
#: The model's native rate; 8000 and 16000 are resampled by the server.
NATIVE_SAMPLE_RATE = 22050
#: The key ``Emulator.api_key`` hands out when ``api_keys`` is None (any non-empty key works then; this one
#: merely looks like the ``sk_996_...`` keys of the page).
DEFAULT_API_KEY = "sk_996_emulator_test_key"


@dataclass
class NineninesixConfig:
    """Knobs of the Nineninesix API (WebSocket, HTTP TTS and voices).

    Attributes:
        api_keys: the valid keys; None (the default) accepts any non-empty key, so whatever key a user copies
            into a page's example works. Set it to test bad keys.
        first_chunk_latency_s: delay before the first audio chunk of every context (WebSocket turn) and of
            every HTTP request.
        realtime_factor: 0 sends audio as fast as it is generated; > 0 paces each context's audio at that
            multiple of real time (1.0 = real time, 2.0 = twice as fast).
        chunk_ms: audio duration carried by one ``chunk`` frame / SSE event / body write.
        max_concurrent_contexts: limit on contexts rendering or open at once across the whole emulator
            (WebSocket contexts plus in-flight HTTP requests); None = unlimited. Over it: ``concurrent_limit``
            (429) on the WebSocket, 429 ``rate_limited`` with ``Retry-After`` over HTTP.
        credits: characters left to bill; None = unlimited. Decremented as transcripts are charged and
            credited back on refunds. Exhausted: ``insufficient_credits`` (402, closes the socket) / HTTP 402.
        idle_timeout_s: the server closes a WebSocket (close code 1000, reason ``idle timeout``) after this
            many seconds without a client message while no context is rendering; None = never.
        inband_faults: honour ``[[error:code]]``, ``[[drop:N]]``, ``[[stall]]``, ``[[close]]`` markers in
            transcripts (the marker text is not spoken or billed).
        default_voice: voice used when a request names none; None = speech (eSpeak NG) if available, else
            the tone voice.
        retry_after_s: the ``Retry-After`` value sent with HTTP 429 answers.
        log_messages: keep every client message in ``stats.messages`` (turn off for long-running servers).
    """

    api_keys: set[str] | None = field(default=None, repr=False)
    first_chunk_latency_s: float = 0.0
    realtime_factor: float = 0.0
    chunk_ms: float = 40.0
    max_concurrent_contexts: int | None = None
    credits: int | None = None
    idle_timeout_s: float | None = None
    inband_faults: bool = True
    default_voice: str | None = None
    retry_after_s: float = 1.0
    log_messages: bool = True

    def is_valid_key(self, key: str | None) -> bool:
        """Whether ``key`` is accepted by the Nineninesix API."""
        return key_accepted(self.api_keys, key)

    def a_valid_key(self) -> str:
        """A key this emulator accepts (the first of ``api_keys`` in sorted order, or the default key)."""
        if self.api_keys is None:
            return DEFAULT_API_KEY
        if not self.api_keys:
            raise ValueError("api_keys is empty: no key is valid")
        return sorted(self.api_keys)[0]
