"""A 2-D map of the corpus: a layout of every document, k-means clusters labelled with distinctive terms.

Computed at build time from the documents' vectors and stored in the version folder as ``map.json``::

    {"method": "pca" | "umap", "documents": N, "seed": 0,
     "points": [[doc_id, x, y, cluster], ...],          # x, y in [0, 1]; cluster indexes "clusters"
     "labels": ["title or opening words", ...],          # one per point, at most LABEL_CHARS characters
     "clusters": [{"id": 0, "label": "federated · privacy · clients", "terms": [...],
                   "x": 0.41, "y": 0.73, "size": 12}, ...],
     "fitted": [0, 1, ...],                              # points the layout was fitted on (the anchors)
     "algorithm": 2, "laid_out_at": "2025-12-01T10:40:00+00:00", "laid_out_documents": N,
     "changed_since_layout": 0,                          # documents added + removed since that full layout
     "fingerprint": "<sha256 of the inputs>"}           # a refresh with the same inputs copies the map

A refresh does not lay the map out again (UMAP costs 25 s on 6k documents): new documents go to the
similarity-weighted mean position of their nearest fitted neighbours and join the cluster whose members' mean
vector is nearest, removed ones drop out (see ``update_map``). A full layout happens when the documents added
and removed since the last one exceed RELAYOUT_SHARE of the documents it laid out, when the layout method
changes, or on request (``semsearch index --relayout`` or ``--full``).

A version appended as a segment does not rewrite map.json: it keeps the last layout's map.json as its base and
writes a point file of what it placed and removed, with the cluster centroids kept beside (``map_layers``);
``load_map`` puts them together. ``map_page.map_html`` turns a map into one self-contained HTML page; the
server's page draws it with ``web/map.js``.
"""

from __future__ import annotations

import json
import math
import os
import re
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from semsearch.core.errors import IndexCorruptError, SemsearchError
from semsearch.core.fileio import utc_now
from semsearch.core.options import MAP_RELAYOUT_SHARE
from semsearch.core.paperinfo import plain_text
from semsearch.core.records import Document
from semsearch.store.map_layers import (
    BASE_FILES,
    DECIMALS,
    MAP_FILE,
    SEGMENT_PREFIX,
    MapState,
    assemble,
    base_clusters_of,
    centre,
    link_files,
    read_state,
    segment_clusters,
    write_base,
    write_state,
)

__all__ = ["MAP_FILE", "MapState", "append_map", "append_state", "can_append", "load_map", "write_map"]
MAP_ALGORITHM = 2  # bump when a change to this module changes the maps it computes (stops reuse of old ones)
# Below this many documents the layout is PCA (0.2 s for the 91 seeds): on a few hundred points it shows the
# topics well enough, while UMAP's numba JIT warm-up alone (10 s and more per process) would dominate the seed
# build and every test that builds an index.
UMAP_MIN_DOCS = 1000
# UMAP is fitted on at most this many documents; each of the rest goes to the similarity-weighted mean position
# of its PLACE_NEIGHBOURS nearest fitted documents (one FAISS search). umap's own ``transform`` does that and then
# runs optimisation epochs per point: on 30k documents (10k fitted) it took 617 s on a busy 2-core machine, twice
# the whole map with this placement; all 155k ML Anthology abstracts then take 116 s, 10k alone about 60 s.
UMAP_FIT_MAX = 10_000
PLACE_NEIGHBOURS = 5
# A refresh places arrivals on the last layout until the documents added plus removed since it exceed this share
# of the documents it laid out; then the whole map is laid out again. Placed documents never move the fitted
# ones, so the layout drifts from what a fresh one would show only as far as the corpus has changed. The value
# lives in options.py, where `semsearch index --help` reads it without importing numpy.
RELAYOUT_SHARE = MAP_RELAYOUT_SHARE
# UMAP's own default for more than 10k points; its 500 for smaller sets more than doubles the optimisation time
# for no visible gain on a scatter plot.
UMAP_EPOCHS = 200
UMAP_NEIGHBORS = 15
# SEMSEARCH_MAP=pca|umap|off overrides the choice at build time ("off": no map.json, for builds where a
# minute or more of UMAP on a slow machine is not worth it); unset or "auto" picks by corpus size.
MAP_ENV = "SEMSEARCH_MAP"
# Cluster terms are counted on at most this many documents: distinctive terms are stable on a sample, and
# tokenizing every abstract of a 150k corpus in Python would cost about a minute.
TERM_SAMPLE_MAX = 20_000
MAX_CLUSTERS = 40
TERMS_PER_CLUSTER = 3
LABEL_CHARS = 90
OUTLIER_SHARE = 0.001  # per side, see normalize()
# Label words: runs of word characters joined by hyphens, so a label reads "fine-tuning" rather than "fine".
LABEL_TOKEN = re.compile(r"\w+(?:-\w+)*")
# Words that can be frequent in one cluster by chance but never name a topic. The lexical index's stop list is
# short on purpose (queries keep "not"); a label has no such need, and small clusters make chance frequent.
_LABEL_STOP_TEXT = """
    about above across address addresses after again against aim aims all almost along also although among
    amongst another any approach approaches based because been before being below best better between both can
    cannot could demonstrate demonstrated demonstrates despite do does doing done due during each effective
    efficient either enable enables entire even ever every existing experiments extensive few first from further
    furthermore given had has have having here how however improve improved improves including introduce
    introduces its itself just key large less like many may method methods might more most much must new novel
    now often only other others our over overcome paper particular per perform performance present previous
    prior problem problems propose proposed provide provides rather recent remain remains result results same
    several should show showed shown shows significant significantly since so some state-of-the-art still study
    than them themselves therefore those though three through thus together toward towards two under until up
    upon use used uses using various very via was we well were what when where whether which while who whose why
    within without work works would yet you your
"""
# Weak adverbs and adjectives: they qualify a claim ("hardly", "largely", "simple") and never say what it is about.
_LABEL_WEAK_TEXT = """
    able actually additionally already always apparent arguably broadly certain certainly clear clearly close
    closely common commonly considerably critical crucial currently different directly easily especially
    essential essentially extremely fairly fully general generally good great greatly hardly high highly
    important importantly increasingly indeed instead interesting largely likely little low mainly major merely
    moreover mostly namely naturally nearly necessary never notably numerous obvious often particularly possible
    potentially practical primarily quite rarely readily real really relatively respectively roughly similar
    similarly simple simply slightly solely somewhat specific specifically strong strongly substantial
    substantially successfully sufficient surprisingly true truly typical typically ubiquitous unable usual
    usually vast whole widely
"""
LABEL_STOPWORDS = frozenset(_LABEL_STOP_TEXT.split()) | frozenset(_LABEL_WEAK_TEXT.split())


def cluster_count(n: int) -> int:
    """How many clusters for n documents: about sqrt(n/2), 2 to 40, never more than half the documents."""
    if n < 4:
        return 1 if n else 0
    return max(2, min(MAX_CLUSTERS, round(math.sqrt(n / 2)), n // 2))


def requested_method() -> str:
    """The map method SEMSEARCH_MAP asks for: auto (unset), pca, umap or off."""
    method = os.environ.get(MAP_ENV, "").strip().lower() or "auto"
    if method not in ("auto", "pca", "umap", "off"):
        raise SemsearchError(f"{MAP_ENV}={method!r} is not a map method; choose auto, pca, umap or off")
    return method


def choose_method(n: int, method: str = "auto") -> str:
    """The layout method for n documents: 'auto' picks PCA below UMAP_MIN_DOCS, else UMAP."""
    if method not in ("auto", "pca", "umap"):
        raise SemsearchError(f"unknown map method {method!r}; choose auto, pca or umap")
    if method == "auto":
        return "umap" if n >= UMAP_MIN_DOCS else "pca"
    if method == "umap" and n <= UMAP_NEIGHBORS:
        return "pca"  # UMAP needs more points than neighbours per point to build its graph
    return method


def compute_map(
    documents: Sequence[Document], vectors: np.ndarray, *, method: str = "auto", seed: int = 0
) -> dict[str, Any]:
    """The map of documents (row i of vectors belongs to documents[i]); deterministic for a given seed."""
    n = len(documents)
    if vectors.shape[0] != n:
        raise SemsearchError(f"{vectors.shape[0]} vectors for {n} documents")
    chosen = choose_method(n, method)
    vecs = np.ascontiguousarray(vectors, dtype=np.float32)
    if chosen == "umap":
        xy, fitted = _umap_layout(vecs, seed)
    else:
        xy, fitted = _pca_layout(vecs), np.arange(n)
    xy = normalize(xy)
    assignment, k = _kmeans(vecs, cluster_count(n), seed)
    terms = cluster_terms(documents, assignment, k, seed=seed)
    clusters = [
        {
            "id": c,
            "label": " · ".join(terms[c]),
            "terms": terms[c],
            **centre(xy[assignment == c]),
            "size": int((assignment == c).sum()),
        }
        for c in range(k)
    ]
    return _map_data(documents, xy, assignment, clusters, method=chosen, seed=seed, fitted=fitted)


def _map_data(
    documents: Sequence[Document],
    xy: np.ndarray,
    assignment: np.ndarray,
    clusters: list[dict[str, Any]],
    *,
    method: str,
    seed: int,
    fitted: Sequence[int] | np.ndarray,
) -> dict[str, Any]:
    """A map's points, labels and clusters as map.json holds them (row i of xy and assignment is documents[i])."""
    return {
        "method": method,
        "documents": len(documents),
        "seed": seed,
        "points": [
            [d.id, round(float(x), DECIMALS), round(float(y), DECIMALS), int(c)]
            for d, (x, y), c in zip(documents, xy, assignment, strict=True)
        ],
        "labels": [point_label(d) for d in documents],
        "clusters": clusters,
        "fitted": [int(i) for i in fitted],
    }


def point_label(doc: Document) -> str:
    """The title, else the abstract's opening words, readable (``plain_text``), in at most LABEL_CHARS characters."""
    label = " ".join(plain_text(doc.title or doc.text).split())
    return label if len(label) <= LABEL_CHARS else label[: LABEL_CHARS - 1].rsplit(" ", 1)[0] + "…"


# ---------------------------------------------------------------- layout


def _pca_layout(vecs: np.ndarray) -> np.ndarray:
    """The first two principal components (zeros where the data has fewer dimensions of variance)."""
    n = vecs.shape[0]
    out = np.zeros((n, 2), dtype=np.float64)
    if n < 2:
        return out
    centered = vecs.astype(np.float64) - vecs.mean(axis=0, dtype=np.float64)
    # Eigenvectors of the d x d covariance: cheap for any n (150k x 384 is one matrix product).
    values, vectors = np.linalg.eigh(centered.T @ centered)
    top = vectors[:, np.argsort(values)[::-1][:2]]
    # An eigenvector's sign is arbitrary; fixing it makes the picture the same on every machine.
    top *= np.where(top[np.abs(top).argmax(axis=0), range(top.shape[1])] < 0, -1.0, 1.0)
    projected = centered @ top
    projected[:, np.abs(projected).max(axis=0) < 1e-9] = 0.0  # no variance left: do not blow up rounding noise
    out[:, : projected.shape[1]] = projected
    return out


def _umap_layout(vecs: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """UMAP (cosine, 15 neighbours) and the rows it was fitted on: at most UMAP_FIT_MAX, the rest are placed."""
    import warnings

    import umap  # imported here: numba's JIT costs seconds, and only large corpora pay for it

    n = vecs.shape[0]

    def reducer(fitted: np.ndarray) -> Any:
        return umap.UMAP(
            n_neighbors=UMAP_NEIGHBORS,
            min_dist=0.1,
            metric="cosine",
            n_epochs=UMAP_EPOCHS,
            random_state=seed,
            precomputed_knn=exact_neighbours(fitted, UMAP_NEIGHBORS),
        )

    with warnings.catch_warnings():
        # "n_jobs value 1 overridden by random_state": determinism is the point of passing a seed; "no NNDescent
        # search index": the map never calls umap's transform (the rest are placed by place_by_neighbours).
        warnings.simplefilter("ignore")
        if n <= UMAP_FIT_MAX:
            return np.asarray(reducer(vecs).fit_transform(vecs), dtype=np.float64), np.arange(n)
        rng = np.random.default_rng(seed)
        sample = np.sort(rng.choice(n, UMAP_FIT_MAX, replace=False))
        out = np.zeros((n, 2), dtype=np.float64)
        out[sample] = reducer(vecs[sample]).fit_transform(vecs[sample])
        rest = np.setdiff1d(np.arange(n), sample)
        out[rest] = place_by_neighbours(vecs[sample], out[sample], vecs[rest])
        return out, sample


def exact_neighbours(vecs: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Each unit vector's k nearest by cosine, itself first, as UMAP's (indices, cosine distances).

    Given to UMAP instead of letting it run its approximate neighbour search: FAISS's exact search of at most
    UMAP_FIT_MAX vectors takes under a second, while pynndescent's numba JIT alone took ~50 s of a 100k-file
    first build (compiled again in every process), and exact neighbours are at least as good a graph.
    """
    import faiss

    n = len(vecs)
    k = min(k, n)
    data = np.ascontiguousarray(vecs, dtype=np.float32)
    index = faiss.IndexFlatIP(data.shape[1])
    index.add(data)
    sims, nearest = index.search(data, min(k + 1, n))
    rows = np.arange(n)[:, None]
    # Itself first (a duplicate vector may tie with it), then the others in order, k in all.
    others = np.where(nearest == rows, -1, nearest)
    order = np.argsort(others == -1, axis=1, kind="stable")
    others = np.take_along_axis(others, order, axis=1)[:, : k - 1]
    other_sims = np.take_along_axis(sims, order, axis=1)[:, : k - 1]
    indices = np.concatenate([rows, others], axis=1).astype(np.int64)
    distances = np.concatenate([np.zeros((n, 1)), 1.0 - other_sims], axis=1).clip(0.0, 2.0).astype(np.float32)
    return indices, distances


def place_by_neighbours(fitted: np.ndarray, fitted_xy: np.ndarray, others: np.ndarray) -> np.ndarray:
    """Positions for vectors not in a layout: the similarity-weighted mean of their nearest fitted neighbours'."""
    import faiss

    index = faiss.IndexFlatIP(fitted.shape[1])
    index.add(np.ascontiguousarray(fitted, dtype=np.float32))
    k = min(PLACE_NEIGHBOURS, len(fitted))
    sims, nearest = index.search(np.ascontiguousarray(others, dtype=np.float32), k)
    weights = np.maximum(sims.astype(np.float64), 1e-6)  # unit vectors: inner product is cosine; floor negatives
    weights /= weights.sum(axis=1, keepdims=True)
    return np.einsum("nk,nkd->nd", weights, fitted_xy[nearest])


def normalize(xy: np.ndarray) -> np.ndarray:
    """Scale a layout into [0, 1] with one factor for both axes (keeps the aspect), centred.

    On large corpora the frame is the 0.1st to 99.9th percentile and the few points beyond sit on its edge:
    UMAP puts small disconnected groups far away, and they would otherwise squash the map into a corner.
    """
    if len(xy) == 0:
        return xy.reshape(0, 2)
    trim = OUTLIER_SHARE if len(xy) >= 1000 else 0.0
    low, high = np.quantile(xy, trim, axis=0), np.quantile(xy, 1 - trim, axis=0)
    span = float((high - low).max())
    if span <= 0:
        return np.full_like(xy, 0.5)
    return np.clip((xy - low) / span + (1.0 - (high - low) / span) / 2, 0.0, 1.0)


# ---------------------------------------------------------------- clusters


def _kmeans(vecs: np.ndarray, k: int, seed: int) -> tuple[np.ndarray, int]:
    """Cluster of each vector (spherical k-means: the vectors are unit length, compared by cosine)."""
    n = vecs.shape[0]
    if k <= 1:
        return np.zeros(n, dtype=np.int64), k
    import faiss

    # min_points_per_centroid=1 silences FAISS's stderr warning on small corpora; FAISS subsamples
    # max_points_per_centroid (256) points per centroid for training, which bounds the cost on large ones.
    km = faiss.Kmeans(vecs.shape[1], k, niter=20, seed=seed, spherical=True, min_points_per_centroid=1)
    km.train(vecs)
    _, assigned = km.index.search(vecs, 1)
    labels = assigned[:, 0].astype(np.int64)
    # Renumber by size (largest first) and drop empty clusters, so ids are dense and stable in meaning.
    sizes = np.bincount(labels, minlength=k)
    order = [c for c in np.argsort(-sizes, kind="stable") if sizes[c] > 0]
    remap = np.full(k, -1, dtype=np.int64)
    remap[order] = np.arange(len(order))
    return remap[labels], len(order)


def cluster_terms(
    documents: Sequence[Document], assignment: np.ndarray, k: int, *, seed: int = 0, top: int = TERMS_PER_CLUSTER
) -> list[list[str]]:
    """The most distinctive words of each cluster by class-based TF-IDF, shown in their commonest surface form.

    A term's weight in cluster c is (share of c's documents containing it) * log(1 + (N/k) / documents
    containing it anywhere): BERTopic's c-TF-IDF on document counts, so one abstract repeating a word
    cannot carry a label. Words are stemmed with the lexical index's Analyzer; its stop words, and
    LABEL_STOPWORDS, are dropped.
    """
    from semsearch.store.lexical import STOPWORDS, Analyzer

    n = len(documents)
    if k == 0:
        return []
    rows = np.arange(n)
    if n > TERM_SAMPLE_MAX:
        rows = np.sort(np.random.default_rng(seed).choice(n, TERM_SAMPLE_MAX, replace=False))
    analyzer = Analyzer()
    stem_of: dict[str, str] = {}
    surface: Counter[tuple[str, str]] = Counter()
    per_cluster: list[Counter[str]] = [Counter() for _ in range(k)]
    cluster_docs = np.zeros(k, dtype=np.int64)
    for row in rows:
        doc = documents[int(row)]
        text = doc.embedding_text()  # LaTeX decoded: "$\\omega \\cdot$" gives no words "omega", "cdot"
        words = {
            w
            for w in LABEL_TOKEN.findall(text.lower())
            if len(w) > 1 and w not in STOPWORDS and w not in LABEL_STOPWORDS and not w.isdigit()
        }
        new = [w for w in words if w not in stem_of]
        if new:
            stem_of.update(analyzer.stem_map(new))
        stems = {stem_of[w] for w in words}
        surface.update((stem_of[w], w) for w in words)
        c = int(assignment[row])
        per_cluster[c].update(stems)
        cluster_docs[c] += 1
    overall: Counter[str] = Counter()
    for counts in per_cluster:
        overall.update(counts)
    shown: dict[str, tuple[int, str]] = {}
    for (stem, word), count in surface.items():
        # The commonest surface form; ties go to the shorter, then alphabetical, so the choice is stable.
        best = shown.get(stem)
        if best is None or (count, -len(word), word) > (best[0], -len(best[1]), best[1]):
            shown[stem] = (count, word)
    average = len(rows) / k
    out = []
    for c, counts in enumerate(per_cluster):
        size = max(int(cluster_docs[c]), 1)
        # A word from a single abstract says little about a cluster of many; needed only when there are several.
        floor = 2 if size >= 4 else 1
        scored = sorted(
            ((df / size) * math.log(1 + average / overall[t]), t)
            for t, df in counts.items()
            if df >= floor and len(t) > 1
        )
        out.append([shown[t][1] for _, t in sorted(scored, key=lambda s: (-s[0], s[1]))[:top]])
    return out


# ---------------------------------------------------------------- storage


def write_map(
    folder: Path,
    documents: Sequence[Document],
    vectors: np.ndarray,
    *,
    previous: Path | None = None,
    relayout: bool = False,
    now: str | None = None,
    method: str | None = None,
) -> dict[str, Any]:
    """Compute and write a version's map.json; returns its manifest entry (method, clusters, layout, seconds).

    When the ``previous`` version has a map of exactly these documents and vectors (a refresh that changed
    nothing), that map is copied. Otherwise its layout is kept and updated (``update_map``) unless the corpus
    changed too much since it was laid out, or ``relayout`` asks for a fresh layout (stamped with ``now``).
    """
    started = time.perf_counter()
    method = requested_method() if method is None else method  # the writers pass what they resolved once
    if method == "off":
        return {"file": None, "method": "off", "clusters": 0, "seconds": 0.0}
    fingerprint = map_fingerprint(documents, vectors, method)
    old = usable_map(previous, method=method)
    data: dict[str, Any] | None = None
    # A map laid out in one go on exactly these inputs is what a relayout would compute again.
    if old is not None and old.get("fingerprint") == fingerprint and not (relayout and old["changed_since_layout"]):
        data, layout = old, "reused"
    elif old is not None and not relayout:
        data, layout = update_map(old, documents, vectors, method=method), "incremental"
    if data is None:
        data, layout = compute_map(documents, vectors, method=method), "full"
        data.update(
            algorithm=MAP_ALGORITHM,
            laid_out_at=now or utc_now(),
            laid_out_documents=len(documents),
            changed_since_layout=0,
        )
    data["fingerprint"] = fingerprint
    (folder / MAP_FILE).write_text(json.dumps(data, ensure_ascii=False, separators=(",", ":")), encoding="utf-8")
    write_base(folder, data, vectors)  # what an appended version reads instead of map.json
    return _map_entry(data, layout, started)


def _map_entry(data: dict[str, Any], layout: str, started: float) -> dict[str, Any]:
    """The manifest's entry for a version's map."""
    return {
        "file": MAP_FILE,
        "method": data["method"],
        "clusters": len(data["clusters"]),
        "seconds": round(time.perf_counter() - started, 3),
        "reused": layout == "reused",
        "layout": layout,
        "laid_out_at": data["laid_out_at"],
        "laid_out_documents": data["laid_out_documents"],
        "changed_since_layout": data["changed_since_layout"],
    }


def append_state(previous: Path | None, *, method: str | None = None) -> MapState | None:
    """What appending to the previous version's map needs, read without its points; None when it has no usable map.

    A version written before layered maps has no state: its map.json is read whole (``legacy``), once; the
    version appended to it writes the layered files.
    """
    if previous is None:
        return None
    try:
        if (requested_method() if method is None else method) == "off":
            return None
        state = read_state(previous)
    except (OSError, SemsearchError):
        return None  # no usable previous map: a full build lays it out again
    if state is not None:
        return state if state.algorithm == MAP_ALGORITHM else None
    old = usable_map(previous, method=method)
    if old is None:
        return None
    sizes = np.bincount([p[3] for p in old["points"]], minlength=len(old["clusters"])).astype(int).tolist()
    return MapState(
        folder=previous,
        method=old["method"],
        seed=int(old.get("seed", 0)),
        algorithm=MAP_ALGORITHM,
        laid_out_at=old["laid_out_at"],
        laid_out_documents=old["laid_out_documents"],
        changed_since_layout=old["changed_since_layout"],
        documents=len(old["points"]),
        sizes=sizes,
        legacy=old,
    )


def can_append(old: MapState | None, documents_after: int, changed: int, *, method: str | None = None) -> bool:
    """Whether the previous map (``append_state``) takes ``changed`` more added or removed documents without a
    new layout."""
    method = requested_method() if method is None else method
    if method == "off":
        return True
    if old is None or choose_method(documents_after, method) != old.method:
        return False
    return _within_share(old.laid_out_documents, old.changed_since_layout + changed)


def _within_share(laid_out_documents: int, changed: int) -> bool:
    """Whether this many documents added and removed since a layout leave it standing (RELAYOUT_SHARE)."""
    return changed <= math.floor(RELAYOUT_SHARE * laid_out_documents + 1e-9)


def append_map(
    folder: Path,
    old: MapState | None,
    dropped: set[str],
    added: Sequence[Document],
    added_vectors: np.ndarray,
    previous_vectors_of: Callable[[list[str]], np.ndarray],
    *,
    method: str | None = None,
) -> dict[str, Any]:
    """Write the map of a version appended as a segment: the previous map less ``dropped``, plus ``added`` placed.

    ``old`` is the previous version's map state (``append_state``; ``can_append`` must have said yes).
    ``added`` are documents the previous version lacks (row i of ``added_vectors`` is added[i]); documents it
    keeps, rewritten or not, keep their place. ``previous_vectors_of`` gives the previous version's vectors of
    document ids. Only what changes is written: the base and the earlier point files are hard-linked, this
    segment's point file, the state and the centroids written (``map_layers``). The map ``load_map`` assembles
    is the one ``update_map`` computes from the previous map (the cluster sums kept, not summed again, so a
    tie between two clusters' cosines may fall the other way by rounding; the label centres come from the
    stored four-decimal positions).
    """
    started = time.perf_counter()
    method = requested_method() if method is None else method
    if method == "off":
        return {"file": None, "method": "off", "clusters": 0, "seconds": 0.0}
    if old is None:
        raise SemsearchError("the previous version has no map to append to")
    state = _layered(folder, old, previous_vectors_of) if old.legacy is not None else old
    link_files(state.folder, folder, [*BASE_FILES, *state.segments])
    sums = state.centroids().copy()
    sizes = np.asarray(state.sizes, dtype=np.int64)
    gone_ids, gone_clusters = _clusters_of(state, sorted(dropped))
    if gone_ids:
        np.subtract.at(sums, gone_clusters, previous_vectors_of(gone_ids).astype(np.float64))
        np.subtract.at(sizes, gone_clusters, 1)
    fitted_ids, fitted_xy = state.fitted()
    gone = set(gone_ids)
    fitted_gone = [*state.fitted_gone, *(doc_id for doc_id in fitted_ids if doc_id in gone)]
    keep = [i for i, doc_id in enumerate(fitted_ids) if doc_id not in gone]
    new = list(added)
    points: list[list[Any]] = []
    if new:
        if not keep:
            raise SemsearchError("the previous map cannot take these documents without a new layout")
        vecs = np.ascontiguousarray(added_vectors, dtype=np.float32).reshape(len(new), -1)
        fitted_vecs = previous_vectors_of([fitted_ids[i] for i in keep])
        xy = place_by_neighbours(fitted_vecs, fitted_xy[keep], vecs)
        assignment = _nearest_of(sums, sizes, vecs)
        np.add.at(sums, assignment, vecs.astype(np.float64))
        np.add.at(sizes, assignment, 1)
        points = [
            [d.id, round(float(x), DECIMALS), round(float(y), DECIMALS), int(c)]
            for d, (x, y), c in zip(new, xy, assignment, strict=True)
        ]
    name = f"{SEGMENT_PREFIX}{len(state.segments) + 1:06d}.json"
    segment = {"dropped": gone_ids, "points": points, "labels": [point_label(d) for d in new]}
    (folder / name).write_text(json.dumps(segment, ensure_ascii=False, separators=(",", ":")), encoding="utf-8")
    after = MapState(
        folder=folder,
        method=state.method,
        seed=state.seed,
        algorithm=state.algorithm,
        laid_out_at=state.laid_out_at,
        laid_out_documents=state.laid_out_documents,
        changed_since_layout=state.changed_since_layout + len(gone_ids) + len(new),
        documents=state.documents - len(gone_ids) + len(new),
        sizes=sizes.astype(int).tolist(),
        segments=[*state.segments, name],
        fitted_gone=fitted_gone,
    )
    write_state(folder, after, sums)
    return {
        "file": MAP_FILE,
        "method": after.method,
        "clusters": int((sizes > 0).sum()),
        "seconds": round(time.perf_counter() - started, 3),
        "reused": False,
        "layout": "incremental",
        "laid_out_at": after.laid_out_at,
        "laid_out_documents": after.laid_out_documents,
        "changed_since_layout": after.changed_since_layout,
        "segments": len(after.segments),
    }


def _layered(folder: Path, old: MapState, previous_vectors_of: Callable[[list[str]], np.ndarray]) -> MapState:
    """An old version's whole map (``old.legacy``) as the base of layered maps: its map.json linked, the
    files beside it written into ``folder`` (the vectors of every point read once for the cluster sums)."""
    data = old.legacy
    assert data is not None
    link_files(old.folder, folder, [MAP_FILE])
    write_base(folder, {**data, "algorithm": MAP_ALGORITHM}, previous_vectors_of([p[0] for p in data["points"]]))
    state = read_state(folder)
    assert state is not None
    return state


def _clusters_of(state: MapState, ids: list[str]) -> tuple[list[str], np.ndarray]:
    """The ids of ``ids`` on the map and each one's (base-numbered) cluster; ids not on it are left out."""
    if not ids:
        return [], np.zeros(0, dtype=np.int64)
    clusters = base_clusters_of(state, np.array([int(i, 16) for i in ids], dtype=np.int64))
    if state.segments:
        placed = segment_clusters(state)  # a document back in a segment after leaving the base is there
        clusters = np.array([placed.get(i, c) for i, c in zip(ids, clusters.tolist(), strict=True)], dtype=np.int64)
    on_map = clusters >= 0
    return [i for i, keep in zip(ids, on_map.tolist(), strict=True) if keep], clusters[on_map]


def _nearest_of(sums: np.ndarray, sizes: np.ndarray, vecs: np.ndarray) -> np.ndarray:
    """The cluster of each vector: the one whose members' mean direction (``sums``) is nearest by cosine."""
    norms = np.linalg.norm(sums, axis=1)
    scores = vecs.astype(np.float64) @ (sums / np.maximum(norms, 1e-12)[:, None]).T
    scores[:, (sizes <= 0) | (norms <= 1e-12)] = -np.inf  # a cluster with no member left takes no newcomers
    return np.asarray(scores.argmax(axis=1), dtype=np.int64)


def update_map(
    old: dict[str, Any], documents: Sequence[Document], vectors: np.ndarray, *, method: str = "auto"
) -> dict[str, Any] | None:
    """The previous map carried to these documents without a new layout, or None when a full layout is due.

    Documents still present keep their position and cluster; removed ones drop out. Each new document is placed
    by its nearest fitted neighbours (``place_by_neighbours``) and joins the cluster whose current members'
    mean vector is nearest by cosine; the clusters keep their labels, their sizes and centres are recounted and
    clusters left empty are dropped. None when ``old`` predates incremental maps (no layout record), when the
    method for this many documents is not the one it was laid out with, when nothing it was fitted on is left,
    or when the documents added and removed since its layout exceed RELAYOUT_SHARE of those it laid out.
    """
    n = len(documents)
    if vectors.shape[0] != n:
        raise SemsearchError(f"{vectors.shape[0]} vectors for {n} documents")
    if not _has_layout_record(old) or choose_method(n, method) != old["method"]:
        return None
    row_of = {d.id: r for r, d in enumerate(documents)}
    old_points = old["points"]
    kept = [(i, row_of[p[0]]) for i, p in enumerate(old_points) if p[0] in row_of]
    changed = old["changed_since_layout"] + (n - len(kept)) + (len(old_points) - len(kept))
    if not _within_share(old["laid_out_documents"], changed):
        return None
    fitted_rows = sorted(row_of[old_points[i][0]] for i in old["fitted"] if old_points[i][0] in row_of)
    if not fitted_rows:
        return None
    vecs = np.ascontiguousarray(vectors, dtype=np.float32)
    xy = np.zeros((n, 2), dtype=np.float64)
    assignment = np.full(n, -1, dtype=np.int64)
    for i, row in kept:
        xy[row] = old_points[i][1:3]
        assignment[row] = old_points[i][3]
    arrived = np.flatnonzero(assignment < 0)
    if len(arrived):
        xy[arrived] = place_by_neighbours(vecs[fitted_rows], xy[fitted_rows], vecs[arrived])
        assignment[arrived] = _nearest_cluster(vecs, assignment, len(old["clusters"]), arrived)
    sizes = np.bincount(assignment, minlength=len(old["clusters"]))
    remaining = [c for c in range(len(old["clusters"])) if sizes[c] > 0]
    renumber = np.full(len(old["clusters"]), -1, dtype=np.int64)
    renumber[remaining] = np.arange(len(remaining))
    assignment = renumber[assignment]
    clusters = [
        {**old["clusters"][c], "id": new_id, **centre(xy[assignment == new_id]), "size": int(sizes[c])}
        for new_id, c in enumerate(remaining)
    ]
    return {
        **_map_data(
            documents, xy, assignment, clusters, method=old["method"], seed=old.get("seed", 0), fitted=fitted_rows
        ),
        "algorithm": MAP_ALGORITHM,
        "laid_out_at": old["laid_out_at"],
        "laid_out_documents": old["laid_out_documents"],
        "changed_since_layout": changed,
    }


def _nearest_cluster(vecs: np.ndarray, assignment: np.ndarray, k: int, rows: np.ndarray) -> np.ndarray:
    """The cluster of each of ``rows``: the one whose assigned members' mean direction is nearest by cosine."""
    centroids = np.zeros((k, vecs.shape[1]), dtype=np.float64)
    for c in range(k):  # at most MAX_CLUSTERS passes; np.add.at over 150k rows is several times slower
        centroids[c] = vecs[assignment == c].sum(axis=0, dtype=np.float64)
    norms = np.linalg.norm(centroids, axis=1)
    scores = vecs[rows].astype(np.float64) @ (centroids / np.maximum(norms, 1e-12)[:, None]).T
    scores[:, norms <= 1e-12] = -np.inf  # a cluster with no member left takes no newcomers
    return np.asarray(scores.argmax(axis=1), dtype=np.int64)


def _has_layout_record(data: dict[str, Any]) -> bool:
    """Whether a loaded map says what an update needs: its algorithm, layout record and fitted points."""
    n, k = len(data["points"]), len(data["clusters"])
    record = (data.get("laid_out_at"), data.get("laid_out_documents"), data.get("changed_since_layout"))
    fitted = data.get("fitted")
    return (
        data.get("algorithm") == MAP_ALGORITHM
        and isinstance(record[0], str)
        and all(isinstance(v, int) and v >= 0 for v in record[1:])
        and isinstance(fitted, list)
        and all(isinstance(i, int) and 0 <= i < n for i in fitted)
        and all(_point_ok(p, k) for p in data["points"])
    )


def _point_ok(point: list[Any], clusters: int) -> bool:
    """Whether a stored point is [id, x, y, cluster] with a number for x and y and a cluster that exists."""
    doc_id, x, y, cluster = point
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (x, y))
    return isinstance(doc_id, str) and numbers and isinstance(cluster, int) and 0 <= cluster < clusters


def map_fingerprint(documents: Sequence[Document], vectors: np.ndarray, method: str, seed: int = 0) -> str:
    """A hash of everything a map depends on: the algorithm, its settings, the documents and their vectors."""
    import hashlib

    digest = hashlib.sha256(f"{MAP_ALGORITHM}|{method}|{seed}|{UMAP_MIN_DOCS}|{UMAP_FIT_MAX}".encode())
    for doc in documents:
        digest.update(f"{doc.id}\0{doc.title or ''}\0".encode())
    digest.update(np.ascontiguousarray(vectors, dtype=np.float32).tobytes())
    return digest.hexdigest()


def usable_map(previous: Path | None, *, method: str | None = None) -> dict[str, Any] | None:
    """The previous version's map when it has a usable one (with its layout record), else None.

    None without reading anything when no map is wanted (SEMSEARCH_MAP=off, or a setting the build rejects).
    """
    if previous is None:
        return None
    try:
        if (requested_method() if method is None else method) == "off":
            return None
        data = load_map(previous)
    except (OSError, SemsearchError):
        return None  # no usable previous map: compute a fresh one
    # A map from before incremental layouts (no layout record) is laid out again, once.
    return data if data is not None and _has_layout_record(data) else None


def load_map(version: Path) -> dict[str, Any] | None:
    """A version's map, or None when the version has none (built before maps existed).

    An appended version's map is its base map.json with its segments' point files applied (``map_layers``);
    a version written before layered maps is its map.json alone.
    """
    path = Path(version) / MAP_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise IndexCorruptError(f"{path} is unreadable ({exc}); rebuild with: semsearch index --full") from exc
    problem = _schema_problem(data)
    if problem:
        raise IndexCorruptError(f"{path}: {problem}; rebuild with: semsearch index --full")
    state = read_state(Path(version))
    if state is not None and state.segments:
        data = assemble(Path(version), state, data)  # checks each point file as it reads it
    return data


def _schema_problem(data: Any) -> str | None:
    """What is wrong with a loaded map.json, or None."""
    if not isinstance(data, dict):
        return "not a JSON object"
    for key, kind in (("method", str), ("documents", int), ("points", list), ("labels", list), ("clusters", list)):
        if not isinstance(data.get(key), kind):
            return f"{key!r} is missing or malformed"
    if len(data["points"]) != data["documents"] or len(data["labels"]) != data["documents"]:
        return f"{len(data['points'])} points and {len(data['labels'])} labels for {data['documents']} documents"
    bad = next((p for p in data["points"] if not (isinstance(p, list) and len(p) == 4)), None)
    if bad is not None:
        return f"malformed point {str(bad)[:40]}"
    return None
