"""What both protocols of the loopback server share: marked audio, mutations, and the emitter that sends one
reply's frames with the armed mutation applied."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from websockets.asyncio.server import ServerConnection

KITTA_SUBPROTOCOL = "realtime.tts.msgpack.v2"
NNS_RATE = 22050
KITTA_RATE = 24000
#: the sample value of audio that belongs to none of the client's turns
FOREIGN = -12345
SAMPLES_PER_CHUNK = 441
CHUNKS_PER_TURN = 4
#: frames a server keeps sending after an error (more than websockets' receive queue holds)
FLOOD = 64

#: mutation kinds both protocols understand
COMMON_KINDS: tuple[str, ...] = (
    "wrong_type", "missing_field", "extra_field", "bad_encoding", "wrong_frame_kind", "odd_pcm", "huge",
    "foreign_id", "unknown_id", "duplicate", "dup_final", "early_final", "unknown_error", "null_error",
    "unknown_event", "error_flood", "stray_not_found", "drop", "close",
)  # fmt: skip
NNS_KINDS: tuple[str, ...] = (*COMMON_KINDS, "bad_base64")
KITTA_KINDS: tuple[str, ...] = (*COMMON_KINDS, "seq_gap", "seq_dup", "audio_as_text")
_WRONG_VALUES: tuple[Any, ...] = (None, 123, -1, 1.5, True, "x", [], {}, b"\x00")
_TURN_NO = re.compile(r"\bt(\d+)\b")


def marker(n: int) -> int:
    """The int16 sample value of turn ``n``'s audio (low and high byte differ, so a misaligned byte shows)."""
    return 0x0101 + 0x0203 * (n % 60)


def turn_number(text: str) -> int:
    m = _TURN_NO.search(text)
    return int(m.group(1)) if m else 0


def odd_split(value: int) -> list[bytes]:
    """Two frames of turn audio split at an odd byte offset (a client must carry the odd byte over)."""
    whole = pcm(value, 8)
    return [whole[:5], whole[5:]]


def pcm(value: int, samples: int = SAMPLES_PER_CHUNK) -> bytes:
    return value.to_bytes(2, "little", signed=True) * samples


@dataclass(frozen=True)
class Mutation:
    """Mutate frame ``at`` of the next reply with ``kind``; ``arg`` picks a variant (field, wrong value...)."""

    at: int
    kind: str
    arg: int = 0


DROP = object()
#: end this reply here (no more frames of it), keep the connection
STOP = object()
#: stop reading from the client (so its close cannot complete) until ``server.release`` is set
HOLD = object()


@dataclass
class Close:
    code: int = 1011


class Emitter:
    """Sends one reply's frames, applying the armed mutation at its frame index."""

    def __init__(
        self,
        conn: ServerConnection,
        mutation: Mutation | None,
        mutate: Callable[..., list[Any]],
        encode: Callable[[dict[str, Any]], Any],
        release: asyncio.Event,
    ) -> None:
        self.conn = conn
        self.release = release
        self.encode = encode
        self.mutation = mutation
        self.mutate = mutate
        self.n = 0
        self.cut = False
        self.stopped = False

    async def emit(self, frames: list[dict[str, Any]], *, last: bool = False) -> None:
        for i, frame in enumerate(frames):
            if self.stopped:
                return
            outs: list[Any] = [self.encode(frame)]
            m = self.mutation
            if m is not None and (self.n == m.at or (last and i == len(frames) - 1 and m.at > self.n)):
                outs = self.mutate(frame, m)
                self.mutation = None
            self.n += 1
            for out in outs:
                if not await self._send(out):
                    return

    async def _send(self, out: Any) -> bool:
        if self.cut:
            return False
        if out is HOLD:
            self.conn.transport.pause_reading()
            await self.release.wait()
            self.conn.transport.resume_reading()
            return True
        if out is STOP:
            self.stopped = True
            return False
        if out is DROP:
            self.cut = True
            self.conn.transport.abort()
            return False
        if isinstance(out, Close):
            self.cut = True
            await self.conn.close(out.code, "scripted close")
            return False
        await self.conn.send(out)
        return True


def mutate_common(
    frame: dict[str, Any], m: Mutation, enc: Callable[[dict[str, Any]], Any]
) -> list[Any] | None:
    """Mutations shared by both protocols, as encoded frames; None for a protocol-specific kind."""
    keys = sorted(frame)
    k = m.kind
    if k == "wrong_type":
        key = keys[m.arg % len(keys)]
        value = _WRONG_VALUES[m.arg % len(_WRONG_VALUES)]
        if type(value) is type(frame[key]) is bytes:
            # bytes for a bytes field (Kitta's ``audio``) is not a wrong type but other audio, which a client
            # cannot tell from the server's own (the page: frames are concatenated): take the next value
            value = _WRONG_VALUES[(m.arg + 1) % len(_WRONG_VALUES)]
        return [enc({**frame, key: value})]
    if k == "missing_field":
        return [enc({x: v for x, v in frame.items() if x != keys[m.arg % len(keys)]})]
    if k == "extra_field":
        return [enc({**frame, f"zz_extra_{m.arg % 5}": m.arg})]
    if k == "duplicate":
        return [enc(frame), enc(frame)]
    if k == "drop":
        return [DROP]
    if k == "close":
        return [Close((1000, 1001, 1008, 1011, 1012, 4000)[m.arg % 6])]
    return None
