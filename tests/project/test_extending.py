"""Each extension point, done once as docs/explanation/extending.md shows it: one file, chosen on every face.

An ANN kind, an encoder backend and a model come from a toy package installed in a folder on ``sys.path`` (its
entry points name them, nothing in semsearch changes); an input format is registered at run time. Each is then
used through the CLI and through the library.
"""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from semsearch.core import registry
from semsearch.encode.hashed import HashedBackend, HashedWords
from semsearch.query.search import Index
from semsearch.store.layout import current_version
from semsearch.store.manifest import Manifest
from semsearch.write.build import BuildOptions, build_index
from tests.helpers import FakeEmbedder, assert_one_line_error, run, toy_format

# The toy package: one module per extension, as a third party would write each.
TOY_ANN = '''
from semsearch.store.ann_kinds import AnnKind


class Brute(AnnKind):
    """Exact search under another name."""

    name = "brute"
    exact = True

    def factory(self, spec):
        return "IDMap,Flat"

    def describe(self, spec):
        return "brute force"
'''
TOY_BACKEND = '''
from semsearch.encode.encoder_choice import EncoderChoice
from semsearch.encode.hashed import HashedWords


class ToyBackend:
    """Hashed words in 16 dimensions, whatever the model: a build and its queries agree from the manifest alone."""

    def open_build(self, model_name, *, precision, out_dir, previous_version, notify, progress):
        return EncoderChoice(self.encoder(model_name), "toy", "fp32")

    def open_query(self, manifest, version, *, notify, threads):
        return self.encoder(manifest.model.name)

    def encoder(self, model_name):
        return HashedWords(16, name=model_name, fingerprint="toy-16", backend="toy")
'''
TOY_MODEL = """
from pathlib import Path

from semsearch.encode.catalogue import ModelSpec

TOY = ModelSpec(
    name="toy-words",
    dimension=24,
    disk_mb=0,
    summary="a toy model for tests",
    location=str(Path(__file__).parent / "toy-words"),
)
"""
ENTRY_POINTS = {
    "semsearch.ann_kinds": "brute = toyext.ann:Brute",
    "semsearch.backends": "toy = toyext.backend:ToyBackend",
    "semsearch.models": "toy-words = toyext.model:TOY",
}
PAPERS = {
    "graphs.txt": "Graph Papers\n\nMessage passing neural networks learn on molecular graphs and predict properties.\n",
    "privacy.txt": "Privacy Papers\n\nDifferential privacy bounds leakage in federated training of shared models.\n",
}


def install_toy_package(site: Path, entry_points: dict[str, str] = ENTRY_POINTS) -> None:
    """The toy package and its distribution's entry points, then the registry reads them again."""
    package = site / "toyext"
    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text("", encoding="utf-8")
    for name, text in (("ann", TOY_ANN), ("backend", TOY_BACKEND), ("model", TOY_MODEL)):
        (package / f"{name}.py").write_text(text, encoding="utf-8")
    info = site / "toyext-0.1.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toyext\nVersion: 0.1\n", encoding="utf-8")
    groups = "".join(f"[{group}]\n{line}\n" for group, line in entry_points.items())
    (info / "entry_points.txt").write_text(groups, encoding="utf-8")
    importlib.invalidate_caches()
    registry.reload_plugins()


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A folder on sys.path for the toy distribution; the registry forgets it afterwards."""
    folder = tmp_path / "site"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    yield folder
    for name in [m for m in sys.modules if m == "toyext" or m.startswith("toyext.")]:
        del sys.modules[name]
    registry.reload_plugins()


@pytest.fixture
def papers(tmp_path: Path) -> Path:
    folder = tmp_path / "papers"
    folder.mkdir()
    for name, text in PAPERS.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def manifest(index: Path) -> Manifest:
    return Manifest.read(current_version(index))


def test_an_ann_kind_from_a_package_is_chosen_with_ann(tmp_path: Path, site: Path, papers: Path) -> None:
    install_toy_package(site)
    assert "brute" in run(["index", "--help"]).output
    index = tmp_path / "idx"
    fake = FakeEmbedder()

    built = run(["index", str(papers), "--index", str(index), "--ann", "brute", "-q"], fake)
    assert built.exit_code == 0, built.output
    assert (manifest(index).ann or {})["kind"] == "brute"
    hits = run(["query", "federated privacy", "--index", str(index), "-k", "1", "--json"], fake)
    assert hits.exit_code == 0, hits.output
    assert "Differential privacy" in hits.stdout

    library = tmp_path / "lib"
    build_index([str(papers)], library, BuildOptions(ann="brute", progress=False), embedder=fake)
    with Index.open(library, embedder=fake) as idx:
        assert "Message passing" in (idx.search("molecular graphs", k=1)[0].text)
    assert (manifest(library).ann or {})["kind"] == "brute"


def test_an_encoder_backend_from_a_package_builds_and_queries(tmp_path: Path, site: Path, papers: Path) -> None:
    install_toy_package(site)
    assert "toy" in run(["index", "--help"]).output
    index = tmp_path / "idx"

    built = run(["index", str(papers), "--index", str(index), "--backend", "toy", "-q"])  # no encoder given
    assert built.exit_code == 0, built.output
    model = manifest(index).model
    assert (model.backend, model.dimension, model.fingerprint) == ("toy", 16, "toy-16")
    hits = run(["query", "molecular graphs", "--index", str(index), "-k", "1"])  # the manifest names the backend
    assert hits.exit_code == 0, hits.output
    assert "Message passing" in hits.stdout

    with Index.open(index) as idx:
        assert "Differential privacy" in (idx.search("federated privacy", k=1)[0].text)


def test_a_model_from_a_package_is_listed_and_chosen_with_model(tmp_path: Path, site: Path, papers: Path) -> None:
    from semsearch.encode.catalogue import resolve_model

    install_toy_package(site)
    listed = run(["models", "--json"])
    assert listed.exit_code == 0, listed.output
    toy = next(row for row in json.loads(listed.stdout) if row["name"] == "toy-words")
    assert (toy["dimension"], toy["installed"]) == (24, False)
    assert resolve_model("toy-words") == str(site / "toyext" / "toy-words")

    index = tmp_path / "idx"
    args = ["index", str(papers), "--index", str(index), "--model", "toy-words", "--backend", "hashed", "-q"]
    built = run(args)
    assert built.exit_code == 0, built.output
    model = manifest(index).model
    assert (model.name, model.dimension, model.backend) == ("toy-words", 24, "hashed")
    assert "Differential privacy" in run(["query", "federated privacy", "--index", str(index), "-k", "1"]).stdout


def test_an_input_format_registered_at_run_time_is_read_on_every_face(tmp_path: Path) -> None:
    papers = tmp_path / "papers"
    papers.mkdir()
    (papers / "reading.lines").write_text(
        "Graph Networks | Message passing neural networks learn on molecular graphs.\n", encoding="utf-8"
    )
    registry.register("format", "lines", toy_format())
    try:
        fake = FakeEmbedder()
        built = run(["index", str(papers), "--index", str(tmp_path / "idx"), "-q"], fake)
        assert built.exit_code == 0, built.output
        assert "Graph Networks" in run(["query", "graphs", "--index", str(tmp_path / "idx")], fake).stdout
        build_index([str(papers)], tmp_path / "lib", BuildOptions(progress=False), embedder=fake)
        assert [f.format for f in manifest(tmp_path / "lib").sources] == ["lines"]
    finally:
        registry.unregister("format", "lines")
    assert not any(e.name == "lines" for e in registry.entries("format"))


def test_the_hashed_backend_builds_and_queries_without_a_model(tmp_path: Path, papers: Path) -> None:
    index = tmp_path / "idx"
    built = run(["index", str(papers), "--index", str(index), "--backend", "hashed", "-q"])
    assert built.exit_code == 0, built.output
    model = manifest(index).model
    assert (model.backend, model.dimension, model.fingerprint) == ("hashed", 384, "hashed-md5-384")
    assert "Message passing" in run(["query", "molecular graphs", "--index", str(index), "-k", "1"]).stdout
    # The tests' fake encoder is this backend's encoder at another width: the same words, the same vectors.
    texts = ["federated privacy", "graphs of molecules"]
    backend = registry.load("backend", "hashed")
    assert isinstance(backend, type) and backend is HashedBackend
    wide = backend().encoder("any", 64).encode(texts)
    assert np.array_equal(wide, FakeEmbedder().encode(texts))
    assert isinstance(FakeEmbedder(), HashedWords)


@pytest.mark.parametrize(
    ("entry_points", "args", "fragments"),
    [
        (
            {"semsearch.ann_kinds": "brute = toyext.nowhere:Brute"},
            ["--ann", "brute"],
            ("ANN kind plugin 'brute' (toyext.nowhere:Brute, from the toyext package) ", "cannot be loaded"),
        ),
        (
            {"semsearch.backends": "toy = toyext.ann:Brute"},
            ["--backend", "toy"],
            ("encoder backend plugin 'toy' ", "has no open_build and open_query"),
        ),
        (
            {"semsearch.ann_kinds": "flat = toyext.ann:Brute"},
            ["--ann", "flat"],
            ("ANN kind plugin 'flat' ", "takes the name of a built-in ANN kind"),
        ),
    ],
)
def test_a_broken_plugin_is_one_error_line(
    tmp_path: Path, site: Path, papers: Path, entry_points: dict[str, str], args: list[str], fragments: tuple[str, ...]
) -> None:
    install_toy_package(site, entry_points)
    result = run(["index", str(papers), "--index", str(tmp_path / "idx"), "-q", *args])
    assert_one_line_error(result, *fragments)
    assert not (tmp_path / "idx").exists()


def test_every_built_in_entry_loads_as_what_its_kind_needs() -> None:
    from semsearch.encode.catalogue import ModelSpec, model_spec
    from semsearch.encode.encoder_choice import encoder_backend
    from semsearch.ingest.formats import built_in_formats
    from semsearch.store.ann_kinds import AnnKind, ann_kind

    assert registry.built_in_names("ann") == ("flat", "ivf", "ivfpq", "hnsw")
    assert all(isinstance(ann_kind(name), AnnKind) for name in registry.built_in_names("ann"))
    assert registry.built_in_names("backend")[:2] == ("onnx", "torch")
    assert all(hasattr(encoder_backend(name), "open_query") for name in registry.built_in_names("backend"))
    assert all(isinstance(model_spec(name), ModelSpec) for name in registry.built_in_names("model"))
    assert [model_spec(name).name for name in registry.built_in_names("model")] == list(
        registry.built_in_names("model")
    )
    formats = built_in_formats()
    assert [f.name for f in (*formats.text, *formats.files)] == list(registry.built_in_names("format"))


def test_listing_the_built_ins_imports_none_of_them() -> None:
    import subprocess

    code = (
        "import sys\n"
        "from semsearch.core import registry\n"
        "names = [registry.built_in_names(k) for k in registry.KINDS]\n"
        "print(sorted(m for m in sys.modules if m.startswith('semsearch.') and not m.startswith('semsearch.core')))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert result.stdout.strip() == "[]"


def test_run_time_entries_cannot_take_built_in_names() -> None:
    with pytest.raises(ValueError, match="built-in encoder backend"):
        registry.register("backend", "onnx", HashedBackend)
    with pytest.raises(ValueError, match="built-in model"):
        registry.unregister("model", "all-MiniLM-L6-v2")
    with pytest.raises(ValueError, match="no extension point"):
        registry.register("tokenizer", "x", object())  # type: ignore[arg-type]
