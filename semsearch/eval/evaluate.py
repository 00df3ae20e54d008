"""Retrieval quality on BEIR-format data: nDCG@10, Recall@100 and MRR@10 for each search mode.

The means come with every judged query's own scores (``per_query``), so that two configurations can be
compared query by query (``metrics.paired_difference``; ``semsearch eval --json`` prints them). Corpus
entries that cannot be documents (an empty text and no title, which published collections hold) are skipped
and counted (``skipped_documents``), as ``--skip-bad`` would; title-only entries are kept.
"""

from __future__ import annotations

import gzip
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from semsearch.core.errors import IndexNotFoundError, InputError
from semsearch.core.wording import count
from semsearch.encode.embedder import Embedder
from semsearch.eval.beir import read_qrels, read_queries
from semsearch.eval.metrics import mean_scores, per_query
from semsearch.eval.tune import check_tunable, tune_fusion, tuned_version
from semsearch.query.search import Index
from semsearch.store.layout import current_version
from semsearch.store.manifest import Manifest
from semsearch.write.build import BuildOptions, build_index, up_to_date

DEPTH = 100  # Recall@100 needs the top 100
EVAL_MODES = ("dense", "lexical", "hybrid")  # the two parts, then their fusion


@dataclass
class EvalData:
    """Where a BEIR data set's files are."""

    corpus: Path
    queries: Path
    qrels: Path

    @classmethod
    def locate(
        cls,
        folder: Path | None,
        split: str,
        corpus: Path | None = None,
        queries: Path | None = None,
        qrels: Path | None = None,
    ) -> EvalData:
        """BEIR's layout (corpus.jsonl, queries.jsonl, qrels/SPLIT.tsv) under a folder, or explicit files."""
        if folder is not None:
            corpus = corpus or folder / "corpus.jsonl"
            queries = queries or folder / "queries.jsonl"
            qrels = qrels or folder / "qrels" / f"{split}.tsv"
        if corpus is None or queries is None or qrels is None:
            raise InputError("give a BEIR folder, or all of --corpus, --queries and --qrels")
        for path in (corpus, queries, qrels):
            if not path.is_file():
                raise InputError(f"no such file: {path}")
        return cls(corpus, queries, qrels)


def _reusable(index_dir: Path, corpus: Path, options: BuildOptions, embedder: Embedder | None) -> bool:
    """Whether index_dir can answer for this corpus as it is; raises if it holds something else.

    An index built from other sources is never overwritten: eval refuses and asks for another --index.
    """
    from semsearch.write.freshness import absolute_source_args

    try:
        manifest = Manifest.read(current_version(index_dir))
    except IndexNotFoundError:
        return False
    if manifest.source_args != absolute_source_args([str(corpus)]):
        raise InputError(f"{index_dir} holds other sources than {corpus}; choose another --index for eval")
    # Eval's own builds merge exact copies only (see run_eval); otherwise the build's own up-to-date check.
    return up_to_date([str(corpus)], index_dir, replace(options, near=False), embedder=embedder)


def run_eval(
    data: EvalData,
    index_dir: Path,
    *,
    modes: Sequence[str] = EVAL_MODES,
    embedder: Embedder | None = None,
    options: BuildOptions | None = None,
    progress: bool = True,
    fusion: str | None = None,
    tune: bool = False,
    split: str = "",
) -> dict[str, Any]:
    """Metrics per mode, plus how many queries were judged and how long searching took.

    ``fusion``: hybrid's weighting ("adaptive" or "fixed"; None: what the index records); the hybrid entry
    reports it with the mean dense weight its queries got. ``tune``: then weigh every hybrid weighting on these
    judged queries and record the best in the index when it clearly wins (eval/tune.py; ``split`` names the
    judgments in the record); the modes are measured before it, under ``fusion`` or the weighting recorded then.
    """
    queries = read_queries(data.queries)
    qrels = read_qrels(data.qrels)
    judged = {q: queries[q] for q in qrels if q in queries}
    if not judged:
        raise InputError(f"none of the queries in {data.queries} has judgments in {data.qrels}")
    if tune:
        check_tunable(judged, qrels)  # before any build or search
    opts = options or BuildOptions(progress=progress)
    if not _reusable(index_dir, data.corpus, opts, embedder):
        if progress:
            print(f"semsearch: building {index_dir} from {data.corpus} ...", file=sys.stderr)
        # Distinct corpus entries must stay distinct for the judgments: merge exact copies only. The index
        # is eval's own, so a model change simply rebuilds it (known texts still come from the cache).
        # Entries that cannot be documents are skipped and counted, never a stop.
        summary = build_index(
            [str(data.corpus)], index_dir, replace(opts, near=False, full=True, skip_bad=True), embedder=embedder
        )
        if progress and summary.skipped:
            print(
                f"semsearch: skipped {count(len(summary.skipped), 'corpus entry', 'corpus entries')}, "
                f"e.g. {summary.skipped[0]}",
                file=sys.stderr,
            )
    results: dict[str, Any] = {}
    with Index.open(index_dir, embedder=embedder) as index:
        read = Manifest.read(current_version(index_dir)).counts.read
        for mode in modes:
            started = time.perf_counter()
            run: dict[str, list[str]] = {}
            alphas: list[float] = []
            for qid, text in judged.items():
                ranked: list[str] = []
                hits = index.search(text, DEPTH, mode=mode, explain=False, fusion=fusion)
                for hit in hits:
                    # A merged document stands for every corpus entry it came from.
                    ranked.extend(hit.external_ids or [hit.id])
                run[qid] = ranked
                if hits and hits[0].fusion is not None:
                    alphas.append(float(hits[0].fusion["alpha"]))
            scores = per_query(run, qrels)
            metrics: dict[str, Any] = dict(mean_scores(scores))
            metrics["seconds"] = round(time.perf_counter() - started, 2)
            if mode == "hybrid":
                method = index.fusion.with_method(fusion).method
                metrics["fusion"] = {"method": method, "mean_alpha": round(sum(alphas) / max(len(alphas), 1), 4)}
            metrics["per_query"] = {q: {k: round(v, 6) for k, v in m.items()} for q, m in scores.items()}
            results[mode] = metrics
        if tune:
            if progress:
                print(f"semsearch: weighing hybrid fusions on {len(judged)} judged queries ...", file=sys.stderr)
            report, chosen = tune_fusion(index, judged, qrels, split=split or data.qrels.stem)
            if report.chosen != report.recorded:
                report.version = tuned_version(index_dir, chosen, index.version.name, wait=opts.wait)
            results["tune"] = report.to_dict()
    results["queries"] = len(judged)
    results["skipped_documents"] = max(_entries(data.corpus) - read, 0)
    return results


def _entries(corpus: Path) -> int:
    """The non-blank lines of a JSONL corpus (gzipped or not): its entries, good and bad."""
    opener = gzip.open if corpus.name.endswith(".gz") else open
    with opener(corpus, "rb") as fh:
        return sum(1 for line in fh if line.strip())
