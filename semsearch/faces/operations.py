"""Every user operation, declared once: its typed request (fields, bounds, defaults, one-line help), the library
function it calls, and the faces that carry it (CLI command, HTTP route, MCP tool).

The faces derive what they show from this table: ``cli_ops`` the click options, ``http_ops`` the FastAPI
parameters (so ``/openapi.json``), ``mcp_tools`` the tools' names, descriptions and input schemas; the test
``tests/test_operations.py`` walks the table and checks every face against it. A face that must differ (an
agent's page default, a path parameter) says so here, in ``Spec.cli`` / ``http`` / ``mcp``, never in the face.
Plain dataclasses only (no click, FastAPI or pydantic), so ``semsearch --help`` stays light.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from semsearch.core.options import ALSO_NEW_CAP, DEFAULT_K, MAX_K, MIN_FIT, RECOMMEND_METHODS
from semsearch.faces.api_schema import IDS_SCHEMA, QUERY_SCHEMA, SINCE_SCHEMA, WHERE_SCHEMA
from semsearch.store.filters import WHERE_HELP

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
    schema: Mapping[str, Any] = field(default_factory=dict)  # more JSON Schema HTTP states (the library checks it)
    name: str = ""  # the face's name for the field: "-k", "--not", "TEXT" (a positional), "q"; default its own
    metavar: str | None = None  # CLI
    path: bool = False  # HTTP: a path parameter
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
        return ()

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
    return arg(
        0, help="Rank to start from, counted from 0: the previous page's next_offset.", ge=0, lt=MAX_K, faces=(MCP,)
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
    offset: int = _offset()


@dataclass(frozen=True)
class Related:
    """Papers nearest to one in the index (cosine), never itself."""

    id: str = _paper_id()
    k: int = _k()
    where: tuple[str, ...] = _where()
    min_score: float | None = arg(None, help="Drop hits scoring below this (a cosine, -1..1).", faces=(CLI,))
    diverse: bool = arg(False, help=DIVERSE_CLI, faces=(CLI,))
    offset: int = _offset()


@dataclass(frozen=True)
class GetPaper:
    """One document: text, title, metadata, sources."""

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
        cli={"help": "Scoring method (see semsearch.reader.recommend) [default: the one measured best]."},
    )
    offset: int = _offset()


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
    offset: int = _offset()


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


# ---------------------------------------------------------------- the table


@dataclass(frozen=True)
class Operation:
    """One user operation: its request, the one library function behind it, and where each face carries it."""

    name: str
    request: type
    call: str  # "module:qualified.name" of the library function
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

    def function(self) -> Any:
        """The library function (imported on call: the table itself imports none of them)."""
        import importlib

        module, _, qualname = self.call.partition(":")
        found: Any = importlib.import_module(module)
        for part in qualname.split("."):
            found = getattr(found, part)
        return found


def _default_of(f: dataclasses.Field[Any]) -> Any:
    return REQUIRED if f.default is dataclasses.MISSING else f.default


OPERATIONS: tuple[Operation, ...] = (
    Operation(
        "search",
        Search,
        "semsearch.query.search:Index.search",
        cli="query",
        http="/api/search",
        mcp="search",
        agent_help="Find papers in the local index that answer a question in plain words; returns one page of "
        "short cards (id, title, authors, year, score, best sentence, link) and next_offset for the next page.",
    ),
    Operation(
        "related",
        Related,
        "semsearch.query.search:Index.related",
        cli="related",
        http="/api/related/{doc_id}",
        mcp="related",
        agent_help="Find the papers nearest in meaning to one paper of the index (never the paper itself), as "
        "one page of short cards.",
    ),
    Operation(
        "get_paper",
        GetPaper,
        "semsearch.query.search:Index.get",
        http="/api/documents/{doc_id}",
        mcp="get_paper",
        agent_help="Get one paper in full (abstract, metadata, sources) by the id that a search or related card gave.",
    ),
    Operation(
        "info",
        Info,
        "semsearch.query.search:Index.info",
        cli="info",
        http="/api/info",
        mcp="info",
        agent_help="Describe the local index: how many papers, which model, which source files, which version.",
    ),
    Operation(
        "recommend",
        Recommend,
        "semsearch.reader.recommend:recommend",
        cli="recommend",
        http="/api/recommend",
        mcp="recommend",
        agent_help="Recommend papers of the index like the ones the user likes (ids or tags) and unlike the "
        "not_like ones, as one page of cards, each saying which liked paper it is near.",
    ),
    Operation(
        "new",
        New,
        "semsearch.reader.whats_new:ranked_new",
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
        "semsearch.reader.export:export",
        cli="export",
        http="/api/export",
        mcp="export",
        agent_help="Get papers as citations to paste into a reference manager or a LaTeX file (whole entries; "
        "ids that did not fit come back in rest).",
    ),
    Operation("digest", Digest, "semsearch.reader.digest:make_digest", cli="digest"),
    Operation("tags", Tags, "semsearch.reader.tags:members", cli="tag list", http="/api/tags"),
    Operation("watch", Watch, "semsearch.reader.arrivals:add_watch", cli="watch add"),
)

BY_NAME: dict[str, Operation] = {op.name: op for op in OPERATIONS}


def operation(name: str) -> Operation:
    """The operation of that name (KeyError names it otherwise)."""
    return BY_NAME[name]


def face_name(face: str, field_name: str, op: str | None = None) -> str:
    """How ``face`` names a request field in its messages (``worded``): CLI ``--where``, HTTP ``q``, MCP ``query``.

    With ``op`` the operation's own field is used, else the first operation that has one of that name.
    """
    ops = [BY_NAME[op]] if op in BY_NAME else list(OPERATIONS)
    for each in ops:
        for param in each.params(face):
            if param.field == field_name:
                return param.name
    return "--" + field_name.replace("_", "-") if face == CLI else field_name
