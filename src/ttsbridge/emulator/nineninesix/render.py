"""The Nineninesix WebSocket connection's rendering half: contexts rendered, paced, faults fired (a mixin)."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from ttsbridge.emulator.nineninesix.config import NATIVE_SAMPLE_RATE
from ttsbridge.emulator.nineninesix.faults import Fault
from ttsbridge.emulator.nineninesix.outbox import Context, Item, Out, Outbox
from ttsbridge.emulator.nineninesix.wire import OutputFormat, chunk_frame, done_frame, fault_label, forever

if TYPE_CHECKING:
    from ttsbridge.emulator.host import EmulatorHost


log = logging.getLogger("ttsbridge.emulator")


class Renderer:
    """The rendering half of ``_WSConnection``: one task per context renders its items in order."""

    emu: EmulatorHost
    outbox: Outbox
    output_format: OutputFormat | None
    contexts: dict[str, Context]

    async def _render_context(self, ctx: Context) -> None:
        try:
            while True:
                while not ctx.pending:
                    if ctx.ended:
                        self._forget(ctx)
                        self.emu.stats.nineninesix.contexts_done += 1
                        self.emu.notify()
                        await self._send(done_frame(ctx.id), wait=False)
                        return
                    ctx.wakeup.clear()
                    await ctx.wakeup.wait()
                item = ctx.pending.popleft()
                ctx.generating = True
                try:
                    ok = await self._render_item(ctx, item)
                finally:
                    ctx.generating = False
                if not ok:
                    return
                item.settled = True  # confirmed
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug or a synthesis failure: report it like the real upstream would
            log.warning("emulator: context rendering failed: %s", type(exc).__name__)
            if self.contexts.get(ctx.id) is ctx:
                await self._fail_context(ctx, "generation_failed", "synthesis backend error")

    async def _render_item(self, ctx: Context, item: Item) -> bool:
        """Render one transcript; False if a fault ended the context or the connection."""
        emu = self.emu
        cfg = emu.config
        fault = item.fault
        fmt = self.output_format or OutputFormat()
        if ctx.first_chunk:
            ctx.first_chunk = False
            if cfg.first_chunk_latency_s > 0:
                await asyncio.sleep(cfg.first_chunk_latency_s)
        if fault is not None and fault.after_chunks == 0:
            return await self._fire(ctx, fault)
        pcm = await emu.voices.synthesize(item.voice_id, item.text, NATIVE_SAMPLE_RATE)
        audio = fmt.encode(pcm)
        step = fmt.chunk_bytes(cfg.chunk_ms)
        sent = 0
        for off in range(0, len(audio), step):
            if fault is not None and sent >= fault.after_chunks:
                return await self._fire(ctx, fault)
            piece = audio[off : off + step]
            await ctx.pacer.pace(len(piece) / fmt.sample_width / fmt.sample_rate, cfg.realtime_factor)
            await self._send(chunk_frame(ctx.id, piece), chunk_of=ctx.id)
            sent += 1
            await asyncio.sleep(0)  # let other contexts and cancels in
        if fault is not None:
            return await self._fire(ctx, fault)
        return True

    async def _fire(self, ctx: Context, fault: Fault) -> bool:
        emu = self.emu
        emu.stats.nineninesix.faults_fired.append(fault_label(fault))
        emu.notify()
        if fault.action == "error":
            spec = fault.spec
            if spec.closes:
                await self._fail_connection(spec.code, ctx.id)
            else:
                await self._fail_context(ctx, spec.code)
            return False
        if fault.action == "drop":
            await self.outbox.put(Out("drop"), wait=False)
            await forever()
        if fault.action == "close":
            await self._close(fault.close_code, "closed by fault")
            await forever()
        await forever()  # stall: nothing more for this context, the socket stays open
        return False
