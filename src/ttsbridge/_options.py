"""Validated options: a pydantic base whose validation errors become :class:`TTSInvalidOptionError`, and
:class:`ProviderOptions`, what every provider's options model answers by field."""

from __future__ import annotations

from typing import Any, ClassVar, Protocol

from pydantic import BaseModel, ConfigDict, ValidationError

from ttsbridge.errors import TTSInvalidOptionError


class ProviderOptions(Protocol):
    """What the framework adapters read of any provider's options model, by field (the model is frozen and
    validated; a change is a validated copy, made by ``TurnProvider.update_options``)."""

    @property
    def voice(self) -> str | None:
        """The voice turns speak with (None: the server's default voice)."""
        ...

    @property
    def model(self) -> str:
        """The model id."""
        ...


def invalid_option_from(
    exc: ValidationError, allowed_by_field: dict[str, Any] | None = None
) -> TTSInvalidOptionError:
    """The first error of a ValidationError, as a TTSInvalidOptionError naming field, value, allowed."""
    err = exc.errors()[0]
    field = ".".join(str(p) for p in err.get("loc", ())) or "options"
    value = err.get("input")
    ctx = err.get("ctx") or {}
    allowed: Any = (allowed_by_field or {}).get(field) or ctx.get("expected") or err.get("msg", "")
    if err.get("type") == "extra_forbidden":
        allowed = "a known option name"
    return TTSInvalidOptionError(field, value, allowed)


class StrictOptions(BaseModel):
    """Options model: unknown fields and bad values raise TTSInvalidOptionError at construction."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)

    #: field name -> human-readable allowed values, for error texts
    _allowed: ClassVar[dict[str, Any]] = {}

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise invalid_option_from(exc, type(self)._allowed) from None

    def updated(self, **changes: Any) -> StrictOptions:
        """A validated copy with ``changes`` applied. ``None`` is a value (e.g. ``voice=None`` = the server's
        default voice): leave a field out to keep it."""
        data = self.model_dump()
        data.update(changes)
        return type(self)(**data)
