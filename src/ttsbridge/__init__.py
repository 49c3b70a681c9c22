"""ttsbridge: streaming TTS (Nineninesix, Kitta) for Pipecat and LiveKit Agents."""

from ttsbridge.errors import (
    TTSAPIError,
    TTSBridgeError,
    TTSConnectionError,
    TTSInvalidOptionError,
    TTSTimeoutError,
)

__version__ = "0.1.0"

__all__ = [
    "TTSAPIError",
    "TTSBridgeError",
    "TTSConnectionError",
    "TTSInvalidOptionError",
    "TTSTimeoutError",
    "__version__",
]
