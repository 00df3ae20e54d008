"""Which ``Host`` and ``Origin`` a local HTTP server answers (``serve``, ``mcp --http``): no DNS rebinding.

A page on another site can point its own name at 127.0.0.1 (DNS rebinding) and then read this server as if it
were its own origin; the browser still sends that name in ``Host``. So each request must name this server:

- bound to a loopback address: ``localhost``, ``127.0.0.1``, ``[::1]`` and the ``--allow-host`` names;
- bound to one other address: that address, ``localhost`` and the ``--allow-host`` names;
- bound to every address (``0.0.0.0``, ``::``): the machine's own names (``localhost``, its host name and fully
  qualified name), any IP address literal (an address cannot be rebound to another machine), and the
  ``--allow-host`` names: a DNS name of this machine that is none of these must be listed.

Anything else is refused with 421. An ``Origin`` header, when sent, must be an http(s) URL of an allowed name
with the same port as ``Host`` (a page of this server), else 403 (reads too: nothing of this server is for
other sites). ``ScreenedApp`` applies both and adds the security headers every response carries.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from semsearch.core.errors import InputError

WILDCARDS = frozenset({"", "0.0.0.0", "::"})
LOOPBACK = ("localhost", "127.0.0.1", "::1")
_NAME = re.compile(r"^[a-z0-9_]([a-z0-9_\-]{0,62})(\.[a-z0-9_]([a-z0-9_\-]{0,62}))*$")
# The search page: its own scripts, styles and API only (no inline script, no framing, no plugins).
PAGE_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
MAX_BODY = 4 * 1024 * 1024  # a declared body past this is refused unread; serve counts a chunked one as it arrives
SECURITY_HEADERS = (
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def _normal(name: str) -> str:
    """A host name or address as compared: lower case, no brackets, no trailing dot."""
    name = name.strip().lower()
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    return name.rstrip(".")


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def check_allow_host(name: str) -> str:
    """An ``--allow-host`` value: a host name or IP address without scheme or port; raises InputError otherwise."""
    normal = _normal(name)
    if not normal or not (_is_ip(normal) or _NAME.match(normal)):
        raise InputError(f"--allow-host {name!r} is not a host name or IP address (give a name like papers.lan)")
    return normal


def split_host(value: str) -> tuple[str, str | None]:
    """A ``Host`` header as (name, port or None); ``[::1]:8000`` -> ("::1", "8000")."""
    value = value.strip()
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return "", None
        rest = value[end + 1 :]
        return _normal(value[: end + 1]), rest[1:] if rest.startswith(":") else None
    name, sep, port = value.rpartition(":")
    if not sep or ":" in name:  # no port, or a bare IPv6 address (not valid in Host, never allowed)
        return (_normal(value), None) if ":" not in value else ("", None)
    return _normal(name), port


@dataclass(frozen=True)
class TrustedHosts:
    """The names one server answers to (see the module's description)."""

    names: frozenset[str]
    any_ip: bool = False

    @classmethod
    def for_bind(cls, host: str, extra: Sequence[str] = ()) -> TrustedHosts:
        """The names a server bound to ``host`` answers to, plus the ``extra`` (--allow-host) ones."""
        bound = _normal(host)
        names = {"localhost", *(check_allow_host(n) for n in extra)}
        if bound in WILDCARDS:
            names |= {n for n in (_normal(socket.gethostname()), _normal(socket.getfqdn())) if n}
            return cls(frozenset(names | set(LOOPBACK)), any_ip=True)
        names.add(bound)
        if bound == "localhost" or (_is_ip(bound) and ipaddress.ip_address(bound).is_loopback):
            names |= set(LOOPBACK)
        return cls(frozenset(names))

    def allows(self, name: str) -> bool:
        """Whether a (normalised) host name or address is this server's."""
        return bool(name) and (name in self.names or (self.any_ip and _is_ip(name)))

    def refusal(self, host: str | None, origin: str | None) -> tuple[int, str] | None:
        """(status, message) when a request's Host or Origin is not this server's, else None."""
        name, port = split_host(host or "")
        if not self.allows(name):
            shown = ", ".join(sorted(self.names))
            return 421, (
                f"this server answers to {shown}, not Host {host!r} "
                "(start it with --allow-host NAME to serve it under another name)"
            )
        if origin is None:
            return None
        try:
            parts = urlsplit(origin)
            origin_port = parts.port
        except ValueError:
            parts, origin_port = None, None
        if (
            parts is None
            or parts.scheme not in ("http", "https")
            or not self.allows(_normal(parts.hostname or ""))
            or (str(origin_port) if origin_port is not None else None) != port
        ):
            return 403, f"cross-origin request refused: Origin {origin!r} is not a page of this server"
        return None


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return None


def _declared_length(scope: Scope) -> int:
    try:
        return int(_header(scope, b"content-length") or 0)
    except ValueError:
        return 0  # h11 refuses a malformed length itself


class ScreenedApp:
    """ASGI middleware: refuse a foreign Host (421) or Origin (403), or a body over ``max_body`` (413), as JSON;
    add the security headers to every response."""

    def __init__(self, app: ASGIApp, trusted: TrustedHosts, csp: str = PAGE_CSP, max_body: int = MAX_BODY) -> None:
        self.app = app
        self.trusted = trusted
        self.csp = csp.encode("ascii")
        self.max_body = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", ()))
                have = {bytes(k).lower() for k, _ in headers}
                extra = [*SECURITY_HEADERS, (b"content-security-policy", self.csp)]
                headers += [(k, v) for k, v in extra if k not in have]  # a route may set its own CSP (/docs)
                message["headers"] = headers
            await send(message)

        refused = self.trusted.refusal(_header(scope, b"host"), _header(scope, b"origin"))
        if refused is None and _declared_length(scope) > self.max_body:
            refused = 413, f"the request body is over {self.max_body} bytes"
        if refused is None:
            await self.app(scope, receive, with_headers)
            return
        import json

        status, error = refused
        body = json.dumps({"status": status, "error": error, "type": "HostError"}).encode()
        await with_headers(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    *([(b"connection", b"close")] if status == 413 else []),  # the body is never read
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
