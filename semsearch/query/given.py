"""Which indexed documents are a paper given as a file (``related --file``, ``recommend --like-file``).

Such a paper is left out of its own neighbours. Its text finds a copy of its abstract (``dedup.duplicates``), but
the index may hold it under another abstract: a PDF merged by its DOI with a record whose abstract was edited.
So a document is the given paper too when it was read from a PDF with the same content (the version's manifest
records each source file's sha256), or when it names the paper's DOI or arXiv id as a build would merge it
(``dedup.paper_ids``: the ids agree, and so do the titles).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from semsearch.core.records import Document, GivenPaper, SourceFile
from semsearch.dedup.paper_ids import PDF_FORMAT, PDF_KIND, ids_agree, paper_ids, pdf_files, titles_agree


class GivenMatch:
    """Tells whether a document is the given paper, by its PDF's content or by its ids (built once per query)."""

    def __init__(self, paper: GivenPaper, recorded: Sequence[SourceFile]) -> None:
        self.recorded = list(recorded)
        self.paths = {s.path for s in recorded if s.format == PDF_FORMAT and paper.sha256 and s.sha256 == paper.sha256}
        self.names = {os.path.basename(p) for p in self.paths}  # a source named otherwise is none of them
        self.ids = paper_ids(dict(paper.ids))
        self.title = paper.title

    def __bool__(self) -> bool:
        """Whether any document could match: the file is one the index read, or it shows an id."""
        return bool(self.paths or self.ids)

    def __call__(self, doc: Document) -> bool:
        """Whether ``doc`` is the given paper."""
        named = any(p.kind == PDF_KIND and os.path.basename(p.file) in self.names for p in doc.sources)
        if named and self.paths.intersection(pdf_files(doc, self.recorded)):
            return True
        return bool(self.ids) and ids_agree(self.ids, paper_ids(doc.metadata)) and titles_agree(self.title, doc.title)
