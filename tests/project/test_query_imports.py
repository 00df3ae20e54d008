"""A cold `semsearch query` loads what a search needs: the stale-sources walk reads the formats' names, not readers."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from semsearch.core import registry
from semsearch.ingest.formats import FileFormat, TextFormat, built_in_formats, installed_formats
from semsearch.ingest.walk import DeclaredNames
from semsearch.ingest.zotero import DATABASE_NAME
from semsearch.store.documents import FILTER_TABLES
from semsearch.store.filter_columns import SCHEMA
from semsearch.store.layout import current_version
from semsearch.store.manifest import Manifest
from semsearch.write.freshness import source_names, stale_sources
from tests.helpers import REPO, FakeEmbedder, run, toy_format

MAX_QUERY_MODULES = 45  # issue 38's bound on the package modules a cold query enters (package __init__s apart)


def test_the_registry_declares_what_each_built_in_format_reads() -> None:
    formats = built_in_formats()
    assert set(registry.BUILT_IN_NAMES) == set(registry.built_in_names("format"))
    for name, declared in registry.BUILT_IN_NAMES.items():
        loaded = registry.load("format", name)
        assert isinstance(loaded, type)
        if issubclass(loaded, TextFormat):
            assert (declared.extensions, declared.data_file) == (loaded.extensions, "")
        else:
            data_file = DATABASE_NAME if name == "zotero" else ""  # a database is named by its folder, not walked
            assert issubclass(loaded, FileFormat) and declared == registry.WalkedNames(loaded.extensions, data_file)
    names = source_names()
    assert isinstance(names, DeclaredNames)
    assert list(names.extensions.items()) == list(formats.extensions.items())  # messages name them in this order


def test_the_declared_names_answer_a_walk_as_the_formats_do(tmp_path: Path) -> None:
    formats, names = built_in_formats(), source_names()
    for file_name in ("a.TXT", "b.md", "c.jsonl.gz", "d.json", "e.tsv", "f.bib", "g.docx", "h.sqlite", "noext", ".x"):
        assert names.for_name(file_name) == formats.for_name(file_name), file_name
    library = tmp_path / "Zotero"
    library.mkdir()
    assert names.folder_source(library) is None is formats.folder_source(library)
    (library / DATABASE_NAME).write_bytes(b"SQLite format 3\x00")
    assert names.folder_source(library) == formats.folder_source(library) == library / DATABASE_NAME


def test_a_format_registered_at_run_time_counts_in_the_stale_check(tmp_path: Path) -> None:
    papers = tmp_path / "papers"
    papers.mkdir()
    (papers / "a.lines").write_text("Graph Networks | Message passing networks learn on graphs.\n", encoding="utf-8")
    registry.register("format", "lines", toy_format())
    try:
        assert source_names() is installed_formats()
        built = run(["index", str(papers), "--index", str(tmp_path / "idx"), "-q"], FakeEmbedder())
        assert built.exit_code == 0, built.output
        (papers / "b.lines").write_text("Molecules | Graph networks read molecules.\n", encoding="utf-8")
        manifest = Manifest.read(current_version(tmp_path / "idx"))
        assert stale_sources(manifest, tmp_path / "idx")["new"] == [str((papers / "b.lines").resolve())]
    finally:
        registry.unregister("format", "lines")
    assert isinstance(source_names(), DeclaredNames)


def test_the_document_store_names_the_filter_columns_tables() -> None:
    created = {line.split()[2] for line in SCHEMA.splitlines() if line.startswith("CREATE TABLE")}
    assert created == set(FILTER_TABLES)


def test_a_cold_cli_query_enters_at_most_45_package_modules(tmp_path: Path) -> None:
    """The query ``scripts/trace_imports.py`` traces, over the seed papers (hashed vectors: no model needed)."""
    index = tmp_path / "idx"
    shutil.copytree(REPO / "seeds", tmp_path / "seeds")
    built = run(["index", str(tmp_path / "seeds"), "--index", str(index), "--backend", "hashed", "-q"])
    assert built.exit_code == 0, built.output
    code = (
        "import json, sys\n"
        "from semsearch.faces.cli import main\n"
        f"sys.argv = ['semsearch', 'query', 'federated privacy', '--index', {str(index)!r}, '-k', '3']\n"
        "try:\n"
        "    main()\n"
        "except SystemExit:\n"
        "    pass\n"
        "mods = [m for m, v in sys.modules.items() if m.startswith('semsearch.')"
        " and not str(getattr(v, '__file__', '')).endswith('__init__.py')]\n"
        "print(json.dumps(sorted(mods)))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert result.returncode == 0, result.stderr
    modules = json.loads(result.stdout.strip().splitlines()[-1])
    assert "semsearch.ingest.sources" not in modules
    assert len(modules) <= MAX_QUERY_MODULES, modules
