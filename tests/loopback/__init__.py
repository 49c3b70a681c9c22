"""A small real loopback WebSocket server for misbehaving-server tests, shared by every test folder (``tests/``
is on ``sys.path`` through its conftest; ``bench/chaos.py`` puts it there itself). It speaks just enough of
either protocol: Nineninesix (JSON text frames, ``/tts/websocket``) or Kitta Realtime v2 (MessagePack binary
frames, subprotocol ``realtime.tts.msgpack.v2``). Clients connect to ``srv.base_url`` as to the real service.

Built-in replies, optionally mutated (the reliability suites). Audio is *marked*: every int16 sample of a turn's
audio equals :func:`marker` of the number found in the turn's text (``"t17 ..."`` -> ``marker(17)``), and audio
that belongs to no turn of the client (foreign contexts, frames after ``done``) carries :data:`FOREIGN`. A
client that plays anything but its own marker played stale audio. Clients must ask for the native rate (22050
for Nineninesix, 24000 for Kitta) so that the bytes pass through unresampled.

``server.arm(Mutation(at, kind, arg))`` mutates the next turn's reply (one Nineninesix context, or one Kitta
session): frame number ``at`` of that reply (clamped to the last one) is replaced, preceded or followed by the
mutation, then the honest rest follows unless the mutation cut the connection. ``server.handshake`` is a FIFO of
handshake actions (``"drop"``, or an HTTP status) consumed one per connection attempt.

Scripted replies: ``LoopbackServer(protocol, script=fn)`` hands every client message to ``await fn(conn, msg)``,
which answers with whatever it likes (:func:`send`, raw ``conn.send``, :func:`ignore_close`); the frame builders
(:func:`nns_chunk`, :func:`kitta_ready`...) give the well-formed frames to start from. Either way
``srv.messages`` holds what the clients sent, ``srv.open_connections`` the connections not closed yet (a long
``close_timeout`` keeps a half-closed one counted) and ``srv.closed`` is set whenever one has ended.

:class:`FaultProxy` (``proxy.py``) goes between a client and the server for the faults of a quiet network:
blackholes, stalls, sliced writes, idle closes, cut handshakes.
"""

from __future__ import annotations

from .common import (
    CHUNKS_PER_TURN,
    FOREIGN,
    KITTA_KINDS,
    KITTA_RATE,
    KITTA_SUBPROTOCOL,
    NNS_KINDS,
    NNS_RATE,
    SAMPLES_PER_CHUNK,
    Mutation,
    marker,
    pcm,
    turn_number,
)
from .kitta import kitta_encode, kitta_ready
from .nineninesix import nns_chunk, nns_done, nns_error, nns_provider, nns_turn
from .proxy import Fault, FaultProxy
from .server import (
    SERVER_LOG,
    LoopbackServer,
    Script,
    client_tasks,
    collect,
    ignore_close,
    no_client_tasks_left,
    send,
)
from .silent import SilentServer

__all__ = [
    "CHUNKS_PER_TURN",
    "FOREIGN",
    "KITTA_KINDS",
    "KITTA_RATE",
    "KITTA_SUBPROTOCOL",
    "NNS_KINDS",
    "NNS_RATE",
    "SAMPLES_PER_CHUNK",
    "SERVER_LOG",
    "Fault",
    "FaultProxy",
    "LoopbackServer",
    "Mutation",
    "Script",
    "SilentServer",
    "client_tasks",
    "collect",
    "ignore_close",
    "kitta_encode",
    "kitta_ready",
    "marker",
    "nns_chunk",
    "nns_done",
    "nns_error",
    "nns_provider",
    "nns_turn",
    "no_client_tasks_left",
    "pcm",
    "send",
    "turn_number",
]
