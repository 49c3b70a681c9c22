"""Kitta as a :class:`ttsbridge.turns.TurnProvider`: one turn = one Kitta session (an
:class:`~ttsbridge.engine.turn.EngineTurn`; a retry is a new session); the provider is its turns' dialer.

A v2 connection carries exactly one generation, so every turn needs connect + auth + start before its first
text can go out. With ``standby=True`` the provider keeps one *connection* warm in the background: connected
and ``authenticated``, but with its ``start`` held, so no server session and no request_id exist until a user
opens a turn. The turn adopts the connection and sends ``start`` with its own fresh request_id; only
``start`` -> ``ready`` remains on its path. An idle standby connection is replaced once it is
``standby_max_age`` seconds old (below the server's idle timeout); nothing is ever started while idle.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any, cast

from ttsbridge._keys import account_scope
from ttsbridge._redact import mask_key
from ttsbridge.engine.shared import LoopShare, settings_key
from ttsbridge.engine.turn import EngineTurn, Link
from ttsbridge.errors import TTSConnectionError, TTSInvalidOptionError
from ttsbridge.kitta.client import KittaClient
from ttsbridge.kitta.connection import KittaConnection
from ttsbridge.kitta.facts import KittaRequest
from ttsbridge.kitta.models import DEFAULT_BASE_URL, KittaLimits, KittaOptions
from ttsbridge.kitta.protocol import KittaProtocol
from ttsbridge.kitta.standby import Standby, spawn_close
from ttsbridge.turns import TurnProvider

__all__ = ["KittaTurnProvider"]

log = logging.getLogger("ttsbridge.kitta")

_MIN_RATE = 8000
_MAX_RATE = 192_000


def _check_rate(sample_rate: Any) -> int:
    if (
        isinstance(sample_rate, bool)
        or not isinstance(sample_rate, int)
        or not _MIN_RATE <= sample_rate <= _MAX_RATE
    ):
        raise TTSInvalidOptionError("sample_rate", sample_rate, f"an int between {_MIN_RATE} and {_MAX_RATE}")
    return sample_rate


class KittaTurnProvider(TurnProvider[KittaOptions]):
    """Turns on Kitta Realtime TTS v2, with an optional warm standby connection.

    Args:
        api_key: Kitta key (default ``$KITTA_API_KEY``); it only ever travels in the handshake header (or the
            auth frame with ``auth="frame"``).
        base_url: server (``wss://realtime.fishaudio.org`` by default; http(s) mapped to ws(s)).
        options: :class:`KittaOptions` (voice_id and model at least).
        standby: keep one connection connected and authenticated in the background (``start`` held until a
            turn opens), so that a turn starts without a handshake. Starts no session while idle.
        standby_max_age: replace an idle standby connection after this many seconds (keep it below the
            server's idle and authentication timeouts).
        standby_replace_delay_max: the replacement of a used standby is started when the turn that took it
            has its first audio (so the handshake does not compete with it), at the latest after this long.
        client: an existing :class:`KittaClient` (then ``api_key``/``base_url``/knobs are ignored; the
            provider does not close it).
        **client_kwargs: ``auth``, ``max_retries``, ``backoff_initial``, ``backoff_max``, ``connect_timeout``,
            ``event_timeout``, ``close_timeout``, ``resume_after_audio``, ``proxy``, ``ping_interval``,
            ``ping_after_silence``, ``pong_timeout`` (see KittaClient).
    """

    provider = "kitta"

    def __init__(
        self,
        api_key: str | None = None,
        *,
        base_url: str = DEFAULT_BASE_URL,
        options: KittaOptions | None = None,
        standby: bool = True,
        standby_max_age: float = 15.0,
        standby_replace_delay_max: float = 1.0,
        limits: KittaLimits | None = None,
        client: KittaClient | None = None,
        **client_kwargs: Any,
    ) -> None:
        if not isinstance(options, KittaOptions):
            raise TTSInvalidOptionError("options", options, "KittaOptions(voice_id=..., model=...)")
        if (
            isinstance(standby_max_age, bool)
            or not isinstance(standby_max_age, (int, float))
            or standby_max_age <= 0
        ):
            raise TTSInvalidOptionError("standby_max_age", standby_max_age, "a number of seconds > 0")
        if (
            isinstance(standby_replace_delay_max, bool)
            or not isinstance(standby_replace_delay_max, (int, float))
            or standby_replace_delay_max < 0
        ):
            raise TTSInvalidOptionError(
                "standby_replace_delay_max", standby_replace_delay_max, "seconds >= 0"
            )
        self._options = options
        self.standby_enabled = standby
        self.standby_max_age = float(standby_max_age)
        self.standby_replace_delay_max = float(standby_replace_delay_max)
        knobs = {"enabled": standby, "max_age": self.standby_max_age, "replace_delay_max": self.standby_replace_delay_max}
        if client is None:
            # Validated now (a bad knob fails here, before any loop runs); the client and its standby are made
            # per event loop and shared by every provider with the same settings there (engine/shared.py).
            spare = KittaClient(api_key, base_url=base_url, limits=limits, **client_kwargs)
            key = spare._api_key

            def make() -> Standby:
                made = KittaClient(key, base_url=base_url, limits=limits, **client_kwargs)
                return Standby(made, options, **knobs)

            share_key = settings_key("kitta", key, base_url, limits, client_kwargs, knobs)
        else:  # the caller's client: a standby of this provider's own, the client left open
            spare = client

            def make() -> Standby:
                return Standby(client, options, own_client=False, **knobs)

            share_key = settings_key("kitta-client", id(self))
        self._url = spare.url
        self._api_key = spare._api_key
        self._standbys: LoopShare[Standby] = LoopShare(share_key, make, Standby.aclose, name="kitta")
        self._turns: set[EngineTurn] = set()
        self._closing: set[asyncio.Task[None]] = set()
        self._not_before = 0.0  # loop time: no turn starts before this (backoff after a retryable failure)
        #: Counters for diagnostics and tests (this provider's turns).
        self.standby_hits = 0
        self.standby_misses = 0

    def __repr__(self) -> str:
        return f"KittaTurnProvider(url={self._url!r}, api_key={mask_key(self._api_key)}, standby={self.standby_enabled})"

    @property
    def standby(self) -> Standby:
        """This event loop's standby keeper (shared by every provider with the same settings on this loop)."""
        return self._standbys.get()

    @property
    def client(self) -> KittaClient:
        """This event loop's client (once closed: the last one, for diagnostics; it refuses new sessions)."""
        if self._standbys.closed:
            last = self._standbys.last()
            if last is not None:
                return last.client
        return self._standbys.get().client

    @property
    def closed(self) -> bool:
        return self._standbys.closed

    @property
    def options(self) -> KittaOptions:
        return self._options

    @property
    def standby_session(self) -> KittaConnection | None:
        keeper = self._standbys.peek()
        return keeper.session if keeper is not None else None

    @property
    def standby_created(self) -> int:
        keeper = self._standbys.last()
        return keeper.created if keeper is not None else 0

    @property
    def standby_retired(self) -> int:
        keeper = self._standbys.last()
        return keeper.retired if keeper is not None else 0

    # --------------------------------------------------------------------------------------------- options

    def _turn_options(self, overrides: dict[str, Any]) -> KittaOptions:
        if "voice" in overrides:  # adapters speak of "voice"
            overrides = dict(overrides)
            voice = overrides.pop("voice")
            overrides.setdefault("voice_id", voice)
        overrides.pop("sample_rate", None)
        return self._options.with_overrides(**overrides)

    def describe(self, *, sample_rate: int, **overrides: Any) -> dict[str, str]:
        options = self._turn_options(
            overrides
        )  # the wire rate is the server's: known once a session is ready
        return {"model": options.model, "voice": options.voice_id, "wire_format": options.format}

    def cache_identity(self, *, sample_rate: int, **overrides: Any) -> dict[str, Any]:
        options = self._turn_options(overrides)
        return {
            "provider": self.provider,
            "endpoint": self._url,
            "account": account_scope(self._api_key),
            # every start.request field: each one changes the audio (not options.sample_rate: a turn's audio
            # comes out at the rate it is opened with, keyed below)
            "options": options.start_request().model_dump(),
            "sample_rate": _check_rate(sample_rate),
        }

    def update_options(self, **options: Any) -> None:
        self._options = self._turn_options(options)  # the standby holds no start: it serves any options

    # --------------------------------------------------------------------------------------------- standby

    def _turn_done(self, turn: EngineTurn) -> None:
        """Forget the turn at once; its protocol says when the next turn may start (a turn opened right after
        a retryable failure is a retry, LiveKit's loop or a caller's: its ``start`` waits the backoff from
        that failure, warm connection or not)."""
        self._turns.discard(turn)
        proto = cast("KittaProtocol | None", turn.protocol)
        if proto is not None:
            self._not_before = proto.not_before_next(self._not_before)

    async def prewarm(self, sample_rate: int | None = None) -> None:
        """Connect the standby (if enabled) and wait until it is authenticated; raises its error if it fails.
        One standby however many calls and providers (with the same settings, on this loop); does nothing
        once the provider is closed.

        ``sample_rate`` is accepted for the interface and ignored: a session's rate is the server's.
        """
        if not self.standby_enabled or self.closed:
            return
        await self._standbys.get().prewarm()

    # ----------------------------------------------------------------------------------------------- turns

    async def open_turn(self, *, sample_rate: int, timeout: float | None = None, **overrides: Any) -> EngineTurn:
        rate = _check_rate(sample_rate)
        options = self._turn_options(overrides)
        if self.closed:
            raise TTSConnectionError("kitta: provider is closed", retryable=False)
        keeper = self.standby
        not_before, self._not_before = self._not_before, 0.0
        if not_before > asyncio.get_running_loop().time():
            log.debug("kitta: previous turn failed (retryable); its start waits until %.2f", not_before)
        # every send closes its segment: the adapters hand whole sentences, and a flush per sentence gets its
        # audio started at once
        request = KittaRequest(
            options.start_request(), not_before or None, flush_each_send=True, event_timeout=timeout
        )
        turn = EngineTurn(self, request, turn_id=str(uuid.uuid4()), sample_rate=rate)
        await turn.open()
        if turn.connection_reused:
            keeper.gate(turn.first_audio_or_done)
        self._turns.add(turn)  # only while it runs: nothing of a turn is kept after it ends
        turn.add_done_callback(self._turn_done)
        log.debug("kitta: turn %s opened (standby=%s)", turn.id, turn.connection_reused)
        return turn

    # ------------------------------------------------------------------------------------ the turns' dialer

    async def dial(self, turn_id: str, request: KittaRequest, *, retry: bool) -> tuple[Link, bool]:
        """A connection for an attempt: the warm standby for a first attempt when there is one (``start``
        carries the turn's options), else a new one (a retry always: a fresh session)."""
        if self.closed:
            raise TTSConnectionError("kitta: provider is closed", retryable=False)
        keeper = self.standby
        if not retry and self.standby_enabled:
            session = keeper.take()
            if session is not None:
                self.standby_hits += 1
                return session, True
            self.standby_misses += 1
        return keeper.client.connect(turn_id, self._options), False

    def hang_up(self, link: Link, *, cancelled: bool) -> None:
        """The turn is done with its session: a cancelled one is closed now (v2 has no cancel message); one
        that ended closes itself once its protocol knows the outcome."""
        if cancelled:
            spawn_close(cast("KittaConnection", link), "cancelled", self._closing)

    async def aclose(self) -> None:
        """Fail this provider's turns and let go of the shared standby (closed, 1000, with every connection of
        its client, once no other provider on this loop uses it). Idempotent; nothing reconnects afterwards:
        ``prewarm()`` does nothing and ``open_turn()`` raises :class:`TTSConnectionError`."""
        err = TTSConnectionError("kitta: client closed", retryable=False)
        for turn in list(self._turns):
            turn.abort(err)  # a turn waiting to retry fails now, and starts no session
        await self._standbys.aclose()
        for turn in list(self._turns):
            if not turn.done:
                await turn.cancel()  # shared on (or the caller's client): this provider's sessions close
        if self._closing:
            await asyncio.wait(set(self._closing), timeout=5.0)
        self._turns.clear()
