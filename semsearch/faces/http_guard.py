"""What keeps a local HTTP server up (``serve``, ``serve --workers N``, ``mcp --http``) under slow or greedy clients.

uvicorn's own settings carry what they can: the h11 parser (pinned, whatever else is installed) with a bounded
request head (``h11_max_incomplete_event_size``: 400 past it) and the keep-alive timeout between requests. The
body cap is the app's: Starlette's ``RequestBodyLimitMiddleware`` (``serve.create_app``), counted as the bytes
arrive, chunked too; the MCP SDK's own for ``mcp --http``. Three gaps remain, closed by ``GuardedH11``, a thin
subclass of uvicorn's h11 protocol. uvicorn 0.55 has no header-read timeout, and its ``limit_concurrency``
counts half-open connections too, so slow clients would make it answer 503 to good ones, which is the attack's
aim. So:

- a request deadline: the head within ``head_timeout_s`` of connecting (or of the previous response), the body
  within ``body_timeout_s`` of the head, absolute, so trickling a byte at a time does not extend it (408);
- a connection cap below the process's open-file limit: a connection past it sheds the oldest connection that
  is waiting for a request head (idle or slow), never one being answered, so ``/api/health`` still gets in;
- a budget of request bytes held across all connections: past it, the connection that would overflow it is
  refused (503) instead of the process growing.

Each process of ``serve --workers N`` builds its own protocol class, limits and tally, so each holds these bounds.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

# Requests past uvicorn's 16 KiB default head buffer could be cut off or refused depending on how TCP split them;
# this bound holds every request the API's own limits allow: MAX_K (1000) ids of 200 characters, each character up
# to 12 bytes percent-encoded (a 4-byte UTF-8 one: 2.4 MB in all). Before, 4 MiB: 300 clients sending 3.7 MB heads
# held 1.3 GB; now the request-byte budget and the head deadline bound what they hold.
MAX_REQUEST_HEAD = 3 * 1024 * 1024
MAX_CONNECTIONS = 1024  # per process; lowered to fit the open-file limit (``connection_cap``)
FD_RESERVE = 128  # files the process itself keeps open: the index's versions, SQLite, the model, logs
HEAD_TIMEOUT_S = 10.0
BODY_TIMEOUT_S = 30.0
REQUEST_BYTES_BUDGET = 16 * 1024 * 1024  # request heads and bodies held at once, all connections together


@dataclass(frozen=True)
class Limits:
    """The bounds one server process holds (tests pass small ones)."""

    max_connections: int = MAX_CONNECTIONS
    head_timeout_s: float = HEAD_TIMEOUT_S
    body_timeout_s: float = BODY_TIMEOUT_S
    max_head: int = MAX_REQUEST_HEAD
    budget: int = REQUEST_BYTES_BUDGET


@dataclass
class Tally:
    """What one server process's connections hold now (shared by them; the event loop is single-threaded)."""

    request_bytes: int = 0
    # The connections waiting for a request head, longest-waiting first (a dict keeps insertion order).
    waiting: dict[GuardedH11, None] = field(default_factory=dict)


def connection_cap(wanted: int = MAX_CONNECTIONS) -> int:
    """``wanted`` connections, or fewer so that they and the process's own files fit its open-file limit.

    The soft limit is first raised to the hard one, as Go's runtime does for every server: a server's sockets are
    its files, and the common soft default (1024) would leave room for fewer connections than the cap.
    """
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft != resource.RLIM_INFINITY and (hard == resource.RLIM_INFINITY or soft < hard):
            try:
                resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
                soft = hard
            except (OSError, ValueError):
                pass  # some platforms cap it lower than they say (macOS: OPEN_MAX); keep the soft one
    except (ImportError, OSError, ValueError):
        return wanted
    if soft == resource.RLIM_INFINITY:
        return wanted
    return max(16, min(wanted, soft - FD_RESERVE))


def _raw_response(status: int, reason: str, message: str) -> bytes:
    """A whole ``Connection: close`` response, written below h11 (which cannot answer a request it never saw)."""
    import json

    body = json.dumps({"status": status, "error": message, "type": "ConnectionLimit"}).encode()
    head = (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n"
        "connection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


class GuardedH11(H11Protocol):
    """uvicorn's h11 protocol with a request deadline, a connection cap and a request-bytes budget (see module)."""

    limits: Limits = Limits()
    tally: Tally = Tally()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.awaiting_head = False
        self.held = 0  # bytes of the current request counted in tally.request_bytes
        self.deadline: asyncio.TimerHandle | None = None

    # ------------------------------------------------------------------ the connection's life

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.limits.max_connections:
            # Shed the connection that has waited longest for a request (idle or slow), else refuse this one.
            victim = next(iter(self.tally.waiting), self)
            victim.refuse(503, "Service Unavailable", "too many connections: this one waited longest for a request")
        if not transport.is_closing():
            self._await_head()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_deadline()
        self._release()
        self._got_head()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self.awaiting_head or (self.cycle is not None and not self.cycle.response_complete):
            self.held += len(data)
            self.tally.request_bytes += len(data)
            if self.tally.request_bytes > self.limits.budget:
                self.refuse(503, "Service Unavailable", "the server holds too many request bytes; try again")
                return
        before = self.cycle
        super().data_received(data)
        self._after_events(before)

    def on_response_complete(self) -> None:
        self._release()
        if not self.transport.is_closing():
            self._await_head()
        before = self.cycle
        super().on_response_complete()
        self._after_events(before)

    # ------------------------------------------------------------------ the bounds

    def _await_head(self) -> None:
        self.awaiting_head = True
        self.tally.waiting.pop(self, None)
        self.tally.waiting[self] = None  # now the last to be shed
        self._arm(self.limits.head_timeout_s)

    def _got_head(self) -> None:
        self.awaiting_head = False
        self.tally.waiting.pop(self, None)

    def _after_events(self, before: Any) -> None:
        """After h11 parsed what arrived: a new request head starts the body's deadline; a whole request ends it."""
        if self.cycle is not before and self.cycle is not None:
            self._got_head()
            self._arm(self.limits.body_timeout_s)
        if not self.awaiting_head and self.cycle is not None and not self.cycle.more_body:
            self._cancel_deadline()

    def _arm(self, seconds: float) -> None:
        self._cancel_deadline()
        self.deadline = self.loop.call_later(seconds, self._too_slow)

    def _cancel_deadline(self) -> None:
        if self.deadline is not None:
            self.deadline.cancel()
            self.deadline = None

    def _release(self) -> None:
        self.tally.request_bytes -= self.held
        self.held = 0

    def _too_slow(self) -> None:
        self.deadline = None
        if self.awaiting_head:
            self.refuse(408, "Request Timeout", "the request head did not arrive in time")
        elif self.cycle is not None and not self.cycle.response_started:
            self.refuse(408, "Request Timeout", "the request body did not arrive in time")

    def refuse(self, status: int, reason: str, message: str) -> None:
        """Close the connection now, answering ``status`` when it is between requests (mid-request, the app sees
        a disconnect and answers no one)."""
        answer = self.awaiting_head or self.cycle is None  # between requests: no app is answering
        self._cancel_deadline()
        self._release()
        self._got_head()
        self.connections.discard(self)  # it no longer counts against the cap, before connection_lost runs
        if not self.transport.is_closing():
            if answer:
                self.transport.write(_raw_response(status, reason, message))
            self.transport.close()


def guarded_protocol(limits: Limits) -> type[GuardedH11]:
    """A ``GuardedH11`` class of its own for one server (its limits and its own tally)."""
    return type("GuardedH11", (GuardedH11,), {"limits": limits, "tally": Tally()})


def guarded_config(app: Any, *, limits: Limits | None = None, **settings: Any) -> Any:
    """uvicorn's settings for ``app`` with these bounds (``settings``: log level, access log, host, port, ...)."""
    import uvicorn

    limits = limits or Limits(max_connections=connection_cap())
    return uvicorn.Config(
        app,
        http=guarded_protocol(limits),
        h11_max_incomplete_event_size=limits.max_head,
        timeout_keep_alive=5,
        ws="none",  # neither server speaks WebSocket; an Upgrade header is then an ordinary request
        **settings,
    )
