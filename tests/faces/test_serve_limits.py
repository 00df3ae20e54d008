"""A server that stays up (issue #37): body, head, time and connection bounds on a real uvicorn server, a
read-only index refusing tag writes with 409, and tags listed from one read of the tags file.

The servers here run in a thread on 127.0.0.1 with small limits (``http_guard.Limits``), so each bound is hit
in milliseconds; nothing is timed. ``benchmarks/load_serve.py`` measures the same bounds at full size.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import select
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import FakeEmbedder

pytest.importorskip("fastapi")
pytest.importorskip("httpx")
uvicorn = pytest.importorskip("uvicorn")

from fastapi.testclient import TestClient  # noqa: E402

from semsearch import BuildOptions, build_index  # noqa: E402
from semsearch.faces import http_guard  # noqa: E402
from semsearch.faces.http_guard import GuardedH11, Limits  # noqa: E402
from semsearch.faces.local_hosts import MAX_BODY  # noqa: E402
from semsearch.faces.serve import create_app, server_config  # noqa: E402

WAIT_S = 10.0  # how long a test waits for an answer that must come (a bound is 0.3 s here)
HOST = b"Host: localhost\r\n"


@pytest.fixture
def index_dir(tmp_path: Path) -> Path:
    rows = [
        {"id": f"p{i}", "title": f"Paper {i}", "abstract": f"Abstract {i} on federated privacy and graph learning {i}."}
        for i in range(6)
    ]
    src = tmp_path / "papers.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    path = tmp_path / "index"
    build_index([str(src)], path, BuildOptions(progress=False), embedder=FakeEmbedder())
    return path


class Running:
    """A uvicorn server of ``app`` in a thread on a free loopback port, with ``limits``."""

    def __init__(self, app: Any, limits: Limits) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.config = server_config(app, limits=limits)
        self.protocol: type[GuardedH11] = self.config.http
        self.server = uvicorn.Server(self.config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)

    def __enter__(self) -> Running:
        self.thread.start()
        deadline = time.monotonic() + WAIT_S
        while not self.server.started:
            assert time.monotonic() < deadline and self.thread.is_alive(), "the server did not start"
            time.sleep(0.02)
        return self

    def __exit__(self, *_: object) -> None:
        self.server.should_exit = True
        self.thread.join(WAIT_S)
        self.sock.close()

    def connect(self) -> socket.socket:
        conn = socket.create_connection(("127.0.0.1", self.port), timeout=WAIT_S)
        return conn

    def health(self) -> int:
        """The status of a fresh GET /api/health."""
        with contextlib.closing(self.connect()) as conn:
            conn.sendall(b"GET /api/health HTTP/1.1\r\n" + HOST + b"\r\n")
            return status_of(read_response(conn))


def read_response(conn: socket.socket) -> bytes:
    """What the server sends until it closes the connection or a whole response has come (WAIT_S at most)."""
    conn.settimeout(WAIT_S)
    data = b""
    while True:
        try:
            part = conn.recv(65536)
        except (ConnectionResetError, TimeoutError):
            return data
        if not part:
            return data
        data += part
        head, sep, body = data.partition(b"\r\n\r\n")
        if sep:
            length = [int(v) for k, v in _headers(head) if k == b"content-length"]
            if length and len(body) >= length[0]:
                return data


def _headers(head: bytes) -> list[tuple[bytes, bytes]]:
    lines = head.split(b"\r\n")[1:]
    return [(k.strip().lower(), v.strip()) for k, _, v in (line.partition(b":") for line in lines)]


def status_of(response: bytes) -> int:
    return int(response.split(b" ", 2)[1]) if response.startswith(b"HTTP/1.1 ") else 0


def closed_by_server(conn: socket.socket) -> bool:
    """Whether the server has closed the connection (EOF or reset) within WAIT_S."""
    conn.settimeout(WAIT_S)
    try:
        while conn.recv(65536):
            pass
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False
    return True


# ------------------------------------------------------------------------------------------------ the body


def test_a_chunked_body_past_the_cap_is_refused_as_it_arrives(index_dir: Path) -> None:
    """Before: a chunked body (no Content-Length) passed the 4 MiB cap and was read whole (a 1 GiB one: 2.8 GB)."""
    app = create_app(index_dir, embedder=FakeEmbedder(), allow_tags=True)
    with Running(app, Limits()) as server, contextlib.closing(server.connect()) as conn:
        conn.sendall(
            b"POST /api/tags/liked HTTP/1.1\r\n" + HOST + b"Content-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        chunk = b'{"add": ["p0"], "pad": "' + b" " * 65536
        sent, limit = 0, 16 * MAX_BODY
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            while sent < limit and not select.select([conn], [], [], 0)[0]:
                conn.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                sent += len(chunk)
        response = read_response(conn)
        assert status_of(response) == 413, response[:300]
        assert sent < limit  # answered while the body was still coming, not after reading it all
        assert f"over {MAX_BODY} bytes".encode() in response
        assert (b"connection", b"close") in _headers(response.partition(b"\r\n\r\n")[0])
    assert not (index_dir / "tags.json").exists()


def test_a_chunked_body_past_the_cap_is_413_json_in_process(index_dir: Path) -> None:
    app = create_app(index_dir, embedder=FakeEmbedder(), allow_tags=True)

    def chunks() -> Iterator[bytes]:
        yield b'{"add": ["p0"], "pad": "'
        for _ in range(MAX_BODY // 65536 + 2):
            yield b" " * 65536
        yield b'"}'

    with TestClient(app, base_url="http://localhost") as client:
        response = client.post("/api/tags/liked", content=chunks(), headers={"Content-Type": "application/json"})
    assert response.status_code == 413, response.text[:300]
    assert response.json()["error"] == f"the request body is over {MAX_BODY} bytes"


# ------------------------------------------------------------------------------------------------ time


def test_an_unfinished_head_is_answered_408_and_closed(index_dir: Path) -> None:
    """Before: a half-sent head (slowloris) held its connection for as long as the client liked."""
    app = create_app(index_dir, embedder=FakeEmbedder())
    with Running(app, Limits(head_timeout_s=0.3)) as server:
        with contextlib.closing(server.connect()) as slow, contextlib.closing(server.connect()) as idle:
            slow.sendall(b"GET /api/health HTTP/1.1\r\n" + HOST)  # never the blank line
            for conn in (slow, idle):  # idle: connected and silent
                response = read_response(conn)
                assert status_of(response) == 408 and b"did not arrive in time" in response, response
        assert server.health() == 200


def test_a_trickled_body_is_cut_off(index_dir: Path) -> None:
    """Before: a body promised by Content-Length and never sent held the request (and its task) forever."""
    app = create_app(index_dir, embedder=FakeEmbedder(), allow_tags=True)
    with Running(app, Limits(body_timeout_s=0.3)) as server, contextlib.closing(server.connect()) as conn:
        conn.sendall(
            b"POST /api/tags/liked HTTP/1.1\r\n" + HOST + b"Content-Type: application/json\r\n"
            b'Content-Length: 100\r\n\r\n{"add"'
        )
        assert closed_by_server(conn)
        assert server.health() == 200
    assert not (index_dir / "tags.json").exists()


def test_a_keep_alive_connection_gets_a_fresh_head_deadline(index_dir: Path) -> None:
    app = create_app(index_dir, embedder=FakeEmbedder())
    with Running(app, Limits(head_timeout_s=0.5)) as server, contextlib.closing(server.connect()) as conn:
        for _ in range(3):  # each request well inside its own deadline, on one connection
            conn.sendall(b"GET /api/health HTTP/1.1\r\n" + HOST + b"\r\n")
            assert status_of(read_response(conn)) == 200
            time.sleep(0.2)


# ------------------------------------------------------------------------------------------------ connections


def test_connections_past_the_cap_shed_the_longest_waiting(index_dir: Path) -> None:
    """Before: every half-open connection was kept until the process ran out of file descriptors."""
    app = create_app(index_dir, embedder=FakeEmbedder())
    with Running(app, Limits(max_connections=8)) as server:
        slow = []
        for _ in range(20):
            conn = server.connect()
            conn.sendall(b"GET /api/health HTTP/1.1\r\n")
            slow.append(conn)
            time.sleep(0.005)  # in order, so "longest waiting" is the first ones
        try:
            assert server.health() == 200
            first = read_response(slow[0])
            assert status_of(first) == 503 and b"too many connections" in first, first
            assert len(server.server.server_state.connections) <= 8
        finally:
            for conn in slow:
                conn.close()


def test_request_bytes_past_the_budget_are_refused(index_dir: Path) -> None:
    """Before: 300 clients each sending 3.7 MB of headers and never finishing held 1.3 GB."""
    app = create_app(index_dir, embedder=FakeEmbedder())
    with Running(app, Limits(budget=256 * 1024)) as server:
        heads = []
        try:
            for _ in range(4):
                conn = server.connect()
                conn.sendall(b"GET /api/health HTTP/1.1\r\n" + HOST + b"X-Pad: " + b"a" * 100_000)
                heads.append(conn)
            statuses = [status_of(read_response(c)) for c in heads[2:]]
            assert 503 in statuses, statuses
            assert server.protocol.tally.request_bytes <= 256 * 1024
            assert server.health() == 200
        finally:
            for conn in heads:
                conn.close()


def test_a_head_past_the_bound_is_refused_and_a_long_id_list_is_not(index_dir: Path) -> None:
    app = create_app(index_dir, embedder=FakeEmbedder())
    with Running(app, Limits()) as server:
        with contextlib.closing(server.connect()) as conn:
            conn.sendall(
                b"GET /api/health HTTP/1.1\r\n" + HOST + b"X-Pad: " + b"a" * (http_guard.MAX_REQUEST_HEAD + 10)
            )
            assert status_of(read_response(conn)) == 400
        # The longest request the API's bounds allow: 1000 ids of 200 characters, every one percent-encoded.
        ids = "&".join("ids=" + "%C3%A9" * 100 for _ in range(1000))
        with contextlib.closing(server.connect()) as conn:
            conn.sendall(f"GET /api/export?{ids} HTTP/1.1\r\n".encode() + HOST + b"\r\n")
            response = read_response(conn)
        assert status_of(response) in (200, 404, 422), response[:300]  # answered by the app, not cut off
        assert response.partition(b"\r\n\r\n")[2].startswith(b"{") or status_of(response) == 200


def test_the_connection_cap_fits_the_open_file_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    import resource

    raised: list[tuple[int, int]] = []

    def refuse_raise(_: int, limits: tuple[int, int]) -> None:
        raised.append(limits)
        raise ValueError("not allowed here")

    monkeypatch.setattr(resource, "setrlimit", refuse_raise)
    monkeypatch.setattr(resource, "getrlimit", lambda _: (256, 4096))
    assert http_guard.connection_cap() == 256 - http_guard.FD_RESERVE  # the soft limit could not be raised
    assert raised == [(4096, 4096)]
    monkeypatch.setattr(resource, "setrlimit", lambda _, limits: raised.append(limits))
    assert http_guard.connection_cap() == http_guard.MAX_CONNECTIONS  # raised to the hard limit: room for all
    monkeypatch.setattr(resource, "getrlimit", lambda _: (100_000, 100_000))
    assert http_guard.connection_cap() == http_guard.MAX_CONNECTIONS


# ------------------------------------------------------------------------------------------------ every server


class _Captured(Exception):
    pass


def _capture_config(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Make uvicorn.Server record its config and stop, so a run_server returns at once."""
    seen: list[Any] = []

    class FakeServer:
        def __init__(self, config: Any) -> None:
            seen.append(config)

        def run(self, sockets: Any = None) -> None:
            raise _Captured

    monkeypatch.setattr(uvicorn, "Server", FakeServer)
    return seen


def test_serve_and_mcp_http_run_on_the_guarded_protocol(index_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: serve set only a 4 MiB head; mcp --http ran uvicorn's defaults (no bound on slow connections)."""
    from semsearch.faces import mcp_server, serve

    seen = _capture_config(monkeypatch)
    with pytest.raises(_Captured):
        serve.run_server(index_dir, port=0, embedder=FakeEmbedder())
    if mcp_server.importlib.util.find_spec("mcp") is not None:
        with pytest.raises(_Captured):
            mcp_server.run_server(index_dir, http=True, port=0, embedder=FakeEmbedder())
    assert seen
    for config in seen:
        assert isinstance(config.http, type) and issubclass(config.http, GuardedH11), config.http
        assert config.h11_max_incomplete_event_size == http_guard.MAX_REQUEST_HEAD
        assert config.http.limits.max_connections <= http_guard.MAX_CONNECTIONS
    assert len({id(c.http.tally) for c in seen}) == len(seen)  # each server counts its own bytes


def test_a_worker_serves_with_the_same_bounds(index_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from semsearch.faces import serve
    from semsearch.faces.workers import WorkerSpec

    seen = _capture_config(monkeypatch)
    spec = WorkerSpec(str(index_dir), "127.0.0.1", 0, FakeEmbedder(), False, False, ())

    class Ready:
        def put(self, _: object) -> None:
            pass

    with pytest.raises(_Captured):
        serve.serve_worker(spec, Ready())
    assert issubclass(seen[0].http, GuardedH11)


# ------------------------------------------------------------------------------------------------ read-only index


@pytest.fixture
def read_only(monkeypatch: pytest.MonkeyPatch) -> Callable[[Path], None]:
    """Make every write below a folder fail as on a read-only filesystem (root ignores chmod)."""

    def install(folder: Path) -> None:
        root = str(folder.resolve())
        real_open = os.open
        writes = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND

        def ro_open(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
            if os.path.abspath(os.fspath(path)).startswith(root) and flags & writes:
                raise OSError(errno.EROFS, os.strerror(errno.EROFS), os.fspath(path))
            return real_open(path, flags, *args, **kwargs)

        monkeypatch.setattr(os, "open", ro_open)

    return install


def test_a_read_only_index_refuses_tag_writes_with_409(index_dir: Path, read_only: Callable[[Path], None]) -> None:
    """Before: GET /api/tags said writable and the POST answered 500."""
    app = create_app(index_dir, embedder=FakeEmbedder(), allow_tags=True)
    read_only(index_dir)
    with TestClient(app, base_url="http://localhost") as client:
        listed = client.get("/api/tags").json()
        assert listed["writable"] is False
        assert "read-only" in listed["read_only_reason"] and str(index_dir) in listed["read_only_reason"]
        response = client.post("/api/tags/liked", json={"add": ["p0"]})
        assert response.status_code == 409, response.text
        assert "read-only" in response.json()["error"]
        assert client.get("/api/health").status_code == 200
    assert not (index_dir / "tags.json").exists()


def test_the_read_only_reason_of_a_server_without_allow_tags(index_dir: Path) -> None:
    with TestClient(create_app(index_dir, embedder=FakeEmbedder()), base_url="http://localhost") as client:
        listed = client.get("/api/tags").json()
    assert listed["writable"] is False and "--allow-tags" in listed["read_only_reason"]
    with TestClient(create_app(index_dir, embedder=FakeEmbedder(), allow_tags=True), base_url="http://localhost") as c:
        listed = c.get("/api/tags").json()
    assert listed["writable"] is True and listed["read_only_reason"] is None


def test_a_write_that_meets_a_read_only_folder_is_409(index_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The folder turns read-only between the check and the write: still 409 with the reason, not 500."""
    from semsearch.faces import serve_recs

    monkeypatch.setattr(serve_recs, "read_only_reason", lambda request: None)
    app = create_app(index_dir, embedder=FakeEmbedder(), allow_tags=True)

    def refuse(*_: Any, **__: Any) -> None:
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(index_dir / "tags.json"))

    monkeypatch.setattr("semsearch.curate.tags.write_text_atomic", refuse)
    with TestClient(app, base_url="http://localhost") as client:
        response = client.post("/api/tags/liked", json={"add": ["p0"]})
    assert response.status_code == 409 and "read-only" in response.json()["error"], response.text


def test_cli_tag_add_on_a_read_only_index_says_so(index_dir: Path, read_only: Callable[[Path], None]) -> None:
    from tests.helpers import assert_one_line_error, run

    read_only(index_dir)
    result = run(["tag", "add", "liked", "p0", "--index", str(index_dir)], FakeEmbedder())
    assert_one_line_error(result, "read-only")
    assert not (index_dir / "tags.json").exists()


def test_saved_queries_in_a_folder_turned_read_only_say_so(index_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The state lock opens (its file is there already) but the write meets a read-only folder: the same line as
    tags give, for saved queries too (before: only tags' own write was explained; a watch got the bare OSError)."""
    from tests.helpers import assert_one_line_error, run

    def refuse(path: Path, *_: Any) -> None:
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))

    monkeypatch.setattr("semsearch.curate.arrivals.write_text_atomic", refuse)
    result = run(["watch", "add", "moe", "mixture of experts", "--index", str(index_dir)], FakeEmbedder())
    assert_one_line_error(result, "the index is read-only here", "queries still work")
    assert not (index_dir / "watches.json").exists()


# ------------------------------------------------------------------------------------------------ tag listing


def _many_tags(index_dir: Path, count: int) -> None:
    from semsearch.curate.tags import TagStore
    from semsearch.query.search import Index

    with Index.open(index_dir) as idx:
        doc = idx.store.find("p0")
    assert doc is not None
    store = TagStore(index_dir)
    for i in range(count):
        store.add(f"t{i:04d}", [doc])


def _counting_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    from semsearch.curate.tags import TagStore

    reads = [0]
    real = TagStore._read_all

    def counted(self: TagStore) -> Any:
        reads[0] += 1
        return real(self)

    monkeypatch.setattr(TagStore, "_read_all", counted)
    return reads


@pytest.mark.parametrize("count", [3, 60])
def test_tags_are_listed_from_a_constant_number_of_reads(
    index_dir: Path, monkeypatch: pytest.MonkeyPatch, count: int
) -> None:
    """Before: the tags file was read once per tag (2,000 tags: 36-55 s; 50,000: over 10 min)."""
    from tests.helpers import run

    _many_tags(index_dir, count)
    reads = _counting_reads(monkeypatch)
    with TestClient(create_app(index_dir, embedder=FakeEmbedder()), base_url="http://localhost") as client:
        listed = client.get("/api/tags").json()
    assert len(listed["tags"]) == count and listed["tags"]["t0000"]["papers"] == 1
    assert reads[0] <= 2, reads
    for args in (["tag", "list"], ["tag", "list", "--json"]):
        reads[0] = 0
        result = run([*args, "--index", str(index_dir)], FakeEmbedder())
        assert result.exit_code == 0, result.output
        assert "t0000" in result.output
        assert reads[0] <= 2, (args, reads)


def test_the_server_parses_tags_again_only_once_they_change(index_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The server keeps one tag store: a second listing parses nothing, and a tag write is seen at once."""
    _many_tags(index_dir, 3)
    reads = _counting_reads(monkeypatch)
    app = create_app(index_dir, embedder=FakeEmbedder(), allow_tags=True)
    with TestClient(app, base_url="http://localhost") as client:
        assert len(client.get("/api/tags").json()["tags"]) == 3
        first = reads[0]
        assert len(client.get("/api/tags").json()["tags"]) == 3
        assert reads[0] == first  # nothing replaced tags.json: nothing parsed again
        assert client.post("/api/tags/fresh", json={"add": ["p0"]}).status_code == 200
        listed = client.get("/api/tags").json()["tags"]
    assert set(listed) == {"t0000", "t0001", "t0002", "fresh"} and listed["fresh"]["papers"] == 1


def test_listing_one_unknown_tag_names_the_known_ones(index_dir: Path) -> None:
    from tests.helpers import assert_one_line_error, run

    _many_tags(index_dir, 2)
    result = run(["tag", "list", "nope", "--index", str(index_dir)], FakeEmbedder())
    assert_one_line_error(result, "no tag 'nope'", "t0000, t0001")
