"""Hostile input, the rest of issue #37: BibTeX concatenation and macros, failing format plugins, a bad request
worded as damage, NaN and infinities in numeric options, and an abstract too long to be one.

Each test fails on the code before the fix: the comment above it says what that code did.
"""

from __future__ import annotations

import json
import math
import sqlite3
import typing
from pathlib import Path

import pytest

from semsearch import Index
from semsearch.app.operations import CLI, FACES, HTTP, OPERATIONS
from semsearch.core.errors import IndexCorruptError, IndexReadError, QueryError, sqlite_failure
from semsearch.core.options import MAX_KEY_CHARS
from semsearch.ingest.guards import MAX_ABSTRACT_CHARS
from semsearch.ingest.sources import read_sources
from tests.helpers import PAPERS, TOY_MODULE, FakeEmbedder, _install_plugin, assert_one_line_error, run, snapshot


@pytest.fixture
def built(tmp_path: Path, fake: FakeEmbedder) -> Path:
    """An index of the five papers, each with an external id (p0 .. p4) and a year."""
    source = tmp_path / "papers.jsonl"
    rows = [{"id": f"p{i}", "abstract": text, "year": 2020 + i} for i, text in enumerate(PAPERS.values())]
    source.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    index = tmp_path / "idx"
    result = run(["index", str(source), "--index", str(index), "-q"], fake)
    assert result.exit_code == 0, result.output
    return index


# ------------------------------------------------------------------ BibTeX: concatenation and macros

pytest.importorskip("bibtexparser", reason="the bibtex extra is not installed")

CONCATENATED = r"""@string{nips = "NeurIPS"}
@string{nipsfull = "Advances in " # nips}

@inproceedings{fed2019,
  title     = "Private " # {Federated} # " Learning",
  booktitle = nips # " 32",
  series    = nipsfull,
  month     = jan,
  note      = oct # "~15",
  year      = 2019,
  abstract  = "FED " # nips # " as " # {\emph{the} venue} # ".",
}
""".replace("FED", PAPERS["fed"].rstrip("."))


# Before: bibtexparser resolves a value that is one macro, so each of these stayed its source text
# ('nips # " 32"', '"FED " # nips # ...', 'jan'), stored and exported so.
def test_concatenations_and_macros_are_resolved(tmp_path: Path) -> None:
    source = tmp_path / "refs.bib"
    source.write_text(CONCATENATED, encoding="utf-8")
    (record,) = read_sources([str(source)]).records
    assert record.title == "Private Federated Learning"
    assert record.text == PAPERS["fed"].rstrip(".") + " NeurIPS as the venue."
    meta = record.metadata
    assert meta["booktitle"] == meta["venue"] == "NeurIPS 32"
    assert meta["series"] == "Advances in NeurIPS"  # a @string made by concatenation, used alone
    assert meta["month"] == "January"  # BibTeX's month macros
    assert meta["note"] == "October 15"
    assert meta["year"] == "2019"
    assert not any("#" in str(v) for v in meta.values())


def test_a_concatenated_venue_is_exported_resolved(tmp_path: Path, fake: FakeEmbedder) -> None:
    source = tmp_path / "refs.bib"
    source.write_text(CONCATENATED, encoding="utf-8")
    index = tmp_path / "idx"
    assert run(["index", str(source), "--index", str(index), "-q"], fake).exit_code == 0
    cited = run(["query", "federated privacy", "--index", str(index), "--format", "bibtex"], fake)
    assert cited.exit_code == 0, cited.output
    assert "NeurIPS 32" in cited.stdout and "nips #" not in cited.stdout
    assert "NeurIPS as the venue" in cited.stdout


def test_braced_and_quoted_hashes_are_text_and_an_undefined_macro_is_its_name(tmp_path: Path) -> None:
    source = tmp_path / "refs.bib"
    source.write_text(
        '@article{a, title = {C # sharp}, journal = "C" # " # " # "D", abstract = undefinedmacro # " text", '
        "year = 2020}\n",
        encoding="utf-8",
    )
    (record,) = read_sources([str(source)]).records
    assert record.title == "C # sharp"
    assert record.metadata["journal"] == "C # D"
    assert record.text == "undefinedmacro text"


# ------------------------------------------------------------------ format plugins that fail

FAILING_MODULE = (
    TOY_MODULE
    + """

class Raising(Lines):
    def items(self, text, display):
        raise RuntimeError("cannot parse\\nsecond line of the reason")


class Exiting(Lines):
    def items(self, text, display):
        raise SystemExit(0)


class BadSniffer(Lines):
    name_decides = False

    def sniff(self, text):
        raise ValueError("sniffing broke")
"""
)


def _plugin(site: Path, target: str, module: str = FAILING_MODULE) -> None:
    _install_plugin(site, target)
    (site / "toyfmt.py").write_text(module, encoding="utf-8")


def _lines_file(tmp_path: Path, name: str = "a.lines") -> Path:
    source = tmp_path / name
    source.write_text("Graph Networks | Message passing neural networks learn on molecular graphs.\n", encoding="utf-8")
    return source


# Before: the plugin's RuntimeError came out of `index` as a traceback naming neither plugin nor file.
@pytest.mark.parametrize(
    ("target", "reason"), [("toyfmt:Raising", "(RuntimeError: cannot parse)"), ("toyfmt:Exiting", "(SystemExit: 0)")]
)
def test_a_plugin_that_raises_while_reading_is_one_line_naming_it_and_the_file(
    tmp_path: Path, plugin_site: Path, target: str, reason: str
) -> None:
    _plugin(plugin_site, target)
    source = _lines_file(tmp_path)
    result = run(["index", str(source), "--index", str(tmp_path / "idx"), "-q"], FakeEmbedder())
    assert_one_line_error(result, "a.lines: input format plugin 'lines' failed while reading it ", reason)
    assert not (tmp_path / "idx").exists()


def test_a_plugin_that_raises_while_sniffing_is_one_line_naming_it_and_the_file(
    tmp_path: Path, plugin_site: Path
) -> None:
    _plugin(plugin_site, "toyfmt:BadSniffer")
    source = tmp_path / "notes.txt"
    source.write_text("Some Papers\n\nAn abstract about graphs.\n", encoding="utf-8")
    result = run(["index", str(source), "--index", str(tmp_path / "idx"), "-q"], FakeEmbedder())
    assert_one_line_error(result, "notes.txt: input format plugin 'lines' failed while sniffing it (ValueError: ")


# Before: SystemExit(0) on import passed `except Exception`, and `index` ended with status 0 having built nothing.
@pytest.mark.parametrize("exc", ["SystemExit(0)", "SystemExit('bye')", "GeneratorExit()"])
def test_a_plugin_that_exits_on_import_is_an_error_not_a_success(tmp_path: Path, plugin_site: Path, exc: str) -> None:
    _plugin(plugin_site, "toyfmt:Lines", f"raise {exc}\n")
    source = tmp_path / "a.txt"
    source.write_text("Papers\n\nAn abstract about graphs.\n", encoding="utf-8")
    result = run(["index", str(source), "--index", str(tmp_path / "idx"), "-q"], FakeEmbedder())
    assert_one_line_error(result, "input format plugin 'lines' (toyfmt:Lines", "cannot be loaded (", exc.split("(")[0])
    assert not (tmp_path / "idx").exists()


def test_a_plugins_own_input_error_is_kept_as_it_words_it(tmp_path: Path, plugin_site: Path) -> None:
    module = TOY_MODULE.replace(
        "    def items(self, text, display):\n",
        "    def items(self, text, display):\n"
        "        from semsearch.core.errors import InputError\n"
        "        raise InputError(f'{display}: my own words')\n",
    )
    _plugin(plugin_site, "toyfmt:Lines", module)
    result = run(["index", str(_lines_file(tmp_path)), "--index", str(tmp_path / "idx"), "-q"], FakeEmbedder())
    assert_one_line_error(result, "a.lines: my own words")
    assert "input format plugin" not in result.output


# ------------------------------------------------------------------ a bad request is not damage


# Before: a 50,000-character id reached a LIKE pattern, and SQLite's "LIKE or GLOB pattern too complex" was
# worded "...docs.sqlite: ...; rebuild with: semsearch index --full" (the index is sound).
@pytest.mark.parametrize("key", ["a" * 50_000, "abcdef" * 10_000, "%" * 2_000, "p1" * 600])
def test_an_over_long_id_is_a_bad_request_not_damage(built: Path, fake: FakeEmbedder, key: str) -> None:
    before = snapshot(built)
    result = run(["related", key, "--index", str(built)], fake)
    assert_one_line_error(result, f"an id is at most {MAX_KEY_CHARS:,} characters; this one has {len(key):,}")
    assert "rebuild" not in result.output and "sqlite" not in result.output
    assert snapshot(built) == before


def test_a_long_hex_id_under_the_cap_is_simply_unknown(built: Path, fake: FakeEmbedder) -> None:
    result = run(["related", "abcdef" * 100, "--index", str(built)], fake)  # 600 hex digits: no id's prefix
    assert_one_line_error(result, "no document 'abcdef")
    assert "rebuild" not in result.output


def test_a_request_past_sqlites_limits_is_a_query_error(built: Path, fake: FakeEmbedder) -> None:
    # Before: DocumentStore wrapped every sqlite3.Error as damage with the rebuild hint.
    with Index.open(built, embedder=fake) as idx, pytest.raises(QueryError) as caught:
        idx.store.rows("SELECT num FROM documents WHERE id LIKE ?", ("a" * 60_000,))
    assert "LIKE or GLOB pattern too complex" in str(caught.value)
    assert "rebuild" not in str(caught.value)


def _sqlite_error(sql: str, *params: object) -> sqlite3.Error:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE documents (id TEXT)")
    conn.execute("INSERT INTO documents VALUES ('x')")
    with pytest.raises(sqlite3.Error) as caught:
        conn.execute(sql, params).fetchall()
    return caught.value


def test_only_damage_says_rebuild(tmp_path: Path) -> None:
    not_a_db = tmp_path / "docs.sqlite"
    not_a_db.write_bytes(b"this is not a database, it is forty-odd bytes of text" * 100)
    with pytest.raises(sqlite3.DatabaseError) as foreign:
        sqlite3.connect(not_a_db).execute("SELECT * FROM documents").fetchall()
    damage = [foreign.value, _sqlite_error("SELECT * FROM provenance"), _sqlite_error("SELECT nope FROM documents")]
    for exc in damage:
        error = sqlite_failure("docs.sqlite", exc)
        assert isinstance(error, IndexCorruptError), exc
        assert str(error).endswith("; rebuild with: semsearch index --full")
    requests = [
        _sqlite_error("SELECT id FROM documents WHERE id LIKE ?", "a" * 60_000),
        _sqlite_error("SELECT zeroblob(2000000000)"),  # SQLITE_TOOBIG
    ]
    for exc in requests:
        error = sqlite_failure("docs.sqlite", exc)
        assert isinstance(error, QueryError), exc
        assert "rebuild" not in str(error)
    io_error = sqlite3.OperationalError("disk I/O error")
    io_error.sqlite_errorcode = 10  # type: ignore[attr-defined]  # SQLITE_IOERR: not damage, not the request
    error = sqlite_failure("docs.sqlite", io_error)
    assert isinstance(error, IndexReadError) and "rebuild" not in str(error)


def test_an_index_that_cannot_be_read_now_is_503_over_http(
    built: Path, fake: FakeEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """IndexReadError (an I/O error, not damage) is the server's index like IndexCorruptError (503), never a 500.

    Before sqlite_failure split it out, such an error was an IndexCorruptError (503); the new kind had no status.
    """
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from semsearch.faces.serve import create_app
    from semsearch.store.documents import DocumentStore

    def unreadable(*_: object) -> None:
        raise IndexReadError("docs.sqlite: cannot be read (disk I/O error)")

    monkeypatch.setattr(DocumentStore, "get_many", unreadable)
    with TestClient(create_app(built, embedder=fake), base_url="http://localhost") as client:
        response = client.get("/api/search", params={"q": "privacy"})
    assert response.status_code == 503, response.text
    assert "cannot be read" in response.json()["error"] and "rebuild" not in response.json()["error"]


def test_ingest_refuses_an_id_no_lookup_would_take(tmp_path: Path) -> None:
    source = tmp_path / "long-id.jsonl"
    rows = [{"id": "x" * (MAX_KEY_CHARS + 1), "abstract": PAPERS["fed"]}, {"id": "ok", "abstract": PAPERS["rl"]}]
    source.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    with pytest.raises(Exception, match=r"long-id\.jsonl:line 1: an id of 1,001 characters \(field 'id'; the limit"):
        read_sources([str(source)])
    assert [r.external_id for r in read_sources([str(source)], skip_bad=True).records] == ["ok"]


# ------------------------------------------------------------------ NaN and infinities


# Before: click's float read "nan" and "inf"; a NaN floor dropped every hit: "no results", exit 0.
@pytest.mark.parametrize("value", ["nan", "NaN", "inf", "-inf", "Infinity", "1e999"])
@pytest.mark.parametrize("command", [["query", "federated privacy"], ["related", "p0"]])
def test_nan_and_infinities_are_refused_by_the_cli(
    built: Path, fake: FakeEmbedder, command: list[str], value: str
) -> None:
    result = run([*command, "--min-score", value, "--index", str(built)], fake)
    assert_one_line_error(result, f"--min-score must be a finite number, got {value!r}")


def test_a_finite_min_score_still_works(built: Path, fake: FakeEmbedder) -> None:
    result = run(["query", "federated privacy", "--min-score", "-1e3", "--index", str(built), "-k", "1"], fake)
    assert result.exit_code == 0 and "Federated" in result.stdout


def test_the_library_refuses_a_nan_floor(built: Path, fake: FakeEmbedder) -> None:
    with Index.open(built, embedder=fake) as idx:
        for bad in (math.nan, math.inf, -math.inf):
            with pytest.raises(QueryError, match="min_score must be a finite number"):
                idx.search("federated privacy", min_score=bad)


def _is_float(kind: object) -> bool:
    return kind is float or float in typing.get_args(kind)


def test_every_float_field_on_every_face_refuses_nan_and_infinities() -> None:
    from semsearch.faces.cli.common import click_type

    seen = []
    for op in OPERATIONS:
        for face in FACES:
            for param in op.params(face):
                if not _is_float(param.base):
                    continue
                seen.append((op.name, face, param.field))
                if face == CLI:
                    kind = click_type(param)
                    for bad in ("nan", "inf", "-inf"):
                        with pytest.raises(Exception, match="must be a finite number"):
                            kind.convert(bad, None, None)
                    assert kind.convert("0.25", None, None) == 0.25
                    continue
                pydantic = pytest.importorskip("pydantic")
                if face == HTTP:
                    pytest.importorskip("fastapi")
                    from semsearch.faces.http_ops import http_parameter

                    kind = typing.Annotated[param.type, http_parameter(param).default]
                else:
                    pytest.importorskip("mcp")
                    from semsearch.faces.mcp_tools import mcp_type

                    kind = mcp_type(param)
                adapter = pydantic.TypeAdapter(kind)
                for bad in (math.nan, math.inf, -math.inf, "nan"):
                    with pytest.raises(pydantic.ValidationError, match="finite number"):
                        adapter.validate_python(bad)
                assert adapter.validate_python(0.25) == 0.25
    assert ("search", CLI, "min_score") in seen and ("search", HTTP, "min_score") in seen


# ------------------------------------------------------------------ an abstract too long to be one


def _long_source(tmp_path: Path, length: int) -> Path:
    source = tmp_path / "long.jsonl"
    text = ("federated privacy gradient leakage " * (length // 35 + 1))[:length].strip().ljust(length, "z")
    rows = [{"id": "long", "title": "A Full Text", "abstract": text}, {"id": "ok", "abstract": PAPERS["rl"]}]
    source.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return source


# Before: nothing bounded an abstract; a 100 KB one was read and encoded (12 s of sentences per build).
def test_an_abstract_past_the_cap_is_a_bad_record(tmp_path: Path, fake: FakeEmbedder) -> None:
    source = _long_source(tmp_path, MAX_ABSTRACT_CHARS + 1)
    index = tmp_path / "idx"
    refused = run(["index", str(source), "--index", str(index), "-q"], fake)
    assert_one_line_error(
        refused, "long.jsonl:line 1: an abstract of 20,001 characters (the limit is 20,000", "--skip-bad skips it"
    )
    assert not index.exists()

    skipped = run(["index", str(source), "--index", str(index), "--skip-bad", "--json"], fake)
    assert skipped.exit_code == 0, skipped.output
    assert "long.jsonl:line 1: an abstract of 20,001 characters" in skipped.stderr
    assert json.loads(skipped.stdout.strip().splitlines()[-1])["documents"] == 1
    assert all(len(t) <= MAX_ABSTRACT_CHARS for call in fake.calls for t in call)


def test_an_abstract_at_the_cap_is_read(tmp_path: Path) -> None:
    records = read_sources([str(_long_source(tmp_path, MAX_ABSTRACT_CHARS))]).records
    assert sorted(len(r.text) for r in records)[-1] == MAX_ABSTRACT_CHARS


def test_the_cap_holds_for_every_format(tmp_path: Path) -> None:
    seed = tmp_path / "papers.txt"
    seed.write_text("Papers\n\n" + "word " * 5_000 + "\n\n" + PAPERS["rl"] + "\n", encoding="utf-8")  # 24,999
    with pytest.raises(Exception, match=r"papers\.txt:paragraph 1: an abstract of 24,999 characters"):
        read_sources([str(seed)])
    result = read_sources([str(seed)], skip_bad=True)
    assert [r.text for r in result.records] == [PAPERS["rl"]]
    assert result.files[0].records == 1 and len(result.skipped) == 1


def test_an_unreadable_encoder_file_is_not_called_damage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Permissions or an I/O error on the model file: one line naming it, and no "rebuild" (nothing is damaged)."""
    import errno

    from semsearch.core.errors import IndexReadError
    from semsearch.encode import onnx_backend

    model = tmp_path / "model.int8.onnx"
    model.write_bytes(b"onnx")

    def refuse(self: Path) -> bytes:
        raise PermissionError(errno.EACCES, "Permission denied", str(self))

    monkeypatch.setattr(Path, "read_bytes", refuse)
    with pytest.raises(IndexReadError) as caught:
        onnx_backend._listed_bytes(tmp_path, model.name, {"size": 4})
    assert str(caught.value) == f"cannot read the ONNX encoder file {model}: Permission denied"
    assert "rebuild" not in str(caught.value)

