"""The Nineninesix (Cartesia-compatible) API of the emulator (``ws``, ``http``, ``voices_api`` over ``wire``): ``/tts/websocket``, ``/tts/bytes``, ``/tts/sse``
and ``/voices``.

Where the spec pages are silent, the emulator's choices are (docs state them too):

* A socket-closing error frame is followed by a close frame: 1008 for 4xx codes, 1013 for
  ``not_initialized`` (503), 1011 for other 5xx. ``action="close"`` faults close with their ``close_code``
  (default 1001); the idle timeout closes with 1000 (reason ``idle timeout``); emulator shutdown with 1001.
* Invalid JSON, a non-object message, a binary frame or a generation request without a string ``transcript``
  gets ``invalid_request`` (400); the socket stays open. The frame carries the message's ``context_id`` when
  there is one, and an open context of that id ends with it (refunded).
* ``model_id`` is validated on the connection's first generation request (the spec: "validated at the
  gateway on the first request"); later ``model_id`` values are ignored, like later ``output_format`` values.
* A ``voice`` that is not an object with ``mode: "id"`` (e.g. a bare string, or ``mode: "embedding"``) means
  the default voice.
* A ``context_id`` that was cancelled, failed (``generation_failed`` ...) or rejected (``concurrent_limit``)
  stays dead on that connection: later requests naming it are ignored silently, so no stale audio can
  follow. After ``done`` an id is free again: a new request starts a new context.
* A request reaching a context after its ``continue: false`` but before its ``done`` is still rendered before
  the ``done``.
* ``continue: false`` with an empty transcript on an unknown id opens and at once completes a context (a
  ``done`` frame), so clients waiting for ``done`` never hang.
* The idle timeout counts time without a client message (pings count) while no context is rendering.
* Concurrency counts WebSocket contexts (from their first request to ``done``/error/cancel) plus in-flight
  HTTP TTS requests, across the whole emulator.
* Billing: each transcript's characters (markers stripped, trimmed) are charged when the request arrives,
  refunded if it or its context ends with an error frame or the socket is closed by an error; cancelled or
  abandoned (client disconnect) text stays billed.
* HTTP: an unknown voice is 400 ``voice_not_found``; ``generation_failed``/``not_initialized`` are 502
  ``upstream_unavailable``; an error fault with ``after_chunks > 0`` on ``/tts/bytes`` cuts the body (the
  status is already sent); on ``/tts/sse`` it sends an ``error`` event and ends the stream.
"""

from __future__ import annotations

from aiohttp import web

from ttsbridge.emulator.nineninesix.config import (
    DEFAULT_API_KEY,
    MODEL_ID,
    NATIVE_SAMPLE_RATE,
    NineninesixConfig,
)
from ttsbridge.emulator.nineninesix.http import handle_bytes, handle_sse
from ttsbridge.emulator.nineninesix.stats import NineninesixStats
from ttsbridge.emulator.nineninesix.voices_api import handle_voice_clone, handle_voice_get, handle_voices_list
from ttsbridge.emulator.nineninesix.wire import EMULATOR_KEY, OutputFormat, parse_output_format
from ttsbridge.emulator.nineninesix.ws import handle_websocket

__all__ = [
    "DEFAULT_API_KEY",
    "EMULATOR_KEY",
    "MODEL_ID",
    "NATIVE_SAMPLE_RATE",
    "NineninesixConfig",
    "NineninesixStats",
    "OutputFormat",
    "parse_output_format",
    "setup_nineninesix_routes",
]


def setup_nineninesix_routes(app: web.Application) -> None:
    """Add the Nineninesix routes to the emulator's app (``app[EMULATOR_KEY]`` is the Emulator)."""
    app.router.add_get("/tts/websocket", handle_websocket)
    app.router.add_post("/tts/bytes", handle_bytes)
    app.router.add_post("/tts/sse", handle_sse)
    app.router.add_get("/voices", handle_voices_list)
    app.router.add_get("/voices/", handle_voices_list)
    app.router.add_post("/voices/clone", handle_voice_clone)
    app.router.add_get("/voices/{voice_id}", handle_voice_get)
