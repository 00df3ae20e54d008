"""Reading BEIR data sets (``corpus.jsonl``, ``queries.jsonl``, ``qrels/<split>.tsv``): the one reader of
queries and judgments that ``semsearch eval``, the metrics and the benchmarks share."""

from __future__ import annotations

import json
from pathlib import Path

from semsearch.core.errors import InputError

Qrels = dict[str, dict[str, int]]


def _lines(path: Path) -> list[str]:
    """A text file's lines (UTF-8, a BOM allowed); one-line errors for unreadable or non-UTF-8 files."""
    try:
        return Path(path).read_text(encoding="utf-8-sig").splitlines()
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None


def read_queries(path: Path) -> dict[str, str]:
    """BEIR queries.jsonl: query id -> text."""
    out = {}
    for number, line in enumerate(_lines(path), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            out[str(record["_id"])] = str(record["text"])
        except (json.JSONDecodeError, KeyError, TypeError):
            raise InputError(f"{path}:line {number}: expected a JSON object with _id and text") from None
    return out


def read_qrels(path: Path) -> Qrels:
    """BEIR qrels TSV (an optional ``query-id corpus-id score`` header): query id -> {doc id: grade}."""
    out: Qrels = {}
    for number, line in enumerate(_lines(path), start=1):
        if not line.strip():
            continue
        cells = line.split("\t")
        if number == 1 and cells[0].strip().lower() == "query-id":
            continue
        if len(cells) != 3:
            raise InputError(f"{path}:line {number}: expected query-id<TAB>corpus-id<TAB>score")
        try:
            grade = int(cells[2])
        except ValueError:
            raise InputError(f"{path}:line {number}: score {cells[2]!r} is not an integer") from None
        out.setdefault(cells[0], {})[cells[1]] = grade
    return out


def load_beir(folder: Path, split: str = "test") -> tuple[dict[str, str], Qrels]:
    """(queries, qrels) of a BEIR split: the queries that split judges, and its ``qrels/<split>.tsv``."""
    folder = Path(folder)
    qrels_path = folder / "qrels" / f"{split}.tsv"
    qrels = read_qrels(qrels_path)
    queries_path = folder / "queries.jsonl"
    queries = {q: text for q, text in read_queries(queries_path).items() if q in qrels}
    missing = sorted(set(qrels) - set(queries))
    if missing:
        raise InputError(f"{qrels_path} judges {len(missing)} queries absent from {queries_path}, e.g. {missing[0]}")
    return queries, qrels
