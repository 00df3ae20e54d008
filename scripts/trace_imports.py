"""Which semsearch modules a cold `semsearch query` and an appending `semsearch index` enter (one JSON line).

    python scripts/trace_imports.py [--workdir DIR]

Builds the seed index with the real model in DIR (default: a temporary folder), then runs each command in a
fresh interpreter through the CLI's own entry point and lists the semsearch modules in ``sys.modules`` after
it: the query, and a refresh that appends one new abstract. Layer packages' ``__init__`` files (docstrings
only) are counted apart.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EXTRA = (
    "Extra Papers\n\nWe study federated learning with differential privacy for large language models and show "
    "that adaptive clipping improves utility under a fixed privacy budget across many benchmarks and settings.\n"
)
CODE = """
import sys
from semsearch.faces.cli import main
sys.argv = ["semsearch"] + {args!r}
try:
    main()
except SystemExit:
    pass
print("MODULES", " ".join(sorted(m for m in sys.modules if m == "semsearch" or m.startswith("semsearch."))))
"""


def modules(args: list[str], cwd: Path) -> list[str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO)}
    out = subprocess.run(
        [sys.executable, "-c", CODE.format(args=args)], capture_output=True, text=True, cwd=cwd, env=env, check=True
    )
    line = next(ln for ln in out.stdout.splitlines() if ln.startswith("MODULES"))
    return line.split()[1:]


def summary(names: list[str]) -> dict[str, object]:
    packages = sorted(n for n in names if (REPO / n.replace(".", "/") / "__init__.py").is_file())
    mods = sorted(set(names) - set(packages))
    return {"modules": len(mods), "packages": len(packages), "names": mods}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workdir", type=Path)
    args = parser.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="semsearch-trace-"))
    work.mkdir(parents=True, exist_ok=True)
    shutil.copytree(REPO / "seeds", work / "seeds", dirs_exist_ok=True)
    modules(["index", "seeds", "--index", "idx", "-q"], work)
    query = modules(["query", "federated privacy", "--index", "idx", "-k", "3"], work)
    (work / "seeds" / "zz_extra.txt").write_text(EXTRA, encoding="utf-8")
    append = modules(["index", "seeds", "--index", "idx", "-q"], work)
    print(json.dumps({"query": summary(query), "appending_index": summary(append)}))


if __name__ == "__main__":
    main()
