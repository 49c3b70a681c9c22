"""A fault proxy: a small asyncio TCP proxy (real sockets) between a client and a loopback server, for networks
that fail quietly (the Toxiproxy ``timeout`` toxic and its kin, as LiveKit's own plugin tests use).

``async with FaultProxy(server.port) as proxy:`` then point the client at ``proxy.base_url``. Every accepted
connection is a :class:`Link`; it knows where the HTTP upgrade ends in each direction and, after it, where each
server frame ends (WebSocket framing, so a fault can start exactly after the N-th server frame).

``proxy.arm(Fault(kind, after_frames=N, duration=s))`` applies to the next connection the client opens:

* ``blackhole``: after N server frames, nothing more is forwarded in either direction; both sockets stay open
  (no FIN, no RST: a NAT or load balancer that forgot the flow);
* ``stall``: after N server frames, server->client bytes are held for ``duration`` seconds, then released in
  order (client->server bytes keep flowing);
* ``slice``: every write in both directions goes out in pieces of 1-7 bytes (seeded), the loop turning between
  pieces, so the client reads partial frames;
* ``cut_handshake``: the client's upgrade request reaches the server, then both sockets are closed before the
  server's response reaches the client;
* ``cut_after_first_message``: the client's first message after the upgrade (Kitta's ``start``) reaches the
  server, then both sockets are closed.

On the connections already open (an idle pooled one, a warm standby): ``proxy.blackhole_all()`` kills them
silently; ``proxy.close_all(code)`` closes them as a server does (a close frame with ``code`` and a reason, the
client's answer awaited, bounded, then the TCP connection closed).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from dataclasses import dataclass

from websockets.frames import Close, Frame, Opcode

KINDS = ("blackhole", "stall", "slice", "cut_handshake", "cut_after_first_message")
_END = b"\r\n\r\n"


@dataclass(frozen=True)
class Fault:
    kind: str
    after_frames: int = 0
    duration: float = 0.0

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown fault kind {self.kind!r}; one of {KINDS}")


class FrameScanner:
    """Counts WebSocket frames in a byte stream; :meth:`feed` says where the ``frames``-th one ends."""

    def __init__(self, frames: int) -> None:
        self.left = frames
        self._head = bytearray()
        self._payload = 0

    def feed(self, data: bytes) -> int | None:
        """The offset in ``data`` just past the frame that completes the count (0 when it was complete
        already), or None when the count is not reached within ``data``."""
        if self.left <= 0:
            return 0
        i, n = 0, len(data)
        while i < n:
            if self._payload:
                take = min(self._payload, n - i)
                i += take
                self._payload -= take
                if not self._payload:
                    self.left -= 1
                    if not self.left:
                        return i
                continue
            self._head.append(data[i])
            i += 1
            need = _header_size(self._head)
            if need is None or len(self._head) < need:
                continue
            self._payload = _payload_size(self._head)
            self._head.clear()
            if not self._payload:
                self.left -= 1
                if not self.left:
                    return i
        return None


def _header_size(head: bytearray) -> int | None:
    if len(head) < 2:
        return None
    short = head[1] & 0x7F
    return 2 + (2 if short == 126 else 8 if short == 127 else 0) + (4 if head[1] & 0x80 else 0)


def _payload_size(head: bytearray) -> int:
    short = head[1] & 0x7F
    if short == 126:
        return int.from_bytes(head[2:4], "big")
    if short == 127:
        return int.from_bytes(head[2:10], "big")
    return short


def server_close_frame(code: int, reason: str) -> bytes:
    """A close frame as a server sends it (unmasked)."""
    return Frame(Opcode.CLOSE, Close(code, reason).serialize()).serialize(mask=False)


class Link:
    """One proxied connection: two pumps and the fault state of each direction."""

    def __init__(
        self,
        proxy: FaultProxy,
        creader: asyncio.StreamReader,
        cwriter: asyncio.StreamWriter,
        fault: Fault | None,
    ) -> None:
        self.proxy = proxy
        self.creader, self.cwriter = creader, cwriter
        self.fault = fault
        self.uwriter: asyncio.StreamWriter | None = None
        self.request = bytearray()  # the client's upgrade request, until its end
        self.response_done = False  # the server's upgrade response has reached the client
        self.s2c = "pass"  # pass | drop | stall
        self.c2s = "pass"  # pass | drop | close (drop, and close both on the client's next bytes)
        self.held = bytearray()  # server->client bytes held by a stall
        self.closed = False
        self._scanner = (
            FrameScanner(fault.after_frames) if fault and fault.kind in ("blackhole", "stall") else None
        )
        self._slice = fault is not None and fault.kind == "slice"
        self._rng = random.Random(proxy.seed + proxy.connections)
        self._timers: list[asyncio.TimerHandle] = []
        self._tasks: set[asyncio.Task[None]] = set()

    async def run(self) -> None:
        try:
            ureader, self.uwriter = await asyncio.open_connection("127.0.0.1", self.proxy.upstream_port)
        except OSError:
            self.close()
            return
        pumps = [
            asyncio.ensure_future(self._client_to_server()),
            asyncio.ensure_future(self._server_to_client(ureader)),
        ]
        try:  # either side's end (or a fault's cut) ends both: no half-closed connection is kept
            await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for p in pumps:
                p.cancel()
            self.close()
            for t in self._tasks:
                t.cancel()

    # --- directions ---------------------------------------------------------------------------------------

    async def _client_to_server(self) -> None:
        kind = self.fault.kind if self.fault else ""
        while not self.closed:
            data = await self.creader.read(65536)
            if not data:
                return
            if self.c2s == "close":
                self.close()  # the client answered our close frame: the TCP connection goes
                return
            if self.c2s == "drop":
                continue
            after_handshake = self.response_done
            if not after_handshake:
                self.request += data
            assert self.uwriter is not None
            await self._forward(self.uwriter, data)
            if kind == "cut_handshake" and _END in self.request:
                await self._cut_soon()
                return
            if kind == "cut_after_first_message" and after_handshake:
                await self._cut_soon()
                return

    async def _server_to_client(self, ureader: asyncio.StreamReader) -> None:
        while not self.closed:
            data = await ureader.read(65536)
            if not data:
                return
            if not self.response_done:
                if self.fault is not None and self.fault.kind == "cut_handshake":
                    continue  # (the cut is on its way: nothing of the response goes out)
                k = data.find(_END)
                if k < 0:
                    await self._forward(self.cwriter, data)
                    continue
                await self._forward(self.cwriter, data[: k + 4])
                self.response_done = True
                data = data[k + 4 :]
                if self._scanner is not None and self._scanner.left <= 0:
                    self._trigger()
                if not data:
                    continue
            await self._to_client(data)

    async def _to_client(self, data: bytes) -> None:
        scanner = self._scanner
        if scanner is not None and self.s2c == "pass":
            cut = scanner.feed(data)
            if cut is not None:
                if cut:
                    await self._forward(self.cwriter, data[:cut])
                data = data[cut:]
                self._trigger()
        if not data or self.s2c == "drop":
            return
        if self.s2c == "stall":
            self.held += data
            return
        await self._forward(self.cwriter, data)

    def _trigger(self) -> None:
        self._scanner = None
        assert self.fault is not None
        if self.fault.kind == "blackhole":
            self.blackhole()
        else:
            self.s2c = "stall"
            self._timers.append(asyncio.get_running_loop().call_later(self.fault.duration, self._release))

    def _release(self) -> None:
        task = asyncio.ensure_future(self._flush_held())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _flush_held(self) -> None:
        while self.held and not self.closed:
            chunk, self.held = bytes(self.held), bytearray()
            await self._forward(self.cwriter, chunk)
        if self.s2c == "stall":
            self.s2c = "pass"

    async def _forward(self, writer: asyncio.StreamWriter, data: bytes) -> None:
        if self.closed:
            return
        if writer is self.cwriter:
            self.proxy.bytes_to_client += len(data)
        try:
            if not self._slice:
                writer.write(data)
                await writer.drain()
                return
            i = 0
            while i < len(data) and not self.closed:
                n = self._rng.randint(1, 7)
                writer.write(data[i : i + n])
                i += n
                await writer.drain()
                await asyncio.sleep(0)  # the loop turns: the peer reads this piece on its own
        except (ConnectionError, RuntimeError):
            self.close()

    async def _cut_soon(self) -> None:
        """Close both sockets once what was forwarded has left (the server got it)."""
        with contextlib.suppress(Exception):
            assert self.uwriter is not None
            await self.uwriter.drain()  # (in the kernel on its way to the server: it reads it, then the end)
        self.close()

    # --- faults on open connections -----------------------------------------------------------------------

    def blackhole(self) -> None:
        self.s2c = self.c2s = "drop"
        self.held.clear()

    def server_close(self, code: int, reason: str) -> None:
        """Close as a server does: the close frame, the client's answer awaited (1 s at most), then TCP."""
        if self.closed:
            return
        self.s2c = "drop"
        self.c2s = "close"
        with contextlib.suppress(Exception):
            self.cwriter.write(server_close_frame(code, reason))
        self._timers.append(asyncio.get_running_loop().call_later(1.0, self.close))

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for t in self._timers:
            t.cancel()
        for w in (self.cwriter, self.uwriter):
            if w is not None:
                with contextlib.suppress(Exception):
                    w.close()


@dataclass
class FaultProxy:
    upstream_port: int
    seed: int = 0

    def __post_init__(self) -> None:
        self.links: list[Link] = []
        self.connections = 0
        self.bytes_to_client = 0
        self._armed: list[Fault] = []
        self._server: asyncio.AbstractServer | None = None
        self._runs: set[asyncio.Task[None]] = set()

    async def __aenter__(self) -> FaultProxy:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for link in self.links:
            link.close()
        if self._runs:
            await asyncio.wait(set(self._runs), timeout=2.0)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._server.wait_closed(), 2.0)

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.sockets[0].getsockname()[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def open_links(self) -> int:
        """Proxied connections whose client side is not closed yet (neither end closed it)."""
        return sum(1 for link in self.links if not link.closed)

    def arm(self, *faults: Fault) -> None:
        """Apply ``faults`` to the next connections, one each, in order."""
        self._armed = list(faults)

    def blackhole_all(self) -> None:
        """Silently kill every connection open now (nothing more flows either way; no FIN, no RST)."""
        for link in self.links:
            link.blackhole()

    def close_all(self, code: int = 1001, reason: str = "going away") -> None:
        """Close every connection open now as a server closes an idle one."""
        for link in self.links:
            link.server_close(code, reason)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        fault = self._armed.pop(0) if self._armed else None
        link = Link(self, reader, writer, fault)
        self.links = [x for x in self.links if not x.closed] + [link]
        task = asyncio.current_task()
        if task is not None:
            self._runs.add(task)
        try:
            await link.run()
        finally:
            if task is not None:
                self._runs.discard(task)
