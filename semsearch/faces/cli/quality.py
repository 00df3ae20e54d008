"""``semsearch eval``: retrieval quality on a judged data set."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import click

from semsearch.app import operations as ops
from semsearch.faces.cli.common import application, request_options

EVAL_INDEX = click.option(
    "--index",
    "index_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Index to build or reuse [default: indexes/eval-<corpus folder>].",
)


@click.command(name="eval")
@request_options("eval", after={"split": EVAL_INDEX})
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object keyed by mode.")
@click.pass_context
def eval_(ctx: click.Context, request: ops.Evaluate, index_dir: Path | None, as_json: bool) -> None:
    """Measure retrieval quality on BEIR-format DATA (corpus.jsonl, queries.jsonl, qrels/SPLIT.tsv).

    \b
    Prints nDCG@10 (trec_eval's definition, graded gains), Recall@100 and MRR@10 for each mode
    (--json adds each query's scores, for paired comparisons: python -m benchmarks.bench_quality --compare).
    Corpus entries with no text and no title are skipped and counted; title-only ones are kept.
    The corpus is indexed once (exact duplicates merged only) and reused while it is unchanged:
      semsearch eval ../shared/data/scifact --split test

    \b
    --tune then ranks the judged queries under each hybrid weighting (the index's, adaptive, alpha 0 to 1)
    and records the best in the index when it beats the index's by two standard errors, so that
    `semsearch query` on that index uses it. Tune on one split, report on another:
      semsearch eval DATA --split train --tune
      semsearch eval DATA --split test
    """
    from semsearch.faces.render import eval_table

    results = application(ctx, index_dir).run("eval", dataclasses.replace(request, progress=not as_json))
    click.echo(json.dumps(results) if as_json else eval_table(results))
