"""``semsearch map --out``: the corpus map of an index as one self-contained HTML page (works offline).

The page's markup lives in ``web/map_page.html`` and its renderer in ``web/map.js`` (shared with the server's
page); this module only fills them in. It reads a built map and never computes one.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

from semsearch.core.errors import SemsearchError
from semsearch.core.fileio import write_output
from semsearch.core.paperinfo import plain_text
from semsearch.core.wording import count
from semsearch.store.corpus_map import load_map
from semsearch.store.documents import open_documents
from semsearch.store.layout import current_version
from semsearch.store.manifest import read_manifest

WEB_DIR = Path(__file__).parent / "web"
PAGE_TEMPLATE = WEB_DIR / "map_page.html"
MAP_JS = WEB_DIR / "map.js"
TEXTS_MAX_DOCS = 50_000  # beyond this the page carries titles only, to stay a reasonable size
_SLOT = re.compile(r"\{\{(title|subtitle|script|data)\}\}")


def map_html(data: dict[str, Any], *, title: str = "semsearch map", texts: dict[str, str] | None = None) -> str:
    """One self-contained HTML page showing the map: inline style, script and data, no network access."""
    # Labels of maps built before labels were made readable, and the texts, shown as plain_text shows them.
    data = {**data, "labels": [plain_text(str(label)) for label in data.get("labels", [])]}
    payload = {"map": data, "texts": {k: plain_text(v) for k, v in (texts or {}).items()}}
    # "</" inside a script element would end it; "\u003c" is the same string to JSON.parse.
    blob = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).replace("<", "\\u003c")
    script = MAP_JS.read_text(encoding="utf-8")
    clusters = len(data["clusters"])
    documents = count(data["documents"], "document", grouped=True)
    subtitle = f"{documents} · {count(clusters, 'cluster')} · {data['method'].upper()} layout"
    if isinstance(data.get("laid_out_at"), str):  # maps from before incremental layouts do not say
        subtitle += f" of {data.get('laid_out_documents', 0):,} laid out {data['laid_out_at'][:10]}"
    slots = {
        "title": html.escape(plain_text(title)),
        "subtitle": html.escape(subtitle),
        "script": script.replace("</script", "<\\/script"),
        "data": blob,
    }
    # One pass, so text filled into one slot is never read as another slot.
    return _SLOT.sub(lambda m: slots[m.group(1)], PAGE_TEMPLATE.read_text(encoding="utf-8"))


def write_map_html(index_dir: Path, out: Path, *, snippet_chars: int = 320) -> dict[str, Any]:
    """Write the live version's map of an index as one HTML file; returns the map's data."""
    version = current_version(Path(index_dir))
    data = load_map(version)
    if data is None:
        raise SemsearchError(f"{version} has no map (built before maps existed); rebuild it with: semsearch index")
    # Short texts make the standalone page useful on a click; skipped on huge corpora to keep the file small.
    texts: dict[str, str] = {}
    if data["documents"] <= TEXTS_MAX_DOCS:
        store = open_documents(version, read_manifest(version))
        try:
            for doc in store.iter_documents():
                text = " ".join(doc.text.split())
                texts[doc.id] = text if len(text) <= snippet_chars else text[: snippet_chars - 1] + "…"
        finally:
            store.close()
    page = map_html(data, title=f"semsearch map · {Path(index_dir).name}", texts=texts)
    write_output(Path(out), page)  # atomic; a link is written through, a FIFO or device as a stream
    return data
