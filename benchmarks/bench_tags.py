"""What listing many tags costs: `semsearch tag list` and GET /api/tags with 2,000 and 50,000 tags.

    python -m benchmarks.bench_tags                     # 2,000 and 50,000 tags, one paper each, on the seeds
    python -m benchmarks.bench_tags --counts 1000,10000

Builds a seed index with stand-in vectors (a hashed bag of words: no model), writes a tags file of N tags in one
edit (each tag one seed paper, in turn), then times a new `semsearch tag list --json` process and, in process,
`/api/tags` through the app (when the serve extra is installed), twice: the server keeps its tag store, so the
second listing parses nothing. A baseline in the same run, `semsearch info`, is
what a process costs to start and open the index. Prints one JSON line. Before #37, the tag file was read once per
tag: 2,000 tags took 36–55 s and 50,000 over 10 minutes.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.harness import SEEDS, HashedWords, arguments, build, emit
from semsearch import Index
from semsearch.curate.tags import TagEntry, TagStore


def timed_cli(*args: str) -> float:
    began = time.perf_counter()
    subprocess.run([sys.executable, "-m", "semsearch", *args], check=True, capture_output=True)
    return time.perf_counter() - began


def main() -> None:
    parser = arguments(__doc__.split("\n")[0])
    parser.add_argument("--counts", default="2000,50000", help="comma-separated numbers of tags")
    args = parser.parse_args()
    out: dict[str, object] = {}
    with tempfile.TemporaryDirectory() as tmp:
        index = Path(tmp) / "index"
        build([SEEDS], index, HashedWords())
        with Index.open(index, embedder=HashedWords()) as idx:
            docs = [idx.get(h.id) for h in idx.search("learning", k=50, mode="lexical", explain=False)]
        out["process_baseline_s"] = round(timed_cli("info", "--index", str(index)), 3)
        for count in (int(c) for c in args.counts.split(",")):
            store = TagStore(index)
            with store._editing() as tags:  # one edit: writing N tags one by one would time the writer
                tags.clear()
                for i in range(count):
                    tags[f"t{i:05d}"] = [TagEntry.of(docs[i % len(docs)])]
            figures: dict[str, float] = {
                "cli_tag_list_s": round(timed_cli("tag", "list", "--json", "--index", str(index)), 3),
                "tags_file_mb": round((index / "tags.json").stat().st_size / 1e6, 2),
            }
            try:
                from fastapi.testclient import TestClient

                from semsearch.faces.serve import create_app
            except ImportError:
                pass
            else:
                with TestClient(create_app(index, embedder=HashedWords()), base_url="http://localhost") as client:
                    for key in ("api_tags_s", "api_tags_again_s"):  # again: the server's store parses nothing
                        began = time.perf_counter()
                        listed = client.get("/api/tags").json()
                        figures[key] = round(time.perf_counter() - began, 3)
                        assert len(listed["tags"]) == count
            out[str(count)] = figures
    emit(out, out=args.out)


if __name__ == "__main__":
    main()
