"""One cached utterance (:class:`PhraseEntry`) and its bytes in a backend. Pure.

An entry holds the PCM16 the live turn yielded (at the rate it was opened with, so a hit gives the very
samples of the live render), the normalised text (word timing weighs it) and what tracing reports. Never a
key, a URL or an option value: those only went into the entry's key, as a digest.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass

__all__ = ["PhraseEntry"]

_MAGIC = b"TBPC"
_VERSION = 1
_HEAD = struct.Struct("<4sBI")  # magic, version, header length


@dataclass(frozen=True)
class PhraseEntry:
    """A cleanly completed utterance."""

    text: str
    sample_rate: int
    #: PCM16 LE mono; read from a backend it is a view of the stored bytes (a hit copies no audio but the
    #: chunks it yields)
    pcm: bytes | memoryview
    provider: str = ""
    wire_format: str = ""
    created: float = 0.0

    @property
    def duration(self) -> float:
        """Seconds of audio."""
        return len(self.pcm) / 2 / self.sample_rate if self.sample_rate else 0.0

    @property
    def nbytes(self) -> int:
        """What the entry weighs in a backend (its PCM and header)."""
        return len(self.pcm) + len(self.text.encode()) + 64

    def to_bytes(self) -> bytes:
        header = json.dumps(
            {
                "text": self.text,
                "rate": self.sample_rate,
                "provider": self.provider,
                "wire": self.wire_format,
                "created": self.created,
            },
            separators=(",", ":"),
            ensure_ascii=False,
        ).encode()
        return b"".join((_HEAD.pack(_MAGIC, _VERSION, len(header)), header, self.pcm))

    @classmethod
    def from_bytes(cls, blob: bytes) -> PhraseEntry:
        """Raises ``ValueError`` for bytes that are not an entry of this version (the lookup is a miss). The
        entry's PCM is a view of ``blob`` (no copy of seconds of audio on a hit's path)."""
        if len(blob) < _HEAD.size:
            raise ValueError("phrase cache entry too short")
        magic, version, n = _HEAD.unpack_from(blob)
        if magic != _MAGIC or version != _VERSION or _HEAD.size + n > len(blob):
            raise ValueError("not a phrase cache entry of this version")
        head = json.loads(blob[_HEAD.size : _HEAD.size + n])
        pcm = memoryview(blob)[_HEAD.size + n :]
        rate = int(head["rate"])
        if rate <= 0 or len(pcm) % 2:
            raise ValueError("phrase cache entry with a bad rate or odd PCM length")
        return cls(
            text=str(head["text"]),
            sample_rate=rate,
            pcm=pcm,
            provider=str(head.get("provider", "")),
            wire_format=str(head.get("wire", "")),
            created=float(head.get("created", 0.0)),
        )
