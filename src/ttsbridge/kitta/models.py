"""Kitta Realtime TTS v2 wire models (pydantic v2) and the client options.

Client events are strict (``extra="forbid"``): the server rejects unknown fields with
``unsupported_parameter``, so we refuse to build such a frame in the first place. Server events tolerate extra
fields (``extra="ignore"``): a server may add fields at any time without breaking the client.

The page lost its field tables; the value ranges below are our choices (see ``docs/kitta.md``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Final, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError, field_validator

from ttsbridge.errors import TTSInvalidOptionError

__all__ = [
    "CLIENT_FORMATS",
    "DEFAULT_BASE_URL",
    "DEFAULT_MODEL",
    "DISPLAY_NAME",
    "FORMATS",
    "LATENCIES",
    "MODEL_CAPABILITIES",
    "OPTIONAL_REQUEST_FIELDS",
    "PATH",
    "SUBPROTOCOL",
    "AudioEvent",
    "AuthEvent",
    "AuthenticatedEvent",
    "ClientEvent",
    "ErrorEvent",
    "FinishEvent",
    "FlushEvent",
    "KittaLimits",
    "KittaOptions",
    "ReadyEvent",
    "ServerEvent",
    "StartEvent",
    "StartRequest",
    "StopEvent",
    "TextEvent",
    "UsageEvent",
]

SUBPROTOCOL: Final = "realtime.tts.msgpack.v2"
DEFAULT_BASE_URL: Final = "wss://realtime.fishaudio.org"
#: The provider's name for people and metrics (LiveKit's ``TTS.provider``, the command line's messages).
DISPLAY_NAME: Final = "Kitta"
PATH: Final = "/v2/tts/live"
DEFAULT_MODEL: Final = "fishaudio-s21pro-flash"

#: Output formats the protocol knows. Our client only ever asks for ``pcm`` (it builds frames from PCM).
FORMATS: Final[tuple[str, ...]] = ("pcm", "wav", "mp3", "opus")
CLIENT_FORMATS: Final[tuple[str, ...]] = ("pcm",)
LATENCIES: Final[tuple[str, ...]] = ("normal", "balanced")

#: ``start.request`` fields besides the required ``voice_id``, ``model`` and ``format``.
OPTIONAL_REQUEST_FIELDS: Final[tuple[str, ...]] = (
    "speed",
    "volume",
    "language",
    "emotion",
    "chunk_length",
    "latency",
    "instructions",
    "optimize_instructions",
)

#: Capability matrix from the page ("Site capabilities"): which optional ``start.request`` fields each model
#: accepts. A field outside its model's set is rejected before connecting (the server would answer
#: ``unsupported_parameter``). The server stays authoritative; add entries here for models we don't know.
MODEL_CAPABILITIES: dict[str, frozenset[str]] = {
    # FishAudio: speed, volume, language, emotion, chunk_length, latency.
    "fishaudio-s21pro-flash": frozenset(
        {"speed", "volume", "language", "emotion", "chunk_length", "latency"}
    ),
    # MiniMax: speed, volume, language, emotion.
    "minimax-speech": frozenset({"speed", "volume", "language", "emotion"}),
    # Qwen: 24 kHz mono 16-bit PCM; language, emotion, instructions, optimize_instructions.
    "qwen-tts": frozenset({"language", "emotion", "instructions", "optimize_instructions"}),
}

_CLIENT = ConfigDict(extra="forbid", strict=True, frozen=True)
# strict: a field of the wrong type (``audio`` as a text string, ``sample_rate`` as "24000" or 24000.0,
# ``retryable`` as "true") is a protocol error, never coerced into something that plays.
_SERVER = ConfigDict(extra="ignore", strict=True)

_LANGUAGE = r"^[a-z]{2,3}(-[A-Za-z0-9]{2,8})*$"
_EMOTION = r"^[a-z][a-z_]{0,31}$"


# --------------------------------------------------------------------------------------------- client events


class StartRequest(BaseModel):
    """``start.request``. Ranges are our choices where the page is silent (see docs/kitta.md)."""

    model_config = _CLIENT

    voice_id: str = Field(min_length=1, max_length=128)
    model: str = Field(min_length=1, max_length=64)
    format: Literal["pcm", "wav", "mp3", "opus"]
    speed: float | None = Field(default=None, ge=0.5, le=2.0)
    volume: float | None = Field(default=None, ge=-20.0, le=20.0)
    language: str | None = Field(default=None, pattern=_LANGUAGE)
    emotion: str | None = Field(default=None, pattern=_EMOTION)
    chunk_length: int | None = Field(default=None, ge=100, le=300)
    latency: Literal["normal", "balanced"] | None = None
    instructions: str | None = Field(default=None, min_length=1, max_length=1000)
    optimize_instructions: bool | None = None

    @field_validator("speed", "volume", mode="before")
    @classmethod
    def _int_is_float(cls, v: Any) -> Any:
        # strict mode refuses ints for float fields; 1 and 1.0 mean the same speed.
        if isinstance(v, int) and not isinstance(v, bool):
            return float(v)
        return v


class AuthEvent(BaseModel):
    model_config = _CLIENT
    event: Literal["auth"] = "auth"
    token: str = Field(min_length=1, repr=False)


class StartEvent(BaseModel):
    model_config = _CLIENT
    event: Literal["start"] = "start"
    request_id: str = Field(min_length=1, max_length=128)
    request: StartRequest


class TextEvent(BaseModel):
    model_config = _CLIENT
    event: Literal["text"] = "text"
    text: str = Field(min_length=1)


class FlushEvent(BaseModel):
    model_config = _CLIENT
    event: Literal["flush"] = "flush"


class StopEvent(BaseModel):
    model_config = _CLIENT
    event: Literal["stop"] = "stop"


ClientEvent = AuthEvent | StartEvent | TextEvent | FlushEvent | StopEvent


# --------------------------------------------------------------------------------------------- server events


class AuthenticatedEvent(BaseModel):
    model_config = _SERVER
    event: Literal["authenticated"] = "authenticated"


class ReadyEvent(BaseModel):
    model_config = _SERVER
    event: Literal["ready"] = "ready"
    request_id: str
    # required: "When format is pcm, both ready and audio include the required sample_rate, channels, and
    # bit_depth fields" (the page), and pcm is the only format this client asks for
    sample_rate: int = Field(gt=0)
    channels: int = Field(gt=0)
    bit_depth: int = Field(gt=0)


class AudioEvent(BaseModel):
    model_config = _SERVER
    event: Literal["audio"] = "audio"
    request_id: str | None = None
    seq: int | None = Field(default=None, ge=0, validation_alias=AliasChoices("seq", "sequence"))
    audio: bytes
    sample_rate: int = Field(gt=0)  # required with pcm, as in ReadyEvent
    channels: int = Field(gt=0)
    bit_depth: int = Field(gt=0)

    def __repr__(self) -> str:  # never dump kilobytes of audio into a log line
        return (
            f"AudioEvent(request_id={self.request_id!r}, seq={self.seq}, bytes={len(self.audio)}, "
            f"sample_rate={self.sample_rate}, channels={self.channels}, bit_depth={self.bit_depth})"
        )


class UsageEvent(BaseModel):
    model_config = _SERVER
    event: Literal["usage"] = "usage"
    request_id: str | None = None
    units: int = Field(ge=0)
    total_units: int | None = Field(default=None, ge=0)


class FinishEvent(BaseModel):
    model_config = _SERVER
    event: Literal["finish"] = "finish"
    request_id: str | None = None
    units: int = Field(default=0, ge=0)


class ErrorEvent(BaseModel):
    model_config = _SERVER
    event: Literal["error"] = "error"
    request_id: str | None = None
    code: str
    message: str = ""
    retryable: bool = False


ServerEvent = Annotated[
    AuthenticatedEvent | ReadyEvent | AudioEvent | UsageEvent | FinishEvent | ErrorEvent,
    Field(discriminator="event"),
]


# ---------------------------------------------------------------------------------------------------- limits


@dataclass(frozen=True)
class KittaLimits:
    """Client-side limits (the protocol defaults). Deployments may enforce lower ones; the server's errors
    stay authoritative."""

    max_text_chars: int = 2_000
    max_segment_chars: int = 10_000
    max_session_units: int = 100_000

    def __post_init__(self) -> None:
        for name in ("max_text_chars", "max_segment_chars", "max_session_units"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise TTSInvalidOptionError(name, value, "an int >= 1")
        if self.max_segment_chars < self.max_text_chars:
            raise TTSInvalidOptionError(
                "max_segment_chars", self.max_segment_chars, f">= max_text_chars ({self.max_text_chars})"
            )


# --------------------------------------------------------------------------------------------------- options

_OPTION_ALLOWED: Final[dict[str, str]] = {
    "voice_id": "a non-empty string of at most 128 characters",
    "model": "one of " + ", ".join(sorted(MODEL_CAPABILITIES)),
    "format": "'pcm'",
    "sample_rate": "None or an int between 8000 and 192000 (output rate; resampled locally)",
    "speed": "a number between 0.5 and 2.0",
    "volume": "a number between -20 and 20 (dB)",
    "language": "a language tag such as 'en' or 'pt-BR'",
    "emotion": "a lowercase word such as 'happy' (letters and '_', at most 32)",
    "chunk_length": "an int between 100 and 300",
    "latency": "'normal' or 'balanced'",
    "instructions": "a non-empty string of at most 1000 characters",
    "optimize_instructions": "a bool",
}


class KittaOptions(BaseModel):
    """What to synthesise and how. Validated at construction, before any connection.

    ``sample_rate`` is the rate the *client* delivers (``None`` = the server's native rate); the protocol has
    no rate field, so the audio is resampled locally. ``format`` is always ``"pcm"``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)

    voice_id: str
    model: str = DEFAULT_MODEL
    format: str = "pcm"
    sample_rate: int | None = None
    speed: float | None = None
    volume: float | None = None
    language: str | None = None
    emotion: str | None = None
    chunk_length: int | None = None
    latency: str | None = None
    instructions: str | None = None
    optimize_instructions: bool | None = None

    def __init__(self, **data: Any) -> None:
        unknown = sorted(set(data) - set(type(self).model_fields))
        if unknown:
            raise TTSInvalidOptionError(unknown[0], data[unknown[0]], sorted(type(self).model_fields))
        try:
            super().__init__(**data)
        except ValidationError as exc:
            err = exc.errors()[0]
            field = str(err["loc"][0]) if err["loc"] else "options"
            raise TTSInvalidOptionError(
                field, data.get(field), _OPTION_ALLOWED.get(field, "see docs/kitta.md"), hint=err["msg"]
            ) from None
        self._check()

    def _check(self) -> None:
        if self.format not in CLIENT_FORMATS:
            raise TTSInvalidOptionError(
                "format", self.format, list(CLIENT_FORMATS), hint="the client builds frames from PCM"
            )
        if self.model not in MODEL_CAPABILITIES:
            raise TTSInvalidOptionError("model", self.model, sorted(MODEL_CAPABILITIES))
        sr = self.sample_rate
        if sr is not None and not 8000 <= sr <= 192_000:
            raise TTSInvalidOptionError("sample_rate", sr, _OPTION_ALLOWED["sample_rate"])
        supported = MODEL_CAPABILITIES[self.model]
        for name in OPTIONAL_REQUEST_FIELDS:
            value = getattr(self, name)
            if value is not None and name not in supported:
                raise TTSInvalidOptionError(
                    name,
                    value,
                    f"fields supported by {self.model}: {sorted(supported)}",
                    hint=f"{self.model} does not support {name}",
                )
        try:
            self.start_request()
        except ValidationError as exc:
            err = exc.errors()[0]
            field = str(err["loc"][0]) if err["loc"] else "request"
            raise TTSInvalidOptionError(
                field,
                getattr(self, field, None),
                _OPTION_ALLOWED.get(field, "see docs/kitta.md"),
                hint=err["msg"],
            ) from None

    def start_request(self) -> StartRequest:
        """The ``start.request`` object for these options (``None`` fields are left out)."""
        fields: dict[str, Any] = {"voice_id": self.voice_id, "model": self.model, "format": self.format}
        for name in OPTIONAL_REQUEST_FIELDS:
            value = getattr(self, name)
            if value is not None:
                fields[name] = value
        return StartRequest.model_validate(fields)

    @property
    def voice(self) -> str:
        """The voice (``voice_id``), under the name every provider's options answer."""
        return self.voice_id

    def updated(self, **changes: Any) -> KittaOptions:
        """A validated copy with ``changes`` applied (as every provider's options make one)."""
        return self.with_overrides(**changes)

    def with_overrides(self, **overrides: Any) -> KittaOptions:
        """A copy with some fields changed, validated like a new instance."""
        if not overrides:
            return self
        data = self.model_dump()
        data.update(overrides)
        return KittaOptions(**data)
