"""The one sans-I/O contract both providers implement (modelled on ``websockets.protocol.Protocol``, h11).

A :class:`TurnProtocol` is the state of one connection and of every turn on it. It does no I/O and reads no
clock: the caller passes ``now`` (seconds, any monotonic clock; the engine uses the event loop's).

- inputs:   :meth:`receive` (one frame), :meth:`connection_lost`, :meth:`tick` (fires due deadlines)
- commands: :meth:`open_turn` (``turn_id, request, now``: the provider's typed request), :meth:`send_text`,
            :meth:`end_turn`, :meth:`cancel_turn` (``turn_id, now``): one signature each; they queue frames
- answers:  :meth:`usage` (the turn's bill by the provider's rule), :meth:`wire_format`; a failed turn's
            retry travels on its :class:`~ttsbridge.engine.events.TurnFailed` (``retry``: a
            :class:`RetryPlan`, decided by the protocol at the failure)
- outputs:  :meth:`data_to_send` (frames to write, in order), :meth:`events_received` (events, in order),
            :meth:`next_deadline` (when :meth:`tick` must be called next), :meth:`awaiting_since` (since when
            the server owes something: the engine's liveness check starts from it)
- queries:  :attr:`closed`, :attr:`accepts_turn` (a new turn may open here), :attr:`sample_rate` (the wire
            rate of its audio), the turn's facts (the :class:`TurnFacts` record :meth:`open_turn` returns,
            written only by the protocol)
- handshake: :meth:`connect_request` (URL, headers, subprotocols; secrets masked in its repr),
            :meth:`handshake_accepted` (the upgrade succeeded: an error when the protocol refuses what the
            server chose), :meth:`handshake_failed` / :meth:`connect_failed` (the typed errors of a refused
            upgrade and of a connect that failed before one)
- closing:  :meth:`close` (the client closes the connection, with the error that made it, if any)

Everything that *decides* lives in the implementation: URLs, the error catalog's effects, retry eligibility,
deadlines. The asyncio side (:class:`~ttsbridge.engine.connection.Connection`) only moves bytes and events.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from ttsbridge._redact import redact
from ttsbridge.engine.events import Event, RetryPlan
from ttsbridge.errors import TTSBridgeError, TTSConnectionError, TTSTimeoutError

if TYPE_CHECKING:
    from ttsbridge.policy.usage import TurnUsage
    from ttsbridge.turns import Turn

Frame = str | bytes


class TurnFacts(Protocol):
    """What the engine's turn reads of the protocol's record of one turn (attempt): written only by the
    protocol, read live (never copied)."""

    @property
    def characters_sent(self) -> int: ...

    @property
    def audio_bytes(self) -> int: ...

    @property
    def retries(self) -> int: ...

    @property
    def ended(self) -> bool: ...


@dataclass(frozen=True)
class ConnectRequest:
    """What to open: the URL, extra headers and subprotocols. ``secrets`` are masked in ``repr`` and logs."""

    url: str
    headers: tuple[tuple[str, str], ...] = ()
    subprotocols: tuple[str, ...] = ()
    secrets: tuple[str, ...] = field(default=(), repr=False)

    @property
    def safe_url(self) -> str:
        return redact(self.url, self.secrets)

    def __repr__(self) -> str:
        heads = tuple((k, redact(v, self.secrets)) for k, v in self.headers)
        return f"ConnectRequest(url={self.safe_url!r}, headers={heads!r}, subprotocols={self.subprotocols!r})"


def describe_close(code: int | None, reason: str) -> str:
    """The text of a lost connection: ``code`` is the close code the server sent (None: no close frame was
    received, and ``reason`` describes what happened instead)."""
    if code is None:
        return reason
    return f"connection closed by the server (code {code}{': ' + reason if reason else ''})"


class TurnProtocol(abc.ABC):
    """Base of every provider protocol: the two output queues and the contract of inputs and commands."""

    #: Provider name, used in error texts and logs (``"nineninesix"``, ``"kitta"``).
    provider: str = ""
    #: Turns :meth:`tick` failed because audio was owed and did not come (a timeout): the engine condemns the
    #: connection on each (no new turn goes to it until a ping proves it alive).
    timeouts: int = 0

    def __init__(self) -> None:
        self._outbox: list[Frame] = []
        self._events: list[Event] = []

    # --- outputs (concrete: implementations fill them with _send / _emit) -----------------------------------

    def data_to_send(self) -> list[Frame]:
        """Frames to write, in order. Each is handed out once: after this call it counts as written."""
        out, self._outbox = self._outbox, []
        return out

    def has_data_to_send(self) -> bool:
        return bool(self._outbox)

    def events_received(self) -> list[Event]:
        """Events since the last call, in order."""
        out, self._events = self._events, []
        return out

    def next_deadline(self) -> float | None:
        """When :meth:`tick` must be called next (None: no deadline pending)."""
        return None

    def tick(self, now: float) -> None:  # noqa: B027 - a protocol without deadlines has nothing to fire
        """Fire every deadline due at ``now`` (an owed audio that never came fails its turn...)."""

    def awaiting_since(self) -> float | None:
        """Since when (the ``now`` of the call that made it so) the server has owed this connection something
        it has not sent yet: audio for text sent, the end of an ended turn, a cancel's answer, a session
        event. None: nothing is owed (an idle connection, or a turn waiting for more text). The engine pings a
        connection that stays silent a short while after this (docs/reliability.md, "Quiet networks")."""
        return None

    def _send(self, frame: Frame) -> None:
        self._outbox.append(frame)

    def _emit(self, event: Event) -> None:
        self._events.append(event)

    # --- handshake ----------------------------------------------------------------------------------------

    @abc.abstractmethod
    def connect_request(self) -> ConnectRequest:
        """The URL (and headers, subprotocols) this connection opens with."""

    @abc.abstractmethod
    def handshake_failed(self, status: int, body: bytes) -> TTSBridgeError:
        """The typed error for an upgrade the server rejected with HTTP ``status`` and ``body``."""

    def handshake_rejected(self, status: int, headers: Mapping[str, str], body: bytes) -> TTSBridgeError:
        """What the connection calls for a rejected upgrade: :meth:`handshake_failed` by default; a provider
        that reads the response headers (Kitta: ``Retry-After``) overrides this."""
        return self.handshake_failed(status, body)

    def handshake_accepted(self, subprotocol: str | None, now: float) -> TTSBridgeError | None:
        """The upgrade succeeded with ``subprotocol`` (the server's choice, None: none): None when the
        protocol can run on it, else the typed error the connection fails with (it then calls :meth:`close`
        with it). Default: accepted."""
        return None

    def close_frame(self) -> tuple[int, str]:
        """The close code and reason our side sends when it closes the socket: 1000 by default; a provider
        whose protocol decided another (Kitta: 1002 after a protocol error) overrides this."""
        return (1000, "")

    def connect_failed(self, kind: str, detail: str, timeout: float) -> TTSBridgeError:
        """The typed error for a connect that failed before any HTTP status: ``kind`` is ``"timeout"`` (after
        ``timeout`` seconds), ``"invalid_uri"``, ``"invalid_handshake"`` or ``"network"``; ``detail`` is
        already redacted. Providers override it to word (or judge) these differently."""
        safe = self.connect_request().safe_url
        if kind == "timeout":
            return TTSTimeoutError(f"{self.provider}: connecting to {safe} timed out after {timeout:.1f}s")
        return TTSConnectionError(f"{self.provider}: cannot connect to {safe}: {detail}")

    # --- inputs -------------------------------------------------------------------------------------------

    @abc.abstractmethod
    def receive(self, frame: Frame, now: float) -> None:
        """One frame from the server. A malformed one fails its turn (or the connection), never raises."""

    @abc.abstractmethod
    def connection_lost(self, code: int | None, reason: str, now: float) -> None:
        """The socket closed (``code`` from the server's close frame) or dropped (``code`` None): every live
        turn ends, then :class:`~ttsbridge.engine.events.ConnectionFailed`. Idempotent."""

    def close(self, error: TTSBridgeError | None, now: float) -> None:
        """The client closes the connection: its connect failed, the handshake was refused or not accepted,
        the pool let it go, or the provider shuts down (``error``: why; None: no error, just closed). Every
        live turn ends (with ``error``, or a connection error "closed by the client"), then
        :class:`~ttsbridge.engine.events.ConnectionFailed`; nothing more is sent. Idempotent. Default: as
        :meth:`connection_lost`; providers override it to fail their turns with ``error`` itself."""
        self.connection_lost(None, "closed by the client" if error is None else str(error), now)

    def connection_silent(self, detail: str, now: float) -> None:
        """The engine found the connection dead: the server owed something (or the connection was idle) and a
        ping got no answer in time (``detail`` says how long). Ends every live turn like
        :meth:`connection_lost`; providers override it to fail them with a
        :class:`~ttsbridge.errors.TTSSilentConnectionError` (and decide whether that may be retried)."""
        self.connection_lost(None, detail, now)

    # --- commands (queue frames; never I/O) ---------------------------------------------------------------

    @abc.abstractmethod
    def open_turn(self, turn_id: str, request: Any, now: float) -> TurnFacts:
        """Start a turn with the provider's typed ``request`` (options, replay of an earlier attempt, hold):
        its record, written only here. Raises :class:`~ttsbridge.errors.TTSConnectionError` once
        :attr:`closed`."""

    @abc.abstractmethod
    def send_text(self, turn_id: str, text: str, now: float) -> None:
        """Queue text of the turn."""

    @abc.abstractmethod
    def end_turn(self, turn_id: str, now: float) -> None:
        """No more text: the server completes the turn."""

    @abc.abstractmethod
    def cancel_turn(self, turn_id: str, now: float) -> None:
        """Barge-in: stop the turn (its end event follows, at once or on the server's acknowledgement)."""

    # --- answers ------------------------------------------------------------------------------------------

    def usage(self, facts: Any, turn: Turn) -> TurnUsage | None:
        """The turn's usage by the provider's billing rule, from ``facts`` (its record) and what the turn
        knows (outcome, error, characters heard); None: the interface's default (billed as sent)."""
        return None

    def wire_format(self) -> str:
        """``"<encoding>@<rate>"`` of this connection's audio; empty when not known (yet)."""
        return ""

    #: Each ``send_text`` is rendered on its own and its end reported in :meth:`rendered` (Kitta, flushing
    #: every send: a segment ended by its ``usage``).
    reports_send_ends: bool = False

    def rendered(self, facts: Any) -> list[tuple[int, float]]:
        """Where the server said the audio of the turn's text so far is complete: ``(characters of the text,
        seconds of its audio)`` from the turn's start (:attr:`~ttsbridge.turns.Turn.rendered`); [] when it
        says so only at the turn's end."""
        return []

    # --- queries ------------------------------------------------------------------------------------------

    @property
    @abc.abstractmethod
    def closed(self) -> bool:
        """True once the connection failed or was closed: no turn can be opened on it any more."""

    @property
    def accepts_turn(self) -> bool:
        """A new turn may be opened on this connection now (default: while it is not closed; a provider with
        one turn per connection says no once it carries one)."""
        return not self.closed

    #: The rate of the PCM16 its :class:`~ttsbridge.engine.events.AudioReceived` carry (None until known:
    #: Kitta's comes with ``ready``).
    sample_rate: int | None = None


__all__ = ["ConnectRequest", "Frame", "RetryPlan", "TurnFacts", "TurnProtocol", "describe_close"]
