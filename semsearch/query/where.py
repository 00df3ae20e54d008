"""The ``--where`` filters of one index version: answered from its column index (else a scan), and remembered."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np

from semsearch.store.documents import DocumentStore
from semsearch.store.filter_columns import FilterColumns
from semsearch.store.filters import evaluate, parse_where
from semsearch.store.layout import doc_num

FILTER_CACHE = 32  # --where answers an open Index remembers


class WhereFilters:
    """The document numbers (FAISS ids) meeting a version's filters, and why a filter matches none.

    A version never changes, so a remembered answer cannot go stale: a long-lived Index (a server, a notebook)
    keeps the last FILTER_CACHE answers, shared by its threads.
    """

    def __init__(self, store: DocumentStore) -> None:
        self.store = store
        self._answers: dict[tuple[str, ...], tuple[np.ndarray, list[str]]] = {}
        self._lock = threading.Lock()
        self._columns: FilterColumns | None = None  # the column index, read on the first filter

    def answer(self, where: Sequence[str]) -> tuple[np.ndarray, list[str]]:
        """The FAISS ids meeting every clause of ``where`` and the warnings, remembered once computed."""
        key = tuple(where)
        with self._lock:
            found = self._answers.pop(key, None)
        if found is None:
            found = self.evaluate(where)
        with self._lock:  # a server's threads share the Index
            self._answers[key] = found  # most recently used last
            while len(self._answers) > FILTER_CACHE:
                self._answers.pop(next(iter(self._answers)))
        return found

    def evaluate(self, where: Sequence[str]) -> tuple[np.ndarray, list[str]]:
        """The FAISS ids meeting ``where`` and the warnings, from the column index or else a scan."""
        clauses = parse_where(where)
        if self.store.has_filter_columns:
            if self._columns is None:
                self._columns = FilterColumns(self.store.rows, self.store.path, self.store.segment_tables)
            answer = self._columns.evaluate(clauses)
            return answer.nums, answer.warnings
        result = evaluate(self.store.iter_documents(), clauses)
        return np.array([doc_num(i) for i in result.ids], dtype=np.int64), result.warnings
