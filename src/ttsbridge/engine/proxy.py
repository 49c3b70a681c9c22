"""Proxies: the ``proxy=`` option every surface takes, and the environment's proxy for one URL.

``proxy=True`` (the default) follows the environment: ``HTTPS_PROXY`` / ``HTTP_PROXY`` (``WSS_PROXY`` /
``WS_PROXY`` too, for the WebSockets, where websockets reads them) and ``NO_PROXY``; ``None`` (or ``False``)
connects directly whatever the environment says; a URL (``http://proxy.corp:3128``) is that proxy and wins
over the environment. WebSockets read the environment themselves (websockets' ``proxy=True``); aiohttp does
only with ``trust_env=True``, which a session handed in (LiveKit's, Pipecat's) may not have, so the HTTP
side asks :func:`proxy_for` per request and passes the answer as the request's ``proxy``.
"""

from __future__ import annotations

import urllib.request
from urllib.parse import urlsplit

from ttsbridge.errors import TTSInvalidOptionError

__all__ = ["ProxySetting", "check_proxy", "proxy_for"]

ProxySetting = str | bool | None

_SCHEMES = ("http", "https", "socks5h", "socks5", "socks4a", "socks4")


def check_proxy(proxy: object) -> ProxySetting:
    """``proxy`` validated: True, None/False, or a proxy URL with a scheme and a host."""
    if proxy is True or proxy is None or proxy is False:
        return proxy
    if isinstance(proxy, str):
        parts = urlsplit(proxy)
        if parts.scheme.lower() in _SCHEMES and parts.hostname:
            return proxy
    shown = "a URL" if isinstance(proxy, str) and "@" in proxy else repr(proxy)  # may hold credentials
    raise TTSInvalidOptionError(
        "proxy", shown, f"True (from the environment), None (direct) or a proxy URL ({', '.join(_SCHEMES)})"
    )


def proxy_for(url: str, proxy: ProxySetting = True) -> str | None:
    """The proxy an HTTP request to ``url`` goes through: the explicit one, none, or the environment's
    (``<scheme>_proxy`` for the URL's scheme, unless ``NO_PROXY`` names its host)."""
    if proxy is not True:
        return proxy or None
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port
    if urllib.request.proxy_bypass(host) or (port and urllib.request.proxy_bypass(f"{host}:{port}")):
        return None
    proxies = urllib.request.getproxies()
    return proxies.get(parts.scheme.lower()) or None
