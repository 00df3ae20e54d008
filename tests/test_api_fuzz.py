"""Property-based fuzzing of the web API from its own OpenAPI description (schemathesis, bounded examples).

Every operation, with generated valid and invalid parameters: never a 500, every response matches the
documented schema and status codes, and each answer comes within a few seconds.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import PAPERS, FakeEmbedder

pytest.importorskip("fastapi")
pytest.importorskip("httpx")
schemathesis = pytest.importorskip("schemathesis")
from hypothesis import HealthCheck, settings  # noqa: E402

from semsearch import BuildOptions, build_index  # noqa: E402
from semsearch.serve import create_app  # noqa: E402

MAX_SECONDS = 5.0


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Any:
    folder = tmp_path_factory.mktemp("fuzz")
    src = folder / "papers.jsonl"
    rows = [
        {"id": f"ext-{i}", "title": f"Paper {name}", "abstract": text, "venue": "neurips", "year": 2020 + i}
        for i, (name, text) in enumerate(PAPERS.items())
    ]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    build_index([str(src)], folder / "idx", BuildOptions(progress=False), embedder=FakeEmbedder())
    return create_app(folder / "idx", embedder=FakeEmbedder())


@pytest.fixture(scope="module")
def base_url(app: Any) -> Iterator[str]:
    """The app on a real uvicorn server on a free loopback port (as `semsearch serve` runs it)."""
    import uvicorn

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    runner = threading.Thread(target=server.run, daemon=True)
    runner.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline and runner.is_alive(), "server did not start"
        time.sleep(0.02)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    runner.join(timeout=10)


@pytest.fixture(scope="module")
def api_schema(base_url: str) -> Any:
    return schemathesis.openapi.from_url(f"{base_url}/openapi.json")


WITH_PARAMETERS = [
    "/api/search",
    "/api/related/{doc_id}",
    "/api/documents/{doc_id}",
    "/api/export",
    "/api/recommend",
    "/api/new",
    "/api/tags/{name}",
]
OPERATIONS = [*WITH_PARAMETERS, "/api/info", "/api/health", "/api/map", "/api/tags"]
CASES = [(path, "positive") for path in OPERATIONS] + [(path, "negative") for path in WITH_PARAMETERS]


# schemathesis.pytest.from_fixture does not run under pytest 9 (it reads a private attribute), so each operation's
# case strategy is drawn inside an ordinary hypothesis test instead.
@pytest.mark.parametrize(("path", "mode"), CASES)
def test_api_conforms_to_its_schema(api_schema: Any, base_url: str, path: str, mode: str) -> None:
    from hypothesis import given

    (method,) = api_schema[path].keys()  # every endpoint answers one method (GET; POST for tag writes)
    operation = api_schema[path][method]
    strategy = operation.as_strategy(generation_mode=schemathesis.GenerationMode(mode))
    seen: list[int] = []

    @given(case=strategy)
    @settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    def check(case: Any) -> None:
        started = time.perf_counter()
        response = case.call(base_url=base_url, timeout=30)
        took = time.perf_counter() - started
        assert response.status_code < 500, (case.formatted_path, case.query, response.text)
        # Documented status code, content type and body schema (negative cases must be rejected with 4xx).
        case.validate_response(response)
        assert took < MAX_SECONDS, (case.formatted_path, case.query, took)
        seen.append(response.status_code)

    check()
    assert seen


def test_every_endpoint_is_fuzzed(api_schema: Any) -> None:
    paths = {result.ok().path for result in api_schema.get_all_operations()}
    # A new endpoint must join OPERATIONS (and WITH_PARAMETERS when it takes any) to be fuzzed.
    assert paths == set(OPERATIONS), f"not fuzzed: {sorted(paths - set(OPERATIONS))}"
