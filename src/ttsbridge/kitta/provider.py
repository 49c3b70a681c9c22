"""Kitta as a :class:`ttsbridge.turns.TurnProvider`: its options, its typed request, which dialer (the engine's
:class:`~ttsbridge.engine.dialers.StandbyDialer`: one Kitta session per connection, a warm standby connected and
``authenticated`` with no ``start``, so no session exists until a user opens a turn; one standby per event loop
for every provider with the same endpoint, key and settings: :mod:`ttsbridge.engine.shared`) and its cache
identity; turns, connections and retries (planned by the protocol) are the engine's (docs/kitta.md,
docs/production.md). The key travels only in the ``Authorization`` header (or the ``auth`` frame), never in a URL,
and never reaches a log line."""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from typing import Any

from ttsbridge._keys import account_scope
from ttsbridge._redact import mask_key
from ttsbridge.engine.backoff import Backoff
from ttsbridge.engine.dialers import StandbyDialer
from ttsbridge.engine.settings import ConnectionSettings
from ttsbridge.engine.shared import LoopShare
from ttsbridge.engine.turn import EngineTurn
from ttsbridge.errors import TTSConnectionError, TTSInvalidOptionError
from ttsbridge.kitta.catalog import SETTINGS, build_url, resolve_api_key, retry_backoff
from ttsbridge.kitta.facts import KittaRequest
from ttsbridge.kitta.models import DEFAULT_BASE_URL, KittaLimits, KittaOptions, StartRequest
from ttsbridge.kitta.protocol import KittaProtocol
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


def _number(name: str, value: Any, low: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < low:
        raise TTSInvalidOptionError(name, value, f"a number >= {low:g}")
    return float(value)


@dataclass(frozen=True)
class Endpoint:
    """What a connection's protocol is made with; with the :class:`ConnectionSettings` and the standby knobs,
    what providers must all match to share a standby (the key is compared, never shown). The options are not
    part of it: a standby holds no ``start``, so it serves any model and voice (the turn that takes it sends
    its own ``start.request``)."""

    api_key: str = field(repr=False)
    url: str
    auth: str
    limits: KittaLimits
    event_timeout: float
    max_retries: int
    backoff_initial: float
    backoff_max: float
    resume_after_audio: bool

    def protocol(self, placeholder: StartRequest, label: str) -> KittaProtocol:
        """The protocol of a new connection (no turn on it yet; ``label`` names it). ``placeholder`` is never
        sent: every turn opens with its own start request."""
        return KittaProtocol(
            request=placeholder,
            auth=self.auth,
            token=self.api_key,
            limits=self.limits,
            secrets=(self.api_key,),
            url=self.url,
            event_timeout=self.event_timeout,
            max_retries=self.max_retries,
            backoff_initial=self.backoff_initial,
            backoff_max=self.backoff_max,
            resume_after_audio=self.resume_after_audio,
            label=label,
        )


class KittaTurnProvider(TurnProvider[KittaOptions]):
    """Turns on Kitta Realtime TTS v2, with an optional warm standby connection.

    Args:
        api_key: Kitta key (default ``$KITTA_API_KEY``); it only ever travels in the handshake header (or the
            auth frame with ``auth="frame"``).
        base_url: server (``wss://realtime.fishaudio.org`` by default; http(s) mapped to ws(s); the path
            ``/v2/tts/live`` is appended unless present). Must not carry a key.
        options: :class:`KittaOptions` (voice_id and model at least).
        standby: keep one connection connected and authenticated in the background (``start`` held until a
            turn opens), so that a turn starts without a handshake. Starts no session while idle.
        standby_max_age: replace an idle standby connection after this many seconds (the ``max_age`` of its
            connection settings; keep it below the server's idle and authentication timeouts).
        standby_replace_delay_max: the replacement of a used standby is started when the turn that took it
            has its first audio (so the handshake does not compete with it), at the latest after this long.
        auth: ``"header"`` (``Authorization: Bearer`` on the handshake) or ``"frame"`` (an in-band ``auth``
            event first, for proxies that strip headers).
        max_retries: retries of one turn (retryable errors, close 1012/1013, retryable handshakes).
        backoff_initial / backoff_max: the backoff with jitter between retries, and before the next turn
            after a retryable failure that was not retried (seconds).
        event_timeout: longest server silence while it owes us something (a turn's own timeout replaces it).
        resume_after_audio: on a retryable failure after some segments completed, continue the remaining,
            never-delivered segments on a new session (a segment whose audio was delivered is never replayed).
        limits: client-side protocol limits.
        settings: the connection knobs (default: :data:`~ttsbridge.kitta.catalog.SETTINGS`);
        **knobs: any of them by name (``connect_timeout``, ``ping_interval``, ``proxy``, ``ssl``...: see
            :class:`~ttsbridge.engine.settings.ConnectionSettings` and docs/kitta.md).

    Providers with the same endpoint, key, knobs and standby knobs share this event loop's dialer and its one
    standby (docs/production.md), whatever their options; closing one closes only what no other uses. Built
    where no loop runs yet, it leases nothing until it is used in one.
    """

    provider = "kitta"

    def __init__(
        self,
        api_key: str | None = None,
        *,
        base_url: str = DEFAULT_BASE_URL,
        options: KittaOptions | None = None,
        standby: bool = True,
        standby_max_age: float | None = None,
        standby_replace_delay_max: float = 1.0,
        auth: str = "header",
        max_retries: int = 3,
        backoff_initial: float = 0.25,
        backoff_max: float = 4.0,
        event_timeout: float = 20.0,
        resume_after_audio: bool = True,
        limits: KittaLimits | None = None,
        settings: ConnectionSettings | None = None,
        **knobs: Any,
    ) -> None:
        if not isinstance(options, KittaOptions):
            raise TTSInvalidOptionError("options", options, "KittaOptions(voice_id=..., model=...)")
        if auth not in ("header", "frame"):
            raise TTSInvalidOptionError("auth", auth, ["header", "frame"])
        if standby_max_age is not None:
            knobs["max_age"] = standby_max_age
        self._options = options
        self._api_key = key = resolve_api_key(api_key)
        self.url = build_url(base_url)
        self.auth = auth
        self.endpoint = endpoint = Endpoint(
            key, self.url, auth, limits or KittaLimits(),
            _number("event_timeout", event_timeout, 1e-3),
            int(_number("max_retries", max_retries, 0)),
            _number("backoff_initial", backoff_initial, 0),
            _number("backoff_max", backoff_max, 0),
            resume_after_audio,
        )  # fmt: skip
        self.settings = conn = (settings or SETTINGS).replace(**knobs)
        self.standby_enabled = standby
        delay = _number("standby_replace_delay_max", standby_replace_delay_max, 0)
        hold = retry_backoff(endpoint.backoff_initial, endpoint.backoff_max)
        placeholder = options.start_request()  # (never sent: a turn sends its own)

        def make() -> StandbyDialer:
            return _dialer(endpoint, placeholder, conn, standby, delay, hold)

        # The dialer (and its standby) is made per event loop, shared by every provider with the same settings.
        self._dialers: LoopShare[StandbyDialer] = LoopShare(
            (endpoint, conn, standby, delay), make, StandbyDialer.aclose, name="kitta"
        )
        self._turns: set[EngineTurn] = set()  # only while they run: nothing of a turn is kept after it ends

    def __repr__(self) -> str:
        return (
            f"KittaTurnProvider(url={self.url!r}, auth={self.auth!r}, api_key={mask_key(self._api_key)}, "
            f"standby={self.standby_enabled})"
        )

    @property
    def dialer(self) -> StandbyDialer:
        """This event loop's dialer (its standby), shared by every provider with the same endpoint and
        settings on this loop. Once the provider is closed: the one it last used on this loop, for diagnostics
        (its counters and connections; turns go through :meth:`open_turn`, which refuses)."""
        return self._dialers.current()

    @property
    def closed(self) -> bool:
        return self._dialers.closed

    @property
    def options(self) -> KittaOptions:
        return self._options

    def _turn_options(self, overrides: dict[str, Any]) -> KittaOptions:
        if "voice" in overrides:  # adapters speak of "voice"
            overrides = dict(overrides)
            overrides.setdefault("voice_id", overrides.pop("voice"))
        overrides.pop("sample_rate", None)
        return self._options.with_overrides(**overrides)

    def update_options(self, **options: Any) -> None:
        self._options = self._turn_options(options)  # the standby holds no start: it serves any options

    def describe(self, *, sample_rate: int, **overrides: Any) -> dict[str, str]:
        options = self._turn_options(
            overrides
        )  # the wire rate is the server's: known once a session is ready
        return {"model": options.model, "voice": options.voice_id, "wire_format": options.format}

    def cache_identity(self, *, sample_rate: int, **overrides: Any) -> dict[str, Any]:
        options = self._turn_options(overrides)
        return {
            "provider": self.provider,
            "endpoint": self.url,
            "account": account_scope(self._api_key),
            # every start.request field: each one changes the audio (not options.sample_rate: a turn's audio
            # comes out at the rate it is opened with, keyed below)
            "options": options.start_request().model_dump(),
            "sample_rate": _check_rate(sample_rate),
        }

    async def prewarm(self, sample_rate: int | None = None) -> None:
        """Connect the standby (if enabled) and wait until it is authenticated; raises its error if it fails.
        One standby however many calls and providers (with the same settings, on this loop); does nothing
        once the provider is closed. ``sample_rate`` is accepted for the interface and ignored: a session's
        rate is the server's."""
        if not self.standby_enabled or self.closed:
            return
        await self._dialers.get().prewarm()

    async def open_turn(
        self, *, sample_rate: int, timeout: float | None = None, **overrides: Any
    ) -> EngineTurn:
        rate = _check_rate(sample_rate)
        options = self._turn_options(overrides)
        if self.closed:
            raise TTSConnectionError("kitta: provider is closed", retryable=False)
        dialer = self._dialers.get()
        # A turn opened right after a retryable failure is a retry (a framework's loop, a caller's): its start
        # waits the backoff from that failure, warm connection or not. Every send closes its segment: the
        # adapters hand whole sentences, and a flush per sentence gets its audio started at once.
        request = KittaRequest(
            options.start_request(), dialer.take_hold(), flush_each_send=True, event_timeout=timeout
        )
        turn = EngineTurn(dialer, request, turn_id=str(uuid.uuid4()), sample_rate=rate, timeout=timeout)
        await turn.open()
        self._turns.add(turn)
        turn.add_done_callback(self._turns.discard)
        log.debug("kitta: turn %s opened (standby=%s)", turn.id, turn.connection_reused)
        return turn

    async def aclose(self) -> None:
        """Fail this provider's turns and let go of the shared dialer (its standby and every connection closed,
        1000, once no other provider on this loop uses it). Idempotent; nothing reconnects afterwards:
        ``prewarm()`` does nothing and ``open_turn()`` raises :class:`TTSConnectionError`."""
        err = TTSConnectionError("kitta: the provider was closed", retryable=False)
        for turn in list(self._turns):
            if not turn.done:
                turn.abort(err)  # a turn waiting to retry fails now, and starts no session
        await self._dialers.aclose()
        for turn in list(self._turns):
            if not turn.done:
                await turn.cancel()  # shared on: this provider's sessions close (bounded)
        self._turns.clear()


def _dialer(
    endpoint: Endpoint,
    placeholder: StartRequest,
    settings: ConnectionSettings,
    standby: bool,
    replace_delay_max: float,
    hold: Backoff,
) -> StandbyDialer:
    """A loop's dialer for ``endpoint`` (holds nothing of a provider: it outlives the one that made it)."""
    return StandbyDialer(
        lambda label: endpoint.protocol(placeholder, label),
        settings,
        name="kitta",
        standby=standby,
        replace_delay_max=replace_delay_max,
        hold=hold,
    )
