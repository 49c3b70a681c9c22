"""The provider-neutral turn interface that the framework adapters are written against.

A *turn* is one utterance of the agent (one LLM response, or one ``TTSSpeakFrame``). The adapters in
``ttsbridge.pipecat`` and ``livekit.plugins.*`` only ever see these two classes, so the framework logic is
written once per framework and the protocol once per provider:

    turn = await provider.open_turn(sample_rate=24000)
    await turn.send("Hello there. ")      # any number of times, as sentences are released
    await turn.end()                      # no more text for this turn
    async for pcm in turn:                # PCM16 little-endian mono at turn.sample_rate
        ...
    # on barge-in, from another task:
    await turn.cancel()                   # after this returns the iterator yields nothing more and stops

Iteration raises a :class:`ttsbridge.errors.TTSBridgeError` subclass when the turn fails; it never hangs
(every wait inside a provider is bounded). Audio is already decoded (G.711 -> PCM16) and resampled to the
rate the turn was opened with; the resampler tail is flushed when the turn completes, and no empty chunk is
ever yielded.
"""

from __future__ import annotations

import abc
import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any, Generic, Literal, TypeVar

from ttsbridge._options import ProviderOptions
from ttsbridge.errors import TTSConnectionError, TTSInvalidOptionError, TTSTimeoutError
from ttsbridge.policy.usage import TurnEnd, TurnUsage

#: How a turn ended: its audio completed, it was cancelled (barge-in), or it failed.
TurnOutcome = Literal["done", "cancelled", "failed"]
#: A provider's options model (``NineninesixOptions``, ``KittaOptions``).
OptionsT = TypeVar("OptionsT", bound=ProviderOptions, covariant=True)


class Turn(abc.ABC):
    """One utterance on the provider: one Nineninesix context, or one Kitta session."""

    #: Sample rate of the PCM16 the iterator yields.
    sample_rate: int

    @property
    @abc.abstractmethod
    def id(self) -> str:
        """Provider-side id of the turn (Nineninesix ``context_id``, Kitta ``request_id``). Read-only and read
        live: a provider that transparently retries on a fresh id answers the current one (it is read off the
        provider's record of the turn, not kept twice)."""

    @property
    def retries(self) -> int:
        """How many times the provider transparently retried the turn (a fresh context or session), read off
        the provider's record of the turn; 0 for providers that never retry."""
        return 0

    @abc.abstractmethod
    async def send(self, text: str) -> None:
        """Queue text (usually one sentence) for synthesis. More may follow."""

    @abc.abstractmethod
    async def end(self) -> None:
        """No more text: the server completes the turn once the queued text has rendered."""

    @abc.abstractmethod
    async def cancel(self) -> None:
        """Barge-in. Stop generation now; no audio of this turn is yielded after this returns.

        Idempotent, never raises for a turn that already finished or failed, and bounded in time.
        """

    @abc.abstractmethod
    def __aiter__(self) -> AsyncIterator[bytes]:
        """PCM16 LE mono chunks at :attr:`sample_rate`, in order, until the turn is done or cancelled."""

    @property
    @abc.abstractmethod
    def audio_started(self) -> bool:
        """True once any audio of this turn was yielded (after that, a turn must never be replayed)."""

    @property
    @abc.abstractmethod
    def done(self) -> bool:
        """True once the turn has finished, failed or been cancelled."""

    @property
    def connection_reused(self) -> bool:
        """True when the turn started on a connection or session that was already open (no handshake)."""
        return False

    @property
    def characters_sent(self) -> int:
        """Characters of text sent for this turn (for usage metrics)."""
        return 0

    @property
    def outcome(self) -> TurnOutcome | None:
        """How the turn ended (``"done"``, ``"cancelled"``, ``"failed"``), or None while it runs.

        The default derives it from :attr:`done` and :attr:`error` (it cannot tell a cancel from a
        completion); providers that know better override it.
        """
        if not self.done:
            return None
        return "failed" if self.error is not None else "done"

    @property
    def error(self) -> BaseException | None:
        """The error the turn failed with (what iteration raised), or None."""
        return None

    @property
    def error_code(self) -> str | None:
        """A short machine-readable code for :attr:`error` (see :func:`error_code`), or None."""
        return error_code(self.error) if self.error is not None else None

    @property
    def usage(self) -> TurnUsage:
        """The turn's usage ledger (:class:`~ttsbridge.policy.usage.TurnUsage`), a snapshot: characters sent,
        billed by the provider's rules (see :mod:`ttsbridge.policy.usage`), heard (as the adapter reported
        with :meth:`note_heard`), audio seconds delivered. Final once :attr:`done`.

        The default knows only what was sent (billed as sent); providers override it with their rules."""
        ended = self.outcome
        return TurnUsage(
            provider="",
            turn_id=self.id,
            characters_sent=self.characters_sent,
            characters_billed=self.characters_sent,
            characters_heard=self.characters_heard,
            ended=None if ended is None else TurnEnd(ended),
            error_code=self.error_code,
            retries=self.retries,
            characters_written=self.characters_written,
        )

    @property
    def characters_heard(self) -> int:
        """Characters of the turn's words the adapter reported played (:meth:`note_heard`)."""
        return getattr(self, "_heard_chars", 0)

    def note_heard(self, chars: int) -> None:
        """The adapter played words of this turn worth ``chars`` characters (``len(TimedWord.text)``: the LLM's
        own words, docs/text.md)."""
        self._heard_chars = self.characters_heard + max(int(chars), 0)

    @property
    def characters_written(self) -> int:
        """Characters of the LLM's text whose spoken form was sent (:meth:`note_written`); without a normalizer
        in between (nothing noted), what was sent."""
        written: int | None = getattr(self, "_written_chars", None)
        return self.characters_sent if written is None else written

    def note_written(self, chars: int) -> None:
        """The adapter sent the spoken form of ``chars`` characters of the LLM's text."""
        self._written_chars = (getattr(self, "_written_chars", None) or 0) + max(int(chars), 0)

    #: The provider renders each :meth:`send` on its own, in order, and reports each one's end in
    #: :attr:`rendered` (Kitta: a send is a flushed segment, ended by its ``usage``).
    reports_send_ends: bool = False

    @property
    def rendered(self) -> list[tuple[int, float]]:
        """Where the provider said the audio of the text so far is complete, in order: ``(characters of the
        text sent, seconds of the turn's audio)`` at each point, both counted from the turn's start (Kitta:
        each segment's ``usage`` event ends that segment's audio). Empty when the provider says so only at
        the turn's end (Nineninesix). The adapters' word clocks time those words exactly from it
        (:meth:`ttsbridge.policy.words.WordClock.complete_text`)."""
        return []

    def add_done_callback(self, fn: Callable[[Turn], None]) -> None:
        """Call ``fn(self)`` once the turn's end is known: all its audio has been received (the iterator may
        still hold some of it), or it failed or was cancelled. The adapters end a hold while ahead of playback
        there, so that a turn's end (and the next turn, which plays after it) never waits for a hold meant for
        later chunks. The default never calls: a turn that cannot tell has its holds run their course."""
        del fn

    @abc.abstractmethod
    def take_ready(self, max_bytes: int) -> bytes:
        """The audio already received and not yet yielded, behind the chunk just yielded: at most
        ``max_bytes`` (whole samples) at :attr:`sample_rate`, in order, without waiting; ``b""`` when none is
        queued, before the first chunk, once cancelled, and after the iteration ended. Synchronous: it never
        waits, raises, or consumes the turn's end or error (the iterator reports those). The adapters join it
        to the chunk they just read, and read it after a hold while safely ahead of playback
        (:mod:`ttsbridge.policy.chunks`)."""

    def take_received(self) -> bytes:
        """The turn is being given up after audio (the adapter's own timeout: the server stalled): the audio
        already received and not yet yielded, with the resampler's tail, at the turn's rate, so that none of
        it is lost; ``b""`` by default, once cancelled, and after the iteration ended. Synchronous; the turn is
        cancelled next, so nothing else is yielded of what came before it."""
        return b""

    @property
    def wire_format(self) -> str:
        """The audio format on the wire, ``"<provider's encoding name>@<rate>"`` (``"pcm_mulaw@8000"``,
        ``"pcm@44100"``); empty when not known (yet)."""
        return ""


class Synthesis(AsyncIterator[bytes]):
    """What :meth:`TurnProvider.synthesize` returns: the audio of a one-shot synthesis as it arrives.

    :meth:`take_received` is :meth:`Turn.take_received` for a synthesis: a caller that gives it up after
    audio (its own timeout cancelled the wait for the next chunk, which ends the iteration) gets the audio
    already received and not yielded, with the resampler's filter tail, so that none of it is lost. ``b""``
    when nothing is held (the iteration ended by itself: it yielded everything, the tail too).
    """

    def __init__(self, body: Callable[[Synthesis], AsyncIterator[bytes]]) -> None:
        self._held: Callable[[], bytes] | None = None
        self._body = body(self)

    def hold(self, take: Callable[[], bytes] | None) -> None:
        """For the body: what :meth:`take_received` returns from now on (None: nothing)."""
        self._held = take

    def take_received(self) -> bytes:
        take, self._held = self._held, None
        return take() if take is not None else b""

    def __aiter__(self) -> Synthesis:
        return self

    async def __anext__(self) -> bytes:
        return await self._body.__anext__()

    async def aclose(self) -> None:
        await self._body.aclose()  # type: ignore[attr-defined]


class TurnProvider(abc.ABC, Generic[OptionsT]):
    """Opens turns on one provider. Owns connections (pooled, reused across turns) and options."""

    #: Short provider name (``"nineninesix"``, ``"kitta"``), used in logs and metrics.
    provider: str = ""

    @property
    @abc.abstractmethod
    def options(self) -> OptionsT:
        """The options of the turns opened from now on: the provider's frozen options model, read by field
        (``voice`` and ``model`` for every provider, see :class:`~ttsbridge._options.ProviderOptions`);
        :meth:`update_options` replaces it with a validated copy."""

    @abc.abstractmethod
    async def open_turn(self, *, sample_rate: int, timeout: float | None = None, **overrides: Any) -> Turn:
        """Open a new turn whose audio comes out at ``sample_rate``.

        ``timeout`` is the turn's one audio-owed deadline (the server owes audio and stays silent this long:
        the turn fails with :class:`~ttsbridge.errors.TTSTimeoutError`), kept by the provider's protocol;
        None: the provider's own. ``overrides`` are provider option fields (``voice``, ``model``,
        ``language``...) for this turn only. Raises :class:`ttsbridge.errors.TTSInvalidOptionError` for a bad
        override before any I/O.
        """

    @abc.abstractmethod
    def update_options(self, **options: Any) -> None:
        """Change options for turns opened from now on: :attr:`options` becomes a copy with ``options`` (option
        fields) changed, validated at once (TTSInvalidOptionError, and nothing changes)."""

    def describe(self, *, sample_rate: int, **overrides: Any) -> dict[str, str]:
        """What a turn (or one-shot synthesis) opened now with these arguments would use, for tracing:
        ``model``, ``voice``, ``wire_format`` (keys that are unknown are left out). No I/O."""
        return {}

    def synthesize(self, text: str, *, sample_rate: int, **overrides: Any) -> Synthesis:
        """One-shot synthesis of a whole text, streamed as it is generated (PCM16 at ``sample_rate``): a
        :class:`Synthesis` (iterate it; nothing happens before the first ``__anext__``).

        The default runs one turn; providers with a better one-shot transport (Nineninesix ``POST /tts/sse``)
        override it. Used by LiveKit's ``ChunkedStream`` and Pipecat's HTTP service.
        """
        return Synthesis(
            lambda synthesis: self._synthesize_on_a_turn(synthesis, text, sample_rate, overrides)
        )

    async def _synthesize_on_a_turn(
        self, synthesis: Synthesis, text: str, sample_rate: int, overrides: dict[str, Any]
    ) -> AsyncIterator[bytes]:
        turn = await self.open_turn(sample_rate=sample_rate, **overrides)
        try:
            await turn.send(text)
            await turn.end()
            async for pcm in turn:
                yield pcm
        finally:
            if not turn.done:  # given up (the caller's timeout, a cancel): what the turn still holds
                rest = turn.take_received()
                synthesis.hold(lambda: rest)
                await turn.cancel()

    def cache_identity(self, *, sample_rate: int, **overrides: Any) -> dict[str, Any] | None:
        """Everything that changes the audio of a turn opened now with these arguments, for the phrase cache's
        key (provider, endpoint, account scope, model, voice, voice controls, language, wire format, the output
        rate); never a secret (the account is a digest: :func:`ttsbridge.cache.keys.account_scope`). None: the
        provider's audio cannot be cached (the default). Raises like :meth:`open_turn` for a bad override."""
        return None

    async def prewarm(self, sample_rate: int | None = None) -> None:
        """Open what the next turn will need (a connection, a standby session) ahead of time.

        ``sample_rate`` is the rate turns will be opened with, for providers whose connections depend on it
        (Nineninesix pools sockets by output format); others ignore it.
        """

    @abc.abstractmethod
    async def aclose(self) -> None:
        """Close every connection; open turns fail with a connection error."""


def error_code(exc: BaseException) -> str:
    """A short code for why a turn failed: the server's ``error_code`` when it sent one (``voice_not_found``,
    ``quota_exceeded``...), else the kind of failure (``timeout``, ``connection_error``, ``invalid_option``),
    else the exception's class name."""
    code = getattr(exc, "error_code", None)
    if isinstance(code, str) and code:
        return code
    if isinstance(exc, (TTSTimeoutError, TimeoutError, asyncio.TimeoutError)):
        return "timeout"
    if isinstance(exc, TTSConnectionError):
        return "connection_error"
    if isinstance(exc, TTSInvalidOptionError):
        return "invalid_option"
    return type(exc).__name__
