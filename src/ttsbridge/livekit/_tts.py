"""LiveKit Agents (1.8) TTS over any :class:`~ttsbridge.turns.TurnProvider`: framework logic written once.

``livekit.plugins.nineninesix`` and ``livekit.plugins.kitta`` are thin subclasses of :class:`TurnTTS` that
only build their provider. Everything LiveKit-specific lives here:

- :class:`TurnSynthesizeStream` (``tts.stream()``): one provider turn per stream. Text is split into
  sentences as it arrives (LiveKit's sentence tokenizer, blingfire by default) and each sentence is sent at
  once; the turn is ended at the first flush after text (LiveKit 1.8 drops text pushed after a flush, so one
  stream is one segment) or at ``end_input()``. Audio (PCM16 at the declared rate, already decoded and
  resampled by the provider) goes through the ``AudioEmitter`` as it arrives. Closing the stream before the
  turn is done (what LiveKit does on barge-in) cancels the turn on the provider, which keeps its connection
  for the next turn.
- :class:`TurnChunkedStream` (``tts.synthesize()``): the provider's one-shot streaming synthesis.
- Errors: provider errors become ``APIStatusError`` / ``APIConnectionError`` / ``APITimeoutError`` with
  ``retryable`` taken from the provider error, and forced to ``False`` once any audio reached the emitter
  (LiveKit must not replay a turn the user already heard). Texts are redacted, and the provider's exception
  chain is not attached (LiveKit prints the root cause of an ``APIConnectionError``, which may quote a URL
  with a key).
- ``APIConnectOptions.timeout`` bounds opening a turn, the first audio after text was sent, and every gap
  between audio chunks once the input has ended (see :class:`_Watchdog`). ``max_retry`` and
  ``retry_interval`` are applied by LiveKit's own retry loop around ``_run``.
- Estimated word timing (:class:`ttsbridge.policy.words.WordClock`, ``release="end"``) for LiveKit's aligned
  transcripts: the APIs send no timestamps.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

from livekit.agents import (
    APIConnectionError,
    APIConnectOptions,
    APIError,
    APIStatusError,
    APITimeoutError,
    tokenize,
    tts,
    utils,
)
from livekit.agents.types import DEFAULT_API_CONNECT_OPTIONS, NOT_GIVEN, NotGivenOr, TimedString
from livekit.agents.utils import is_given

from ttsbridge._redact import redact
from ttsbridge.errors import (
    ErrorCategory,
    TTSAPIError,
    TTSBridgeError,
    TTSInvalidOptionError,
    TTSTimeoutError,
    verdict_of,
)
from ttsbridge.livekit_usage import TurnUsageEvents
from ttsbridge.policy.words import DEFAULT_CHARS_PER_SECOND, SpeechRate, TimedWord, WordClock
from ttsbridge.tracing import LIVEKIT_NAMES, TurnRecord, current_span
from ttsbridge.turns import Turn, TurnProvider

__all__ = [
    "DEFAULT_CHARS_PER_SECOND",
    "TurnChunkedStream",
    "TurnSynthesizeStream",
    "TurnTTS",
    "to_api_error",
]

_default_logger = logging.getLogger("ttsbridge.livekit")


# ----------------------------------------------------------------------------------------------------
# errors


def to_api_error(exc: BaseException, *, audio_pushed: bool, secrets: tuple[str, ...] = ()) -> APIError:
    """Translate the verdict of a ttsbridge (or transport) error into LiveKit's API errors.

    A server error becomes ``APIStatusError``, a ``TIMEOUT`` ``APITimeoutError``, a ``CONNECTIVITY``
    ``APIConnectionError``, anything else ``APIError``. ``retryable`` follows the verdict, but is ``False``
    once audio reached the emitter: LiveKit's retry would replay the whole turn and the user would hear it
    twice.
    """
    if isinstance(exc, APIError):
        if audio_pushed and exc.retryable:
            exc.retryable = False
        return exc
    verdict = verdict_of(exc)
    message = redact(str(exc) or type(exc).__name__, secrets)
    retryable = verdict.retryable and not audio_pushed
    if isinstance(exc, TTSAPIError):
        body = {
            "provider": exc.provider,
            "error_code": exc.error_code,
            "title": exc.title,
            "context_id": exc.context_id,
            "closes_connection": exc.closes_connection,
            "retry_after": exc.retry_after,
        }
        return APIStatusError(
            message,
            status_code=exc.status_code if exc.status_code is not None else -1,
            request_id=exc.request_id,
            body={k: v for k, v in body.items() if v is not None},
            retryable=retryable,
        )
    ours = isinstance(exc, TTSBridgeError)
    if verdict.category is ErrorCategory.TIMEOUT:
        return APITimeoutError(message if ours else "Request timed out.", retryable=retryable)
    if not ours:
        message = f"{type(exc).__name__}: {message}"
    if verdict.category is ErrorCategory.CONNECTIVITY:
        return APIConnectionError(message, retryable=retryable)
    return APIError(message, retryable=retryable)


# ----------------------------------------------------------------------------------------------------
# estimated word timing (the estimator is ttsbridge.policy.words)


#: Bound on one pushed buffer made of chunks already queued when the first was read (never waits).
_COALESCE_S = 0.1


def _push_timed_words(output_emitter: tts.AudioEmitter, words: list[TimedWord]) -> None:
    """Released words as LiveKit ``TimedString``\\ s (text with its whitespace, start and end in seconds)."""
    for w in words:
        output_emitter.push_timed_transcript(TimedString(text=w.text, start_time=w.start, end_time=w.end))


# ----------------------------------------------------------------------------------------------------
# bounded waits


class _Watchdog:
    """When the server owes audio, and until when.

    Armed by the first send after the last audio chunk (the next chunk must come within ``timeout``), and
    for good once the input has ended (each chunk, and the completion, must come within ``timeout`` of the
    previous one). While the input is still open and audio has caught up with the text, nothing is owed: the
    LLM may be slow, and that is not the TTS's fault.
    """

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self._owed_since: float | None = None
        self._ended = False

    @staticmethod
    def _now() -> float:
        return time.monotonic()

    def on_send(self) -> None:
        if self._owed_since is None:
            self._owed_since = self._now()

    def on_end(self) -> None:
        self._ended = True
        if self._owed_since is None:
            self._owed_since = self._now()

    def on_audio(self) -> None:
        self._owed_since = self._now() if self._ended else None

    def remaining(self) -> float | None:
        """Seconds left before the deadline (<= 0: expired), or None when nothing is owed."""
        if self._owed_since is None:
            return None
        return self._owed_since + self.timeout - self._now()


_T = TypeVar("_T")


async def _within(
    aw: Awaitable[_T],
    timeout: float,
    *,
    discard: Callable[[_T], Awaitable[object]] | None = None,
) -> _T:
    """``asyncio.wait_for`` without its Python < 3.12 flaw: when the caller is cancelled just as ``aw``
    completes, ``wait_for`` returns the result and the cancellation is lost (a closed stream would go on
    reading). Here the cancellation always propagates; a result that is not returned is handed to
    ``discard`` (e.g. a turn opened for a stream that was closed meanwhile is cancelled)."""
    task = asyncio.ensure_future(aw)
    try:
        done, _ = await asyncio.wait({task}, timeout=timeout)
    except asyncio.CancelledError:
        await utils.aio.cancel_and_wait(task)
        if discard is not None and not task.cancelled() and task.exception() is None:
            with contextlib.suppress(Exception):
                await discard(task.result())
        raise
    if not done:
        await utils.aio.cancel_and_wait(task)
        if not task.cancelled() and task.exception() is None:
            if discard is not None:
                with contextlib.suppress(Exception):
                    await discard(task.result())
        raise asyncio.TimeoutError
    return task.result()


# ----------------------------------------------------------------------------------------------------
# the TTS


def _stream_pacer(text_pacing: object) -> tts.SentenceStreamPacer | None:
    """``text_pacing`` as LiveKit's plugins take it: True (a default pacer), False (none) or a pacer."""
    if isinstance(text_pacing, tts.SentenceStreamPacer):
        return text_pacing
    if text_pacing is True:
        return tts.SentenceStreamPacer()
    if text_pacing is False:
        return None
    raise TTSInvalidOptionError(
        "text_pacing", text_pacing, "True, False or a livekit.agents.tts.SentenceStreamPacer"
    )


class TurnTTS(TurnUsageEvents, tts.TTS):
    """A LiveKit TTS over a :class:`TurnProvider` (the per-provider plugins subclass it).

    Args:
        turn_provider: opens turns; owned by this TTS (closed by :meth:`aclose`).
        sample_rate: the rate LiveKit receives (the provider resamples to it).
        model: model name, for metrics.
        provider_name: provider name, for metrics (``"Nineninesix"``).
        word_timestamps: publish estimated word timing (``aligned_transcript`` capability).
        tokenizer: sentence tokenizer for ``stream()`` (default: blingfire, as LiveKit's own plugins).
        text_pacing: pace the sentences ``stream()`` sends, as LiveKit's own plugins: ``True`` for a default
            ``tts.SentenceStreamPacer``, a pacer of your own, or ``False`` (default) to send each sentence at once.
        chars_per_second: the initial speaking rate for word timing, before any audio was measured.
        logger: where to log (the plugin's ``livekit.plugins.<name>`` logger).
        secrets: strings to mask from every error text and log line (the API key).
    """

    def __init__(
        self,
        *,
        turn_provider: TurnProvider,
        sample_rate: int,
        model: str,
        provider_name: str,
        word_timestamps: bool = True,
        tokenizer: NotGivenOr[tokenize.SentenceTokenizer] = NOT_GIVEN,
        text_pacing: tts.SentenceStreamPacer | bool = False,
        chars_per_second: float = DEFAULT_CHARS_PER_SECOND,
        logger: logging.Logger | None = None,
        secrets: tuple[str, ...] = (),
    ) -> None:
        if (
            isinstance(sample_rate, bool)
            or not isinstance(sample_rate, int)
            or not 8000 <= sample_rate <= 96000
        ):
            raise TTSInvalidOptionError("sample_rate", sample_rate, "an integer rate in Hz, 8000-96000")
        stream_pacer = _stream_pacer(text_pacing)
        super().__init__(
            capabilities=tts.TTSCapabilities(streaming=True, aligned_transcript=word_timestamps),
            sample_rate=sample_rate,
            num_channels=1,
        )
        self._turn_provider = turn_provider
        self._model = model
        self._provider_name = provider_name
        self._word_timestamps = word_timestamps
        self._sentence_tokenizer: tokenize.SentenceTokenizer = (
            tokenizer if is_given(tokenizer) else tokenize.blingfire.SentenceTokenizer()
        )
        self._stream_pacer: tts.SentenceStreamPacer | None = stream_pacer
        self._speech_rate = SpeechRate(chars_per_second)
        self._logger = logger or _default_logger
        self._secrets = tuple(s for s in secrets if s)
        self._streams: weakref.WeakSet[TurnSynthesizeStream] = weakref.WeakSet()
        self._prewarm_task: asyncio.Task[None] | None = None
        self._closed = False

    # -- metadata

    @property
    def model(self) -> str:
        return self._model

    @property
    def provider(self) -> str:
        return self._provider_name

    @property
    def turn_provider(self) -> TurnProvider:
        return self._turn_provider

    @property
    def chars_per_second(self) -> float:
        """The speaking rate word timing starts from: measured on the completed turns (the last ~60 s of
        audio), starting from the prior (see :class:`~ttsbridge.policy.words.SpeechRate`)."""
        return self._speech_rate.chars_per_second

    def _apply_option_changes(self, changes: dict[str, Any], *, voice_field: str) -> None:
        """``update_options`` of the plugins: validate and apply ``changes`` on the provider, keep the metrics'
        model name in step, and re-learn the speaking rate when the voice changed."""
        if not changes:
            return
        provider: Any = self._turn_provider
        before = getattr(provider.options, voice_field)
        provider.update_options(**changes)
        self._model = provider.options.model
        if getattr(provider.options, voice_field) != before:
            self._reset_rate()  # word timing re-learns the new voice's speaking rate

    def _reset_rate(self) -> None:
        """Forget the measured rate (the voice changed): back to the prior."""
        self._speech_rate.reset()

    def _redact(self, text: object) -> str:
        return redact(text, self._secrets)

    # -- API

    def synthesize(
        self, text: str, *, conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS
    ) -> TurnChunkedStream:
        return TurnChunkedStream(tts=self, input_text=text, conn_options=conn_options)

    def stream(
        self, *, conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS
    ) -> TurnSynthesizeStream:
        stream = TurnSynthesizeStream(tts=self, conn_options=conn_options)
        self._streams.add(stream)
        return stream

    def prewarm(self) -> None:
        """Open the connection the next turn will use, in the background (errors are logged, not raised)."""
        if self._closed or (self._prewarm_task is not None and not self._prewarm_task.done()):
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop yet: the first turn connects
        self._prewarm_task = loop.create_task(self._prewarm(), name=f"{type(self).__name__}.prewarm")

    async def _prewarm(self) -> None:
        try:
            await self._turn_provider.prewarm(sample_rate=self.sample_rate)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._logger.warning("prewarm failed: %s", self._redact(exc))

    async def aclose(self) -> None:
        self._closed = True
        for stream in list(self._streams):
            await stream.aclose()
        self._streams.clear()
        if self._prewarm_task is not None:
            await utils.aio.cancel_and_wait(self._prewarm_task)
            self._prewarm_task = None
        await self._turn_provider.aclose()

    def _open_turn_kwargs(self) -> dict[str, Any]:
        """Per-turn overrides passed to ``open_turn`` (none by default; options live in the provider)."""
        return {}


# ----------------------------------------------------------------------------------------------------
# streams


class TurnSynthesizeStream(tts.SynthesizeStream):
    """``tts.stream()``: one provider turn per stream (see the module docstring)."""

    def __init__(self, *, tts: TurnTTS, conn_options: APIConnectOptions) -> None:
        super().__init__(tts=tts, conn_options=conn_options)
        self._tts: TurnTTS = tts
        #: the turn of the current attempt (tests and debugging)
        self.turn: Turn | None = None

    async def _run(self, output_emitter: tts.AudioEmitter) -> None:
        owner = self._tts
        log = owner._logger
        request_id = utils.shortuuid()
        output_emitter.initialize(
            request_id=request_id,
            sample_rate=owner.sample_rate,
            num_channels=1,
            mime_type="audio/pcm",
            stream=True,
        )
        timeout = self._conn_options.timeout
        watchdog = _Watchdog(timeout)
        timer = WordClock(owner._speech_rate, release="end") if owner._word_timestamps else None
        sentences: tokenize.SentenceStream = owner._sentence_tokenizer.stream()
        if owner._stream_pacer is not None:
            # LiveKit's pacer: the first sentence at once, the rest batched while enough audio is left to play.
            sentences = owner._stream_pacer.wrap(sent_stream=sentences, audio_emitter=output_emitter)
        has_text = asyncio.Event()  # set on the first non-blank text, or when the input ends without any
        turn_fut: asyncio.Future[Turn | None] = asyncio.get_running_loop().create_future()
        state = {"text": False, "audio": False, "cancelled": False}
        turn: Turn | None = None
        span = current_span()  # LiveKit's tts_request_run span of this attempt
        record: TurnRecord | None = None

        def _trace() -> None:
            if record is not None:
                if state["cancelled"]:
                    record.cancelled()
                note = getattr(output_emitter, "_note_provider_request_id", None)  # LiveKit >= 1.8
                if note is not None and turn is not None and turn.id:  # a retry moved the turn to a fresh id
                    note(turn.id)
                record.apply(span, LIVEKIT_NAMES)

        def _emit_words(words: list[TimedWord]) -> None:
            _push_timed_words(output_emitter, words)
            if turn is not None:
                turn.note_heard(sum(len(w.text) for w in words))  # aligned words emitted: see livekit_usage

        async def _input_task() -> None:
            async for data in self._input_ch:
                if isinstance(data, self._FlushSentinel):
                    if state["text"]:
                        break  # LiveKit 1.8: one segment per stream, text after a flush is dropped
                    continue
                if not state["text"] and data.strip():
                    state["text"] = True
                    has_text.set()
                sentences.push_text(data)
            sentences.end_input()
            has_text.set()

        async def _open() -> Turn:
            nonlocal turn, record
            record = TurnRecord(
                owner._turn_provider, sample_rate=owner.sample_rate, overrides=owner._open_turn_kwargs()
            )
            started = time.perf_counter()
            opened = await _within(
                owner._turn_provider.open_turn(sample_rate=owner.sample_rate, **owner._open_turn_kwargs()),
                timeout,
                discard=lambda t: t.cancel(),
            )
            turn = self.turn = opened
            self._acquire_time = time.perf_counter() - started
            self._connection_reused = opened.connection_reused
            output_emitter.start_segment(segment_id=opened.id or request_id)
            record.bind(opened)
            _trace()
            log.debug("turn opened", extra={"turn_id": opened.id, "request_id": request_id})
            return opened

        async def _send_task() -> None:
            await has_text.wait()
            if not state["text"]:
                turn_fut.set_result(None)
                return
            try:
                opened = await _open()
            except BaseException:
                if not turn_fut.done():
                    turn_fut.set_result(None)
                raise
            turn_fut.set_result(opened)
            async for ev in sentences:
                text = ev.token + " "
                self._mark_started()
                watchdog.on_send()
                await opened.send(text)
                if timer is not None:
                    timer.add_text(text)
            await opened.end()
            watchdog.on_end()

        async def _recv_task() -> None:
            opened = await turn_fut
            if opened is None:
                return
            rate = opened.sample_rate or owner.sample_rate
            bytes_per_s = 2.0 * rate
            limit = max(2, int(_COALESCE_S * rate) * 2)
            take_ready = getattr(opened, "take_ready", None)  # every chunk already queued, never waits
            push, on_audio = output_emitter.push, watchdog.on_audio
            add_audio = timer.add_audio if timer is not None else None
            async for pcm in opened:
                if not pcm:
                    continue
                if take_ready is not None and len(pcm) < limit:
                    more = take_ready(limit - len(pcm))
                    if more:
                        pcm += more
                push(pcm)
                if not state["audio"]:
                    state["audio"] = True
                if record is not None:
                    record.on_audio()
                on_audio()
                if add_audio is not None:
                    words = add_audio(len(pcm) / bytes_per_s)
                    if words:
                        _emit_words(words)
            if timer is not None and opened.done and not state["cancelled"]:  # completed, not cut short
                _emit_words(timer.end_segment())  # the rest by the real duration; calibrates the rate

        input_t = asyncio.create_task(_input_task(), name="TurnSynthesizeStream.input")
        send_t = asyncio.create_task(_send_task(), name="TurnSynthesizeStream.send")
        recv_t = asyncio.create_task(_recv_task(), name="TurnSynthesizeStream.recv")
        try:
            await _supervise(send_t, recv_t, input_t, watchdog=watchdog)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if record is not None:
                record.failed(exc)
            err = to_api_error(exc, audio_pushed=state["audio"], secrets=owner._secrets)
            log.warning(
                "%s turn %s failed: %s",
                owner.provider,
                turn.id if turn is not None else "-",
                owner._redact(err),
                extra={"request_id": request_id},
            )
            raise err from None
        finally:

            async def _cancel_turn() -> None:
                if turn is not None and not turn.done:
                    state["cancelled"] = True
                    # barge-in (or our own failure): stop the generation, keep the provider's connection
                    with contextlib.suppress(Exception):
                        await asyncio.wait_for(turn.cancel(), max(timeout, 1.0))

            await _cancel_turn()
            _trace()
            await sentences.aclose()
            await utils.aio.gracefully_cancel(input_t, send_t, recv_t)
            await _cancel_turn()  # a turn whose opening completed while the tasks were being stopped
            _trace()
            if turn is not None:
                owner._report_usage(request_id, turn.usage)


async def _supervise(
    send_t: asyncio.Task[None],
    recv_t: asyncio.Task[None],
    input_t: asyncio.Task[None],
    *,
    watchdog: _Watchdog,
) -> None:
    """Wait until the turn's audio is complete; raise the first task error, or a timeout if audio is late.

    The receiving side's error is the turn's real one (a send to a turn that just failed only says the turn
    is over), so when sending fails the receiver gets a moment (bounded) to report first.
    """
    tasks = {send_t, recv_t, input_t}
    while True:
        if recv_t.done() and not recv_t.cancelled() and recv_t.exception() is not None:
            raise recv_t.exception()  # type: ignore[misc]
        for t in (send_t, input_t):
            if t.done() and not t.cancelled() and t.exception() is not None:
                if not recv_t.done():
                    await asyncio.wait({recv_t}, timeout=min(watchdog.timeout, 1.0))
                if recv_t.done() and not recv_t.cancelled() and recv_t.exception() is not None:
                    raise recv_t.exception()  # type: ignore[misc]
                raise t.exception()  # type: ignore[misc]
        if send_t.done() and recv_t.done():
            return
        remaining = watchdog.remaining()
        if remaining is not None and remaining <= 0:
            raise TTSTimeoutError(f"no audio from the server within {watchdog.timeout:g}s")
        wait = watchdog.timeout if remaining is None else remaining
        live = {t for t in tasks if not t.done()}
        if live:
            await asyncio.wait(live, timeout=max(wait, 0.0), return_when=asyncio.FIRST_COMPLETED)


class TurnChunkedStream(tts.ChunkedStream):
    """``tts.synthesize(text)``: the provider's one-shot streaming synthesis, emitted as it arrives."""

    def __init__(self, *, tts: TurnTTS, input_text: str, conn_options: APIConnectOptions) -> None:
        super().__init__(tts=tts, input_text=input_text, conn_options=conn_options)
        self._tts: TurnTTS = tts

    async def _run(self, output_emitter: tts.AudioEmitter) -> None:
        owner = self._tts
        request_id = utils.shortuuid()
        output_emitter.initialize(
            request_id=request_id,
            sample_rate=owner.sample_rate,
            num_channels=1,
            mime_type="audio/pcm",
        )
        if not self._input_text.strip():
            return
        timeout = self._conn_options.timeout
        timer = WordClock(owner._speech_rate, release="end") if owner._word_timestamps else None
        if timer is not None:
            timer.add_text(self._input_text)
        audio_pushed = False
        span = current_span()  # LiveKit's tts_request_run span of this attempt
        record = TurnRecord(
            owner._turn_provider, sample_rate=owner.sample_rate, overrides=owner._open_turn_kwargs()
        )
        record.add_characters(len(self._input_text))
        agen: AsyncIterator[bytes] = owner._turn_provider.synthesize(
            self._input_text, sample_rate=owner.sample_rate, **owner._open_turn_kwargs()
        ).__aiter__()
        try:
            while True:
                try:
                    pcm = await _within(agen.__anext__(), timeout)
                except StopAsyncIteration:
                    break
                if not pcm:
                    continue
                output_emitter.push(pcm)
                audio_pushed = True
                record.on_audio()
                if timer is not None:
                    words = timer.add_audio(len(pcm) / 2 / owner.sample_rate)
                    if words:
                        _push_timed_words(output_emitter, words)
            if timer is not None:
                _push_timed_words(output_emitter, timer.end_segment())
            output_emitter.flush()
            record.completed()
        except asyncio.CancelledError:
            record.cancelled()
            raise
        except Exception as exc:
            record.failed(exc)
            err = to_api_error(exc, audio_pushed=audio_pushed, secrets=owner._secrets)
            owner._logger.warning(
                "%s synthesize failed: %s",
                owner.provider,
                owner._redact(err),
                extra={"request_id": request_id},
            )
            raise err from None
        finally:
            record.apply(span, LIVEKIT_NAMES)
            aclose = getattr(agen, "aclose", None)
            if aclose is not None:
                with contextlib.suppress(Exception):
                    await aclose()
