"""The web API (semsearch serve): every endpoint, every bad parameter, and new index versions picked up live."""

from __future__ import annotations

import json
import re
import socket
import sys
import threading
import time
import types
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import PAPERS, FakeEmbedder

pytest.importorskip("fastapi")
pytest.importorskip("httpx")

from fastapi.testclient import TestClient  # noqa: E402

from semsearch import BuildOptions, build_index  # noqa: E402
from semsearch.faces.serve import MAX_QUERY_CHARS, create_app  # noqa: E402
from semsearch.query.live import LiveIndex  # noqa: E402

OPTIONS = BuildOptions(progress=False)
EXTRA = {
    "id": "extra1",
    "title": "Sparse attention",
    "abstract": "Sparse attention patterns cut the quadratic cost of transformers on long documents.",
    "venue": "iclr",
    "year": 2024,
}


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def sources(tmp_path: Path) -> tuple[Path, Path]:
    """A catalogue of five papers with venue/year metadata, and a second file with one more paper."""
    folder = tmp_path / "src"
    folder.mkdir()
    rows = [
        {"id": f"p{i}", "title": f"Paper {name}", "abstract": text, "venue": "neurips", "year": 2020 + i}
        for i, (name, text) in enumerate(PAPERS.items())
    ]
    return write_jsonl(folder / "main.jsonl", rows), write_jsonl(folder / "extra.jsonl", [EXTRA])


@pytest.fixture
def index_dir(tmp_path: Path, sources: tuple[Path, Path]) -> Path:
    path = tmp_path / "index"
    build_index([str(sources[0])], path, OPTIONS, embedder=FakeEmbedder())
    return path


@pytest.fixture
def client(index_dir: Path) -> Iterator[TestClient]:
    with TestClient(create_app(index_dir, embedder=FakeEmbedder()), base_url="http://localhost") as c:
        yield c


def search(client: TestClient, **params: Any) -> dict[str, Any]:
    response = client.get("/api/search", params=params)
    assert response.status_code == 200, response.text
    return response.json()


# ------------------------------------------------------------------------------------------------ endpoints


def test_health_and_info(client: TestClient, index_dir: Path) -> None:
    health = client.get("/api/health").json()
    assert health["status"] == "ok" and health["documents"] == 5
    assert health["version"] == (index_dir / "CURRENT").read_text().strip()
    info = client.get("/api/info").json()
    assert info["documents"] == 5 and info["model"] == "fake-bow" and info["version"] == health["version"]
    assert [Path(s["path"]).name for s in info["sources"]] == ["main.jsonl"]


def test_search_returns_explained_hits(client: TestClient) -> None:
    data = search(client, q="federated privacy", k=3)
    assert (data["query"], data["k"], data["mode"]) == ("federated privacy", 3, "hybrid")
    hits = data["hits"]
    assert len(hits) == 3 and hits[0]["title"] == "Paper fed"
    assert [h["rank"] for h in hits] == [1, 2, 3]
    first = hits[0]
    assert set(first["matched_terms"]) == {"Federated", "privacy"}
    sentence = first["highlights"][0]
    marked = [sentence[s:e] for s, e in first["highlight_spans"][0]]
    assert marked and {w.lower() for w in marked} <= {"federated", "privacy"}
    assert first["metadata"] == {"venue": "neurips", "year": 2020}


@pytest.mark.parametrize("mode", ["hybrid", "dense", "lexical"])
def test_search_modes(client: TestClient, mode: str) -> None:
    hits = search(client, q="graph neural networks oversmoothing", k=2, mode=mode)["hits"]
    assert hits[0]["title"] == "Paper graph" and all(h["mode"] == mode for h in hits)


def test_search_where_repeats_and_diverse(client: TestClient) -> None:
    data = search(client, q="learning", k=10, where=["venue=neurips", "year>=2023"])
    assert sorted(h["metadata"]["year"] for h in data["hits"]) == [2023, 2024]
    assert data["where"] == ["venue=neurips", "year>=2023"]
    diverse = search(client, q="learning", k=4, diverse="true")
    assert len(diverse["hits"]) == 4 and diverse["order"] == "diverse"
    assert all(h["order"] == "diverse" and h["relevance_rank"] >= 1 for h in diverse["hits"])
    assert search(client, q="learning", k=4)["order"] == "relevance"


def test_search_min_score_and_no_hits(client: TestClient) -> None:
    hits = search(client, q="federated", mode="lexical", min_score=0.001)["hits"]
    assert [h["title"] for h in hits] == ["Paper fed"]
    assert search(client, q="learning", where=["venue=nowhere"])["hits"] == []


def test_related_and_documents(client: TestClient) -> None:
    fed = search(client, q="federated privacy", k=1)["hits"][0]
    related = client.get(f"/api/related/{fed['id']}", params={"k": 4}).json()
    assert len(related["hits"]) == 4 and fed["id"] not in {h["id"] for h in related["hits"]}
    doc = client.get(f"/api/documents/{fed['id']}").json()
    assert doc["id"] == fed["id"] and doc["text"] == PAPERS["fed"] and doc["external_ids"] == ["p0"]
    assert doc["sources"][0]["kind"] == "line" and doc["version"]
    # An external id (the source's own id) and an id prefix find the same paper.
    assert client.get("/api/documents/p0").json()["id"] == fed["id"]
    assert client.get(f"/api/documents/{fed['id'][:8]}").json()["id"] == fed["id"]


def test_page_static_files_and_offline_docs(client: TestClient) -> None:
    page = client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert '<script src="/static/app.js">' in page.text and '<script src="/static/map.js">' in page.text
    assert client.get("/static/app.js").status_code == 200
    assert client.get("/static/style.css").status_code == 200
    docs = client.get("/docs")
    assert docs.status_code == 200 and "http" not in docs.text.replace("http-equiv", "")  # nothing from a CDN
    assets = set(re.findall(r"/docs-assets/[\w.\-]+", docs.text))
    assert {"/docs-assets/swagger-ui-bundle.js", "/docs-assets/swagger-ui.css"} <= assets
    for asset in assets:
        assert client.get(asset).status_code == 200, asset
    paths = client.get("/openapi.json").json()["paths"]
    assert {"/api/search", "/api/related/{doc_id}", "/api/documents/{doc_id}", "/api/info", "/api/health"} <= set(paths)


def test_map_endpoint_follows_corpus_map(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Path] = []

    def load_map(version: Path) -> dict[str, Any] | None:
        seen.append(version)
        return {"points": [{"id": "x", "x": 0.5, "y": 0.25}]}

    monkeypatch.setitem(sys.modules, "semsearch.store.corpus_map", types.SimpleNamespace(load_map=load_map))
    assert client.get("/api/map").json() == {"points": [{"id": "x", "x": 0.5, "y": 0.25}]}
    client.get("/api/map")
    assert len(seen) == 1 and seen[0].name == client.get("/api/health").json()["version"]  # read once per version


def test_map_endpoint_404_without_a_map(index_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "semsearch.store.corpus_map", types.SimpleNamespace(load_map=lambda version: None))
    with TestClient(create_app(index_dir, embedder=FakeEmbedder()), base_url="http://localhost") as c:
        response = c.get("/api/map")
    assert response.status_code == 404
    assert response.json()["error"] == "this index has no map; rebuild it with semsearch index"


# ------------------------------------------------------------------------------------------------ bad input

BAD = [
    ("/api/search", {}, 422, "q: Field required"),
    ("/api/search", {"q": ""}, 422, "the query is empty"),
    ("/api/search", {"q": "   "}, 422, "the query is empty"),
    ("/api/search", {"q": "x" * (MAX_QUERY_CHARS + 1)}, 422, f"at most {MAX_QUERY_CHARS} characters"),
    ("/api/search", {"q": "privacy", "k": 0}, 422, "k: Input should be greater than or equal to 1"),
    ("/api/search", {"q": "privacy", "k": 1001}, 422, "k: Input should be less than or equal to 1000"),
    ("/api/search", {"q": "privacy", "k": "ten"}, 422, "k: Input should be a valid integer"),
    ("/api/search", {"q": "privacy", "k": "1e9"}, 422, "k: Input should be a valid integer"),
    ("/api/search", {"q": "privacy", "mode": "fuzzy"}, 422, "mode: Input should be 'hybrid', 'dense' or 'lexical'"),
    ("/api/search", {"q": "privacy", "where": "yearish"}, 422, "malformed --where 'yearish'"),
    ("/api/search", {"q": "privacy", "where": "year>="}, 422, "malformed --where"),
    ("/api/search", {"q": "privacy", "where": ["year>1"] * 21}, 422, "where: List should have at most 20 items"),
    ("/api/search", {"q": "privacy", "where": "title~" + "a" * 600}, 422, "the limit is 500"),
    ("/api/search", {"q": "privacy", "diverse": "maybe"}, 422, "diverse: Input should be a valid boolean"),
    ("/api/search", {"q": "privacy", "min_score": "nan"}, 422, "min_score: Input should be a finite number"),
    ("/api/related/ffffffffffffffff", {}, 404, "no document 'ffffffffffffffff'"),
    ("/api/related/p0", {"k": 0}, 422, "k: Input should be greater than or equal to 1"),
    ("/api/related/p0", {"k": 5000}, 422, "k: Input should be less than or equal to 1000"),
    ("/api/related/p0", {"where": "nonsense"}, 422, "malformed --where 'nonsense'"),
    ("/api/documents/nope", {}, 404, "no document 'nope'"),
    ("/api/documents/" + "a" * 300, {}, 422, "doc_id: String should have at most 200 characters"),
    ("/api/nothing", {}, 404, "Not Found"),
]


@pytest.mark.parametrize(("path", "params", "status", "message"), BAD)
def test_bad_parameters_get_a_json_4xx(
    client: TestClient, path: str, params: dict[str, Any], status: int, message: str
) -> None:
    response = client.get(path, params=params)
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert body["status"] == status and message in body["error"], body


def test_wrong_method_is_405(client: TestClient) -> None:
    response = client.post("/api/search", params={"q": "x"})
    assert response.status_code == 405 and response.json()["error"] == "Method Not Allowed"


def test_app_needs_an_index(tmp_path: Path) -> None:
    from semsearch import IndexNotFoundError

    with pytest.raises(IndexNotFoundError, match="no index at"):
        create_app(tmp_path / "missing", embedder=FakeEmbedder())


# ------------------------------------------------------------------------------------------------ new versions


def test_next_request_sees_a_published_version(client: TestClient, index_dir: Path, sources: tuple[Path, Path]) -> None:
    main, extra = sources
    first = client.get("/api/health").json()["version"]
    assert client.get("/api/documents/extra1").status_code == 404
    build_index([str(main), str(extra)], index_dir, OPTIONS, embedder=FakeEmbedder())
    second = client.get("/api/health").json()
    assert second["version"] != first and second["documents"] == 6
    assert client.get("/api/documents/extra1").json()["title"] == "Sparse attention"
    assert search(client, q="sparse attention transformers", k=1)["hits"][0]["title"] == "Sparse attention"
    assert client.get("/api/info").json()["documents"] == 6
    # Fewer sources: the paper is gone at the next request.
    build_index([str(main)], index_dir, OPTIONS, embedder=FakeEmbedder())
    assert client.get("/api/documents/extra1").status_code == 404
    assert client.get("/api/health").json()["documents"] == 5


def test_old_version_closes_only_after_its_requests(index_dir: Path, sources: tuple[Path, Path]) -> None:
    live = LiveIndex(index_dir, embedder=FakeEmbedder())
    try:
        with live.use() as old:  # a request in flight on the old version
            build_index([str(sources[0]), str(sources[1])], index_dir, OPTIONS, embedder=FakeEmbedder())
            with live.use() as new:
                assert new.name != old.name and len(new.index) == 6
            # The swap happened, yet the old version still answers its request.
            assert old.retired and len(old.index.search("federated", k=2)) == 2
        with pytest.raises(Exception, match="closed"):
            old.index.store.count()
        with live.use() as current:
            assert current.index.get("extra1").title == "Sparse attention"
    finally:
        live.close()


def test_unreadable_new_version_keeps_the_live_one(index_dir: Path) -> None:
    live = LiveIndex(index_dir, embedder=FakeEmbedder())
    try:
        before = live.version
        (index_dir / "CURRENT").write_text("v-999999-broken\n")
        with live.use() as loaded:
            assert loaded.name == before and len(loaded.index.search("graph", k=1)) == 1
    finally:
        live.close()


def test_query_encoder_is_reused_across_versions(
    index_dir: Path, sources: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    import semsearch.query.search

    loads: list[str] = []

    def fake_loader(manifest: dict[str, Any], version: Path) -> FakeEmbedder:
        loads.append(version.name)
        return FakeEmbedder()

    monkeypatch.setattr(semsearch.query.search, "open_query_encoder", fake_loader)
    with TestClient(create_app(index_dir), base_url="http://localhost") as c:
        assert search(c, q="privacy")["hits"]
        build_index([str(sources[0]), str(sources[1])], index_dir, OPTIONS, embedder=FakeEmbedder())
        assert search(c, q="sparse attention", k=1)["hits"][0]["title"] == "Sparse attention"
    assert len(loads) == 1  # the second version took the first one's encoder


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_hammer_search_while_versions_publish(index_dir: Path, sources: tuple[Path, Path]) -> None:
    """A real uvicorn server, 8 client threads, and two publications mid-run: every request answers 200."""
    import httpx
    import uvicorn

    app = create_app(index_dir, embedder=FakeEmbedder())
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=_free_port(), log_level="warning"))
    runner = threading.Thread(target=server.run, daemon=True)
    runner.start()
    base = f"http://127.0.0.1:{server.config.port}"
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline and runner.is_alive(), "server did not start"
        time.sleep(0.02)

    stop = threading.Event()
    statuses: Counter[int] = Counter()
    versions: Counter[str] = Counter()
    lock = threading.Lock()
    queries = ["federated privacy", "graph networks", "sparse attention", "robot navigation", "quantization"]

    def hammer(worker: int) -> None:
        with httpx.Client(base_url=base, timeout=30) as http:
            n = 0
            while not stop.is_set() and n < 5000:
                if n % 5 == 4:
                    response = http.get("/api/related/p0", params={"k": 3})
                else:
                    mode = ("hybrid", "dense", "lexical")[n % 3]
                    response = http.get("/api/search", params={"q": queries[(worker + n) % 5], "k": 5, "mode": mode})
                with lock:
                    statuses[response.status_code] += 1
                    if response.status_code == 200:
                        versions[response.json()["version"]] += 1
                n += 1

    def served(version: str) -> None:
        """Wait until the hammering threads have had answers from this version."""
        deadline = time.monotonic() + 60
        while versions[version] < 20:
            assert time.monotonic() < deadline, (version, versions)
            time.sleep(0.02)

    workers = [threading.Thread(target=hammer, args=(i,)) for i in range(8)]
    try:
        for w in workers:
            w.start()
        served((index_dir / "CURRENT").read_text().strip())
        build_index([str(sources[0]), str(sources[1])], index_dir, OPTIONS, embedder=FakeEmbedder())
        served((index_dir / "CURRENT").read_text().strip())
        build_index([str(sources[0])], index_dir, OPTIONS, embedder=FakeEmbedder())
        served((index_dir / "CURRENT").read_text().strip())
    finally:
        stop.set()
        for w in workers:
            w.join(timeout=60)
        server.should_exit = True
        runner.join(timeout=30)
    assert set(statuses) == {200}, statuses
    assert len(versions) == 3, versions  # the first version, and both publications, each answered requests
    assert sum(statuses.values()) > 100


# ------------------------------------------------------------------------------------------------ the CLI


def test_cli_serve_without_an_index_is_one_line(tmp_path: Path) -> None:
    from tests.helpers import assert_one_line_error, run

    assert_one_line_error(run(["serve", "--index", str(tmp_path / "none")], FakeEmbedder()), "no index at")


def test_cli_serve_without_the_extra_is_one_line(index_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.helpers import assert_one_line_error, run

    monkeypatch.setitem(sys.modules, "uvicorn", None)  # import uvicorn now raises ImportError
    result = run(["serve", "--index", str(index_dir)], FakeEmbedder())
    assert_one_line_error(result, "needs the 'serve' extra", "pip install 'semsearch[serve]'")


def test_cli_serve_on_a_busy_port_is_one_line(index_dir: Path) -> None:
    from tests.helpers import assert_one_line_error, run

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = run(["serve", "--index", str(index_dir), "--port", str(port)], FakeEmbedder())
    assert_one_line_error(result, f"cannot listen on 127.0.0.1:{port}")


# ------------------------------------------------------------------------------------------------ hostile pages


@pytest.fixture
def writable(index_dir: Path) -> Iterator[TestClient]:
    with TestClient(create_app(index_dir, embedder=FakeEmbedder(), allow_tags=True), base_url="http://localhost") as c:
        yield c


REBINDING = {"Host": "evil.example", "Origin": "http://evil.example"}


@pytest.mark.parametrize("path", ["/api/tags", "/api/health", "/api/documents/p0", "/", "/docs", "/openapi.json"])
def test_a_rebinding_page_cannot_read(writable: TestClient, path: str) -> None:
    for headers in (REBINDING, {"Host": "evil.example"}):
        response = writable.get(path, headers=headers)
        assert response.status_code == 421, (path, response.text)
        body = response.json()
        assert body["status"] == 421 and "--allow-host" in body["error"] and "evil.example" in body["error"]


def test_a_rebinding_page_cannot_write_tags(writable: TestClient, index_dir: Path) -> None:
    response = writable.post("/api/tags/liked", json={"add": ["p0"]}, headers=REBINDING)
    assert response.status_code == 421, response.text
    assert not (index_dir / "tags.json").exists()
    ok = writable.post("/api/tags/liked", json={"add": ["p0"]}, headers={"Origin": "http://localhost"})
    assert ok.status_code == 200 and ok.json()["added"] == 1


@pytest.mark.parametrize(
    "origin",
    ["http://evil.example", "null", "http://localhost:9999", "file://", "ftp://localhost", "http://[::1"],
)
def test_a_foreign_origin_is_refused_for_reads_and_writes(writable: TestClient, index_dir: Path, origin: str) -> None:
    read = writable.get("/api/health", headers={"Origin": origin})
    assert read.status_code == 403 and "not a page of this server" in read.json()["error"], read.text
    write = writable.post("/api/tags/liked", json={"add": ["p0"]}, headers={"Origin": origin})
    assert write.status_code == 403, write.text
    assert not (index_dir / "tags.json").exists()


@pytest.mark.parametrize(
    ("host", "origin"),
    [
        ("localhost", None),
        ("localhost", "http://localhost"),
        ("127.0.0.1:8000", "http://localhost:8000"),  # the same server under another of its names
        ("[::1]:8000", "http://[::1]:8000"),
        ("LOCALHOST.", "https://localhost"),
    ],
)
def test_own_names_are_answered(writable: TestClient, host: str, origin: str | None) -> None:
    headers = {"Host": host, **({"Origin": origin} if origin else {})}
    assert writable.get("/api/health", headers=headers).status_code == 200


def test_allowed_names_follow_the_bound_address(monkeypatch: pytest.MonkeyPatch) -> None:
    from semsearch.core.errors import InputError
    from semsearch.faces.local_hosts import TrustedHosts

    loopback = TrustedHosts.for_bind("127.0.0.1")
    assert loopback.names == {"localhost", "127.0.0.1", "::1"} and not loopback.any_ip
    assert loopback.refusal("10.0.0.5:8000", None) is not None  # a LAN address is not a loopback server's name
    one = TrustedHosts.for_bind("192.168.1.5", ["Papers.LAN"])
    assert one.names == {"localhost", "192.168.1.5", "papers.lan"}
    assert one.refusal("papers.lan:8000", "http://papers.lan:8000") is None
    assert one.refusal("127.0.0.1", None) is not None
    monkeypatch.setattr("socket.gethostname", lambda: "box")
    monkeypatch.setattr("socket.getfqdn", lambda: "box.example.org")
    every = TrustedHosts.for_bind("0.0.0.0")
    assert {"box", "box.example.org", "localhost"} <= every.names
    for allowed in ("10.1.2.3:8000", "[fe80::1]:8000", "box:8000", "box.example.org"):
        assert every.refusal(allowed, None) is None, allowed
    assert every.refusal("evil.example", None)[0] == 421  # type: ignore[index]
    assert every.refusal("10.1.2.3", "http://evil.example")[0] == 403  # type: ignore[index]
    assert every.refusal(None, None)[0] == 421  # type: ignore[index]  # HTTP/1.0 without Host
    for bad in ("", "http://x", "a b", "x:80", "a/b"):
        with pytest.raises(InputError, match="--allow-host"):
            TrustedHosts.for_bind("127.0.0.1", [bad])


def test_cli_serve_rejects_a_bad_allow_host(index_dir: Path) -> None:
    from tests.helpers import assert_one_line_error, run

    result = run(["serve", "--index", str(index_dir), "--allow-host", "http://x/"], FakeEmbedder())
    assert_one_line_error(result, "--allow-host 'http://x/' is not a host name")


@pytest.mark.parametrize("path", ["/", "/static/app.js", "/api/health", "/api/nothing", "/docs", "/openapi.json"])
def test_every_response_carries_the_security_headers(client: TestClient, path: str) -> None:
    for response in (client.get(path), client.get(path, headers={"Host": "evil.example"})):
        assert response.headers["x-content-type-options"] == "nosniff"
        assert response.headers["x-frame-options"] == "DENY"
        csp = response.headers["content-security-policy"]
        assert "frame-ancestors 'none'" in csp and "object-src 'none'" in csp
        assert "'unsafe-inline'" not in csp.split("script-src", 1)[1].split(";")[0], csp


def test_page_csp_allows_no_inline_script(client: TestClient) -> None:
    csp = client.get("/").headers["content-security-policy"]
    assert "script-src 'self';" in csp and "unsafe" not in csp
    from semsearch.faces.serve import WEB_DIR

    page = (WEB_DIR / "index.html").read_text(encoding="utf-8")
    assert re.findall(r"<script(?![^>]*\bsrc=)[^>]*>", page) == []  # every script is a file the CSP allows
    assert re.findall(r"\son[a-z]+\s*=", page) == []  # no inline event handlers
    assert "style=" not in page


def test_docs_csp_allows_exactly_its_inline_script(client: TestClient) -> None:
    import base64
    import hashlib

    docs = client.get("/docs")
    (inline,) = re.findall(r"<script>(.*?)</script>", docs.text, flags=re.DOTALL)
    digest = base64.b64encode(hashlib.sha256(inline.encode()).digest()).decode()
    assert f"'sha256-{digest}'" in docs.headers["content-security-policy"]


# ------------------------------------------------------------------------------------------------ bounds, writes


def test_export_of_hundreds_of_long_ids_answers_in_full(index_dir: Path) -> None:
    """A request past uvicorn's default 16 KiB head buffer used to be reset mid-response (ChunkedEncodingError)."""
    import requests

    from semsearch.faces.serve import server_config

    app = create_app(index_dir, embedder=FakeEmbedder())
    server = uvicorn_server(server_config(app, host="127.0.0.1", port=_free_port()))
    base = f"http://127.0.0.1:{server.config.port}"
    try:
        for n, key in [(300, "a" * 200), (400, "é" * 200), (1000, "ü" * 200), (150, "😀" * 200)]:
            response = requests.get(f"{base}/api/export", params=[("ids", key)] * n, timeout=30)
            assert response.status_code == 404 and f"no document '{key}" in response.json()["error"]
            assert len(response.content) == int(response.headers["content-length"])
        too_many = requests.get(f"{base}/api/export", params=[("ids", "a")] * 1001, timeout=30)
        assert too_many.status_code == 422 and too_many.json()["error"].startswith("ids: ")
        long = requests.get(f"{base}/api/export", params={"ids": "a" * 201}, timeout=30)
        assert long.status_code == 422 and long.json()["error"].startswith("ids: ")
        first = search_real(base)
        whole = requests.get(f"{base}/api/export", params=[("ids", first)] * 500, timeout=30)
        assert whole.status_code == 200 and whole.text.count("@") == 1  # the one paper, once
    finally:
        server.should_exit = True


def search_real(base: str) -> str:
    import requests

    return str(
        requests.get(f"{base}/api/search", params={"q": "federated", "k": 1}, timeout=30).json()["hits"][0]["id"]
    )


def uvicorn_server(config: Any) -> Any:
    import uvicorn

    server = uvicorn.Server(config)
    runner = threading.Thread(target=server.run, daemon=True)
    runner.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline and runner.is_alive(), "server did not start"
        time.sleep(0.02)
    return server


def tags_file(index_dir: Path) -> str | None:
    path = index_dir / "tags.json"
    return path.read_text() if path.exists() else None


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        ({"add": ["p0"], "remove": ["nope"]}, 404, "'nope' is not tagged 'liked'"),
        ({"add": ["p0", "nope"]}, 404, "no document 'nope'"),
        ({"add": ["nope"], "remove": ["p1"]}, 404, "no document 'nope'"),
        ({"add": ["p1"], "remove": ["p1"]}, 422, "both added to and removed from"),
        ({"add": ["x" * 201]}, 422, "add.0: String should have at most 200 characters"),
        ({"add": ["p0"] * 201}, 422, "add: List should have at most 200 items"),
        ({"add": ["p0"] * 150, "remove": ["p1"] * 51}, 422, "add, remove: give 1..200 ids"),
        ({"add": [], "remove": []}, 422, "add, remove: give 1..200 ids"),
        ({"add": ["p0"], "rename": "x"}, 422, "rename: Extra inputs are not permitted"),
        ({"add": [" "]}, 422, "add.0: String should match pattern"),
    ],
)
def test_tag_writes_are_all_or_nothing(
    writable: TestClient, index_dir: Path, body: dict[str, Any], status: int, message: str
) -> None:
    assert writable.post("/api/tags/liked", json={"add": ["p1"]}).status_code == 200
    before = tags_file(index_dir)
    response = writable.post("/api/tags/liked", json=body)
    assert response.status_code == status and message in response.json()["error"], response.text
    assert tags_file(index_dir) == before  # nothing of the write was saved
    assert writable.get("/api/tags").json()["tags"]["liked"]["papers"] == 1


def test_tag_write_adds_and_removes_in_one_go(writable: TestClient) -> None:
    assert writable.post("/api/tags/liked", json={"add": ["p1", "p2"]}).json()["papers"] == 2
    both = writable.post("/api/tags/liked", json={"add": ["p0", "p2"], "remove": ["p1"]}).json()
    assert both == {"tag": "liked", "added": 1, "removed": 1, "papers": 2}
    empty = writable.post("/api/tags/fresh", json={"remove": ["p1"]})
    assert empty.status_code == 404 and "not tagged 'fresh'" in empty.json()["error"]


@pytest.mark.parametrize("name", ["a b", "-x", "é", "x" * 65])
def test_a_bad_tag_name_is_422(writable: TestClient, index_dir: Path, name: str) -> None:
    response = writable.post(f"/api/tags/{name}", json={"add": ["p0"]})
    assert response.status_code == 422 and response.json()["error"].startswith("name: "), response.text
    assert tags_file(index_dir) is None


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"like": "x" * 201}, "like.0: String should have at most 200 characters"),
        ({"like": "p0", "not": ["p1", "y" * 201]}, "not.1: String should have at most 200 characters"),
        ({"like": ["p0"] * 201}, "like: List should have at most 200 items"),
    ],
)
def test_recommend_bounds_its_ids(client: TestClient, params: dict[str, Any], message: str) -> None:
    response = client.get("/api/recommend", params=params)
    assert response.status_code == 422 and message in response.json()["error"], response.text


def test_an_oversized_body_is_refused_unread(writable: TestClient, index_dir: Path) -> None:
    from semsearch.faces.local_hosts import MAX_BODY

    huge = json.dumps({"add": ["p0"], "pad": " " * MAX_BODY})
    response = writable.post("/api/tags/liked", content=huge, headers={"Content-Type": "application/json"})
    assert response.status_code == 413 and "over" in response.json()["error"], response.text
    assert tags_file(index_dir) is None
