"""Chirp: a third provider written only against the engine (:mod:`ttsbridge.engine`) and the registry
(:mod:`ttsbridge.providers`), as a test fixture. It proves the turn contract is one: the shared Pipecat and
LiveKit adapter suites (tests/test_adapters_shared.py) run it as they run Nineninesix and Kitta.

The API (``server.py``, its own loopback server): one WebSocket per client, any number of turns on it.
The client sends one JSON frame per command: ``{"turn": id, "text": str}``, ``{"turn": id, "end": true}``,
``{"turn": id, "cancel": true}``; the server answers each text with binary audio frames (``id`` + ``b"\\n"``
+ PCM16 LE at 16 kHz, 0.02 s of audio per character), then ``{"turn": id, "done": true}`` after the end, or
``{"turn": id, "error": message}`` for a text holding ``[[error]]``. docs/adding-a-provider.md walks through
these files.
"""

from chirp.provider import SPEC, ChirpOptions, ChirpTurnProvider, register

__all__ = ["SPEC", "ChirpOptions", "ChirpTurnProvider", "register"]
