"""``semsearch mcp``: the index as a Model Context Protocol server over stdio or streamable HTTP, for LLM agents.

This module runs the server (``mcp_tools`` declares what it serves) and, like ``serve``, imports its optional
extra only when asked to: ``check_installed()`` names the missing extra in one line. Logging goes to stderr: on
stdio, stdout belongs to the protocol (the SDK points stray writes to it at stderr while serving).
"""

from __future__ import annotations

import importlib.util
import socket
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from semsearch.core.errors import ExtraNotInstalledError, InputError
from semsearch.core.errors import McpUnavailableError as McpUnavailableError  # the old name, still importable here
from semsearch.faces import agent_results as results
from semsearch.faces.agent_results import DEFAULT_BUDGET
from semsearch.faces.local_hosts import ScreenedApp, TrustedHosts
from semsearch.query.live import LiveIndex

if TYPE_CHECKING:
    from semsearch.encode.embedder import Embedder

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765


def check_installed() -> None:
    """Raise a one-line error naming the extra when the MCP SDK is missing."""
    for module in ("mcp", "pydantic", "uvicorn"):
        if importlib.util.find_spec(module) is None:
            raise ExtraNotInstalledError("mcp", "semsearch mcp", module)


def _listen(host: str, port: int) -> socket.socket:
    """A bound socket (port 0: any free one), or a one-line InputError."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(2048)  # before `ready` is called: a client that connects at once must not be refused
    except OSError as exc:
        sock.close()
        raise InputError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    return sock


def http_app(server: Any, trusted: TrustedHosts) -> Any:
    """The streamable HTTP app of an MCP server, answering only ``trusted`` names (as ``semsearch serve`` does)."""
    from mcp.server.transport_security import TransportSecuritySettings

    # One screen for both servers (local_hosts), rather than the SDK's own, which guards loopback binds only.
    unscreened = server.streamable_http_app(
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False)
    )
    return ScreenedApp(unscreened, trusted)


def run_server(
    index_dir: str | Path,
    *,
    http: bool = False,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    budget: int = DEFAULT_BUDGET,
    embedder: Embedder | None = None,
    ready: Callable[[str], None] | None = None,
    allow_hosts: Sequence[str] = (),
) -> None:
    """Serve the index over stdio (default) or streamable HTTP until the client leaves or Ctrl-C.

    The index is opened first, so a missing or damaged one is a one-line error before any protocol starts.
    ``ready(where)`` is called once the server is about to answer (with the URL for HTTP). Over HTTP it answers
    only its own names, like ``semsearch serve`` (``local_hosts``: 421 for another Host, 403 for another Origin).
    """
    from semsearch.faces.mcp_tools import create_server

    results.check_budget(budget)
    trusted = TrustedHosts.for_bind(host, allow_hosts)
    live = LiveIndex(index_dir, embedder=embedder)
    try:
        server = create_server(live, budget=budget)
        if not http:
            if ready is not None:
                ready("stdio")
            server.run("stdio")
            return
        import uvicorn

        from semsearch.faces.http_guard import guarded_config

        sock = _listen(host, port)
        try:
            app = http_app(server, trusted)
            bound = sock.getsockname()[1]
            shown = f"[{host}]" if sock.family == socket.AF_INET6 else host
            if ready is not None:
                ready(f"http://{shown}:{bound}/mcp")
            # The same bounds as serve (http_guard); the SDK caps the body itself (413, counted as it arrives).
            config = guarded_config(app, log_level="warning", access_log=False, timeout_graceful_shutdown=3)
            uvicorn.Server(config).run(sockets=[sock])
        finally:
            sock.close()
    finally:
        live.close()
