"""The choices and defaults every face offers (library, CLI, server, MCP), in one leaf module.

The modules that own a behaviour import their choice list from here, and the faces build their options from the
same names, so a new mode is one edit and ``semsearch --help`` never imports numpy to learn them. The choices an
extension can add to (ANN kinds, encoder backends, models) are the extension registry's (``core/registry.py``),
read by the functions at the end when a face first needs them.
"""

from __future__ import annotations

# The longest id, external id or DOI a lookup takes (and ingest keeps: a longer one is a bad record). Document
# ids are 16 hex digits and DOIs a few dozen characters; thousands of characters are a pasted abstract.
MAX_KEY_CHARS = 1000
MODES = ("hybrid", "dense", "lexical")  # search.py: how hits are scored; the first is the default
FUSIONS = ("adaptive", "fixed")  # query/fusion.py: how hybrid weighs its two sides per query, or alpha 0.5
# What a new build records as its hybrid weighting (the manifest's "fusion"; query/fusion.py explains both).
# Recorded, not implied, so a later release's new default never changes an existing index's ranking. Adaptive is
# the default since it was never worse than alpha 0.5 beyond noise on five collections and gains where one side is
# weak (docs/explanation/quality.md); an index built before it records nothing and keeps alpha 0.5.
DEFAULT_FUSION = "adaptive"
FIXED_ALPHA = 0.5  # query.fusion.DEFAULT_ALPHA
ADAPTIVE_PEAK_TOP, ADAPTIVE_POWER, ADAPTIVE_LEXICAL_SCALE = 1, 1.0, 1.5
# Query signals (query/fusion.py FusionPolicy.leader; docs/explanation/quality.md tells how they were chosen): when
# BM25's best match holds less than COMMON_SHARE of the query's idf mass, dense leads with at least DENSE_ALPHA; a
# query of one typed word, shaped like an acronym or in at most RARE_DF of the documents, gives dense at most
# ONE_TERM_ALPHA, and a query whose words spelling corrected for BM25 (query/spelling.py), at least TYPO_SHARE of its
# typed words, at most TYPO_ALPHA: the dense side reads the typos. When the best match holds less than ALONE_SHARE,
# BM25's list rests on a few common words and dense ranks alone.
ADAPTIVE_RARE_DF, ADAPTIVE_COMMON_SHARE, ADAPTIVE_DENSE_ALPHA, ADAPTIVE_ONE_TERM_ALPHA = 0.005, 0.6, 0.75, 0.3
ADAPTIVE_TYPO_ALPHA, ADAPTIVE_TYPO_SHARE, ADAPTIVE_ALONE_SHARE = 0.3, 0.25, 0.35


def fusion_entry(method: str = DEFAULT_FUSION) -> dict[str, object]:
    """The manifest's "fusion" entry of a build that fuses by ``method``, with the parameters that define it."""
    if method == "adaptive":
        return {
            "method": "adaptive",
            "peak_top": ADAPTIVE_PEAK_TOP,
            "power": ADAPTIVE_POWER,
            "lexical_scale": ADAPTIVE_LEXICAL_SCALE,
            "rare_df": ADAPTIVE_RARE_DF,
            "common_share": ADAPTIVE_COMMON_SHARE,
            "dense_alpha": ADAPTIVE_DENSE_ALPHA,
            "one_term_alpha": ADAPTIVE_ONE_TERM_ALPHA,
            "typo_alpha": ADAPTIVE_TYPO_ALPHA,
            "typo_share": ADAPTIVE_TYPO_SHARE,
            "alone_share": ADAPTIVE_ALONE_SHARE,
        }
    return {"method": "fixed", "alpha": FIXED_ALPHA}


# `semsearch eval --tune` (eval/tune.py) weighs these on a collection's judged queries, beside adaptive and what the
# index records, and records the winner only when it beats the recorded one by TUNE_MARGIN paired standard errors.
TUNE_ALPHAS = tuple(round(a / 10, 1) for a in range(11))
TUNE_MARGIN = 2.0
TUNE_MIN_QUERIES = 10  # fewer judged queries give no standard error worth the name


def tuned_entry(alpha: float, tuned_on: dict[str, object]) -> dict[str, object]:
    """The manifest's "fusion" entry of a weight chosen on judged queries (``tuned_on`` says which, and how)."""
    return {"method": "tuned", "alpha": alpha, "tuned_on": tuned_on}


# The runtime that encodes (encode/encoder_choice.py) when neither the caller nor the index names one; every
# backend there is, built in or a plugin's, is an entry of the extension registry (``backend_names``).
DEFAULT_BACKEND = "onnx"
PRECISIONS = ("fp32", "int8")  # onnx_backend.py: ONNX weights
DEFAULT_PRECISION = "int8"
# How the ONNX runtime computes a vector (onnx_backend.py): "alone", each text in its own unpadded run, so a
# vector depends on its text only. Recorded in the manifest and the embedding cache's key, so vectors of the
# earlier batched regime (whose int8 activation scales depended on batch-mates) are never taken for these.
ONNX_REGIME = "alone"


def encoder_regime(backend: str) -> str:
    """The regime a backend's vectors are computed under ("" where none is promised: torch)."""
    return ONNX_REGIME if backend == "onnx" else ""


# How a document's vector reads an abstract longer than the encoder's window (encode/windows.py): "truncated", the
# encoder's first window only; "pooled", the unit mean of the whole-text vector and its sentence windows past the
# cut; "windows", the whole-text vector plus one stored vector per such window, a search's dense candidates
# re-scored by the best window (store/windows_part.py); "windows-all", the same with every 2-sentence window
# from the start; "sentences", a vector per sentence pooled from 128-token runs that read the whole text, and
# their mean as the document's vector (encode/sentence_runs.py), stored and scored as windows are. Recorded in
# the manifest (ModelInfo.reading; none recorded means truncated). Sentences is the default because it gained the
# most retrieval quality for a modest cost at the first build (docs/explanation/quality.md has the comparison): new
# indexes read sentences when the encoder can (ONNX); an encoder that cannot (torch, a caller's own) reads
# truncated unless sentences were asked for.
READINGS = ("truncated", "pooled", "windows", "windows-all", "sentences")
DEFAULT_READING = "sentences"


# --ann when neither the caller nor the index names a kind: store/ann_build.py chooses by corpus size and memory.
DEFAULT_ANN = "auto"
ENGINES = ("local", "ray")  # where a build encodes (ray_engine.py)
DEFAULT_INDEX = "indexes/default"
INDEX_ENV = "SEMSEARCH_INDEX"
DEFAULT_K = 10
# One bound for every face: a ranked list is read by a person or an agent, and past a thousand hits it is an
# export, not a search.
MAX_K = 1000
# atlas/method.py: a refresh places arrivals on the last map layout until the documents added plus removed since it
# exceed this share of those it laid out; then the map is laid out again (see RELAYOUT_SHARE there).
MAP_RELAYOUT_SHARE = 0.2
DEFAULT_BATCH_SIZE = 32  # texts per torch encoder batch (ONNX encodes each text alone: one text, one vector)
DEFAULT_HOST = "127.0.0.1"  # a server listens on this machine only unless told otherwise
DEFAULT_PORT = 8000

# The user's loop (curate.whats_new, curate.digest), here so that the CLI's help needs no numpy:
# a paper fits an interest from this z-score on: high enough that few unrelated arrivals pass it, low enough that
# most related ones do (docs/guides/digest.md).
MIN_FIT = 2.0
# and a digest shows at most this many "also new" titles (the count covers the rest).
ALSO_NEW_CAP = 50
# How `digest --mail-to` talks to its SMTP server (curate/mail.py); here so the CLI declares the choice
# without importing smtplib, ssl and email on every command.
SMTP_SECURITIES = ("starttls", "ssl", "none")
# How `recommend` scores (curate/recommend.py METHODS; a test checks they agree), here so the faces declare the
# choice without importing numpy.
RECOMMEND_METHODS = ("centroid", "maxsim", "svm", "svm-bm25", "fused", "related")
# The MCP server's tools, in the order `tools/list` gives them (faces/mcp_tools.py; a test checks they agree),
# named here so `semsearch mcp --help` can list them without importing the MCP SDK.
MCP_TOOLS = ("search", "related", "get_paper", "info", "recommend", "whats_new", "export")


def ann_choices() -> tuple[str, ...]:
    """What ``--ann`` takes: "auto" and every registered ANN kind (reads the plugins' entry points once)."""
    from semsearch.core import registry

    return (DEFAULT_ANN, *registry.names("ann"))


# Registered and accepted, but not offered: a words-only stand-in for tests and benchmarks builds an index without
# meaning, which no user choosing from --help should pick by accident.
UNLISTED_BACKENDS = ("hashed",)


def backend_names() -> tuple[str, ...]:
    """What ``--backend`` offers: every registered encoder backend, the built-in ones first (the stand-in left out)."""
    from semsearch.core import registry

    return tuple(name for name in registry.names("backend") if name not in UNLISTED_BACKENDS)


def backend_accepted() -> tuple[str, ...]:
    """What ``--backend`` accepts: every registered encoder backend, the unlisted stand-in too."""
    from semsearch.core import registry

    return registry.names("backend")
