"""ttsbridge: streaming TTS (Nineninesix, Kitta) for Pipecat and LiveKit Agents."""

from ttsbridge.errors import (
    ErrorCategory,
    TTSAPIError,
    TTSBridgeError,
    TTSConnectionError,
    TTSInvalidOptionError,
    TTSSilentConnectionError,
    TTSTimeoutError,
    Verdict,
    verdict_of,
)

__version__ = "0.1.0"

__all__ = [
    "ErrorCategory",
    "TTSAPIError",
    "TTSBridgeError",
    "TTSConnectionError",
    "TTSInvalidOptionError",
    "TTSSilentConnectionError",
    "TTSTimeoutError",
    "Verdict",
    "__version__",
    "verdict_of",
]
