"""Kitta Realtime TTS v2 endpoint of the emulator: ``GET /v2/tts/live`` (MessagePack over WebSocket).

Stands apart from the client (never imports ``ttsbridge.kitta``): its own validation, its own capability
matrix. What the public page leaves open (field ranges, error codes, close codes, units) is decided here and
written down in ``docs/kitta.md``; the short version:

* Handshake (HTTP answers before 101, JSON ``{error, message}``): ``token``/``api_key`` in the query -> 400
  ``api_key_in_url``; no ``realtime.tts.msgpack.v2`` subprotocol -> 400 ``subprotocol_required``; a bad
  ``Authorization: Bearer`` -> 401 ``unauthorized``; a key without realtime access -> 403 ``forbidden``;
  too many sessions -> 429 ``concurrency_limit`` (``Retry-After``); ``handshake_status`` knob -> that status.
* Without the header the first frame must be ``{event: "auth", token}`` within ``auth_timeout_s``.
* Session errors are an ``error {code, message, retryable, request_id?}`` event, then a close: 1008 for client
  mistakes, 1011 for retryable server failures, or the code the fault asks for.
* Formats ``pcm``, ``wav`` and ``mp3`` (the last two through PyAV: ``ttsbridge.emulator.encoders``); a key is
  any non-empty string unless ``KittaConfig.api_keys`` is set.
* Units are characters of a segment (leading/trailing whitespace and fault markers excluded); a segment is
  reserved at ``flush``, committed at its first audio frame, refunded if it fails (or the client leaves)
  before any audio.

Fault injection: :class:`KittaConfig` knobs, and in-band markers ``[[kitta:SPEC]]`` in the text (removed
before synthesis and billing). ``SPEC`` is ``error=CODE`` | ``close=CODE`` | ``error_after_audio`` |
``stall`` | ``delay=SECONDS`` followed by ``:``-separated flags ``retryable``, ``after_audio``, ``times=N``
(fire for the first N segments carrying that exact marker, so a client's retry of the same text can succeed).
``KittaConfig.session_faults`` is a FIFO of the same specs: each new session pops one and applies it to its
first segment (or, with flag ``at=start``, instead of ``ready``).
"""

from __future__ import annotations

from ttsbridge.emulator.kitta.config import (
    DEFAULT_KITTA_KEY,
    KITTA_MODELS,
    KITTA_PATH,
    KITTA_SUBPROTOCOL,
    KittaConfig,
)
from ttsbridge.emulator.kitta.faults import KittaFault, parse_kitta_fault
from ttsbridge.emulator.kitta.routes import setup_kitta_routes
from ttsbridge.emulator.kitta.stats import KittaStats

__all__ = [
    "DEFAULT_KITTA_KEY",
    "KITTA_MODELS",
    "KITTA_PATH",
    "KITTA_SUBPROTOCOL",
    "KittaConfig",
    "KittaFault",
    "KittaStats",
    "parse_kitta_fault",
    "setup_kitta_routes",
]
