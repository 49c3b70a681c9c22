"""Run one turn through each public surface (framework-free turns, Pipecat service, LiveKit plugin) of either
provider, classify how it ended, and check what it left behind. Importable without pytest (bench/chaos.py).

An :class:`Outcome` is ``audio`` (PCM received, no error), ``typed`` (a ttsbridge / framework typed error) or
``raw`` (any other exception: a bug). ``stale`` counts samples that are not the turn's marker (see
:mod:`loopback`). Every wait is bounded by ``BOUND``; running into it is a ``hang``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import traceback
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from loopback import KITTA_RATE, NNS_RATE, marker
from ttsbridge.errors import TTSBridgeError
from ttsbridge.kitta import KittaOptions, KittaTurnProvider
from ttsbridge.nineninesix import NineninesixOptions, NineninesixTurnProvider

#: distinctive keys: any occurrence in a log line or exception text is a leak
NNS_KEY = "sk_996_RELKEY_q7Zx3vW9pL"
KITTA_KEY = "kitta_RELKEY_m4Tn8bY2cK"
SECRETS = (NNS_KEY, KITTA_KEY, "RELKEY_")
#: outer bound on one turn (a hang detector, not a speed check: bench/chaos.py measures durations)
BOUND = 10.0
VOICE = "tone"
PROVIDERS = ("nineninesix", "kitta")
SURFACES = ("turns", "pipecat", "livekit")

#: short client timeouts, so a frame the client ignores ends the turn in about a second, not in fifteen
NNS_CLIENT = {"receive_timeout": 1.0, "connect_timeout": 2.0, "cancel_timeout": 0.5, "ping_interval": None}
KITTA_CLIENT = {"backoff_initial": 0.01, "backoff_max": 0.05, "event_timeout": 1.0, "connect_timeout": 2.0,
                "close_timeout": 0.5}  # fmt: skip


def rate_of(provider: str) -> int:
    return NNS_RATE if provider == "nineninesix" else KITTA_RATE


def key_of(provider: str) -> str:
    return NNS_KEY if provider == "nineninesix" else KITTA_KEY


@dataclass
class Outcome:
    kind: str  # audio | typed | raw | hang
    pcm: bytes = b""
    error: BaseException | None = None
    stale: int = 0
    text: str = ""
    #: seconds from the turn's start to its end (audio done, error raised or bound hit)
    elapsed: float = 0.0
    #: bytes of audio when ``pcm`` was not kept (long soaks); -1 = ``len(pcm)``
    nbytes: int = -1

    @property
    def size(self) -> int:
        return self.nbytes if self.nbytes >= 0 else len(self.pcm)

    @property
    def ok(self) -> bool:
        return self.kind in ("audio", "typed") and self.stale == 0


def stale_samples(pcm: bytes, n: int) -> int:
    """Samples of ``pcm`` that are neither turn ``n``'s marker nor silence (LiveKit pads a short last frame
    with zeros); an odd trailing byte counts as one."""
    ok = (marker(n).to_bytes(2, "little", signed=True), b"\x00\x00")
    bad = sum(1 for i in range(0, len(pcm) - 1, 2) if pcm[i : i + 2] not in ok)
    return bad + (len(pcm) % 2)


def make_provider(provider: str, base_url: str, **kw: Any) -> NineninesixTurnProvider | KittaTurnProvider:
    standby = kw.pop("standby", False)  # (Kitta's; a Nineninesix connection is pooled anyway)
    if provider == "nineninesix":
        opts = NineninesixOptions(voice=VOICE, sample_rate=NNS_RATE)
        return NineninesixTurnProvider(NNS_KEY, base_url=base_url, options=opts, retry_backoff=0.01,
                                       **{**NNS_CLIENT, **kw})  # fmt: skip
    opts = KittaOptions(voice_id=VOICE, model="fishaudio-s21pro-flash")
    return KittaTurnProvider(
        KITTA_KEY, base_url=base_url, options=opts, standby=standby, **{**KITTA_CLIENT, **kw}
    )


def classify(exc: BaseException, typed: tuple[type[BaseException], ...]) -> str:
    return "typed" if isinstance(exc, typed) else "raw"


def text_of(n: int) -> str:
    return f"t{n} Hello there, this is turn {n}."


async def turn_once(
    prov: Any,
    n: int,
    *,
    cancel_after: int | None = None,
    refs: list[weakref.ref[Any]] | None = None,
    bound: float = BOUND,
) -> Outcome:
    """One framework-free turn; ``cancel_after`` = cancel once that many chunks arrived (a barge-in);
    ``refs`` collects a weak reference to the turn object (to check nothing keeps it once it is over)."""
    chunks: list[bytes] = []

    async def run() -> None:
        turn = await prov.open_turn(sample_rate=prov_rate(prov))
        if refs is not None:
            refs.append(weakref.ref(turn))
        try:
            await turn.send(text_of(n))
            await turn.end()
            async for pcm in turn:
                chunks.append(pcm)
                if cancel_after is not None and len(chunks) >= cancel_after:
                    await turn.cancel()
        finally:
            if not turn.done:
                await turn.cancel()

    return await bounded(run(), chunks, n, (TTSBridgeError,), bound)


def prov_rate(prov: Any) -> int:
    return NNS_RATE if isinstance(prov, NineninesixTurnProvider) else KITTA_RATE


async def bounded(
    coro: Any, chunks: list[bytes], n: int, typed: tuple[type[BaseException], ...], bound: float = BOUND
) -> Outcome:
    start = asyncio.get_running_loop().time()
    try:
        await asyncio.wait_for(coro, bound)
    except asyncio.TimeoutError:
        out = Outcome("hang", b"".join(chunks), None, stale_samples(b"".join(chunks), n))
    except Exception as exc:
        pcm = b"".join(chunks)
        out = Outcome(classify(exc, typed), pcm, exc, stale_samples(pcm, n), error_text(exc))
    else:
        pcm = b"".join(chunks)
        out = Outcome("audio", pcm, None, stale_samples(pcm, n))
    out.elapsed = asyncio.get_running_loop().time() - start
    return out


def error_text(exc: BaseException) -> str:
    """Everything an exception shows: str, repr and the whole chain's traceback."""
    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)) + repr(exc)


# --------------------------------------------------------------------------------------- leaks and logs


def client_tasks() -> list[asyncio.Task[Any]]:
    """Live tasks of the client side: anything not started by the test runner, an emulator or our server."""
    out = []
    for task in asyncio.all_tasks():
        if task.done() or task is asyncio.current_task():
            continue
        files = [f.f_code.co_filename for f in task.get_stack()]
        code = getattr(task.get_coro(), "cr_code", None)
        if code is not None:
            files.append(code.co_filename)
        if any(
            s in f
            for f in files
            for s in (
                "/ttsbridge/emulator/",
                "/aiohttp/web",
                "/tests/loopback/",
                "/websockets/asyncio/server",
                "pytest",
                "chaos.py",
            )
        ):
            continue
        out.append(task)
    return out


async def settle() -> None:
    for _ in range(10):
        await asyncio.sleep(0)


async def leaked_tasks(baseline: set[asyncio.Task[Any]], timeout: float = 3.0) -> list[asyncio.Task[Any]]:
    """Client tasks not in ``baseline`` still alive after ``timeout`` (polled: closing is asynchronous)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while True:
        await settle()
        left = [t for t in client_tasks() if t not in baseline]
        if not left or loop.time() >= end:
            return left
        await asyncio.sleep(0.02)


@dataclass
class KeyScan(logging.Handler):
    """Captures every log record (all loggers, all levels) and every text added, and finds the keys in them."""

    lines: list[str] = field(default_factory=list)
    #: keep every line (tests: a failure can show them); False counts them and keeps only the leaks
    keep: bool = True
    count: int = 0
    leaked: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        logging.Handler.__init__(self, logging.DEBUG)

    def __hash__(self) -> int:
        return id(self)

    def emit(self, record: logging.LogRecord) -> None:
        if record.name.startswith("loopback.server"):
            return  # the test server's own request log
        with contextlib.suppress(Exception):
            text = record.getMessage()
            if record.exc_info:
                text += "".join(traceback.format_exception(*record.exc_info))
            self.add(text)

    def add(self, text: str) -> None:
        self.count += 1
        if any(s in text for s in SECRETS):
            self.leaked.append(text)
        if self.keep:
            self.lines.append(text)

    def leaks(self) -> list[str]:
        return list(self.leaked)


@contextlib.contextmanager
def scan_keys(*, keep: bool = True) -> Iterator[KeyScan]:
    """Capture stdlib logging and loguru (Pipecat) at DEBUG for the block."""
    scan = KeyScan(keep=keep)
    root = logging.getLogger()
    old = root.level
    root.addHandler(scan)
    root.setLevel(logging.DEBUG)
    sink = None
    with contextlib.suppress(ImportError):
        from loguru import logger

        sink = logger.add(lambda m: scan.add(str(m)), level="TRACE", backtrace=True, diagnose=False)
    try:
        yield scan
    finally:
        root.removeHandler(scan)
        root.setLevel(old)
        if sink is not None:
            from loguru import logger

            logger.remove(sink)


# ------------------------------------------------------------------------------------------- one fuzz case

FULL_TURN_BYTES = 4 * 441 * 2


@dataclass
class CaseReport:
    """What one mutated turn (and the clean turn after it) did; ``problems`` empty = the case passed."""

    outcomes: list[Outcome]
    problems: list[str] = field(default_factory=list)


def check_outcome(problems: list[str], label: str, out: Outcome, *, full: bool = False) -> None:
    if out.kind not in ("audio", "typed"):
        problems.append(f"{label}: {out.kind} {out.error!r}")
    if out.stale:
        problems.append(f"{label}: {out.stale} stale sample(s)")
    if full and (out.kind != "audio" or out.size < FULL_TURN_BYTES):
        problems.append(f"{label}: not a full clean turn ({out.kind}, {out.size} bytes, {out.error!r})")
    if any(s in out.text for s in SECRETS):
        problems.append(f"{label}: the key is in the exception text")


async def check_left(problems: list[str], baseline: set[asyncio.Task[Any]], srv: Any) -> None:
    """After ``aclose()``: no client task beyond ``baseline``, no server-side socket still open."""
    left = await leaked_tasks(baseline)
    if left:
        problems.append(f"{len(left)} task(s) left after aclose: {left[:2]!r}")
    await wait_sockets_closed(srv)
    if srv.open_connections:
        problems.append(f"{srv.open_connections} socket(s) still open after aclose")


async def wait_sockets_closed(srv: Any, timeout: float = 1.0) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while srv.open_connections and loop.time() < end:  # noqa: ASYNC110 - server state, no event
        await asyncio.sleep(0.02)
