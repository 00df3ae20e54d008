"""CLI behaviour with the fake encoder: commands, output formats, and every bad-input path."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from click.testing import Result

from tests.helpers import PAPERS, FakeEmbedder, assert_one_line_error, run, snapshot

# ------------------------------------------------------------------ happy paths


def test_index_json_summary(tmp_path: Path, small_corpus: Path, fake: FakeEmbedder) -> None:
    result = run(["index", str(small_corpus), "--index", str(tmp_path / "idx"), "--json"], fake)
    assert result.exit_code == 0, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1
    summary = json.loads(lines[0])
    assert summary["read"] == 6
    assert summary["documents"] == 5
    assert summary["duplicates"] == 1
    assert summary["near_duplicates"] == 0
    assert summary["encoded"] == 5
    assert summary["removed"] == 0
    assert summary["seconds"] >= 0


def test_index_plain_summary(tmp_path: Path, small_corpus: Path, fake: FakeEmbedder) -> None:
    result = run(["index", str(small_corpus), "--index", str(tmp_path / "idx")], fake)
    assert result.exit_code == 0, result.output
    assert "read 6 abstracts from 1 file: 5 documents (1 duplicate," in result.output
    assert "encoded: 5" in result.output


def test_index_defaults_to_seeds_dir(tmp_path: Path, seeds_copy: Path, fake: FakeEmbedder, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SEMSEARCH_INDEX", raising=False)
    result = run(["index", "--json"], fake)
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert (summary["read"], summary["documents"], summary["duplicates"]) == (95, 91, 4)
    assert (tmp_path / "indexes" / "default" / "CURRENT").is_file()


def test_index_env_var_names_index(tmp_path: Path, small_corpus: Path, fake: FakeEmbedder, monkeypatch) -> None:
    monkeypatch.setenv("SEMSEARCH_INDEX", str(tmp_path / "envidx"))
    assert run(["index", str(small_corpus), "-q"], fake).exit_code == 0
    result = run(["query", "federated privacy", "--json"], fake)
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)[0]["text"] == PAPERS["fed"]


@pytest.mark.parametrize("fmt", ["table", "json", "jsonl"])
def test_query_formats(built: Path, fake: FakeEmbedder, fmt: str) -> None:
    flags = {"table": [], "json": ["--json"], "jsonl": ["--jsonl"]}[fmt]
    result = run(
        ["query", "differential privacy for federated clients", "-k", "3", "--index", str(built), *flags],
        fake,
    )
    assert result.exit_code == 0, result.output
    if fmt == "json":
        hits = json.loads(result.output)
    elif fmt == "jsonl":
        hits = [json.loads(line) for line in result.output.strip().splitlines()]
    else:
        assert result.output.lstrip().startswith("1. ")
        assert "papers.txt:paragraph 1" in result.output
        return
    assert len(hits) == 3
    assert [h["rank"] for h in hits] == [1, 2, 3]
    assert hits[0]["text"] == PAPERS["fed"]
    assert {"id", "score", "title", "text", "sources", "label"} <= set(hits[0])
    assert hits[0]["score"] >= hits[1]["score"] >= hits[2]["score"]
    # The duplicate paragraph (6) was merged into the first: both places are remembered.
    assert [(s["kind"], s["number"]) for s in hits[0]["sources"]] == [("paragraph", 1), ("paragraph", 6)]


def test_query_reads_stdin(built: Path, fake: FakeEmbedder) -> None:
    result = run(["query", "-", "--index", str(built), "--json", "-k", "1"], fake, input="robot navigation policy\n")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)[0]["text"] == PAPERS["rl"]


def test_query_k_larger_than_index(built: Path, fake: FakeEmbedder) -> None:
    result = run(["query", "graph", "-k", "50", "--index", str(built), "--json"], fake)
    assert result.exit_code == 0, result.output
    assert len(json.loads(result.output)) == 5


def test_related_by_id_excludes_itself(built: Path, fake: FakeEmbedder) -> None:
    hits = json.loads(run(["query", "graph neural networks", "--index", str(built), "--json", "-k", "1"], fake).output)
    doc_id = hits[0]["id"]
    result = run(["related", doc_id, "--index", str(built), "--json"], fake)
    assert result.exit_code == 0, result.output
    related = json.loads(result.output)
    assert len(related) == 4
    assert doc_id not in {h["id"] for h in related}


def test_related_by_text_and_file_exclude_the_paper(built: Path, fake: FakeEmbedder, tmp_path: Path) -> None:
    result = run(["related", "--text", PAPERS["vision"], "--index", str(built), "--json"], fake)
    assert result.exit_code == 0, result.output
    texts = [h["text"] for h in json.loads(result.output)]
    assert PAPERS["vision"] not in texts and len(texts) == 4
    # A re-wrapped copy in a file is the same paper too.
    path = tmp_path / "abstract.txt"
    path.write_text(PAPERS["vision"].replace(" of ", "\nof "), encoding="utf-8")
    result = run(["related", "--file", str(path), "--index", str(built), "--jsonl", "-k", "2"], fake)
    assert result.exit_code == 0, result.output
    texts = [json.loads(line)["text"] for line in result.output.strip().splitlines()]
    assert PAPERS["vision"] not in texts and len(texts) == 2


def test_info(built: Path, fake: FakeEmbedder) -> None:
    result = run(["info", "--index", str(built)])
    assert result.exit_code == 0, result.output
    for fragment in (
        "model:",
        "fake-bow",
        "64-d",
        "documents:",
        "5",
        "size on disk:",
        "built at:",
        "papers.txt",
    ):
        assert fragment in result.output
    facts = json.loads(run(["info", "--index", str(built), "--json"]).output)
    assert facts["documents"] == 5 and facts["dimension"] == 64 and facts["read"] == 6
    assert facts["sources"][0]["records"] == 6


def test_help_teaches() -> None:
    result = run(["--help"])
    assert result.exit_code == 0
    for command in ("index", "query", "related", "info"):
        assert command in result.output
    assert "cosine" in run(["query", "--help"]).output
    assert "JSONL" in run(["index", "--help"]).output


# ------------------------------------------------------------------ bad input: index


def _index_bad(tmp_path: Path, fake: FakeEmbedder, built: Path, *sources: str, extra: tuple[str, ...] = ()) -> Result:
    before = snapshot(built)
    result = run(["index", *sources, "--index", str(built), *extra], fake)
    assert snapshot(built) == before, "a failed build changed the index on disk"
    return result


def test_missing_path(tmp_path: Path, fake: FakeEmbedder, built: Path) -> None:
    result = _index_bad(tmp_path, fake, built, str(tmp_path / "nope.txt"))
    assert_one_line_error(result, "nope.txt")


def test_unreadable_file(tmp_path: Path, fake: FakeEmbedder, built: Path) -> None:
    import os

    if os.geteuid() == 0:
        pytest.skip("root reads files regardless of permissions")
    path = tmp_path / "locked.txt"
    path.write_text("H\n\nabstract text here\n")
    path.chmod(0)
    assert_one_line_error(_index_bad(tmp_path, fake, built, str(path)), "locked.txt")


def test_empty_file(tmp_path: Path, fake: FakeEmbedder, built: Path) -> None:
    path = tmp_path / "empty.txt"
    path.write_text("")
    assert_one_line_error(_index_bad(tmp_path, fake, built, str(path)), "empty.txt")


def test_file_with_no_abstracts(tmp_path: Path, fake: FakeEmbedder, built: Path) -> None:
    path = tmp_path / "header_only.txt"
    path.write_text("NeurIPS 2025 Papers\n\n\n")
    assert_one_line_error(_index_bad(tmp_path, fake, built, str(path)), "header_only.txt")


def test_binary_file(tmp_path: Path, fake: FakeEmbedder, built: Path) -> None:
    path = tmp_path / "blob.txt"
    path.write_bytes(b"\x00\x01\x02PNG\x00" * 100)
    assert_one_line_error(_index_bad(tmp_path, fake, built, str(path)), "blob.txt", "binary")


def test_malformed_json_line_names_file_and_line(tmp_path: Path, fake: FakeEmbedder, built: Path) -> None:
    path = tmp_path / "bad.jsonl"
    good = json.dumps({"title": "T", "abstract": PAPERS["graph"]})
    path.write_text("\n".join([good, json.dumps({"abstract": PAPERS["rl"]}), '{"abstract": "oops', good]) + "\n")
    assert_one_line_error(_index_bad(tmp_path, fake, built, str(path)), "bad.jsonl", "line 3")
    # --skip-bad reports the line and builds from the rest.
    result = run(["index", str(path), "--index", str(tmp_path / "other"), "--skip-bad", "--json"], fake)
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["read"] == 3 and summary["documents"] == 2
    assert any("line 3" in s for s in summary["skipped"])


def test_unknown_encoding(tmp_path: Path, fake: FakeEmbedder, built: Path) -> None:
    path = tmp_path / "weird.txt"
    # Invalid UTF-8 and invalid GB18030 (0x80 and 0xFF are not lead bytes there), no NULs.
    path.write_bytes(b"Header\n\n" + b"abstract \x80\xff\x80\xff text " * 20)
    assert_one_line_error(_index_bad(tmp_path, fake, built, str(path)), "weird.txt", "encoding")


def test_corrupt_gzip(tmp_path: Path, fake: FakeEmbedder, built: Path) -> None:
    path = tmp_path / "papers.jsonl.gz"
    path.write_bytes(gzip.compress(b'{"abstract": "x y z"}\n')[:15])
    assert_one_line_error(_index_bad(tmp_path, fake, built, str(path)), "papers.jsonl.gz")


def test_index_with_other_model_than_built(tmp_path: Path, small_corpus: Path, built: Path) -> None:
    other = FakeEmbedder(dimension=32, name="other-model", fingerprint="other001")
    result = _index_bad(tmp_path, other, built, str(small_corpus))
    assert_one_line_error(result, "fake-bow", "--full")
    # --full switches models.
    result = run(["index", str(small_corpus), "--index", str(built), "--full", "--json"], other)
    assert result.exit_code == 0, result.output


def test_bad_batch_size(tmp_path: Path, small_corpus: Path, fake: FakeEmbedder) -> None:
    result = run(["index", str(small_corpus), "--index", str(tmp_path / "i"), "--batch-size", "0"], fake)
    assert_one_line_error(result, "--batch-size")
    assert not (tmp_path / "i").exists()


# ------------------------------------------------------------------ bad input: query / related / info


def test_query_without_index_names_the_build_command(tmp_path: Path, fake: FakeEmbedder) -> None:
    result = run(["query", "anything", "--index", str(tmp_path / "missing")], fake)
    assert_one_line_error(result, "no index", "semsearch index")
    assert_one_line_error(run(["info", "--index", str(tmp_path / "missing")]), "semsearch index")


@pytest.mark.parametrize("text", ["", "   ", "\n\t"])
def test_empty_query(built: Path, fake: FakeEmbedder, text: str) -> None:
    assert_one_line_error(run(["query", text, "--index", str(built)], fake), "empty")


@pytest.mark.parametrize("k", ["0", "-3"])
def test_bad_k(built: Path, fake: FakeEmbedder, k: str) -> None:
    assert_one_line_error(run(["query", "graph", "-k", k, "--index", str(built)], fake), "k must be")
    doc = json.loads(run(["query", "graph", "--json", "--index", str(built)], fake).output)[0]["id"]
    assert_one_line_error(run(["related", doc, "-k", k, "--index", str(built)], fake), "k must be")


def test_unknown_id(built: Path, fake: FakeEmbedder) -> None:
    assert_one_line_error(run(["related", "deadbeefdeadbeef", "--index", str(built)], fake), "deadbeefdeadbeef")


def test_related_needs_exactly_one_input(built: Path, fake: FakeEmbedder) -> None:
    assert_one_line_error(run(["related", "--index", str(built)], fake), "exactly one")
    assert_one_line_error(run(["related", "abc", "--text", "x", "--index", str(built)], fake), "exactly one")


def test_related_missing_file(built: Path, fake: FakeEmbedder, tmp_path: Path) -> None:
    assert_one_line_error(run(["related", "--file", str(tmp_path / "no.txt"), "--index", str(built)], fake), "no.txt")


def test_query_with_other_model(built: Path) -> None:
    other = FakeEmbedder(dimension=32, name="other-model", fingerprint="other001")
    assert_one_line_error(run(["query", "graph", "--index", str(built)], other), "fake-bow")
    assert_one_line_error(
        run(["query", "graph", "--index", str(built), "--model", "all-mpnet-base-v2"], FakeEmbedder()),
        "fake-bow",
    )


def _live(index: Path) -> Path:
    return index / (index / "CURRENT").read_text().strip()


def test_newer_format_version(built: Path, fake: FakeEmbedder) -> None:
    manifest_path = _live(built) / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["format_version"] = 99
    manifest_path.write_text(json.dumps(manifest))
    assert_one_line_error(run(["query", "graph", "--index", str(built)], fake), "format version 99", "upgrade")
    assert_one_line_error(run(["info", "--index", str(built)]), "format version 99")


@pytest.mark.parametrize("name", ["vectors.npy", "docs.sqlite"])  # a flat version's index is built from vectors.npy
@pytest.mark.parametrize("damage", ["truncate", "garble"])
def test_corrupt_index_files(built: Path, fake: FakeEmbedder, name: str, damage: str) -> None:
    path = _live(built) / name
    data = path.read_bytes()
    if damage == "truncate":
        path.write_bytes(data[: len(data) // 2])
    else:
        path.write_bytes(b"\x13" * len(data))  # same size: only the content check can catch it
    result = run(["query", "graph", "--index", str(built)], fake)
    assert_one_line_error(result, name, "semsearch index --full")


def test_missing_manifest(built: Path, fake: FakeEmbedder) -> None:
    (_live(built) / "manifest.json").unlink()
    assert_one_line_error(run(["query", "graph", "--index", str(built)], fake), "semsearch index --full")


def test_json_and_jsonl_together(built: Path, fake: FakeEmbedder) -> None:
    assert_one_line_error(run(["query", "graph", "--json", "--jsonl", "--index", str(built)], fake), "--json")


def _tty_query(index: Path, env: dict[str, str]) -> str:
    """`semsearch query` run on a pseudo-terminal (so colour is on unless told otherwise): what it printed."""
    import os
    import pty
    import subprocess
    import sys

    leader, follower = pty.openpty()
    args = [sys.executable, "-m", "semsearch", "query", "graph", "--mode", "lexical", "-k", "2", "--index", str(index)]
    proc = subprocess.run(args, stdout=follower, stderr=subprocess.PIPE, env=env, timeout=120, check=False)
    os.close(follower)
    out = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the terminal is closed and drained
            break
        if not chunk:
            break
        out += chunk
    os.close(leader)
    assert proc.returncode == 0, proc.stderr
    return out.decode("utf-8", "replace")


def test_no_color_turns_the_table_plain(built: Path) -> None:
    import os

    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    assert "\x1b[" in _tty_query(built, env)  # a terminal gets colour
    plain = _tty_query(built, {**env, "NO_COLOR": "1"})
    assert "\x1b[" not in plain and " 1. " in plain
    assert "\x1b[" in _tty_query(built, {**env, "NO_COLOR": ""})  # set but empty: no-color.org says ignore it


def test_related_help_says_its_scores_are_cosines() -> None:
    text = " ".join(run(["related", "--help"]).output.split())
    assert "mode's units" not in text and "(a cosine, -1..1)" in text
    assert "mode's units" in " ".join(run(["query", "--help"]).output.split())
