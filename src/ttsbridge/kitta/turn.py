"""One Kitta turn (:class:`KittaTurn`): a :class:`ttsbridge.turns.Turn` over one generation (one session, or
its retries), resampled to the pipeline's rate. Its facts (outcome, retries, usage) are read from the
generation and its protocol; the turn keeps only its resampler."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from typing import cast

from ttsbridge.audio.resample import StreamResampler
from ttsbridge.errors import TTSAPIError, TTSBridgeError
from ttsbridge.kitta.billing import KITTA, session_units
from ttsbridge.kitta.client import KittaAudio, KittaGeneration
from ttsbridge.policy.usage import TurnEnd, TurnUsage
from ttsbridge.turns import Turn, TurnOutcome

__all__ = ["KittaTurn", "resampled"]


class KittaTurn(Turn):
    """One turn on Kitta. ``send()`` sends the text and flushes it (the adapters hand whole sentences, and a
    flush per sentence gets its audio started at once); ``end()`` sends ``stop``; ``cancel()`` closes the
    session (v2 has no cancel message)."""

    def __init__(self, generation: KittaGeneration, sample_rate: int, *, from_standby: bool) -> None:
        self._gen = generation
        self.sample_rate = sample_rate
        self.from_standby = from_standby
        self._resampler: StreamResampler | None = None

    def __repr__(self) -> str:
        return f"KittaTurn(id={self.id!r}, sample_rate={self.sample_rate}, done={self.done})"

    @property
    def id(self) -> str:
        return self._gen.request_id

    @property
    def generation(self) -> KittaGeneration:
        return self._gen

    async def send(self, text: str) -> None:
        if text:
            await self._gen.send(text, flush=True)

    async def end(self) -> None:
        await self._gen.stop()

    async def cancel(self) -> None:
        await self._gen.cancel()
        if self._resampler is not None:
            self._resampler.reset()

    def take_ready(self, max_bytes: int) -> bytes:
        """The audio (at :attr:`sample_rate`, resampled like the iterator's) of the whole chunks already
        received behind the one just yielded, at most ``max_bytes``; ``b""`` before the first chunk and once
        cancelled. For the adapters' coalescing (see ``NineninesixTurn.take_ready``)."""
        resampler = self._resampler
        if resampler is None or self._gen.cancelled:
            return b""
        pcm = self._gen.take_ready(resampler.max_input(max_bytes))  # a budget the output cannot pass
        return resampler.process(pcm) if pcm else b""

    def take_received(self) -> bytes:
        if self._resampler is None or self._gen.cancelled or self._gen.done:
            return b""
        return self.take_ready(sys.maxsize) + self._resampler.flush()

    def __aiter__(self) -> AsyncIterator[bytes]:
        return resampled(self._gen, self.sample_rate, self._keep)

    def _keep(self, resampler: StreamResampler) -> None:
        self._resampler = resampler

    @property
    def audio_started(self) -> bool:
        return self._gen.audio_started

    @property
    def done(self) -> bool:
        return self._gen.done

    @property
    def characters_sent(self) -> int:
        return self._gen.characters_sent

    reports_send_ends = True  # each send is flushed: a segment, ended by its `usage`

    @property
    def rendered(self) -> list[tuple[int, float]]:
        gen = self._gen  # each segment's `usage`: the end of that text's audio
        rate = gen.sample_rate
        return [(chars, n / 2 / rate) for chars, n in gen.rendered] if rate else []

    @property
    def connection_reused(self) -> bool:
        """True when the turn took the warm standby connection (no handshake or auth on its path)."""
        return self.from_standby

    @property
    def retries(self) -> int:
        return self._gen.retries

    @property
    def outcome(self) -> TurnOutcome | None:
        gen = self._gen  # finished, cancelled and failed exclude each other there
        if gen.error is not None:
            return "failed"
        if gen.cancelled:
            return "cancelled"
        return "done" if gen.finished else None

    @property
    def error(self) -> BaseException | None:
        return self._gen.error

    @property
    def usage(self) -> TurnUsage:
        """Kitta's rule (:data:`~ttsbridge.kitta.billing.KITTA`) over the current session's units
        (:func:`~ttsbridge.kitta.billing.session_units`: its segments and their statuses, or its ``finish``
        count). Earlier (retried) sessions add the units their ``usage`` events reported (a retry never
        follows a part-delivered segment)."""
        gen = self._gen
        proto = gen._proto  # the current session's protocol (the generation's own, also during a retry)
        earlier = gen.units - (proto.finish_units or 0)  # the facts add this session's finish units too
        units = session_units(proto.segments, proto.finish_units)
        ended = self.outcome
        basis = KITTA.basis(ended, by_server=isinstance(self.error, TTSAPIError))
        return TurnUsage(
            provider=KITTA.provider,
            turn_id=self.id,
            characters_sent=self.characters_sent,
            characters_billed=earlier + KITTA.billed(units, basis),
            characters_heard=self.characters_heard,
            audio_seconds=gen.audio_bytes / 2 / gen.sample_rate if gen.sample_rate else 0.0,
            ended=None if ended is None else TurnEnd(ended),
            error_code=self.error_code,
            characters_reserved=0 if ended is not None else KITTA.reserved(units, basis),
            retries=self.retries,
        )

    @property
    def wire_format(self) -> str:
        rate = self._gen.sample_rate
        return f"{self._gen.options.format}@{rate}" if rate else self._gen.options.format


async def resampled(
    gen: KittaGeneration, rate: int | None, keep: Callable[[StreamResampler], object] | None = None
) -> AsyncIterator[bytes]:
    """A generation's audio as PCM16 at ``rate`` (None: the server's rate), tail included: at the end, and
    after a failure too (all the audio received goes out before the error is raised); nothing once the
    generation is cancelled. ``keep`` is told of each new resampler (a turn's ``take_ready`` uses it)."""
    resampler: StreamResampler | None = None
    error: TTSBridgeError | None = None
    # aclosing: a consumer that leaves early closes the generation's iterator now, which cancels it
    async with contextlib.aclosing(cast("AsyncGenerator[KittaAudio, None]", gen.__aiter__())) as chunks:
        try:
            async for chunk in chunks:
                if resampler is None or resampler.in_rate != chunk.sample_rate:
                    if resampler is not None:  # a retry landed on a session with another rate
                        tail = resampler.flush()
                        if tail and not gen.cancelled:
                            yield tail
                    resampler = StreamResampler(chunk.sample_rate, rate or chunk.sample_rate)
                    if keep is not None:
                        keep(resampler)
                pcm = resampler.process(chunk.pcm)
                if pcm and not gen.cancelled:
                    yield pcm
        except TTSBridgeError as exc:  # the generation failed (its retries are its own)
            error = exc
    if (gen.finished or error is not None) and resampler is not None:
        tail = resampler.flush()
        if tail and not gen.cancelled:
            yield tail
    if error is not None:
        raise error
