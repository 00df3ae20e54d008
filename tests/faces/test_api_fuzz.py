"""Property-based fuzzing of the web API from its own OpenAPI description (schemathesis, bounded examples).

Every operation, with generated valid and invalid parameters (EXAMPLES of each per operation, tag writes
allowed): never a 500, never a broken connection or a cut body, every response matches the documented schema
and status codes, and each answer comes within a few seconds.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.helpers import PAPERS, FakeEmbedder

# A fuzz of every route (hundreds of generated requests): the full job runs it, the fast one does not.
pytestmark = pytest.mark.slow

pytest.importorskip("fastapi")
pytest.importorskip("httpx")
schemathesis = pytest.importorskip("schemathesis")
import requests  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402
from schemathesis.checks import not_a_server_error  # noqa: E402
from schemathesis.specs.openapi.checks import (  # noqa: E402
    content_type_conformance,
    negative_data_rejection,
    response_schema_conformance,
    status_code_conformance,
)

from semsearch import BuildOptions, build_index  # noqa: E402
from semsearch.faces.serve import create_app, server_config  # noqa: E402

MAX_SECONDS = 5.0
EXAMPLES = 40  # per operation and mode: the acceptance floor
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    negative_data_rejection,
]


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
    return create_app(folder / "idx", embedder=FakeEmbedder(), allow_tags=True)  # the write path is fuzzed too


@pytest.fixture(scope="module")
def base_url(app: Any) -> Iterator[str]:
    """The app on a real uvicorn server on a free loopback port, with `semsearch serve`'s settings."""
    import uvicorn

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    server = uvicorn.Server(server_config(app, host="127.0.0.1", port=port))
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
    "/api/documents/{doc_id}/pdf",
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
    @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    def check(case: Any) -> None:
        started = time.perf_counter()
        try:
            response = case.call(base_url=base_url, timeout=30)
        except requests.RequestException as exc:  # a reset, a chunked body cut short: never acceptable
            pytest.fail(f"connection broken: {type(exc).__name__}: {exc} ({case.formatted_path}, {case.query})")
        took = time.perf_counter() - started
        assert response.status_code < 500, (case.formatted_path, case.query, response.text)
        length = response.headers.get("content-length")
        if length:  # the whole body arrived (schemathesis keeps headers as lists)
            assert len(response.content) == int(length[0] if isinstance(length, list) else length)
        # Documented status code, content type and body schema (negative cases must be rejected with 4xx).
        case.validate_response(response, checks=CHECKS)
        assert took < MAX_SECONDS, (case.formatted_path, case.query, took)
        seen.append(response.status_code)

    check()
    # Hypothesis ran the full budget where there is anything to vary (a route without parameters is one case).
    assert len(seen) >= (EXAMPLES if path in WITH_PARAMETERS else 1), len(seen)
    print(f"{path} {mode}: {len(seen)} cases, statuses {sorted(set(seen))}")


def test_every_endpoint_is_fuzzed(api_schema: Any) -> None:
    paths = {result.ok().path for result in api_schema.get_all_operations()}
    # A new endpoint must join OPERATIONS (and WITH_PARAMETERS when it takes any) to be fuzzed.
    assert paths == set(OPERATIONS), f"not fuzzed: {sorted(paths - set(OPERATIONS))}"
