"""Voices of the emulator: a deterministic tone voice, real offline speech (eSpeak NG) and in-memory clones.

* ``tone`` (:data:`TONE_VOICE_ID`): a sine whose frequency is :func:`tone_frequency` of the (trimmed)
  transcript and whose length is ~60 ms per character (at least 100 ms), with 5 ms fades so joined sentences
  don't click. Tests decode the audio and tell which transcript it came from (stale audio, wrong order).
* ``speech-en`` (:data:`SPEECH_VOICE_ID`): eSpeak NG through the ``espeakng-loader`` wheel and ctypes,
  synthesized at 22050 Hz in a single worker thread (the library is global state). Absent when the wheel or
  the library can't load: the voice list omits it and the default voice falls back to ``tone``.
* the pages' example voice (:data:`EXAMPLE_VOICE_ID`, ``a0e99841-438c-4a64-b679-ae501e7d6091``, the id in
  every Nineninesix example body): speaks like ``speech-en`` when eSpeak works, else like ``tone``, so the
  pages' examples run unchanged against the emulator.
* the Kitta page's example voice (:data:`KITTA_EXAMPLE_VOICE_ID`, ``00000000-0000-0000-0000-000000000000``,
  with the page's example model ``fishaudio-s21pro-flash``): speaks like the Nineninesix example voice. It is a
  Kitta voice: a Kitta ``start`` naming another model gets ``voice_not_found`` ("does not support this
  model"), and Nineninesix does not know it.
* clones (``POST /voices/clone``): tone voices with their own fixed frequency (the clip's dominant frequency
  when it is a PCM16 WAV holding a clear tone, else derived from the clip's bytes).
"""

from __future__ import annotations

import io
import uuid
import zlib
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from ttsbridge.audio.analysis import dominant_frequency
from ttsbridge.audio.resample import resample_oneshot
from ttsbridge.audio.wav import read_wav
from ttsbridge.emulator.nineninesix.config import NATIVE_SAMPLE_RATE
from ttsbridge.emulator.voice_audio import (
    _ESPEAK,
    _MS_PER_CHAR,
    speech_available,
    tone_duration,
    tone_frequency,
    tone_pcm,
)

__all__ = [
    "EXAMPLE_VOICE_ID",
    "KITTA_EXAMPLE_MODEL",
    "KITTA_EXAMPLE_VOICE_ID",
    "SPEECH_VOICE_ID",
    "TONE_VOICE_ID",
    "Voice",
    "VoiceNotFoundError",
    "VoiceRegistry",
    "speech_available",
    "synthesize",
    "tone_duration",
    "tone_frequency",
    "tone_pcm",
]


TONE_VOICE_ID = "tone"
SPEECH_VOICE_ID = "speech-en"
#: The voice id of the Nineninesix pages' examples (``/tts/sse`` body, WebSocket ``voice.id``).
EXAMPLE_VOICE_ID = "a0e99841-438c-4a64-b679-ae501e7d6091"
#: The voice id of the Kitta page's examples (``start.request.voice_id``), for its example model only.
KITTA_EXAMPLE_VOICE_ID = "00000000-0000-0000-0000-000000000000"
KITTA_EXAMPLE_MODEL = "fishaudio-s21pro-flash"


class VoiceNotFoundError(KeyError):
    """No voice with that id."""


# --- voices -------------------------------------------------------------------------------------------------

_EPOCH = datetime(2026, 1, 1, tzinfo=timezone.utc)


@dataclass
class Voice:
    """A voice of the emulator; :meth:`to_api` is its Cartesia-shaped JSON."""

    id: str
    name: str
    description: str
    kind: str  # "tone", "speech" or "clone"
    frequency: float | None = None  # fixed frequency of a clone
    language: str = "en"
    is_owner: bool = False
    created_at: datetime = field(default_factory=lambda: _EPOCH)
    gender: str | None = None
    #: Kitta models the voice supports; None: every model. A voice with models is a Kitta voice only.
    kitta_models: frozenset[str] | None = None
    #: pace of a tone voice (ms of audio per character; 60 is ~16.7 characters/s)
    ms_per_char: float = _MS_PER_CHAR

    def supports_kitta_model(self, model: str) -> bool:
        return self.kitta_models is None or model in self.kitta_models

    def to_api(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "id": self.id,
            "name": self.name,
            "description": self.description,
            "tagline": self.kind,
            "language": self.language,
            "locales": [{"locale": "en-US" if self.language == "en" else self.language, "is_native": True}],
            "access": "private" if self.is_owner else "public",
            "visibility": "owner" if self.is_owner else "all",
            "is_owner": self.is_owner,
            "created_at": self.created_at.isoformat().replace("+00:00", "Z"),
            "gender": self.gender,
        }
        if self.frequency is not None:
            data["emulator_tone_hz"] = self.frequency
        return data

    async def synthesize(self, text: str, sample_rate: int) -> bytes:
        """PCM16 mono audio of ``text`` at ``sample_rate``."""
        text = text.strip()
        if not text:
            return b""
        if self.kind == "speech":
            pcm = await _ESPEAK.synthesize(text)
            return resample_oneshot(pcm, NATIVE_SAMPLE_RATE, sample_rate)
        return tone_pcm(text, sample_rate, frequency=self.frequency, ms_per_char=self.ms_per_char)


def _builtin_voices(with_speech: bool) -> list[Voice]:
    voices = [
        Voice(
            id=TONE_VOICE_ID,
            name="Tone",
            description="Deterministic sine: frequency from the transcript's crc32, ~60 ms per character.",
            kind="tone",
        )
    ]
    if with_speech:
        voices.append(
            Voice(
                id=SPEECH_VOICE_ID,
                name="eSpeak English",
                description="Offline speech from eSpeak NG (robotic, but real words).",
                kind="speech",
                gender="masculine",
            )
        )
    voices.append(
        Voice(
            id=EXAMPLE_VOICE_ID,
            name="Pages' example voice",
            description="The voice id of the Nineninesix pages' examples; speaks like "
            + ("speech-en." if with_speech else "tone."),
            kind="speech" if with_speech else "tone",
        )
    )
    return voices


def _kitta_voices(with_speech: bool) -> list[Voice]:
    return [
        Voice(
            id=KITTA_EXAMPLE_VOICE_ID,
            name="Kitta page's example voice",
            description=f"The voice id of the Kitta page's example ({KITTA_EXAMPLE_MODEL} only); speaks like "
            + ("speech-en." if with_speech else "tone."),
            kind="speech" if with_speech else "tone",
            kitta_models=frozenset({KITTA_EXAMPLE_MODEL}),
        )
    ]


def _clone_frequency(clip: bytes) -> float:
    try:
        pcm, rate = read_wav(io.BytesIO(clip))
        if len(pcm) >= 2 * max(4, rate // 20):
            freq = dominant_frequency(pcm, rate)
            if 100.0 <= freq <= 3500.0:
                return float(round(freq))
    except Exception:  # not a PCM16 WAV: fall back to the bytes
        pass
    return 200.0 + (zlib.crc32(clip) % 64) * 25.0


class VoiceRegistry:
    """The voices of one emulator: the built-ins plus the clones made through ``POST /voices/clone``."""

    def __init__(self, default_voice: str | None = None) -> None:
        speech = speech_available()
        self._voices: dict[str, Voice] = {v.id: v for v in _builtin_voices(speech)}
        #: voices of the Kitta endpoint only (not listed by ``/voices``, unknown to Nineninesix)
        self._kitta_voices: dict[str, Voice] = {v.id: v for v in _kitta_voices(speech)}
        self._configured_default = default_voice

    @property
    def default_voice_id(self) -> str:
        """The configured default voice, else speech when eSpeak works, else tone."""
        if self._configured_default:
            return self._configured_default
        return SPEECH_VOICE_ID if SPEECH_VOICE_ID in self._voices else TONE_VOICE_ID

    def set_default(self, voice_id: str | None) -> None:
        self._configured_default = voice_id

    def all_voices(self) -> list[Voice]:
        """All voices, built-ins first, then clones in creation order."""
        return list(self._voices.values())

    def get(self, voice_id: str) -> Voice:
        try:
            return self._voices[voice_id]
        except KeyError:
            raise VoiceNotFoundError(voice_id) from None

    def __contains__(self, voice_id: object) -> bool:
        return voice_id in self._voices

    def kitta_voice(self, voice_id: str, model: str) -> Voice | None:
        """The voice a Kitta ``start`` names, if it exists and supports ``model`` (else None)."""
        voice = self._kitta_voices.get(voice_id) or self._voices.get(voice_id)
        return voice if voice is not None and voice.supports_kitta_model(model) else None

    def add_tone_voice(self, voice_id: str, *, ms_per_char: float, name: str = "") -> Voice:
        """A tone voice of another pace (the voice speed knob): like ``tone``, ``ms_per_char`` ms of audio
        per character (``tone`` is 60: ~16.7 characters/s; 90 is ~11). Known to both endpoints."""
        if not 10.0 <= ms_per_char <= 1000.0:
            raise ValueError(f"ms_per_char must be within 10..1000, got {ms_per_char!r}")
        voice = Voice(
            id=voice_id,
            name=name or f"Tone at {ms_per_char:g} ms per character",
            description=f"Deterministic sine like tone, {ms_per_char:g} ms per character.",
            kind="tone",
            ms_per_char=ms_per_char,
        )
        self._voices[voice_id] = voice
        return voice

    def clone(self, *, name: str, clip: bytes, language: str = "en", description: str = "") -> Voice:
        """Create an in-memory tone voice with its own frequency (see module docs)."""
        freq = _clone_frequency(clip)
        voice = Voice(
            id=str(uuid.uuid4()),
            name=name,
            description=description or f"Clone: a {freq:g} Hz tone",
            kind="clone",
            frequency=freq,
            language=language or "en",
            is_owner=True,
            created_at=datetime.now(timezone.utc),
        )
        self._voices[voice.id] = voice
        return voice

    async def synthesize(self, voice_id: str, text: str, sample_rate: int) -> bytes:
        """PCM16 mono audio of ``text`` in voice ``voice_id`` at ``sample_rate``; unknown voice ->
        :class:`VoiceNotFoundError`."""
        return await self.get(voice_id).synthesize(text, sample_rate)

    async def synthesize_kitta(self, voice_id: str, text: str, sample_rate: int) -> bytes:
        """Like :meth:`synthesize`, for a voice of the Kitta endpoint (its own voices too)."""
        voice = self._kitta_voices.get(voice_id)
        return await (voice or self.get(voice_id)).synthesize(text, sample_rate)


async def synthesize(voice_id: str, text: str, sample_rate: int) -> bytes:
    """PCM16 mono audio of ``text`` in a built-in voice (``tone`` or ``speech-en``) at ``sample_rate``.

    For clones use the running emulator's ``emu.voices.synthesize``."""
    for voice in _builtin_voices(speech_available()):
        if voice.id == voice_id:
            return await voice.synthesize(text, sample_rate)
    raise VoiceNotFoundError(voice_id)
