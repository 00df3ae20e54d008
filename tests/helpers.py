"""What the tests share besides fixtures: paths, small corpora, the CLI runner, subprocess and fault helpers.

Imported as ``tests.helpers`` (pyproject puts the repository root on the test path); fixtures live in conftest.py,
which pytest finds for every folder under tests/ without an import.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import importlib
import importlib.util
import json
import os
import random
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import unicodedata
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
from click.testing import CliRunner, Result

from semsearch.core.faults import ENV as FAULT_ENV
from semsearch.encode.hashed import HashedWords

if TYPE_CHECKING:
    from semsearch.encode.embedder import Embedder
    from semsearch.encode.sentence_runs import SentenceText
    from semsearch.store.manifest import Manifest

# ---------------------------------------------------------------------------------------------- paths

REPO = Path(__file__).resolve().parents[1]
SEEDS = REPO / "seeds"
SHARED = REPO.parent / "shared"
FIXTURES = REPO / "tests" / "fixtures"
WORKERS = REPO / "tests" / "workers"

# A `semsearch` run in its own process: offline, so the real model loads from the local cache only.
ENV = {**os.environ, "HF_HUB_OFFLINE": "1"}


def load_script(name: str) -> ModuleType:
    """A benchmark module (``bench_typed``): ``benchmarks`` is a package at the repository root."""
    return importlib.import_module(f"benchmarks.{name}")


def requires_shared(*parts: str) -> Path:
    """The path of a file in ../shared, or skip the test when it is absent."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} is not available")
    return path


# ---------------------------------------------------------------------------------------------- the fake encoder


class FakeEmbedder(HashedWords):
    """Hashed bag of words: texts sharing words get close vectors. Records every call.

    The package's encoder for tests (``semsearch.encode.hashed``, the registered backend "hashed") with the md5
    hashing every test's vectors were made with; ``backend`` "fake" as before, so what tests build records the same.
    """

    backend = "fake"  # a class attribute, so that a test's subclass can stand for another backend

    def __init__(self, dimension: int = 64, name: str = "fake-bow", fingerprint: str = "fake0001") -> None:
        backend = type(self).backend
        super().__init__(dimension, hashing="md5", name=name, fingerprint=fingerprint, backend=backend, record=True)


# ---------------------------------------------------------------------------------------------- small corpora

PAPERS = {
    "fed": "Federated learning lets clients train a shared model while differential privacy protects each "
    "client's data from leakage through gradient updates.",
    "vision": "We present a convolutional network for image segmentation of medical scans that improves "
    "boundary accuracy on tumour datasets.",
    "rl": "A reinforcement learning agent learns a policy for robot navigation with sparse rewards using "
    "curiosity-driven exploration.",
    "graph": "Graph neural networks pass messages between nodes; we study oversmoothing in deep graph "
    "networks and propose a residual fix.",
    "llm": "Large language models are compressed by post-training quantization with calibration data that "
    "sets activation ranges.",
}


def write_small_corpus(path: Path) -> Path:
    """The five PAPERS plus an exact duplicate of the first, as one seed-format file (6 read, 5 documents)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    paragraphs = list(PAPERS.values()) + [PAPERS["fed"]]
    path.write_text("Test Papers\n\n" + "\n\n".join(paragraphs) + "\n", encoding="utf-8")
    return path


def jsonl(path: Path, rows: list[dict]) -> Path:
    """Rows as a JSON-lines file (an empty list: one empty line)."""
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


def beir(tmp_path: Path) -> Path:
    """A BEIR folder over the five PAPERS: two judged queries and one without judgments."""
    folder = tmp_path / "beir"
    (folder / "qrels").mkdir(parents=True)
    jsonl(folder / "corpus.jsonl", [{"_id": f"d{i}", "title": "", "text": t} for i, t in enumerate(PAPERS.values())])
    jsonl(
        folder / "queries.jsonl",
        [
            {"_id": "q1", "text": "oversmoothing in deep graph networks"},
            {"_id": "q2", "text": "robot navigation with sparse rewards"},
            {"_id": "q3", "text": "a query without judgments"},
        ],
    )
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td3\t1\nq2\td2\t2\n")
    return folder


def synthetic_abstracts(n: int, seed: int) -> list[str]:
    """n distinct abstracts of 40 made-up words (same seed, same texts)."""
    rng = random.Random(seed)
    vocab = [f"{a}{b}" for a in ("neu", "gra", "opt", "vis", "lan", "rob", "pri", "cau") for b in "aeiouxyz"]
    return [" ".join(rng.choice(vocab) for _ in range(40)) + f" study {seed}-{i}." for i in range(n)]


WORDS = [f"w{i}" for i in range(1500)]


def abstracts(seed: int, count: int) -> list[dict[str, str]]:
    """count records of random WORDS with a title and a year, for segment and fusion tests."""
    rng = random.Random(seed)
    return [
        {
            "title": " ".join(rng.sample(WORDS, 5)),
            "abstract": " ".join(rng.choices(WORDS, k=40)),
            "year": str(2020 + i % 5),
        }
        for i in range(count)
    ]


def write(path: Path, records: list[dict[str, str]]) -> Path:
    """Records as a JSON-lines file."""
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def _segment_options() -> Any:
    """``OPTS``: a refresh may append any share of the index as a segment (segment tests see appends, no merge)."""
    from semsearch.write.build import BuildOptions

    return BuildOptions(progress=False, merge_share=1.0)


# ---------------------------------------------------------------------------------------------- the CLI in process


def run(args: list[str], embedder: Embedder | None = None, input: str | None = None) -> Result:
    """``semsearch ARGS`` in this process, with ``embedder`` in place of the configured model when given."""
    from semsearch.faces.cli import cli

    return CliRunner().invoke(cli, args, obj={"embedder": embedder} if embedder else None, input=input)


def snapshot(folder: Path) -> dict[str, str]:
    """Every file under a folder with its sha256: proves that nothing on disk changed."""
    if not folder.exists():
        return {}
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def assert_one_line_error(result: Result, *fragments: str) -> None:
    """Exit status 2 and one line, ``Error: ...``, holding every fragment; no traceback."""
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.strip().splitlines() if line]
    assert len(lines) == 1, result.output
    assert lines[0].startswith("Error: ")
    assert "Traceback" not in result.output
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])


class Loop:
    """An index of the seeds with a CLI bound to one encoder (the fake one, or None: the real model)."""

    def __init__(self, root: Path, embedder: Embedder | None) -> None:
        from semsearch.write.build import BuildOptions, build_index

        self.seeds = root / "seeds"
        shutil.copytree(SEEDS, self.seeds)
        self.index = root / "idx"
        self.embedder = embedder
        build_index([str(self.seeds)], self.index, BuildOptions(progress=False), embedder=embedder)

    def run(self, *args: str) -> Result:
        from semsearch.faces.cli import cli

        result = CliRunner().invoke(cli, [*args, "--index", str(self.index)], obj={"embedder": self.embedder})
        assert result.exit_code == 0, result.output
        return result

    def json(self, *args: str) -> Any:
        return json.loads(self.run(*args).output)

    def rebuild(self) -> None:
        from semsearch.write.build import BuildOptions, build_index

        build_index(None, self.index, BuildOptions(progress=False), embedder=self.embedder)

    def id_of(self, fragment: str) -> str:
        from semsearch.query.search import Index

        with Index.open(self.index, embedder=self.embedder) as idx:
            found = [d.id for d in idx.store.iter_documents() if fragment in d.text]
        assert len(found) == 1, fragment
        return found[0]

    def vectors(self) -> tuple[list[str], np.ndarray]:
        from semsearch.query.search import Index
        from semsearch.store.layout import doc_id_from_num

        with Index.open(self.index, embedder=self.embedder) as idx:
            return [doc_id_from_num(int(n)) for n in idx.vectors.ids], np.asarray(idx.vectors.matrix)


def dict_convex(dense: dict, lexical: dict, alpha: float, norm: str) -> list:
    """The fusion as first written, over dicts: the reference the numpy path must reproduce exactly."""
    from semsearch.query.fusion import normalize

    nd, nl = normalize(dense, norm), normalize(lexical, norm)
    floor_d = min(nd.values(), default=0.0)
    floor_l = min(nl.values(), default=0.0)
    fused = {d: alpha * nd.get(d, floor_d) + (1.0 - alpha) * nl.get(d, floor_l) for d in dict.fromkeys([*nd, *nl])}
    return sorted(fused.items(), key=lambda item: (-item[1], item[0]))


# ---------------------------------------------------------------------------------------------- format plugins

# A toy format a separate package could ship: one "title | abstract" per line, in files named *.lines.
TOY_MODULE = '''
from semsearch.core.records import Provenance
from semsearch.ingest.formats import TextFormat


class Lines(TextFormat):
    """One paper per line: its title, a bar, its abstract."""

    name = "lines"
    extensions = (".lines",)

    def items(self, text, display):
        for number, line in enumerate(text.split("\\n"), 1):
            if not line.strip():
                continue
            title, bar, abstract = line.partition("|")
            if not bar:
                yield Provenance(display, "line", number), "no '|' between title and abstract"
                continue
            yield Provenance(display, "line", number), {"title": title.strip(), "abstract": abstract.strip()}


NOT_A_FORMAT = 3
'''


def _install_plugin(site: Path, target: str) -> None:
    """An installed distribution whose ``semsearch.formats`` entry point names ``target`` (nothing else changes)."""
    site.mkdir(exist_ok=True)
    (site / "toyfmt.py").write_text(TOY_MODULE, encoding="utf-8")
    info = site / "toyfmt-0.1.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toyfmt\nVersion: 0.1\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(f"[semsearch.formats]\nlines = {target}\n", encoding="utf-8")
    importlib.invalidate_caches()


def toy_format() -> Any:
    """The toy plugin's format class itself, for registering at run time (made on call: importing the helpers
    must not load the ingest layer, which the query-path tests check stays out)."""
    namespace: dict[str, Any] = {}
    exec(compile(TOY_MODULE, "<toyfmt>", "exec"), namespace)
    return namespace["Lines"]


# ---------------------------------------------------------------------------------------------- PDFs

PDFS = FIXTURES / "pdf"  # papers printed in several layouts, their expected readings, and bad files under bad/
PDF_EXPECTED: dict[str, dict[str, Any]] = {
    e["file"]: e for e in map(json.loads, (PDFS / "expected.jsonl").read_text(encoding="utf-8").splitlines())
}
BAD_PDFS = {  # each bad fixture and the reason its one line gives
    "encrypted.pdf": "encrypted (needs a password)",
    "image-only.pdf": "no text layer",
    "truncated.pdf": "damaged or truncated",
    "not-a-pdf.pdf": "not a PDF",
    "empty.pdf": "empty file",
}


def pdf_compare_form(text: str) -> str:
    """The issue's compare form: compatibility forms folded, line-end hyphens gone, whitespace collapsed."""
    text = unicodedata.normalize("NFKC", text).replace("\u2019", "'").replace("\u00ad", "")
    return " ".join(text.split())


# ---------------------------------------------------------------------------------------------- Zotero

# The tables semsearch reads, as Zotero 5+ defines them (resource/schema/userdata.sql and system.sql).
SCHEMA = """
CREATE TABLE itemTypes (itemTypeID INTEGER PRIMARY KEY, typeName TEXT, templateItemTypeID INT, display INT DEFAULT 1);
CREATE TABLE fields (fieldID INTEGER PRIMARY KEY, fieldName TEXT, fieldFormatID INT);
CREATE TABLE creatorTypes (creatorTypeID INTEGER PRIMARY KEY, creatorType TEXT);
CREATE TABLE items (
    itemID INTEGER PRIMARY KEY, itemTypeID INT NOT NULL,
    dateAdded TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP, dateModified TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP,
    clientDateModified TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP, libraryID INT NOT NULL, key TEXT NOT NULL,
    version INT NOT NULL DEFAULT 0, synced INT NOT NULL DEFAULT 0, UNIQUE (libraryID, key)
);
CREATE TABLE itemDataValues (valueID INTEGER PRIMARY KEY, value UNIQUE);
CREATE TABLE itemData (
    itemID INT, fieldID INT, valueID, PRIMARY KEY (itemID, fieldID),
    FOREIGN KEY (itemID) REFERENCES items(itemID) ON DELETE CASCADE,
    FOREIGN KEY (valueID) REFERENCES itemDataValues(valueID)
);
CREATE INDEX itemData_fieldID ON itemData(fieldID);
CREATE TABLE creators (
    creatorID INTEGER PRIMARY KEY, firstName TEXT, lastName TEXT, fieldMode INT, UNIQUE (lastName, firstName, fieldMode)
);
CREATE TABLE itemCreators (
    itemID INT NOT NULL, creatorID INT NOT NULL, creatorTypeID INT NOT NULL DEFAULT 1,
    orderIndex INT NOT NULL DEFAULT 0,
    PRIMARY KEY (itemID, creatorID, creatorTypeID, orderIndex), UNIQUE (itemID, orderIndex)
);
CREATE TABLE collections (
    collectionID INTEGER PRIMARY KEY, collectionName TEXT NOT NULL, parentCollectionID INT DEFAULT NULL,
    clientDateModified TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP, libraryID INT NOT NULL, key TEXT NOT NULL,
    version INT NOT NULL DEFAULT 0, synced INT NOT NULL DEFAULT 0, UNIQUE (libraryID, key)
);
CREATE TABLE collectionItems (
    collectionID INT NOT NULL, itemID INT NOT NULL, orderIndex INT NOT NULL DEFAULT 0,
    PRIMARY KEY (collectionID, itemID)
);
CREATE TABLE deletedItems (itemID INTEGER PRIMARY KEY, dateDeleted DEFAULT CURRENT_TIMESTAMP NOT NULL);
CREATE TABLE tags (tagID INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
CREATE TABLE itemTags (itemID INT NOT NULL, tagID INT NOT NULL, type INT NOT NULL, PRIMARY KEY (itemID, tagID));
CREATE TABLE libraries (
    libraryID INTEGER PRIMARY KEY, type TEXT NOT NULL, editable INT NOT NULL, filesEditable INT NOT NULL,
    version INT NOT NULL DEFAULT 0, storageVersion INT NOT NULL DEFAULT 0, lastSync INT NOT NULL DEFAULT 0,
    archived INT NOT NULL DEFAULT 0
);
CREATE TABLE itemNotes (itemID INTEGER PRIMARY KEY, parentItemID INT, note TEXT, title TEXT);
CREATE TABLE itemAttachments (itemID INTEGER PRIMARY KEY, parentItemID INT, linkMode INT, contentType TEXT, path TEXT);
"""
ITEM_TYPES = {1: "annotation", 2: "attachment", 3: "conferencePaper", 4: "journalArticle", 5: "note"}
FIELDS = {1: "title", 2: "abstractNote", 3: "date", 4: "DOI", 5: "url", 6: "publicationTitle", 7: "proceedingsTitle"}
CREATOR_TYPES = {1: "author", 2: "editor"}


class Library:
    """A small Zotero database built through one connection, as Zotero would write it."""

    def __init__(self, path: Path, *, wal: bool = False, exclusive: bool = False, create: bool = True) -> None:
        self.path = path
        self.conn = sqlite3.connect(path, isolation_level=None)
        if not create:
            self.next_id = 1 + self.conn.execute("SELECT max(itemID) FROM items").fetchone()[0]
            return
        if exclusive:
            self.conn.execute("PRAGMA locking_mode=EXCLUSIVE")  # Zotero's default
        if wal:
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA wal_autocheckpoint=0")  # keep every change in the -wal file
        self.conn.executescript(SCHEMA)
        self.conn.executemany("INSERT INTO itemTypes (itemTypeID, typeName) VALUES (?, ?)", ITEM_TYPES.items())
        self.conn.executemany("INSERT INTO fields (fieldID, fieldName) VALUES (?, ?)", FIELDS.items())
        self.conn.executemany("INSERT INTO creatorTypes VALUES (?, ?)", CREATOR_TYPES.items())
        self.conn.execute("INSERT INTO libraries (libraryID, type, editable, filesEditable) VALUES (1, 'user', 1, 1)")
        self.conn.execute("INSERT INTO libraries (libraryID, type, editable, filesEditable) VALUES (2, 'feed', 0, 0)")
        self.conn.execute(
            "INSERT INTO collections (collectionID, collectionName, libraryID, key) VALUES (1, 'Reading', 1, 'C1')"
        )
        self.conn.execute(
            "INSERT INTO collections (collectionID, collectionName, libraryID, key) VALUES (2, 'Privacy', 1, 'C2')"
        )
        self.next_id = 1

    def add(
        self,
        item_type: str,
        key: str,
        *,
        creators: tuple[tuple[str, str, str], ...] = (),
        tags: tuple[str, ...] = (),
        collections: tuple[int, ...] = (),
        deleted: bool = False,
        library: int = 1,
        **fields: str,
    ) -> int:
        item_id = self.next_id
        self.next_id += 1
        type_id = next(i for i, name in ITEM_TYPES.items() if name == item_type)
        c = self.conn
        c.execute("BEGIN")
        c.execute(
            "INSERT INTO items (itemID, itemTypeID, libraryID, key) VALUES (?, ?, ?, ?)",
            (item_id, type_id, library, key),
        )
        for name, value in fields.items():
            field_id = next(i for i, f in FIELDS.items() if f == name)
            c.execute("INSERT OR IGNORE INTO itemDataValues (value) VALUES (?)", (value,))
            value_id = c.execute("SELECT valueID FROM itemDataValues WHERE value = ?", (value,)).fetchone()[0]
            c.execute("INSERT INTO itemData VALUES (?, ?, ?)", (item_id, field_id, value_id))
        for order, (first, last, kind) in enumerate(creators):
            mode = 1 if not first else 0
            c.execute(
                "INSERT OR IGNORE INTO creators (firstName, lastName, fieldMode) VALUES (?, ?, ?)", (first, last, mode)
            )
            creator_id = c.execute(
                "SELECT creatorID FROM creators WHERE firstName = ? AND lastName = ?", (first, last)
            ).fetchone()[0]
            kind_id = next(i for i, k in CREATOR_TYPES.items() if k == kind)
            c.execute("INSERT INTO itemCreators VALUES (?, ?, ?, ?)", (item_id, creator_id, kind_id, order))
        for tag in tags:
            c.execute("INSERT OR IGNORE INTO tags (name) VALUES (?)", (tag,))
            tag_id = c.execute("SELECT tagID FROM tags WHERE name = ?", (tag,)).fetchone()[0]
            c.execute("INSERT INTO itemTags VALUES (?, ?, 0)", (item_id, tag_id))
        for collection in collections:
            c.execute("INSERT INTO collectionItems (collectionID, itemID) VALUES (?, ?)", (collection, item_id))
        if deleted:
            c.execute("INSERT INTO deletedItems (itemID) VALUES (?)", (item_id,))
        if item_type == "note":
            c.execute(
                "INSERT INTO itemNotes VALUES (?, NULL, '<p>My reading notes on privacy</p>', 'notes')", (item_id,)
            )
        if item_type == "attachment":
            c.execute(
                "INSERT INTO itemAttachments VALUES (?, 1, 0, 'application/pdf', 'storage:paper.pdf')", (item_id,)
            )
        c.execute("COMMIT")
        return item_id

    def attach(self, parent: int, key: str, where: str, pdf: Path | None = None) -> int:
        """A PDF attachment of ``parent`` at ``where`` ("storage:NAME" or a path); ``pdf`` copied into storage/."""
        item_id = self.next_id
        self.next_id += 1
        self.conn.execute("INSERT INTO items (itemID, itemTypeID, libraryID, key) VALUES (?, 2, 1, ?)", (item_id, key))
        self.conn.execute(
            "INSERT INTO itemAttachments VALUES (?, ?, 0, 'application/pdf', ?)", (item_id, parent, where)
        )
        if pdf is not None and where.startswith("storage:"):
            folder = self.path.parent / "storage" / key
            folder.mkdir(parents=True, exist_ok=True)
            shutil.copy(pdf, folder / where.removeprefix("storage:"))
        return item_id

    def close(self) -> None:
        self.conn.close()


def passages_by_title(index_path: Path) -> dict[str, list[tuple[int, str]]]:
    """Every live document's passages (page, text) in a full-text index, by title."""
    from semsearch.query.search import Index

    with Index.open(index_path, embedder=FakeEmbedder()) as index:
        assert index.passages is not None
        docs = list(index.store.iter_documents())
        nums = [int(d.id, 16) for d in docs]
        held = index.passages.get(nums)
        return {
            doc.title or doc.id: [(int(held.pages[r]), held.texts[r]) for r in np.flatnonzero(held.ids == num)]
            for doc, num in zip(docs, nums, strict=True)
        }


# ---------------------------------------------------------------------------------------------- ray

HAS_RAY = importlib.util.find_spec("ray") is not None
NO_RAY = "ray is not installed: pip install 'semsearch[ray]'"
# A test that needs Ray starts (or fails to reach) a local cluster: seconds each, so conftest marks it slow too.
needs_ray = pytest.mark.skipif(not HAS_RAY, reason=NO_RAY)


# ---------------------------------------------------------------------------------------------- processes

CHROMIUM = Path("/usr/bin/chromium")
# The network is closed: without these Chromium waits on connections it would make at start-up.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def semsearch(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    """``python -m semsearch ARGS`` in its own process (offline), its output captured.

    The timeout leaves room for the largest catalogue model's first build on a busy machine.
    """
    return subprocess.run(
        [sys.executable, "-m", "semsearch", *args],
        cwd=cwd,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=900,
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get_json(url: str) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


def browser_ready() -> None:
    """Skip unless Chromium, Playwright and the serve extra are here."""
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is missing (apt-get install chromium)")
    pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    pytest.importorskip("fastapi", reason="the serve extra is not installed")


def build_seed_index(index: Path, *extra: str) -> None:
    """The seeds indexed with the real model (``extra``: more `semsearch index` arguments)."""
    args = [sys.executable, "-m", "semsearch", "index", str(SEEDS), "--index", str(index), *extra, "-q"]
    built = subprocess.run(args, env=ENV, capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr


@contextmanager
def serving(index: Path, folder: Path, *extra: str) -> Iterator[str]:
    """`semsearch serve` as a real process on a free loopback port; yields its base URL once it answers."""
    port = _free_port()
    log = (folder / "serve.log").open("w")
    cmd = [sys.executable, "-m", "semsearch", "serve", "--index", str(index), "--port", str(port), *extra]
    proc = subprocess.Popen(cmd, env=ENV, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None, (folder / "serve.log").read_text()
            try:
                if _get_json(base + "/api/health")[0] == 200:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, "the server did not answer /api/health in 120 s"
            time.sleep(0.2)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=15)
        log.close()


def _screenshot(page: Any, tmp_path: Path, name: str) -> Path:
    """Save a full-page screenshot under tmp_path, and a copy under $SEMSEARCH_SCREENSHOTS when set."""
    path = tmp_path / name
    page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 10_000  # a real picture, not a blank page
    keep = os.environ.get("SEMSEARCH_SCREENSHOTS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(keep) / name)
    return path


# ---------------------------------------------------------------------------------------------- faults: writers

_FORK_SERVER = WORKERS / "fork_server.py"
_WRITER_WAIT_S = 60.0  # how long a fault test waits on a writer process before it fails


class ForkServer:
    """A warm process that forks ``semsearch`` commands (``fork_server.py``): a start costs milliseconds."""

    def __init__(self) -> None:
        env = dict(os.environ)
        env.pop(FAULT_ENV, None)
        self.proc = subprocess.Popen(
            [sys.executable, str(_FORK_SERVER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
        )

    def start(self, args: list[str], env: dict[str, str], out: Path) -> int:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps({"args": args, "env": env, "out": str(out)}) + "\n")
        self.proc.stdin.flush()
        return int(self.proc.stdout.readline())

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=30)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@dataclass
class Writer:
    """A ``semsearch`` command in its own process, stopped at ``point`` (when given) until released."""

    server: ForkServer
    args: list[str]
    point: str | None
    folder: Path
    pid: int = field(init=False)

    def __post_init__(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        env = {FAULT_ENV: f"{self.point}:{self.folder}"} if self.point is not None else {}
        self.pid = self.server.start(self.args, env, self.folder / "run")

    def _output(self) -> str:
        run = self.folder / "run"
        return "".join((run / n).read_text() for n in ("stdout", "stderr") if (run / n).exists())

    def reached(self) -> int:
        """Wait until the writer stops at its point; its pid. Fails if it ends first."""
        mark = self.folder / f"{self.point}.reached"
        deadline = time.monotonic() + _WRITER_WAIT_S
        while not mark.exists():
            if not _alive(self.pid):
                raise AssertionError(f"{self.args} ended before {self.point}: {self._output()}")
            assert time.monotonic() < deadline, f"{self.args} never reached {self.point}"
            time.sleep(0.002)
        return int(mark.read_text(encoding="utf-8"))

    def release(self) -> None:
        (self.folder / f"{self.point}.go").write_text("go", encoding="utf-8")

    def kill(self) -> None:
        os.kill(self.pid, signal.SIGKILL)
        self.finish()

    def finish(self) -> tuple[int | None, str]:
        """Wait for the end: (exit status, None when killed; its output)."""
        deadline = time.monotonic() + _WRITER_WAIT_S
        while _alive(self.pid):
            assert time.monotonic() < deadline, f"{self.args} did not end"
            time.sleep(0.002)
        status = self.folder / "run" / "status"
        return (int(status.read_text()) if status.exists() else None), self._output()


def lock_held(lock: Path) -> bool:
    """Whether some writer holds this lock file (flock) now."""
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def versions_snapshot(index: Path) -> dict[str, dict[str, str]]:
    """Every published version folder with the sha256 of each of its files."""
    out: dict[str, dict[str, str]] = {}
    for version in sorted(index.glob("v-*")):
        out[version.name] = {
            p.relative_to(version).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(version.rglob("*"))
            if p.is_file()
        }
    return out


def assert_versions_intact(index: Path, before: dict[str, dict[str, str]]) -> None:
    """Every version published before is still there, byte for byte."""
    now = versions_snapshot(index)
    for name, files in before.items():
        assert name in now, f"{name} was deleted"
        assert now[name] == files, f"{name} changed"


# ------------------------------------------------------------------------------------- window and sentence readings

CUT = 120  # the fake encoder reads this many characters, like a 256-token window on a long abstract
TITLE = "Marsupial field notes"
TEXT = (
    "We describe a survey of small mammals across several coastal sites over three seasons. "
    "Counts were taken at dawn. "
    "The quokka colony on the island grew after feral cats were removed."
)
QUERY = "quokka colony island cats"
DECOY = ("Island ferry timetables", "Ferries to the island run twice a day in summer. Cats ride free.")
SOIL = (
    "Soil cores from tilled farms",
    "Soil cores were drilled at ten farms in spring and again in the autumn after harvest. "
    "Each core was split. Nitrogen fell sharply below thirty centimetres in tilled fields.",
)
OTHERS = [(f"Paper {i}", f"Short note number {i} about sampling. It fits the window.") for i in range(6)]


class WindowedFake(FakeEmbedder):
    """The fake encoder, reading only the first CUT characters of each text (and saying so)."""

    def __init__(self) -> None:
        super().__init__(dimension=256)  # the fake hashes words into 256 buckets: fewer chance collisions

    def read_chars(self, text: str) -> int:
        return min(len(text), CUT)

    def encode(self, texts: Sequence[str], *, batch_size: int = 32, progress: bool = False) -> np.ndarray:
        self.calls.append(list(texts))
        return FakeEmbedder(self.dimension).encode([t[:CUT] for t in texts])


class SentenceFake(WindowedFake):
    """The windowed fake that also reads sentences: each sentence whole, a document as its sentences' unit mean.

    A text of one sentence is read as ``encode`` reads it (its first CUT characters), as the ONNX encoder does.
    """

    def __init__(self) -> None:
        super().__init__()
        self.sentence_calls: list[list[str]] = []

    def encode_sentences(self, items: Sequence[SentenceText]) -> list[tuple[np.ndarray, np.ndarray]]:
        self.sentence_calls.append([item.text for item in items])
        bag = FakeEmbedder(self.dimension)
        out = []
        for item in items:
            sentences = bag.encode([item.text[a:b] for a, b in item.spans])
            whole = sentences.mean(axis=0) if item.spans else bag.encode([item.text[:CUT]])[0]
            out.append((whole / np.linalg.norm(whole), sentences))
        return out


def _corpus(tmp_path: Path, *papers: tuple[str, str], name: str = "papers.jsonl") -> Path:
    """(title, abstract) pairs as a JSON-lines file under tmp_path/corpus."""
    path = tmp_path / "corpus" / name
    path.parent.mkdir(exist_ok=True)
    path.write_text("".join(json.dumps({"title": t, "abstract": a}) + "\n" for t, a in papers), encoding="utf-8")
    return path


def _top(idx: Path, fake: FakeEmbedder, query: str = QUERY, mode: str = "dense") -> list[str]:
    """The titles of the top 3 hits."""
    from semsearch.query.search import Index

    with Index.open(idx, embedder=fake) as index:
        return [h.title or "" for h in index.search(query, 3, mode=mode, explain=False)]


def _id_of(idx: Path, fake: FakeEmbedder, title: str) -> str:
    """The id of the document with this title."""
    from semsearch.query.search import Index

    with Index.open(idx, embedder=fake) as index:
        return next(h.id for h in index.search(title, 5, mode="lexical") if h.title == title)


# ------------------------------------------------------------------------------------- faults: the matrix's scenes

EXTRA_A = "Sparse attention patterns cut the quadratic cost of transformers on long documents."
EXTRA_C = "Protein structures are predicted by diffusion models conditioned on evolutionary sequence data."
GONE = "Causal discovery from observational data recovers a graph of interventions with sparse priors."


@dataclass
class Scene:
    """An index over corpus/a.txt and corpus/b.txt (and d.txt, removed with ``remove --source``), tagged."""

    root: Path
    corpus: Path
    index: Path
    ids: dict[str, str]  # paper key -> document id
    removed: Path | None  # the source a removal took out before the fault, which must stay out

    @property
    def a(self) -> Path:
        return self.corpus / "a.txt"

    @property
    def b(self) -> Path:
        return self.corpus / "b.txt"


def _seed(path: Path, texts: list[str]) -> None:
    path.write_text("Papers\n\n" + "\n\n".join(texts) + "\n", encoding="utf-8")


def make_scene(root: Path, *, with_removal: bool) -> Scene:
    """Build the scene at ``root`` (sources, index, a removal, a tag)."""
    from semsearch.query.search import Index

    corpus = root / "corpus"
    corpus.mkdir(parents=True)
    _seed(corpus / "a.txt", [PAPERS["fed"], PAPERS["vision"], PAPERS["rl"]])
    _seed(corpus / "b.txt", [PAPERS["graph"], PAPERS["llm"]])
    # Enough documents that one arriving file or a removed one is a small change (appended as a segment).
    _seed(corpus / "bulk.txt", synthetic_abstracts(20, seed=22))
    index = root / "idx"
    fake = FakeEmbedder()
    sources = [str(corpus)]
    removed = None
    if with_removal:
        removed = root / "d.txt"
        _seed(removed, [GONE])
        sources.append(str(removed))
    # HNSW: a kind that writes vectors.faiss (a flat index is built from vectors.npy), so each writer's FAISS
    # write is a layer a fault can hit.
    assert run(["index", *sources, "--index", str(index), "-q", "--ann", "hnsw"], fake).exit_code == 0
    if removed is not None:
        assert run(["remove", "--source", str(removed), "--index", str(index)], fake).exit_code == 0
    with Index.open(index) as idx:
        ids = {key: next(d.id for d in idx.store.iter_documents() if d.text == text) for key, text in PAPERS.items()}
    assert run(["tag", "add", "liked", ids["fed"], "--index", str(index)], fake).exit_code == 0
    return Scene(root, corpus, index, ids, removed)


def writer_args(kind: str, scene: Scene) -> list[str]:
    """Prepare the sources for a writer and return its ``semsearch`` arguments."""
    idx = ["--index", str(scene.index)]
    if kind == "build":  # a kept source changed: the refresh re-reads and rewrites the index whole
        _seed(scene.a, [PAPERS["fed"], PAPERS["vision"], PAPERS["rl"], EXTRA_A])
        return ["index", *idx, "-q", "--wait"]
    if kind == "append":  # a file arrived: the refresh appends a segment
        _seed(scene.corpus / "c.txt", [EXTRA_C])
        return ["index", *idx, "-q", "--wait"]
    if kind == "remove":
        return ["remove", "--source", str(scene.b), *idx, "--wait"]
    if kind == "optimize":
        return ["index", *idx, "--optimize", "-q", "--wait"]
    return ["tag", "add", "liked", scene.ids["vision"], *idx]


def texts(index: Path) -> set[str]:
    """The text of every document in the live version."""
    from semsearch.query.search import Index

    with Index.open(index) as idx:
        return {d.text for d in idx.store.iter_documents()}


def live_manifest(index: Path) -> Manifest:
    """The manifest of the version CURRENT points to."""
    from semsearch.store.layout import CURRENT
    from semsearch.store.manifest import Manifest

    return Manifest.read(index / (index / CURRENT).read_text(encoding="utf-8").strip())


def assert_sound(scene: Scene) -> None:
    """verify is clean and the removal made before the fault is still in force."""
    checked = run(["verify", "--index", str(scene.index), "--json"], FakeEmbedder())
    assert checked.exit_code == 0, checked.output
    if scene.removed is not None:
        assert GONE not in texts(scene.index), "a removal was undone"
        assert str(scene.removed) in live_manifest(scene.index).excluded_sources


def assert_effect(kind: str, scene: Scene) -> None:
    """What the writer itself set out to do is in the live version (or the tags file)."""
    from semsearch.curate.tags import TagStore

    now = texts(scene.index)
    if kind == "build":
        assert EXTRA_A in now
    elif kind == "append":
        assert EXTRA_C in now
    elif kind == "remove":
        assert PAPERS["graph"] not in now and str(scene.b) in live_manifest(scene.index).excluded_sources
    elif kind == "tag":
        assert scene.ids["vision"] in TagStore(scene.index).tagged_ids(["liked"])


def no_leftovers(index: Path) -> None:
    """No build folder, pointer temp file or publishing journal is left, nor a version past the live one."""
    from semsearch.store.layout import CURRENT

    left = [p.name for p in index.iterdir() if p.name.startswith((".build-", ".CURRENT.")) or p.name == ".publishing"]
    assert left == []
    live = int((index / CURRENT).read_text(encoding="utf-8").split("-")[1])
    assert all(int(v.name.split("-")[1]) <= live for v in index.glob("v-*")), "an unpublished version is left"


# ---------------------------------------------------------------------------------------------- faults: a full disk


def enospc(name: str = "") -> OSError:
    """The error a write raises on a full disk."""
    return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), name or None)


def _half_then_full(real: Callable[..., Any]) -> Callable[..., Any]:
    """np.save that writes half a file and then finds the disk full."""

    def save(path: Any, array: Any, *args: Any, **kwargs: Any) -> None:
        Path(path).write_bytes(b"\x93NUMPY" + b"\0" * 100)
        raise enospc(str(path))

    return save


class FullConnection:
    """A SQLite connection whose bulk inserts hit a full disk, as SQLite reports it."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def executemany(self, *args: Any) -> Any:
        raise sqlite3.OperationalError("database or disk is full")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


def inject(monkeypatch: pytest.MonkeyPatch, layer: str) -> None:
    """Make the next write at ``layer`` find the disk full (``eio``: an I/O error instead)."""
    import faiss

    import semsearch.store.documents
    import semsearch.store.lexical
    import semsearch.store.vectors
    import semsearch.store.versions

    if layer == "vectors":
        monkeypatch.setattr(semsearch.store.vectors.np, "save", _half_then_full(np.save))
    elif layer == "lexical":
        real_save = np.save

        def save(path: Any, array: Any, *args: Any, **kwargs: Any) -> None:
            if "lexical" in str(path):
                raise enospc(str(path))
            real_save(path, array, *args, **kwargs)

        monkeypatch.setattr(semsearch.store.lexical.np, "save", save)
    elif layer == "faiss":

        def write_index(index: Any, path: str) -> None:
            Path(path).write_bytes(b"IxM2" + b"\0" * 64)
            raise RuntimeError(
                f"Error in faiss::FileIOWriter: 'ret == (size)' failed: write error in {path}: 28 "
                "(No space left on device)"
            )

        monkeypatch.setattr(faiss, "write_index", write_index)
    elif layer == "documents":
        real_connect = sqlite3.connect
        monkeypatch.setattr(
            semsearch.store.documents.sqlite3, "connect", lambda *a, **k: FullConnection(real_connect(*a, **k))
        )
    elif layer == "current":
        monkeypatch.setattr(
            semsearch.store.versions, "write_text_atomic", lambda path, text: (_ for _ in ()).throw(enospc())
        )
    elif layer == "eio":

        def save(path: Any, array: Any, *args: Any, **kwargs: Any) -> None:
            raise OSError(errno.EIO, os.strerror(errno.EIO), str(path))

        monkeypatch.setattr(semsearch.store.vectors.np, "save", save)
    else:  # pragma: no cover
        raise ValueError(layer)


# ---------------------------------------------------------------------------------------------- hypothesis strategies


def _strategies() -> dict[str, Any]:
    """The --where strategies (hypothesis imported only by the tests that draw from them)."""
    from hypothesis import HealthCheck, settings
    from hypothesis import strategies as st

    from semsearch.core.records import Arrival, Document, Provenance
    from semsearch.store.filters import OPERATORS

    # SQLite stores UTF-8: a lone surrogate cannot be written to the store at all (nor could it before).
    chars = st.characters(blacklist_categories=["Cs"])
    numberish = st.sampled_from(
        ["1", "01", "2024", " 7 ", "1_000", "1e3", "-0", "+2.5", "nan", "NaN", "inf", "-Infinity", "\u0663"]
        + ["1e400", "e"]
    )
    texts = st.one_of(
        numberish, st.text(chars, max_size=8), st.sampled_from(["Graph", "graph nets", "İstanbul", "ß", ""])
    )
    scalars = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-3, 3),
        st.integers(),
        st.floats(allow_nan=True, allow_infinity=True),
        texts,
    )
    values = st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(chars, max_size=3), inner, max_size=2),
        max_leaves=6,
    )
    keys = st.sampled_from(["year", "Year", "venue", "VENUE", "authors", "x", "title", "source", "id", "added", "tags"])
    files = st.sampled_from(["a.jsonl", "seeds/000.txt", "seeds/001.txt", "B.CSV", "x[1].txt", "*"])

    @st.composite
    def document_lists(draw: st.DrawFn) -> list[Document]:
        nums = draw(st.lists(st.integers(0, 2**63 - 1), unique=True, max_size=7))
        docs = []
        for num in nums:
            sources = [Provenance(draw(files), "line", i) for i in range(draw(st.integers(0, 2)))]
            added = draw(
                st.one_of(
                    st.none(),
                    st.builds(
                        Arrival,
                        st.integers(1, 4),
                        st.sampled_from(["2026-01-02T03:04:05+00:00", "2025-12-31T00:00:00+00:00"]),
                    ),
                )
            )
            docs.append(
                Document(
                    f"{num:016x}",
                    "text",
                    draw(st.one_of(st.none(), texts)),
                    sources,
                    metadata=draw(st.dictionaries(keys, values, max_size=4)),
                    added=added,
                )
            )
        return docs

    fields = st.sampled_from(
        ["year", "venue", "authors", "x", "title", "id", "file", "source", "sources", "added", "added_version", "tags"]
    )
    wanted = st.one_of(
        numberish, texts, st.sampled_from(["*.txt", "seeds/*", "a.jsonl", "[ab]*", "2026-01-01", "0000", "true"])
    )
    return {
        "chars": chars,
        "MANY": settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow]),
        "numberish": numberish,
        "texts": texts,
        "scalars": scalars,
        "values": values,
        "keys": keys,
        "files": files,
        "document_lists": document_lists,
        "fields": fields,
        "wanted": wanted,
        "clauses": st.builds(lambda f, op, v: f"{f}{op}{v}", fields, st.sampled_from(OPERATORS), wanted),
    }


_LAZY: dict[str, Any] = {}
_STRATEGY_NAMES = {"chars", "MANY", "clauses", "document_lists"}
_LAZY_NAMES = _STRATEGY_NAMES | {"OPTS"}


def __getattr__(name: str) -> Any:
    """Values built on first use (hypothesis, the build layer): importing these helpers stays cheap in a worker."""
    if name not in _LAZY_NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if name not in _LAZY:
        _LAZY.update(_strategies() if name in _STRATEGY_NAMES else {"OPTS": _segment_options()})
    return _LAZY[name]
