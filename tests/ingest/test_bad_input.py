"""The bad-input suite: each case gives one line on stderr and exit 2, and leaves the index on disk unchanged.

Huge inputs are generated in the test's temporary folder, streaming; the reader must not read them whole
(peak memory is measured in a subprocess).
"""

from __future__ import annotations

import errno
import gzip
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result

from semsearch.core.fileio import (
    DECOMPRESSED_ENV,
    MAX_DECOMPRESSED_BYTES,
    MAX_RATIO,
    RATIO_FLOOR,
    decompressed_limit,
)
from semsearch.dedup.duplicates import doc_id_for, text_hash
from semsearch.ingest.guards import MAX_LINE_BYTES
from semsearch.ingest.sources import read_file
from tests.helpers import PAPERS, REPO, FakeEmbedder, assert_one_line_error, run, snapshot

MB = 2**20


def refused(result: Result, index: Path, before: dict[str, str], *fragments: str) -> None:
    """One line, exit 2, and not one byte of the index changed."""
    assert_one_line_error(result, *fragments)
    assert snapshot(index) == before


def index_with(source: Path, index: Path, fake: FakeEmbedder, *extra: str) -> tuple[Result, dict[str, str]]:
    before = snapshot(index)
    return run(["index", str(source), "--index", str(index), "-q", *extra], fake), before


def write_repeated(path: Path, chunk: bytes, times: int, *, opener: Callable[..., object] = open) -> Path:
    """A big file written a chunk at a time (never held in memory)."""
    with opener(path, "wb") as fh:  # type: ignore[operator]
        for _ in range(times):
            fh.write(chunk)  # type: ignore[attr-defined]
    return path


def good_jsonl_rows(n: int = 3) -> str:
    texts = list(PAPERS.values())
    return "".join(
        json.dumps({"id": f"g{i}", "abstract": texts[i % len(texts)] + f" Variant {i}."}) + "\n" for i in range(n)
    )


# ------------------------------------------------------------------ huge and many


def test_directory_of_ten_thousand_empty_files(built: Path, tmp_path: Path, fake: FakeEmbedder) -> None:
    folder = tmp_path / "empties"
    folder.mkdir()
    for i in range(10_000):
        (folder / f"{i:05d}.txt").touch()
    result, before = index_with(folder, built, fake)
    refused(result, built, before, "00000.txt", "empty file")


def test_single_line_file_of_200_mb(built: Path, tmp_path: Path, fake: FakeEmbedder) -> None:
    big = write_repeated(tmp_path / "one-line.txt", b"a" * MB, 200)
    result, before = index_with(big, built, fake)
    refused(result, built, before, "one-line.txt", "a line of more than 16 MB")


def test_jsonl_line_of_50_mb(built: Path, tmp_path: Path, fake: FakeEmbedder) -> None:
    path = tmp_path / "huge.jsonl"
    with path.open("w", encoding="utf-8") as fh:
        fh.write(good_jsonl_rows())
        fh.write('{"id": "big", "abstract": "')
        for _ in range(50):
            fh.write("word " * (MB // 5))
        fh.write('"}\n')
    result, before = index_with(path, built, fake)
    refused(result, built, before, "huge.jsonl", "a line of more than 16 MB", "JSONL")


def test_gzip_that_inflates_to_one_huge_line(built: Path, tmp_path: Path, fake: FakeEmbedder) -> None:
    path = write_repeated(tmp_path / "bomb.txt.gz", b"b" * MB, 64, opener=gzip.open)
    assert path.stat().st_size < MB
    result, before = index_with(path, built, fake)
    refused(result, built, before, "bomb.txt.gz", "a line of more than 16 MB")


@pytest.mark.parametrize("gz", [False, True])
def test_reading_a_huge_line_keeps_memory_bounded(tmp_path: Path, gz: bool) -> None:
    name = "one-line.txt.gz" if gz else "one-line.txt"
    big = write_repeated(tmp_path / name, b"a" * MB, 200, opener=gzip.open if gz else open)
    small = tmp_path / "small.txt"
    small.write_text("Papers\n\n" + PAPERS["fed"] + "\n", encoding="utf-8")
    probe = (
        "import resource, sys\n"
        "from semsearch.ingest.sources import read_file\n"
        "from semsearch.core.errors import InputError\n"
        "try:\n"
        "    read_file(__import__('pathlib').Path(sys.argv[1]))\n"
        "    print('read', end=' ')\n"
        "except InputError as exc:\n"
        "    print('refused', end=' ')\n"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n"  # KiB on Linux
    )

    def peak(path: Path) -> tuple[str, int]:
        out = subprocess.run(
            [sys.executable, "-c", probe, str(path)],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
        assert out.returncode == 0, out.stderr
        verdict, kib = out.stdout.split()
        return verdict, int(kib) * 1024

    base_verdict, base = peak(small)
    verdict, used = peak(big)
    assert (base_verdict, verdict) == ("read", "refused")
    # Reading the 200 MB whole would cost 200 MB (bytes) and more (text); the guard holds one 1 MB chunk.
    assert used - base < 32 * MB, (used, base)


def test_csv_with_an_unterminated_quote(built: Path, tmp_path: Path, fake: FakeEmbedder) -> None:
    texts = list(PAPERS.values())
    rows = [f"p{i},Title {i},{texts[i]}" for i in range(4)]
    rows[1] = f'p1,"Stray quote in title 1,{texts[1]}'
    path = tmp_path / "stray.csv"
    path.write_text("id,title,abstract\n" + "\n".join(rows) + "\n", encoding="utf-8")
    result, before = index_with(path, built, fake)
    refused(result, built, before, "stray.csv:line 3: unterminated quote", "(row 2)")
    skipped = run(["index", str(path), "--index", str(built), "--skip-bad", "--json"], fake)
    assert skipped.exit_code == 0, skipped.output
    assert "stray.csv:line 3: unterminated quote" in skipped.output and "semsearch: skipped " in skipped.output
    assert json.loads(skipped.stdout.strip().splitlines()[-1])["documents"] == 3


def gzip_bomb(path: Path, mib: int) -> Path:
    """A gzip file that expands to ``mib`` MiB of one JSONL record repeated: one compressed 1 MiB member, repeated."""
    line = b'{"abstract": "' + b"0 " * 500 + b'"}\n'
    member = gzip.compress(line * (MB // len(line)), 9)
    return write_repeated(path, member, mib)


def peak_read(path: Path, env: dict[str, str] | None = None) -> tuple[str, int, str]:
    """Read one file in a fresh interpreter: ("read" or "refused", its peak memory in bytes, the error)."""
    probe = (
        "import resource, sys\n"
        "from semsearch.ingest.sources import read_file\n"
        "from semsearch.core.errors import InputError\n"
        "msg = ''\n"
        "try:\n"
        "    read_file(__import__('pathlib').Path(sys.argv[1]))\n"
        "    verdict = 'read'\n"
        "except InputError as exc:\n"
        "    verdict, msg = 'refused', str(exc)\n"
        "print(verdict, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, msg)\n"  # KiB on Linux
    )
    out = subprocess.run(
        [sys.executable, "-c", probe, str(path)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=path.parent,  # the error names the file relative to it
        env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
    )
    assert out.returncode == 0, out.stderr
    verdict, kib, message = out.stdout.rstrip("\n").split(" ", 2)
    return verdict, int(kib) * 1024, message


def test_a_gzip_bomb_is_refused_in_bounded_memory(tmp_path: Path) -> None:
    bomb = gzip_bomb(tmp_path / "bomb.jsonl.gz", 256)
    assert bomb.stat().st_size < MB  # under 1 MB on disk, 256 MB of text inside
    small = tmp_path / "small.jsonl.gz"
    small.write_bytes(gzip.compress(good_jsonl_rows().encode()))
    base_verdict, base, _ = peak_read(small)
    verdict, used, message = peak_read(bomb)
    assert (base_verdict, verdict) == ("read", "refused")
    assert message.startswith("bomb.jsonl.gz: decompresses to more than 64 MB (over 50x its compressed size")
    assert DECOMPRESSED_ENV in message
    # Inflating it whole cost 256 MB (bytes) and as much again (text); the reader stops at the 64 MB floor.
    assert used - base < 100 * MB, (used, base)


def test_a_gzip_bomb_through_the_cli(built: Path, tmp_path: Path, fake: FakeEmbedder) -> None:
    result, before = index_with(gzip_bomb(tmp_path / "bomb.jsonl.gz", 80), built, fake)
    refused(result, built, before, "bomb.jsonl.gz: decompresses to more than 64 MB", DECOMPRESSED_ENV)


def test_the_decompression_limit_can_be_set(
    built: Path, tmp_path: Path, fake: FakeEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 3.4 MB of records, compressed about thirtyfold: well within the default limits.
    text = good_jsonl_rows(20_000).encode()
    assert 3 * MB < len(text) < 4 * MB
    source = tmp_path / "papers.jsonl.gz"
    source.write_bytes(gzip.compress(text))
    monkeypatch.setenv(DECOMPRESSED_ENV, "1")
    result, before = index_with(source, built, fake)
    refused(result, built, before, "papers.jsonl.gz: decompresses to more than 1 MB", f"{DECOMPRESSED_ENV}=1")
    monkeypatch.setenv(DECOMPRESSED_ENV, "one")
    result, before = index_with(source, built, fake)
    refused(result, built, before, f"{DECOMPRESSED_ENV} must be a positive number of MB, got 'one'")
    for value in ("3.5", None):
        if value is None:
            monkeypatch.delenv(DECOMPRESSED_ENV)
        else:
            monkeypatch.setenv(DECOMPRESSED_ENV, value)
        records, _, _ = read_file(source)
        assert len(records) == 20_000


def test_decompression_limits_follow_the_compressed_size() -> None:
    assert decompressed_limit(MB, None)[0] == RATIO_FLOOR  # a small file may still expand to 64 MB
    assert decompressed_limit(10 * MB, None)[0] == MAX_RATIO * 10 * MB
    # The largest corpus we keep (80 MB, 280 MB inside) stays readable; the size cap applies above.
    assert decompressed_limit(80 * MB, None)[0] == MAX_DECOMPRESSED_BYTES > 280 * MB
    assert decompressed_limit(80 * MB, "4096")[0] == 4096 * MB
    for bad in ("0", "-1", "nan", "inf", "many"):
        with pytest.raises(ValueError):
            decompressed_limit(MB, bad)


# ------------------------------------------------------------------ bytes and encodings


def test_raw_nul_byte_inside_a_json_string(built: Path, tmp_path: Path, fake: FakeEmbedder) -> None:
    path = tmp_path / "nul.jsonl"
    # Past the binary probe (the first 8 KB), so the JSON reader meets it inside a string.
    padding = good_jsonl_rows(60)
    assert len(padding) > 8192
    path.write_bytes(padding.encode() + b'{"id": "z", "abstract": "bad \x00 byte"}\n')
    result, before = index_with(path, built, fake)
    refused(result, built, before, "nul.jsonl", "line 61")


def test_nul_byte_near_the_start_is_binary(built: Path, tmp_path: Path, fake: FakeEmbedder) -> None:
    path = tmp_path / "nul-early.jsonl"
    path.write_bytes(b'{"id": "z", "abstract": "bad \x00 byte"}\n')
    result, before = index_with(path, built, fake)
    refused(result, built, before, "nul-early.jsonl", "binary file")


def test_mixed_encodings_in_one_folder(built: Path, tmp_path: Path, fake: FakeEmbedder) -> None:
    folder = tmp_path / "mixed"
    folder.mkdir()
    (folder / "a-utf8.txt").write_text("Papers\n\n" + PAPERS["fed"] + " Naïve café.\n", encoding="utf-8")
    (folder / "b-utf16.txt").write_text("Papers\n\n" + PAPERS["rl"] + "\n", encoding="utf-16")
    (folder / "c-gb18030.txt").write_text("论文\n\n" + PAPERS["graph"] + " 图神经网络。\n", encoding="gb18030")
    # Every decodable encoding is read as it is...
    fresh = tmp_path / "mixed-index"
    ok = run(["index", str(folder), "--index", str(fresh), "--json"], fake)
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.stdout)["documents"] == 3
    # ...and one that is none of them is named, with the index left as it was.
    (folder / "d-latin1.txt").write_bytes("Papers\n\nCaf\xe9 \xff na\xefve.\n".encode("latin-1"))
    result, before = index_with(folder, fresh, fake)
    refused(result, fresh, before, "d-latin1.txt", "cannot detect the text encoding")


# ------------------------------------------------------------------ odd file system objects


def test_symlink_loop_in_a_source_folder(built: Path, tmp_path: Path, fake: FakeEmbedder) -> None:
    folder = tmp_path / "loopy"
    folder.mkdir()
    (folder / "good.txt").write_text("Papers\n\n" + PAPERS["llm"] + "\n", encoding="utf-8")
    os.symlink("loop.txt", folder / "loop.txt")
    result, before = index_with(folder, built, fake)
    refused(result, built, before, "loop.txt", "symbolic link loop")


def test_symlink_loop_named_as_the_source(built: Path, tmp_path: Path, fake: FakeEmbedder) -> None:
    os.symlink("self.txt", tmp_path / "self.txt")
    result, before = index_with(tmp_path / "self.txt", built, fake)
    refused(result, built, before, "self.txt")


def test_dangling_symlink_in_a_source_folder(built: Path, tmp_path: Path, fake: FakeEmbedder) -> None:
    folder = tmp_path / "dangling"
    folder.mkdir()
    (folder / "good.txt").write_text("Papers\n\n" + PAPERS["llm"] + "\n", encoding="utf-8")
    os.symlink(tmp_path / "gone.txt", folder / "moved.txt")
    result, before = index_with(folder, built, fake)
    refused(result, built, before, "moved.txt", "broken symbolic link")


def test_directory_symlink_loop_is_not_followed(tmp_path: Path, fake: FakeEmbedder) -> None:
    folder = tmp_path / "tree"
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "good.txt").write_text("Papers\n\n" + PAPERS["llm"] + "\n", encoding="utf-8")
    os.symlink("..", folder / "sub" / "up")  # a walk that followed links would never end
    result = run(["index", str(folder), "--index", str(tmp_path / "i"), "--json"], fake)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["documents"] == 1


def test_fifo_as_source(built: Path, tmp_path: Path, fake: FakeEmbedder) -> None:
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    result, before = index_with(fifo, built, fake)  # reading it would block forever
    refused(result, built, before, "pipe.jsonl", "is a FIFO, not a regular file")


# ------------------------------------------------------------------ records


@pytest.mark.parametrize(("name", "header"), [("header.csv", "id,title,abstract\n"), ("header.tsv", "id\tabstract\n")])
def test_table_with_a_header_only(built: Path, tmp_path: Path, fake: FakeEmbedder, name: str, header: str) -> None:
    path = tmp_path / name
    path.write_text(header, encoding="utf-8")
    result, before = index_with(path, built, fake)
    refused(result, built, before, name, "no abstracts found")


def test_duplicate_ids_with_different_texts(built: Path, tmp_path: Path, fake: FakeEmbedder) -> None:
    path = tmp_path / "dups.jsonl"
    rows = [{"id": "p1", "abstract": PAPERS["fed"]}, {"id": "p1", "abstract": PAPERS["vision"]}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    result, before = index_with(path, built, fake)
    refused(result, built, before, "dups.jsonl:line 2", "id 'p1' was already given to another abstract", "line 1")
    # --skip-bad keeps the first and names the one it skipped.
    skipped = run(["index", str(path), "--index", str(tmp_path / "i2"), "--skip-bad", "--json"], fake)
    assert skipped.exit_code == 0, skipped.output
    assert json.loads(skipped.stdout.strip().splitlines()[-1])["documents"] == 1
    assert "dups.jsonl:line 2: id 'p1'" in skipped.stderr


def test_duplicate_ids_across_files(built: Path, tmp_path: Path, fake: FakeEmbedder) -> None:
    folder = tmp_path / "two"
    folder.mkdir()
    (folder / "a.jsonl").write_text(json.dumps({"id": "x", "abstract": PAPERS["rl"]}) + "\n", encoding="utf-8")
    (folder / "b.jsonl").write_text(json.dumps({"id": "x", "abstract": PAPERS["llm"]}) + "\n", encoding="utf-8")
    result, before = index_with(folder, built, fake)
    refused(result, built, before, "b.jsonl:line 1", "a.jsonl:line 1")


def test_same_id_same_text_is_one_paper(tmp_path: Path, fake: FakeEmbedder) -> None:
    path = tmp_path / "twice.jsonl"
    row = json.dumps({"id": "p1", "abstract": PAPERS["fed"]}) + "\n"
    path.write_text(row + row, encoding="utf-8")
    result = run(["index", str(path), "--index", str(tmp_path / "i"), "--json"], fake)
    assert result.exit_code == 0 and json.loads(result.stdout)["documents"] == 1


# ------------------------------------------------------------------ models and index folders


def test_model_folder_with_a_tokenizer_but_no_weights(tmp_path: Path, small_corpus: Path) -> None:
    model = tmp_path / "half-model"
    model.mkdir()
    (model / "tokenizer.json").write_text('{"version": "1.0", "model": {"type": "WordLevel", "vocab": {}}}')
    (model / "tokenizer_config.json").write_text("{}")
    index = tmp_path / "never"
    result = CliResult = run(["index", str(small_corpus), "--index", str(index), "--model", str(model), "-q"])
    assert_one_line_error(CliResult, "half-model")
    assert not index.exists()  # a first build that fails leaves nothing behind
    assert "Traceback" not in result.output


def test_current_pointing_outside_the_index(built: Path, tmp_path: Path, fake: FakeEmbedder) -> None:
    outside = tmp_path / "elsewhere"
    (outside / "v-000001-x").mkdir(parents=True)
    (outside / "v-000001-x" / "manifest.json").write_text("{}")
    for pointer in ("../elsewhere/v-000001-x", str(outside / "v-000001-x"), ".."):
        (built / "CURRENT").write_text(pointer + "\n")
        before = snapshot(built)
        refused(run(["query", "privacy", "--index", str(built)], fake), built, before, "CURRENT", "missing version")
        refused(run(["remove", "abcdef", "--index", str(built)], fake), built, before, "CURRENT")


def colliding_texts() -> tuple[str, str]:
    """Two abstracts whose ids share their first 6 hex digits (found by trying numbered texts)."""
    seen: dict[str, str] = {}
    i = 0
    while True:
        text = f"Paper number {i} studies sparse attention in transformers for long documents."
        prefix = doc_id_for(text_hash(text))[:6]
        if prefix in seen:
            return seen[prefix], text
        seen[prefix] = text
        i += 1


def test_id_prefix_matching_two_documents(tmp_path: Path, fake: FakeEmbedder) -> None:
    first, second = colliding_texts()
    path = tmp_path / "pair.txt"
    path.write_text(f"Pairs\n\n{first}\n\n{second}\n\n{PAPERS['fed']}\n", encoding="utf-8")
    index = tmp_path / "pair-index"
    assert run(["index", str(path), "--index", str(index), "-q"], fake).exit_code == 0
    prefix = doc_id_for(text_hash(first))[:6]
    before = snapshot(index)
    refused(
        run(["related", prefix, "--index", str(index)], fake), index, before, "matches several documents", "more digits"
    )
    refused(run(["remove", prefix, "--index", str(index)], fake), index, before)
    # One more digit (where the two differ) picks one.
    whole = doc_id_for(text_hash(first))
    assert run(["related", whole[:12], "--index", str(index), "--json"], fake).exit_code == 0


# ------------------------------------------------------------------ a read-only index directory


@pytest.fixture
def read_only(monkeypatch: pytest.MonkeyPatch) -> Callable[[Path], None]:
    """Make every write below a folder fail as on a read-only filesystem (root ignores chmod)."""

    def install(folder: Path) -> None:
        root = str(folder.resolve())
        real_open, real_mkdir = os.open, os.mkdir
        writes = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND

        def inside(path: object) -> bool:
            return os.path.abspath(os.fspath(path)).startswith(root)  # type: ignore[arg-type]

        def ro_open(path: object, flags: int, *args: object, **kwargs: object) -> int:
            if inside(path) and flags & writes:
                raise OSError(errno.EROFS, os.strerror(errno.EROFS), os.fspath(path))  # type: ignore[arg-type]
            return real_open(path, flags, *args, **kwargs)  # type: ignore[arg-type]

        def ro_mkdir(path: object, *args: object, **kwargs: object) -> None:
            if inside(path):
                raise OSError(errno.EROFS, os.strerror(errno.EROFS), os.fspath(path))  # type: ignore[arg-type]
            real_mkdir(path, *args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(os, "open", ro_open)
        monkeypatch.setattr(os, "mkdir", ro_mkdir)

    return install


def test_read_only_index_answers_queries_and_refuses_builds(
    built: Path, small_corpus: Path, fake: FakeEmbedder, read_only: Callable[[Path], None]
) -> None:
    before = snapshot(built)
    read_only(built)
    query = run(["query", "privacy", "--index", str(built), "--json"], fake)
    assert query.exit_code == 0, query.output
    assert json.loads(query.stdout)
    assert run(["verify", "--index", str(built)], fake).exit_code == 0
    refused(
        run(["index", str(small_corpus), "--index", str(built), "-q"], fake),
        built,
        before,
        "cannot write to",
        "read-only",
        "queries still work",
    )
    doc = json.loads(query.stdout)[0]["id"]
    refused(run(["remove", doc, "--index", str(built)], fake), built, before, "read-only")


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root writes through chmod")
def test_index_folder_without_write_permission(built: Path, small_corpus: Path, fake: FakeEmbedder) -> None:
    before = snapshot(built)
    modes = {p: p.stat().st_mode for p in [built, *built.rglob("*")] if p.is_dir()}
    for p in modes:
        p.chmod(0o555)
    try:
        assert run(["query", "privacy", "--index", str(built)], fake).exit_code == 0
        refused(run(["index", str(small_corpus), "--index", str(built), "-q"], fake), built, before, "cannot write")
    finally:
        for p, mode in modes.items():
            p.chmod(mode)


def test_line_limit_is_what_the_messages_say() -> None:
    assert MAX_LINE_BYTES == 16 * MB
