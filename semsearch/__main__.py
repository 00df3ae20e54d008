"""``python -m semsearch`` runs the CLI."""

from __future__ import annotations

from semsearch.faces.cli import main

if __name__ == "__main__":
    main()
