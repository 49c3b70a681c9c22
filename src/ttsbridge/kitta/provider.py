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
import contextlib
import logging
import uuid
from typing import Any, cast

from ttsbridge._keys import account_scope
from ttsbridge.engine.pool import KeyedPool
from ttsbridge.engine.turn import EngineTurn, Link
from ttsbridge.errors import TTSConnectionError, TTSInvalidOptionError
from ttsbridge.kitta.client import KittaClient
from ttsbridge.kitta.connection import KittaConnection
from ttsbridge.kitta.facts import KittaRequest
from ttsbridge.kitta.models import DEFAULT_BASE_URL, KittaLimits, KittaOptions
from ttsbridge.kitta.protocol import KittaProtocol
from ttsbridge.turns import TurnProvider

__all__ = ["KittaTurnProvider"]

log = logging.getLogger("ttsbridge.kitta")

_STANDBY = "standby"  # the pool's one key: the standby holds no start, so it serves any options
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
        self._own_client = client is None
        self._client = client or KittaClient(api_key, base_url=base_url, limits=limits, **client_kwargs)
        self.standby_enabled = standby
        self.standby_max_age = float(standby_max_age)
        self.standby_replace_delay_max = float(standby_replace_delay_max)
        #: The warm connection lives in an exclusive pool (one generation per socket): taken by a turn, refilled.
        self._pool: KeyedPool[str, KittaConnection] = KeyedPool(self._open_standby, shared=False, name="kitta")
        self._replace_gate: asyncio.Event | None = None
        self._standby_task: asyncio.Task[None] | None = None
        self._wake: asyncio.Event | None = None
        self._turns: set[EngineTurn] = set()
        self._closing: set[asyncio.Task[None]] = set()
        self._closed = False
        self._not_before = 0.0  # loop time: no turn starts before this (backoff after a retryable failure)
        #: Counters for diagnostics and tests.
        self.standby_hits = 0
        self.standby_misses = 0
        self.standby_retired = 0
        self.standby_created = 0

    def __repr__(self) -> str:
        return f"KittaTurnProvider(client={self._client!r}, standby={self.standby_enabled})"

    @property
    def client(self) -> KittaClient:
        return self._client

    @property
    def options(self) -> KittaOptions:
        return self._options

    @property
    def standby_session(self) -> KittaConnection | None:
        return self._pool.get(_STANDBY)

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
            "endpoint": self._client.url,
            "account": account_scope(self._client._api_key),
            # every start.request field: each one changes the audio (not options.sample_rate: a turn's audio
            # comes out at the rate it is opened with, keyed below)
            "options": options.start_request().model_dump(),
            "sample_rate": _check_rate(sample_rate),
        }

    def update_options(self, **options: Any) -> None:
        self._options = self._turn_options(options)  # the standby holds no start: it serves any options

    # --------------------------------------------------------------------------------------------- standby

    def _ensure_standby_loop(self) -> None:
        if not self.standby_enabled or self._closed:
            return
        if self._wake is None:
            self._wake = asyncio.Event()
        if self._standby_task is None or self._standby_task.done():
            self._standby_task = asyncio.create_task(self._standby_loop(), name="kitta-standby")

    def _kick(self) -> None:
        if self._wake is not None:
            self._wake.set()

    def _retire_standby(self, why: str) -> None:
        session = self._pool.get(_STANDBY)
        if session is not None:
            self._pool.discard(_STANDBY, session)
            self.standby_retired += 1
            log.debug("kitta: retiring standby %s (%s)", session.request_id, why)
            self._spawn_close(session)
        self._kick()

    def _turn_done(self, turn: EngineTurn) -> None:
        """Forget the turn at once; its protocol says when the next turn may start (a turn opened right after
        a retryable failure is a retry, LiveKit's loop or a caller's: its ``start`` waits the backoff from
        that failure, warm connection or not)."""
        self._turns.discard(turn)
        proto = cast("KittaProtocol | None", turn.protocol)
        if proto is not None:
            self._not_before = proto.not_before_next(self._not_before)

    def _spawn_close(self, session: KittaConnection, reason: str = "standby retired") -> None:
        wait = reason != "cancelled"  # (a cancelled turn's close completes in the session's task)
        task = asyncio.create_task(session.close(1000, reason, wait=wait), name="kitta-session-close")
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def _standby_loop(self) -> None:
        """Keep one warm connection (authenticated, nothing started). Replaced after use, retired by age,
        backed off after failures."""
        assert self._wake is not None
        failures = 0
        while not self._closed:
            session = self._pool.get(_STANDBY)
            if session is None and self._replace_gate is not None:
                # Build the replacement once the turn that took the standby has its first audio (or ended),
                # so that our handshake never competes with that turn's critical path; bounded.
                gate, self._replace_gate = self._replace_gate, None
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(gate.wait(), self.standby_replace_delay_max)
                continue
            if session is not None and not session.usable():
                # failed (auth, network...): back off before the next one; turns connect on their own
                self._pool.discard(_STANDBY, session)
                failures += 1
                delay = min(30.0, 0.5 * 2 ** (failures - 1))
                log.warning(
                    "kitta: standby session failed (%s); next attempt in %.1f s", session.error, delay
                )
                await self._sleep(delay)
                continue
            if session is None:
                try:
                    session = await self._pool.prefill(_STANDBY)
                except Exception as exc:  # e.g. a shared client closed under us: stop keeping a standby
                    log.warning("kitta: cannot open a standby session (%s); standby stopped", exc)
                    return
            if not session.authenticated.is_set():
                # Still connecting: its age starts to count once it is warm (a slow handshake under load
                # must not be retired before it ever served); the connect and auth timeouts bound the wait.
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(session.authenticated.wait(), self._auth_bound())  # set on end too
                continue
            failures = 0
            if session.expired():
                self._retire_standby("max age")
                continue
            # wakes on: taken by a turn, session ended, aclose, options changed; or at max age
            await self._sleep(self.standby_max_age - session.age)

    async def _sleep(self, delay: float) -> None:
        assert self._wake is not None
        self._wake.clear()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._wake.wait(), max(0.0, delay))

    async def _open_standby(self, _key: str) -> KittaConnection:
        """The pool's factory: a connection that connects and authenticates in the background."""
        session = self._client.preconnect(self._options)
        session.max_age = self.standby_max_age
        session.task.add_done_callback(lambda _t: self._kick())
        self.standby_created += 1
        return session

    def _take_standby(self) -> KittaConnection | None:
        """The warm connection, if usable: any turn can take it (``start`` carries the turn's options)."""
        session = self._pool.get(_STANDBY)
        if session is None:
            return None
        if not session.usable():
            self._pool.discard(_STANDBY, session)
            self._kick()
            return None
        if session.age >= self.standby_max_age:
            self._retire_standby("max age")
            return None
        if session.suspect:
            # A keepalive ping is out and unanswered: maybe dead. The turn connects on its own and the standby
            # is replaced (a pong still in flight would otherwise hand it, dead or not, to the next turn).
            self._retire_standby("ping unanswered")
            return None
        self._pool.discard(_STANDBY, session)
        self._kick()  # the replacement connects once the turn has its first audio
        return session

    async def prewarm(self, sample_rate: int | None = None) -> None:
        """Connect the standby (if enabled) and wait until it is authenticated; raises its error if it fails.

        ``sample_rate`` is accepted for the interface and ignored: a session's rate is the server's.
        """
        if not self.standby_enabled or self._closed:
            return
        session = self._pool.get(_STANDBY)
        if session is not None and not session.alive:
            self._pool.discard(_STANDBY, session)
        session = await self._pool.prefill(_STANDBY)
        self._ensure_standby_loop()
        await session.wait_authenticated(self._auth_bound())

    def _auth_bound(self) -> float:
        return self._client.connect_timeout + self._client.event_timeout

    # ----------------------------------------------------------------------------------------------- turns

    async def open_turn(self, *, sample_rate: int, timeout: float | None = None, **overrides: Any) -> EngineTurn:
        rate = _check_rate(sample_rate)
        options = self._turn_options(overrides)
        if self._closed:
            raise TTSConnectionError("kitta: provider is closed", retryable=False)
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
            self._replace_gate = turn.first_audio_or_done
        self._turns.add(turn)  # only while it runs: nothing of a turn is kept after it ends
        turn.add_done_callback(self._turn_done)
        log.debug("kitta: turn %s opened (standby=%s)", turn.id, turn.connection_reused)
        return turn

    # ------------------------------------------------------------------------------------ the turns' dialer

    async def dial(self, turn_id: str, request: KittaRequest, *, retry: bool) -> tuple[Link, bool]:
        """A connection for an attempt: the warm standby for a first attempt when there is one (``start``
        carries the turn's options), else a new one (a retry always: a fresh session)."""
        if self._closed:
            raise TTSConnectionError("kitta: provider is closed", retryable=False)
        if not retry and self.standby_enabled:
            self._ensure_standby_loop()
            standby = self._take_standby()
            if standby is not None:
                self.standby_hits += 1
                return standby, True
            self.standby_misses += 1
        return self._client.connect(turn_id, self._options), False

    def hang_up(self, link: Link, *, cancelled: bool) -> None:
        """The turn is done with its session: a cancelled one is closed now (v2 has no cancel message); one
        that ended closes itself once its protocol knows the outcome."""
        if cancelled:
            self._spawn_close(cast("KittaConnection", link), "cancelled")

    async def aclose(self) -> None:
        self._closed = True
        self._kick()
        task = self._standby_task
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(task, 5.0)
        await self._pool.aclose()
        err = TTSConnectionError("kitta: client closed", retryable=False)
        for turn in list(self._turns):
            turn.abort(err)  # a turn waiting to retry fails now, and starts no session
        if self._own_client:
            await self._client.aclose()
        else:
            for turn in list(self._turns):
                if not turn.done:
                    await turn.cancel()
        if self._closing:
            await asyncio.wait(set(self._closing), timeout=5.0)
        self._turns.clear()
