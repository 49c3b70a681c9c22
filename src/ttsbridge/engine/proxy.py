"""Proxies: the ``proxy=`` setting every surface takes, and which proxy one URL goes through. The one place
the environment's proxy rules are read, for the WebSockets (engine/transport.py) and the HTTP calls alike.

``proxy=True`` (the default) follows the environment, by websockets' rules for ``ws://`` / ``wss://``
(``WSS_PROXY`` / ``WS_PROXY`` first, then a SOCKS proxy, then ``HTTPS_PROXY``, and ``HTTP_PROXY`` for
``ws://``) and by the URL's own scheme for ``http://`` / ``https://``; ``NO_PROXY`` names hosts that connect
directly. ``None`` (or ``False``) connects directly whatever the environment says; a URL
(``http://proxy.corp:3128``) is that proxy and wins over the environment. aiohttp reads the environment only
with ``trust_env=True``, which a session handed in (LiveKit's, Pipecat's) may not have, so the HTTP side asks
:func:`proxy_for` per request and passes the answer as the request's ``proxy``.
"""

from __future__ import annotations

import urllib.request
from urllib.parse import urlsplit

from ttsbridge.errors import TTSInvalidOptionError

__all__ = ["ProxySetting", "check_proxy", "proxy_for"]

ProxySetting = str | bool | None

_SCHEMES = ("http", "https", "socks5h", "socks5", "socks4a", "socks4")

#: Which of the environment's proxies (``urllib.request.getproxies()`` keys) serve a URL's scheme, in order:
#: websockets' rules for the WebSockets (RFC 6455 "Proxy Usage": SOCKS before HTTPS), the scheme's own for HTTP.
_ENVIRONMENT = {
    "wss": ("wss", "socks", "https"),
    "ws": ("ws", "socks", "https", "http"),
    "https": ("https",),
    "http": ("http",),
}


def check_proxy(proxy: object) -> ProxySetting:
    """``proxy`` validated: True, None (``False`` is None), or a proxy URL with a known scheme and a host; a
    typed error naming ``proxy`` otherwise (its value hidden when it may hold credentials)."""
    if proxy is True or proxy is None:
        return proxy
    if proxy is False:
        return None
    if isinstance(proxy, str):
        parts = urlsplit(proxy)
        if parts.scheme.lower() in _SCHEMES and parts.hostname:
            return proxy
    shown = "a URL" if isinstance(proxy, str) and "@" in proxy else repr(proxy)
    raise TTSInvalidOptionError(
        "proxy", shown, f"True (from the environment), None (direct) or a proxy URL ({', '.join(_SCHEMES)})"
    )


def proxy_for(url: str, proxy: ProxySetting = True) -> str | None:
    """The proxy a connection to ``url`` goes through: the explicit one, none, or the environment's (see the
    module docstring; None when ``NO_PROXY`` names the host)."""
    if proxy is not True:
        return proxy or None
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    host = parts.hostname or ""
    port = parts.port or (443 if scheme in ("https", "wss") else 80)
    if urllib.request.proxy_bypass(host) or urllib.request.proxy_bypass(f"{host}:{port}"):
        return None
    proxies = urllib.request.getproxies()
    for name in _ENVIRONMENT.get(scheme, (scheme,)):
        found = proxies.get(name)
        if found:
            # the operating system names a SOCKS proxy as {"socks": "http://host:port"} (websockets' reading)
            return "socks5h://" + found[7:] if name == "socks" and found.startswith("http://") else found
    return None
