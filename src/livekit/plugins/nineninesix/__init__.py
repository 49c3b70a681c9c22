"""Nineninesix TTS plugin for LiveKit Agents.

``from livekit.plugins import nineninesix`` then ``AgentSession(tts=nineninesix.TTS(voice="..."))``.
Sockets are pooled and shared by the streams' contexts, and a barge-in cancels the context on the server
(with ``cancel_ack``) instead of dropping the socket. See ``docs/livekit.md`` in the ttsbridge repository.
"""

from __future__ import annotations

from livekit.agents import Plugin

from .log import logger
from .models import TTSEncoding, TTSModels, TTSWireSampleRate
from .tts import TTS, ChunkedStream, SynthesizeStream
from .version import __version__

__all__ = [
    "TTS",
    "ChunkedStream",
    "SynthesizeStream",
    "TTSEncoding",
    "TTSModels",
    "TTSWireSampleRate",
    "__version__",
]


class NineninesixPlugin(Plugin):
    def __init__(self) -> None:
        super().__init__(__name__, __version__, __package__ or __name__, logger)


Plugin.register_plugin(NineninesixPlugin())

# Cleanup docs of unexported modules
_module = dir()
NOT_IN_ALL = [m for m in _module if m not in __all__]

__pdoc__ = {}

for n in NOT_IN_ALL:
    __pdoc__[n] = False
