"""Kitta Realtime TTS v2 plugin for LiveKit Agents.

``from livekit.plugins import kitta`` then ``AgentSession(tts=kitta.TTS(voice="..."))``. The same adapter as
``livekit.plugins.nineninesix`` (``ttsbridge.livekit``): one Kitta session per turn, taken from a warm
standby so the first sentence goes out without a handshake; a barge-in closes the session. See
``docs/livekit.md`` and ``docs/kitta.md`` in the ttsbridge repository.
"""

from __future__ import annotations

from livekit.agents import Plugin

from .log import logger
from .models import TTSLatency, TTSModels
from .tts import TTS, ChunkedStream, SynthesizeStream
from .version import __version__

__all__ = [
    "TTS",
    "ChunkedStream",
    "SynthesizeStream",
    "TTSLatency",
    "TTSModels",
    "__version__",
]


class KittaPlugin(Plugin):
    def __init__(self) -> None:
        super().__init__(__name__, __version__, __package__ or __name__, logger)


Plugin.register_plugin(KittaPlugin())

# Cleanup docs of unexported modules
_module = dir()
NOT_IN_ALL = [m for m in _module if m not in __all__]

__pdoc__ = {}

for n in NOT_IN_ALL:
    __pdoc__[n] = False
