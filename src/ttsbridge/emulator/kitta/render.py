"""The Kitta session's worker: segments rendered, encoded, paced and billed (a mixin of ``Session``)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from ttsbridge.emulator.encoders import StreamEncoder
from ttsbridge.emulator.kitta.config import CLOSE_INTERNAL, CLOSE_NORMAL, CLOSE_POLICY
from ttsbridge.emulator.kitta.faults import KittaFault
from ttsbridge.emulator.kitta.stats import KittaStats
from ttsbridge.emulator.kitta.validate import SessionError
from ttsbridge.emulator.pacing import Pacer

if TYPE_CHECKING:
    from ttsbridge.emulator.kitta.endpoint import Endpoint


@dataclass
class Segment:
    text: str  # markers removed
    units: int
    faults: list[KittaFault]
    committed: bool = False
    refunded: bool = False


STOP: Final = object()


class Renderer:
    """The worker half of ``Session``: it renders the queued segments one by one."""

    ep: Endpoint
    stats: KittaStats
    request_id: str | None
    format: str
    sample_rate: int
    encoder: StreamEncoder | None
    pacer: Pacer
    audio_fields: dict[str, Any]
    queue: asyncio.Queue[Any]
    seq: int
    busy: bool
    finished: bool
    units_reserved: int
    units_committed: int
    voice_id: str

    async def _work(self) -> None:
        try:
            while True:
                item = await self.queue.get()
                if item is STOP:
                    await self.send(
                        {"event": "finish", "request_id": self.request_id, "units": self.units_committed}
                    )
                    self.finished = True
                    self.stats.finished += 1
                    self.ep.notify()
                    await self.close(CLOSE_NORMAL, "finished")
                    return
                self.busy = True
                try:
                    ok = await self._render(item)
                finally:
                    self.busy = False
                if not ok:
                    return
        except SessionError as err:
            await self.fail(err)

    async def _apply(self, fault: KittaFault) -> None:
        if fault.action == "error":
            await self.fail(
                SessionError(
                    fault.code,
                    f"injected fault ({fault.code})",
                    retryable=fault.retryable,
                    close_code=CLOSE_INTERNAL if fault.retryable else CLOSE_POLICY,
                )
            )
        elif fault.action == "close":
            await self.close(fault.close_code, "injected close")
        elif fault.action == "stall":
            await asyncio.Event().wait()  # until the session ends (the worker is cancelled)

    def _refund(self, seg: Segment) -> None:
        if not seg.committed and not seg.refunded:
            seg.refunded = True
            self.units_reserved -= seg.units
            self.stats.units_refunded += seg.units
            self.stats.segments_refunded += 1
            self.ep.notify()

    def _commit(self, seg: Segment) -> None:
        seg.committed = True
        self.units_committed += seg.units
        self.stats.units_committed += seg.units

    async def _send_audio(self, seg: Segment, data: bytes, after: list[KittaFault]) -> bool:
        """One ``audio`` frame; commits the segment at its first frame. False if an after-audio fault ended
        the session."""
        await self.send(
            {
                "event": "audio",
                "request_id": self.request_id,
                "seq": self.seq,
                "audio": data,
                **self.audio_fields,
            }
        )
        self.seq += 1
        self.stats.audio_frames += 1
        if self.request_id is not None:
            self.stats.timings.mark_chunk(self.request_id)
        self.ep.notify()
        if not seg.committed:
            self._commit(seg)
            if after:
                await self._apply(after[0])
                return False
        return True

    async def _stream(self, seg: Segment, pcm: bytes, after: list[KittaFault]) -> bool:
        """Encode ``pcm`` frame by frame, send what the encoder yields, flush it at the segment's end."""
        cfg = self.ep.config
        assert self.encoder is not None  # opened at start, before the worker
        encoder = self.encoder
        step = max(2, int(self.sample_rate * cfg.chunk_ms / 1000.0) * 2)
        for offset in range(0, len(pcm), step):
            frame = pcm[offset : offset + step]
            # each frame when it is due at realtime_factor x real time (a clock: no drift, no catch-up burst)
            await self.pacer.pace(len(frame) / 2 / self.sample_rate, cfg.realtime_factor)
            data = encoder.encode(frame)
            if data and not await self._send_audio(seg, data, after):
                return False
        tail = encoder.end_segment()
        return not tail or await self._send_audio(seg, tail, after)

    async def _render(self, seg: Segment) -> bool:
        cfg = self.ep.config
        before = [f for f in seg.faults if not f.after_audio and f.action != "delay"]
        after = [f for f in seg.faults if f.after_audio and f.action in ("error", "close")]
        delay = sum(f.delay_s for f in seg.faults if f.action == "delay")
        try:
            if before:
                self._refund(seg)
                await self._apply(before[0])
                return False
            voices = self.ep.emulator.voices
            pcm = (
                await voices.synthesize_kitta(self.voice_id, seg.text, self.sample_rate) if seg.text else b""
            )
            if cfg.first_chunk_latency_s + delay > 0:
                await asyncio.sleep(cfg.first_chunk_latency_s + delay)
            if not await self._stream(seg, pcm, after):
                return False
            if not pcm and seg.units:
                # nothing to say (e.g. punctuation only): generated, committed with its units
                self._commit(seg)
            await self.send(
                {
                    "event": "usage",
                    "request_id": self.request_id,
                    "units": seg.units,
                    "total_units": self.units_committed,
                }
            )
            return True
        finally:
            # failed, cancelled (the client left) or closed before any audio: nothing was delivered
            self._refund(seg)
