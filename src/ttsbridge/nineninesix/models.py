"""Nineninesix wire models (pydantic v2) and validated options."""

from __future__ import annotations

from typing import Any, ClassVar, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ttsbridge._options import StrictOptions

Encoding = Literal["pcm_s16le", "pcm_mulaw", "pcm_alaw"]
Container = Literal["raw", "wav"]
Model = Literal["gepard-1.0"]
WireSampleRate = Literal[8000, 16000, 22050]

ENCODINGS: tuple[str, ...] = ("pcm_s16le", "pcm_mulaw", "pcm_alaw")
SAMPLE_RATES: tuple[int, ...] = (8000, 16000, 22050)
MODELS: tuple[str, ...] = ("gepard-1.0",)
DEFAULT_MODEL: Final[Model] = "gepard-1.0"
NATIVE_SAMPLE_RATE: Final = 22050
DEFAULT_BASE_URL = "https://api.nineninesix.ai"
#: The provider's name for people and metrics (LiveKit's ``TTS.provider``, the command line's messages).
DISPLAY_NAME: Final = "Nineninesix"


class OutputFormat(BaseModel):
    """``output_format``: fixed per WebSocket connection, so connections are keyed by it (hashable)."""

    model_config = ConfigDict(frozen=True)

    container: Container = "raw"
    encoding: Encoding = "pcm_s16le"
    sample_rate: WireSampleRate = NATIVE_SAMPLE_RATE


class VoiceSpecifier(BaseModel):
    model_config = ConfigDict(frozen=True)

    mode: Literal["id"] = "id"
    id: str


class GenerationRequest(BaseModel):
    """Client -> server: speak a transcript within a context."""

    model_config = ConfigDict(populate_by_name=True)

    transcript: str
    context_id: str | None = None
    continue_: bool = Field(default=False, alias="continue")
    model_id: str | None = None
    voice: VoiceSpecifier | None = None
    output_format: OutputFormat | None = None
    language: str | None = None

    def to_wire(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True, exclude_none=True)


class CancelRequest(BaseModel):
    """Client -> server: stop a context's generation and drop its queued sentences."""

    context_id: str
    cancel: Literal[True] = True

    def to_wire(self) -> dict[str, Any]:
        return self.model_dump()


class _ServerMessage(BaseModel):
    model_config = ConfigDict(extra="allow")


class ChunkMessage(_ServerMessage):
    type: Literal["chunk"] = "chunk"
    context_id: str | None = None
    done: bool = False
    status_code: int = 206
    data: str = ""


class DoneMessage(_ServerMessage):
    type: Literal["done"] = "done"
    context_id: str | None = None
    done: bool = True
    status_code: int = 200
    cancelled: bool = False


class ErrorMessage(_ServerMessage):
    type: Literal["error"] = "error"
    context_id: str | None = None
    done: bool = True
    error_code: str = "unknown_error"
    status_code: int | None = None
    title: str | None = None
    message: str | None = None
    doc_url: str | None = None
    request_id: str | None = None


ServerMessage = ChunkMessage | DoneMessage | ErrorMessage


class NineninesixOptions(StrictOptions):
    """What a turn asks of the server. Validated at construction (TTSInvalidOptionError on a bad value).

    ``sample_rate`` is the *wire* rate: None picks the caller's output rate when the API has it
    (8000/16000/22050) and 22050 otherwise, resampling locally.
    """

    _allowed: ClassVar[dict[str, Any]] = {
        "model": MODELS,
        "encoding": ENCODINGS,
        "sample_rate": (*SAMPLE_RATES, None),
        "voice": "a non-empty voice id, or None for the server's default voice",
    }

    model: Model = DEFAULT_MODEL
    voice: str | None = None
    language: str | None = None
    encoding: Encoding = "pcm_s16le"
    sample_rate: Literal[8000, 16000, 22050] | None = None

    @field_validator("voice")
    @classmethod
    def _voice_not_blank(cls, v: str | None) -> str | None:
        if v is not None and not v.strip():
            raise ValueError("blank voice id")
        return v

    def wire_rate(self, output_rate: int) -> int:
        if self.sample_rate is not None:
            return self.sample_rate
        return output_rate if output_rate in SAMPLE_RATES else NATIVE_SAMPLE_RATE

    def output_format(self, output_rate: int) -> OutputFormat:
        return OutputFormat(container="raw", encoding=self.encoding, sample_rate=self.wire_rate(output_rate))  # type: ignore[arg-type]
