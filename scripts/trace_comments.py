"""Lines of measurement talk in the package's comments and docstrings (figures belong in docs and benchmarks).

    python scripts/trace_comments.py [ROOT] [--list]

ROOT holds ``semsearch/`` (default: this checkout). A comment or docstring line counts when it names a data set, a
benchmark or a script, says "measured", quotes a metric at a cut-off with a figure, or gives a figure with a unit
(ms, µs, seconds, %, "3x faster", "157k documents"). Prints the count (and with --list each line first). Code and
the text users see (help, errors) are not read.
"""

from __future__ import annotations

import ast
import io
import re
import sys
import tokenize
from pathlib import Path

PATTERN = re.compile(
    r"scifact|scripts/|\bbench_\w+|\bstudy_\w+|\bmeasured( on| by| here| best|:|\))|"
    r"(ndcg|recall|mrr|p|precision)@\d+ \(?[-+]?\d|\d+(\.\d+)? ?(ms|µs|ns|seconds|s per|%)(?!\w)|"
    r"\d+(\.\d+)?x (the|faster|slower|fewer|vs)|\d+k (abstracts|documents|words|vectors|postings)|"
    r"\+0\.\d|\+- ?0\.\d|\d\.\d+ -> \d|neurips 2025 \(|on neurips 2025",
    re.I,
)


def lines_of(path: Path) -> list[tuple[int, str]]:
    """The comment lines and docstring lines of one module, with their line numbers."""
    src = path.read_text(encoding="utf-8")
    out = [
        (tok.start[0], tok.string)
        for tok in tokenize.generate_tokens(io.StringIO(src).readline)
        if tok.type == tokenize.COMMENT
    ]
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = node.body[0] if node.body else None
            if isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant) and isinstance(doc.value.value, str):
                first, last = doc.value.lineno, doc.value.end_lineno or doc.value.lineno
                out.extend((n, line) for n, line in enumerate(src.splitlines()[first - 1 : last], first))
    return out


def main() -> None:
    args = [a for a in sys.argv[1:] if a != "--list"]
    root = Path(args[0]) if args else Path(__file__).resolve().parents[1]
    hits = [
        f"{path.relative_to(root)}:{n}: {text.strip()}"
        for path in sorted((root / "semsearch").rglob("*.py"))
        for n, text in lines_of(path)
        if PATTERN.search(text)
    ]
    if "--list" in sys.argv:
        print("\n".join(hits))
    print(len(hits))


if __name__ == "__main__":
    main()
