"""HTTP side of Nineninesix (aiohttp): ``POST /tts/bytes``, ``POST /tts/sse`` and voices.

Auth is ``Authorization: Bearer``. Proxies and TLS as every surface (docs/production.md): each request goes
through :func:`~ttsbridge.engine.proxy.proxy_for` (the explicit ``proxy=``, else ``HTTPS_PROXY`` /
``HTTP_PROXY`` / ``NO_PROXY``: aiohttp reads none of them by itself without ``trust_env``), and a session of
ours verifies with the shared context of :mod:`ttsbridge.engine.tls`; a certificate that fails verification is
a :class:`~ttsbridge.engine.tls.TTSCertificateError`. The session of ours is shared by every instance on one
event loop (:mod:`ttsbridge.engine.shared`), never across loops. Errors map to the same typed errors as the WebSocket client: 400 bad
request or output format, 401 bad key, 402 no credits (not retryable), 429 rate limited and 502 upstream
(retryable; ``Retry-After`` is honoured, bounded).
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import ssl as ssl_module
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp

from ttsbridge._redact import mask_key, redact
from ttsbridge.audio.carry import wire_to_pcm16
from ttsbridge.engine.proxy import ProxySetting, check_proxy, proxy_for
from ttsbridge.engine.shared import LoopShare
from ttsbridge.engine.tls import certificate_error, client_context, client_context_sync
from ttsbridge.errors import (
    TTSAPIError,
    TTSBridgeError,
    TTSConnectionError,
    TTSInvalidOptionError,
    TTSTimeoutError,
)
from ttsbridge.nineninesix.catalog import PROVIDER, SETTINGS, derive_urls, resolve_api_key, retryable_status
from ttsbridge.nineninesix.models import (
    DEFAULT_BASE_URL,
    MODELS,
    GenerationRequest,
    OutputFormat,
    VoiceSpecifier,
)

logger = logging.getLogger("ttsbridge.nineninesix")


class NineninesixHTTP:
    """The HTTP endpoints. Pass ``session`` to reuse an aiohttp session (LiveKit's, Pipecat's); without one, the
    session of this event loop that every ``NineninesixHTTP`` with the same ``ssl`` shares is used.

    Args:
        proxy, ssl: as the WebSockets' (:class:`~ttsbridge.engine.settings.ConnectionSettings`; the provider
            passes its own): the environment's proxy by default, or none, or a URL (it wins); the TLS context of
            our own session (default: the shared verifying one).
    """

    def __init__(
        self,
        api_key: str | None = None,
        *,
        base_url: str = DEFAULT_BASE_URL,
        session: aiohttp.ClientSession | None = None,
        timeout: float = 30.0,
        max_retries: int = 2,
        max_retry_after: float = 10.0,
        proxy: ProxySetting = SETTINGS.proxy,
        ssl: ssl_module.SSLContext | None = SETTINGS.ssl,
    ) -> None:
        self._api_key = resolve_api_key(api_key)
        self.http_base, _ = derive_urls(base_url)
        self._session = session
        self.proxy = check_proxy(proxy)
        self._ssl = ssl
        self._own = LoopShare(("aiohttp", ssl), _new_session(ssl), _close_session, name="nineninesix http")
        self.timeout = timeout
        self.max_retries = max_retries
        self.max_retry_after = max_retry_after

    def __repr__(self) -> str:
        return f"NineninesixHTTP(base_url={self.http_base!r}, api_key={mask_key(self._api_key)})"

    @property
    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._api_key}", "User-Agent": "ttsbridge/0.1"}

    async def session(self) -> aiohttp.ClientSession:
        """The session a request goes out on: the one handed in while it is open, else this loop's shared one
        (its TLS context built off the loop first)."""
        if self._session is not None and not self._session.closed:
            return self._session
        if self._ssl is None:
            await client_context()
        return self._own.get()

    async def aclose(self) -> None:
        """Let go of this loop's shared session (closed once no other instance uses it). Later requests lease a
        new one: an HTTP session holds no connection open between requests that a server would see."""
        await self._own.release()

    # --- speech ------------------------------------------------------------------------------------------

    @staticmethod
    def _body(
        transcript: str,
        output_format: OutputFormat,
        model: str | None,
        voice: str | None,
        language: str | None,
    ) -> dict[str, Any]:
        if not voice:
            # The HTTP endpoints require a voice (the WebSocket has a server default): say so before sending.
            raise TTSInvalidOptionError(
                "voice", voice, "a voice id: POST /tts/bytes and /tts/sse require one"
            )
        req = GenerationRequest(
            transcript=transcript,
            model_id=model or MODELS[0],
            voice=VoiceSpecifier(id=voice),
            output_format=output_format,
            language=language,
        ).to_wire()
        req.pop("continue", None)
        return req

    async def tts_bytes(
        self,
        transcript: str,
        output_format: OutputFormat | None = None,
        *,
        model: str | None = None,
        voice: str | None = None,
        language: str | None = None,
    ) -> bytes:
        """``POST /tts/bytes``: the whole audio (a WAV file for ``container="wav"``, else raw in the encoding)."""
        fmt = output_format or OutputFormat(container="wav")
        body = self._body(transcript, fmt, model, voice, language)
        async with self._request("POST", "/tts/bytes", json=body) as resp:
            return await resp.read()

    async def tts_sse(
        self,
        transcript: str,
        output_format: OutputFormat | None = None,
        *,
        model: str | None = None,
        voice: str | None = None,
        language: str | None = None,
    ) -> AsyncIterator[bytes]:
        """``POST /tts/sse``: PCM16 chunks (G.711 decoded) at ``output_format.sample_rate``, as events arrive."""
        fmt = output_format or OutputFormat()
        body = self._body(transcript, fmt, model, voice, language)
        carry = b""
        async with self._request("POST", "/tts/sse", json=body, accept="text/event-stream") as resp:
            async for event in _sse_events(resp):
                kind = event.get("type")
                if kind == "chunk":
                    data = base64.b64decode(event.get("data") or "")
                    pcm, carry = wire_to_pcm16(data, fmt.encoding, carry)  # the WebSocket's path too
                    if pcm:
                        yield pcm
                elif kind == "done":
                    return
                elif kind == "error" or "error_code" in event or "error" in event:
                    raise _error_from_body(event, 500, None)
        # The body ended without a done event: the stream was cut.
        raise TTSConnectionError("nineninesix: the SSE stream ended before its done event")

    # --- voices ------------------------------------------------------------------------------------------

    async def list_voices(self, *, limit: int = 100) -> list[dict[str, Any]]:
        """Every voice, following Cartesia-style pagination (``starting_after`` until ``has_more`` is false)."""
        voices: list[dict[str, Any]] = []
        after: str | None = None
        for _ in range(1000):  # bounded
            params: dict[str, str] = {"limit": str(limit)}
            if after:
                params["starting_after"] = after
            async with self._request("GET", "/voices", params=params) as resp:
                page = await resp.json()
            data = page.get("data", []) if isinstance(page, dict) else page
            voices.extend(data)
            if not data or not (isinstance(page, dict) and page.get("has_more")):
                break
            after = data[-1]["id"]
        return voices

    async def get_voice(self, voice_id: str) -> dict[str, Any]:
        async with self._request("GET", f"/voices/{voice_id}") as resp:
            result: dict[str, Any] = await resp.json()
            return result

    async def clone_voice(
        self,
        name: str,
        clip: bytes,
        *,
        description: str | None = None,
        language: str = "en",
        filename: str = "clip.wav",
    ) -> dict[str, Any]:
        """``POST /voices/clone`` (multipart): a new voice from an audio clip."""
        form = aiohttp.FormData()
        form.add_field("clip", clip, filename=filename, content_type="audio/wav")
        form.add_field("name", name)
        form.add_field("language", language)
        if description:
            form.add_field("description", description)
        async with self._request("POST", "/voices/clone", data=form, retry=False) as resp:
            result: dict[str, Any] = await resp.json()
            return result

    # --- plumbing ----------------------------------------------------------------------------------------

    def _request(self, method: str, path: str, *, accept: str | None = None, retry: bool = True, **kw: Any):
        return _Request(self, method, path, accept=accept, retry=retry, **kw)


class _Request:
    """``async with`` a response that succeeded (2xx), retrying 429/502 before any body was read."""

    def __init__(
        self, http: NineninesixHTTP, method: str, path: str, *, accept: str | None, retry: bool, **kw: Any
    ):
        self.http, self.method, self.path, self.kw = http, method, path, kw
        self.accept, self.retry = accept, retry
        self.resp: aiohttp.ClientResponse | None = None

    async def __aenter__(self) -> aiohttp.ClientResponse:
        http = self.http
        headers = http._headers
        if self.accept:
            headers["Accept"] = self.accept
        url = f"{http.http_base}{self.path}"
        proxy = proxy_for(url, http.proxy)
        if proxy is not None:
            self.kw.setdefault("proxy", proxy)
        attempts = (http.max_retries if self.retry else 0) + 1
        for attempt in range(attempts):
            try:
                session = await http.session()
                resp = await session.request(
                    self.method,
                    url,
                    headers=headers,
                    timeout=aiohttp.ClientTimeout(
                        total=None, sock_connect=http.timeout, sock_read=http.timeout
                    ),
                    **self.kw,
                )
            except (asyncio.TimeoutError, aiohttp.ClientError) as exc:
                raise self._transport_error(exc) from None
            if resp.status < 300:
                self.resp = resp
                return resp
            try:
                raw = await resp.read()
            except (asyncio.TimeoutError, aiohttp.ClientError) as exc:
                raise self._transport_error(exc) from None
            finally:
                resp.release()
            try:
                body = json.loads(raw)
            except ValueError:
                body = {"message": raw[:200].decode(errors="replace")}
            retry_after = _retry_after(resp.headers.get("Retry-After"))
            err = _error_from_body(body if isinstance(body, dict) else {}, resp.status, retry_after)
            if err.retryable and attempt + 1 < attempts:
                delay = min(
                    retry_after if retry_after is not None else 0.5 * 2**attempt, http.max_retry_after
                )
                logger.info(
                    "nineninesix: %s %s -> %d, retrying in %.1fs", self.method, self.path, resp.status, delay
                )
                await asyncio.sleep(delay)
                continue
            raise err
        raise AssertionError("unreachable")

    async def __aexit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        if self.resp is not None:
            self.resp.release()
        if isinstance(exc, (asyncio.TimeoutError, aiohttp.ClientError)):
            # reading the body failed (stream cut, read timeout): a typed error, like the request itself
            raise self._transport_error(exc) from None

    def _transport_error(self, exc: BaseException) -> TTSBridgeError:
        if isinstance(exc, aiohttp.ClientConnectorCertificateError):
            return certificate_error(PROVIDER, self.http.http_base, exc.certificate_error)
        if isinstance(exc, asyncio.TimeoutError):  # aiohttp's read timeouts are TimeoutErrors too
            return TTSTimeoutError(f"nineninesix: {self.method} {self.path} timed out")
        return TTSConnectionError(
            f"nineninesix: {self.method} {self.path} failed: {redact(exc, (self.http._api_key,))}"
        )


def _new_session(ssl: ssl_module.SSLContext | None) -> Callable[[], aiohttp.ClientSession]:
    def make() -> aiohttp.ClientSession:
        context = ssl if ssl is not None else client_context_sync()  # built already (session())
        return aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context))

    return make


async def _close_session(session: aiohttp.ClientSession) -> None:
    await session.close()


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


_HTTP_CODES = {
    400: "bad_request",
    401: "unauthorized",
    402: "payment_required",
    404: "not_found",
    429: "rate_limited",
    502: "upstream_unavailable",
}


def _error_from_body(body: dict[str, Any], status: int, retry_after: float | None) -> TTSBridgeError:
    status = int(body.get("status_code") or status)
    code = str(body.get("error_code") or body.get("error") or _HTTP_CODES.get(status, f"http_{status}"))
    message = str(body.get("message") or body.get("title") or code)
    return TTSAPIError(
        message,
        provider=PROVIDER,
        error_code=code,
        status_code=status,
        retryable=retryable_status(status),
        request_id=body.get("request_id"),
        retry_after=retry_after,
    )


async def _sse_events(resp: aiohttp.ClientResponse) -> AsyncIterator[dict[str, Any]]:
    """``data:`` payloads of a text/event-stream, parsed as JSON, as they arrive."""
    data_lines: list[str] = []
    buf = b""
    async for chunk in resp.content.iter_any():
        buf += chunk
        while True:
            nl = buf.find(b"\n")
            if nl < 0:
                break
            line, buf = buf[:nl].rstrip(b"\r").decode("utf-8", errors="replace"), buf[nl + 1 :]
            if not line:
                if data_lines:
                    payload = "\n".join(data_lines)
                    data_lines = []
                    try:
                        event = json.loads(payload)
                    except ValueError:
                        continue
                    if isinstance(event, dict):
                        yield event
                continue
            if line.startswith(":"):
                continue
            name, _, value = line.partition(":")
            if name == "data":
                data_lines.append(value[1:] if value.startswith(" ") else value)
    if data_lines:
        try:
            event = json.loads("\n".join(data_lines))
        except ValueError:
            return
        if isinstance(event, dict):
            yield event
