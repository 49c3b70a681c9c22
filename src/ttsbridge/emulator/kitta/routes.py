"""The Kitta route: the HTTP upgrade checks and the sessions of one emulator (:class:`Route`, an
:class:`~ttsbridge.emulator.kitta.endpoint.Endpoint` with its handler)."""

from __future__ import annotations

import asyncio
import math
import time
from typing import TYPE_CHECKING

from aiohttp import web

from ttsbridge.emulator.connlog import RecordedWebSocket
from ttsbridge.emulator.kitta.config import KITTA_PATH, KITTA_SUBPROTOCOL
from ttsbridge.emulator.kitta.endpoint import Endpoint
from ttsbridge.emulator.kitta.session import Session

if TYPE_CHECKING:
    from ttsbridge.emulator.host import EmulatorHost

__all__ = ["Route", "setup_kitta_routes"]


class Route(Endpoint):
    """``GET /v2/tts/live``: the upgrade checks, then one :class:`Session` per WebSocket."""

    async def handle(self, request: web.Request) -> web.StreamResponse:
        stats = self.stats
        cfg = self.config
        stats.handshakes += 1
        stats.handshake_urls.append(request.path_qs)
        self.notify()
        if cfg.handshake_delay_s > 0:
            await asyncio.sleep(cfg.handshake_delay_s)
        ws = RecordedWebSocket(
            self.emulator.stats.connections,
            "kitta",
            self.notify,
            protocols=(KITTA_SUBPROTOCOL,),
            autoping=True,
            heartbeat=None,
            max_msg_size=cfg.max_message_bytes,
        )
        refusal, header_key = self._refusal(request, ws)
        if refusal is not None:
            return refusal
        await ws.prepare(request)
        stats.connections += 1
        stats.auth_modes.append("header" if header_key else "frame")
        stats.events.append((time.monotonic(), "connect"))
        session = Session(self, request, ws, header_key)
        self.active += 1
        stats.open = self.active
        self.emulator.register_connection(session)
        self.notify()
        try:
            await session.run()
        finally:
            self.active -= 1
            stats.open = self.active
            self.emulator.unregister_connection(session)
            ws.finish()
            self.notify()
        return ws

    def _refusal(
        self, request: web.Request, ws: web.WebSocketResponse
    ) -> tuple[web.Response | None, str | None]:
        """The upgrade checks: ``(refusal, None)``, or ``(None, the Authorization key or None)``."""
        cfg = self.config
        query_keys = {k.lower() for k in request.query}
        if query_keys & {"token", "api_key", "apikey", "key"}:
            return self._reject(
                400,
                "api_key_in_url",
                "API keys are never accepted in the URL; use the Authorization header or the auth frame",
            ), None
        ready = ws.can_prepare(request)
        if not ready.ok:
            return self._reject(400, "websocket_required", "this endpoint only speaks WebSocket"), None
        if ready.protocol != KITTA_SUBPROTOCOL:
            return self._reject(
                400, "subprotocol_required", f"request the WebSocket subprotocol {KITTA_SUBPROTOCOL}"
            ), None
        if cfg.handshake_status is not None:
            return self._reject(
                cfg.handshake_status, "unavailable", "handshake rejected (emulator knob)"
            ), None
        header_key: str | None = None
        auth_header = request.headers.get("Authorization")
        if auth_header is not None:
            scheme, _, token = auth_header.partition(" ")
            token = token.strip()
            if scheme.lower() != "bearer" or not cfg.is_valid_key(token):
                return self._reject(401, "unauthorized", "invalid API key"), None
            if token in cfg.forbidden_keys:
                return self._reject(403, "forbidden", "this key has no access to Realtime TTS"), None
            header_key = token
        if cfg.max_concurrent_sessions is not None and self.active >= cfg.max_concurrent_sessions:
            return self._reject(429, "concurrency_limit", "too many concurrent sessions"), None
        return None, header_key

    def _reject(self, status: int, code: str, message: str) -> web.Response:
        self.stats.rejected_handshakes.append(status)
        self.notify()
        headers = {}
        if status in (429, 503):
            headers["Retry-After"] = f"{max(0, math.ceil(self.config.retry_after_s))}"
        return web.json_response({"error": code, "message": message}, status=status, headers=headers)


def setup_kitta_routes(app: web.Application, emulator: EmulatorHost) -> None:
    """Add ``/v2/tts/live`` to the emulator's app (``emulator.config.kitta`` its knobs, ``emulator.stats.kitta``
    its counters)."""
    app.router.add_get(KITTA_PATH, Route(emulator).handle)
