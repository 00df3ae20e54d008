"""Counts in messages: "1 paper", never "1 papers", on every face (the CLI's lines, the digest, the page)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from semsearch import Index
from semsearch.core.wording import count
from semsearch.curate.digest import Digest, render
from tests.helpers import REPO, FakeEmbedder, run

# Nouns the package counts in what it says; "{n} papers" in a face's f-string is the bug this file guards.
COUNTED = "abstracts|clusters|documents|duplicates|entries|files|hits|papers|queries|records|sections|ties"
FACES = ("semsearch/faces", "semsearch/curate")


def test_count_is_singular_for_exactly_one() -> None:
    assert count(1, "paper") == "1 paper"
    assert count(0, "paper") == "0 papers"
    assert count(2, "file") == "2 files"
    assert count(1, "corpus entry", "corpus entries") == "1 corpus entry"
    assert count(3, "corpus entry", "corpus entries") == "3 corpus entries"
    assert count(157_000, "paper", grouped=True) == "157,000 papers"
    assert count(1, "near-duplicate") == "1 near-duplicate"


def test_no_face_writes_a_bare_count_before_a_plural() -> None:
    """Every counted noun in the faces' and reader's messages goes through ``count`` (or its twin on the page)."""
    bare = re.compile(r"(\{[^{}]+\}|\$\{[^{}]+\})\s+(?:" + COUNTED + r")\b")
    found = []
    for folder in FACES:
        for path in sorted((REPO / folder).rglob("*")):
            if path.suffix not in (".py", ".js", ".html"):
                continue
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
                if bare.search(line) and not line.lstrip().startswith(("#", "//")):
                    found.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    assert found == []


def test_one_file_one_paper_on_the_command_line(tmp_path: Path, fake: FakeEmbedder) -> None:
    source = tmp_path / "one.jsonl"
    rows = [
        {"id": "a", "title": "Private federated learning", "abstract": "Federated learning with differential privacy."},
        {"id": "b", "title": "Robot navigation", "abstract": "A reinforcement learning agent navigates a robot."},
    ]
    source.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    index = tmp_path / "idx"
    built = run(["index", str(source), "--index", str(index)], fake)
    assert built.exit_code == 0, built.output
    assert "read 2 abstracts from 1 file: 2 documents (0 duplicates, 0 near-duplicates merged)" in built.output
    again = run(["index", str(source), "--index", str(index)], fake)
    assert again.output.startswith("up to date: 2 documents from 1 file, "), again.output
    info = run(["info", "--index", str(index)], fake)
    assert re.search(r"sources:\s+1 file\n", info.output), info.output

    with Index.open(index, embedder=fake) as idx:
        first = idx.search("federated privacy", 1)[0].id
    tagged = run(["tag", "add", "liked", first, "--index", str(index)], fake)
    assert "liked: tagged 1 paper (0 were already)" in tagged.output, tagged.output
    again = run(["tag", "add", "liked", first, "--index", str(index)], fake)
    assert "liked: tagged 0 papers (1 was already)" in again.output, again.output
    assert "liked: 1 paper\n" in run(["tag", "list", "--index", str(index)], fake).output
    untagged = run(["tag", "remove", "liked", first, "--index", str(index)], fake)
    assert "liked: untagged 1 paper\n" in untagged.output, untagged.output

    exported = run(["export", first, "--index", str(index), "--out", str(tmp_path / "one.bib")], fake)
    assert f"exported 1 document to {tmp_path / 'one.bib'}" in exported.output, exported.output


def test_a_digest_of_one_paper() -> None:
    made = Digest("daily", "idx", "v-000001", "v-000002", "2026-12-03T00:00:00Z", 1, [], also_new_count=1)
    assert "\n1 paper arrived in idx since v-000001 (now v-000002).\n" in render(made, "md")
    assert ">1 paper arrived in idx since v-000001" in render(made, "html")
    assert "2 papers arrived" in render(replace(made, arrived=2), "md")


def test_the_page_counts_as_python_does() -> None:
    """web/app.js's count is the twin of core.wording.count."""
    node = shutil.which("node") or shutil.which("nodejs")
    if node is None:
        pytest.skip("node is not installed")
    app = (REPO / "semsearch" / "faces" / "web" / "app.js").read_text(encoding="utf-8")
    block = re.search(r"  function count\(.*?\n  }\n", app, re.S)
    assert block is not None
    cases = [[0, "paper"], [1, "paper"], [2, "hit"], [1, "entry", "entries"], [3, "entry", "entries"], [1500, "paper"]]
    script = block.group(0) + (
        "\nlet input = ''; process.stdin.on('data', (d) => (input += d));"
        "\nprocess.stdin.on('end', () => console.log(JSON.stringify(JSON.parse(input).map((c) => count(...c)))));"
    )
    out = subprocess.run([node, "-e", script], input=json.dumps(cases), capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == [count(c[0], *c[1:], grouped=True) for c in cases]  # type: ignore[arg-type]
