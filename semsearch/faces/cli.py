"""The ``semsearch`` command: a thin click layer over the library (resolve inputs, call, format)."""

from __future__ import annotations

import inspect
import json
import os
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from semsearch.core import options
from semsearch.core.errors import NoMatchWarning, SemsearchError
from semsearch.core.version import __version__
from semsearch.core.wording import count
from semsearch.faces.cli_ops import check_read_text, request_options
from semsearch.faces.cli_options import SemsearchCliError, embedder_of, index_option, output_options
from semsearch.faces.operations import CLI, OPERATIONS, face_name

HELP_SCORES = (
    "Scores by --mode: dense is the cosine similarity of unit-length embeddings (-1..1; about 0.5+ is usually on "
    "topic for all-MiniLM-L6-v2); lexical is the BM25 score (0 up, unbounded, grows with rare matching words); "
    "hybrid (the default) is alpha·z(cosine) + (1-alpha)·z(BM25), each z-scored over this query's top 1000 "
    f"candidates, alpha as the index's fusion says: {options.DEFAULT_FUSION} by default (chosen per query from how "
    "far each side's best candidates stand out and what the query's words are), one alpha when `eval --tune` "
    "recorded it, 0.5 with --fusion fixed. About 0 is average for the query, 2+ stands out. Compare hybrid scores "
    "within one query only; --json shows the cosine and BM25 parts of every hit, and alpha with its reason."
)


def _operation_of(command: str | None) -> str | None:
    """The operation a command carries (None for commands outside the table: index, verify, ...)."""
    for op in OPERATIONS:
        if op.cli is not None and op.cli.split()[0] == command:
            return op.name
    return None


class Group(click.Group):
    """Turns library errors into one-line messages instead of tracebacks."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            with warnings.catch_warnings():
                # A command says why a filter matched nothing in its own line (``_warn_where``; the server in its
                # answers' warnings): the library's NoMatchWarning would say it a second time, as a Python warning.
                warnings.simplefilter("ignore", NoMatchWarning)
                return super().invoke(ctx)
        except SemsearchError as exc:
            # A message about a request field names it as this command's flag (--where, -k, --not).
            command = _operation_of(ctx.invoked_subcommand)
            raise SemsearchCliError(exc.worded(lambda f: face_name(CLI, f, command))) from exc
        except OSError as exc:
            # Disk full, permissions, a path that is a file: the OS's reason and the path, in one line.
            where = f": {exc.filename}" if exc.filename else ""
            raise SemsearchCliError(f"{exc.strerror or exc}{where}") from exc
        except KeyboardInterrupt:
            click.echo("semsearch: interrupted", err=True)
            sys.exit(130)


def _print_hits(
    hits: list[Any],
    as_json: bool,
    as_jsonl: bool,
    fmt: str | None = None,
    *,
    catalogued: bool = True,
    parsed: dict[str, Any] | None = None,
    spelling: dict[str, Any] | None = None,
) -> None:
    from semsearch.faces.render import hits_table, to_json, to_jsonl, use_color

    if fmt is not None:
        from semsearch.reader.export import export

        _notice_untitled(hits, catalogued)  # first: it then stays ahead of the citations through any pipe
        click.echo(export(hits, fmt), nl=False)
        return

    # Each row carries the query as read (fields, phrases, -words) and what BM25 searched (each typo corrected):
    # the list's shape stays a list.
    about = {key: value for key, value in (("parsed", parsed), ("spelling", spelling)) if value is not None}
    rows = [{**h.to_dict(), **about} for h in hits]
    if as_json:
        click.echo(to_json(rows))
    elif as_jsonl:
        if rows:
            click.echo(to_jsonl(rows))
    else:
        click.echo(hits_table(hits, color=use_color(sys.stdout)))


def _warn_if_stale(idx: Any) -> None:
    """One line on stderr when the index's sources changed since it was built.

    The CLI asks the writer's freshness check itself: a library query (``Index``) never loads the source scanner.
    """
    from semsearch.write.freshness import stale_notice, stale_sources

    notice = stale_notice(stale_sources(idx.manifest, idx.path), str(idx.path))
    if notice:
        click.echo(f"semsearch: {notice}", err=True)


def _warn_where(idx: Any, where: tuple[str, ...]) -> None:
    """One line on stderr per reason a --where filter matched no document."""
    for line in idx.where_warnings(where):
        click.echo(f"semsearch: {line}", err=True)


def _notice_untitled(papers: Sequence[Any], catalogued: bool) -> None:
    """One line on stderr when citations lack titles, saying why (no catalogue, or none matched)."""
    from semsearch.reader.export import untitled_notice

    notice = untitled_notice(papers, catalogued)
    if notice:
        click.echo(f"semsearch: {notice}", err=True)


def _read_text_arg(text: str) -> str:
    """``-`` reads the text from standard input."""
    if text != "-":
        return text
    if sys.stdin is None or sys.stdin.closed:
        raise SemsearchCliError("'-' reads the query from stdin, but stdin is closed")
    try:
        return sys.stdin.read()
    except UnicodeDecodeError as exc:
        raise SemsearchCliError(f"stdin is not UTF-8 text ({exc.reason})") from exc


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="semsearch")
def cli() -> None:
    """Semantic search over research-paper abstracts.

    \b
    Build an index from abstract files, then ask it questions in plain words:
      semsearch index seeds/
      semsearch query "federated learning with differential privacy"
      semsearch related 3f2a9c01d4e5b6a7
      semsearch info
    """


@cli.command()
@click.argument("sources", nargs=-1)
@index_option
@click.option(
    "--model",
    help="A short name from `semsearch models` (all-mpnet-base-v2), or any sentence-transformers name or path "
    "[default: the index's, else all-MiniLM-L6-v2].",
)
@click.option(
    "--backend",
    type=click.Choice(options.BACKENDS),
    help="Encoder runtime [default: the index's, else onnx]. onnx exports the model into the index so "
    "queries never load torch.",
)
@click.option(
    "--precision",
    type=click.Choice(options.PRECISIONS),
    help="ONNX weights [default: the index's, else int8]: int8 is smaller and faster; fp32 matches torch closely.",
)
@click.option(
    "--reading",
    type=click.Choice(options.READINGS),
    help="How vectors read an abstract longer than the model's window [default: the index's, else sentences "
    "with the onnx backend, truncated with torch]: sentences reads the whole abstract in runs of 128 tokens, "
    "keeps a vector per sentence and their mean as the document's, and re-scores a search's dense candidates "
    "by their best sentence (about 1.5x the first build); truncated reads the first window only; pooled "
    "averages the whole-text vector with sentence "
    "windows past the cut; windows stores a vector per 2-sentence window past the cut, windows-all per "
    "2-sentence window from the start (each encoded alone: 1.2x and 2x the encoding).",
)
@click.option("--full", is_flag=True, help="Rebuild from scratch (and allow switching models).")
@click.option(
    "--relayout",
    is_flag=True,
    help="Lay the corpus map out afresh. A refresh otherwise places new documents on the last layout until "
    f"more than {options.MAP_RELAYOUT_SHARE:.0%} of the documents it laid out have been added or removed "
    "(--full lays out afresh too).",
)
@click.option("--skip-bad", is_flag=True, help="Skip malformed records (reported) instead of stopping.")
@click.option(
    "--drop-unreadable",
    is_flag=True,
    help="Drop the papers of a source folder that cannot be read now (said in the summary). Without it such a "
    "refresh stops and the index keeps them.",
)
@click.option(
    "--follow-links/--no-follow-links",
    default=None,
    help="Read files that symbolic links in a source folder point to outside the source folders (remembered "
    "by the index) [default: the index's, else not: each is named in the summary]. Linked folders are always "
    "walked.",
)
@click.option("--no-near", is_flag=True, help="Merge only exact duplicates, not near-duplicates.")
@click.option(
    "--ann",
    type=click.Choice(options.ANN_CHOICES),
    help="Vector index [default: the index's, else auto]: auto is exact (flat) up to 20,000 documents, IVF "
    "above, IVF-PQ with exact re-ranking when the raw vectors exceed --memory-budget. hnsw on request.",
)
@click.option(
    "--memory-budget",
    metavar="SIZE",
    help="RAM for raw vectors before auto switches to compressed IVF-PQ codes, e.g. 512MB, 2GB "
    "[default: the index's, else 1GB].",
)
@click.option(
    "--batch-size",
    type=int,
    default=options.DEFAULT_BATCH_SIZE,
    show_default=True,
    help="Texts per encoder batch (torch; ONNX encodes each text alone).",
)
@click.option("--wait", is_flag=True, help="Wait for another writer of this index instead of failing.")
@click.option(
    "--optimize",
    is_flag=True,
    help="Rewrite the index as one segment. A refresh that brings new files (or drops some) appends a small "
    "segment instead of rewriting the corpus; they are merged this way, or by themselves past a tenth of it.",
)
@click.option(
    "--engine",
    type=click.Choice(options.ENGINES),
    default=options.ENGINES[0],
    show_default=True,
    help="Where texts are encoded: in this process, or on Ray (pip install 'semsearch[ray]'): a pool of "
    "encoder actors, one per CPU. Vectors equal a local build's; the cache and the index stay here.",
)
@click.option(
    "--address",
    metavar="ADDR",
    help="Ray cluster for --engine ray: ray://HEAD:10001 (Ray Client) or HEAD:6379 on a cluster node "
    "[default: RAY_ADDRESS, else a Ray started on this machine for the build]. Every node needs "
    "semsearch[ray] installed.",
)
@click.option("--actors", type=int, metavar="N", help="Encoder actors for --engine ray [default: one per CPU].")
@click.option(
    "--catalogue",
    "catalogues",
    multiple=True,
    metavar="FILE",
    help="Paper records (any input format, e.g. an ML Anthology dump or a .bib) that give matching documents "
    "their title, authors, year, venue, links, DOI and id; never indexed themselves. Repeatable; kept by later "
    "refreshes [default: the index's].",
)
@click.option("--no-catalogue", is_flag=True, help="Drop the catalogue the index remembers.")
@click.option("--list-uncatalogued", is_flag=True, help="List the documents no catalogue record matched.")
@click.option(
    "--recover",
    is_flag=True,
    help="Point a damaged, missing or dangling CURRENT back at the newest sound version (atomically; deletes "
    "nothing, builds nothing).",
)
@click.option(
    "--recover-to",
    metavar="VERSION",
    help="Point CURRENT at VERSION (a v-… folder of the index whose every file matches its checksum), e.g. one "
    "older than a damaged live version (atomically; deletes nothing, builds nothing).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the build summary as one JSON line.")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar.")
@click.pass_context
def index(
    ctx: click.Context,
    sources: tuple[str, ...],
    index_dir: Path,
    model: str | None,
    backend: str | None,
    precision: str | None,
    reading: str | None,
    full: bool,
    relayout: bool,
    skip_bad: bool,
    drop_unreadable: bool,
    follow_links: bool | None,
    no_near: bool,
    ann: str | None,
    memory_budget: str | None,
    batch_size: int,
    wait: bool,
    optimize: bool,
    engine: str,
    address: str | None,
    actors: int | None,
    catalogues: tuple[str, ...],
    no_catalogue: bool,
    list_uncatalogued: bool,
    recover: bool,
    recover_to: str | None,
    as_json: bool,
    quiet: bool,
) -> None:
    """Build or update an index from SOURCES (files, directories, globs).

    The index then holds exactly what SOURCES provide: abstracts of files no longer given are
    removed. Without SOURCES, the sources of the last build are read again (./seeds for a new
    index). Only new or changed abstracts are encoded; the rest come from the embedding cache.

    \b
    Formats are detected from content and extension:
      seed text  first line a collection header, then one abstract per blank-line-separated paragraph
      JSONL, JSON array, CSV, TSV  fields title, abstract|text|summary, _id|id|paper_id; others kept
      BibTeX (.bib)  title, abstract, author, year, booktitle|journal, doi, url; the citation key as id
      any of them gzipped (.gz); UTF-8 (BOM or not), UTF-16 with BOM, GB18030/GBK; CRLF line ends
      Zotero     ~/Zotero or ~/Zotero/zotero.sqlite (read from a private copy; Zotero may be running)
    A record with a title and no abstract is indexed by its title (marked title-only).
    Identical abstracts become one document that remembers every source; near-duplicates
    (re-wrapped, markup, a few words changed) are merged too unless --no-near. A copy that
    arrives later joins the document it copies, which keeps its id and is not encoded again.
    The new index is written beside the old one and swapped in atomically.

    \b
    Titles and authors from a catalogue (documents whose abstract matches a record exactly
    or as a near-duplicate take its metadata):
      semsearch index seeds/ --catalogue ../shared/data/mlanthology/neurips2025.jsonl.gz
      semsearch index --list-uncatalogued     # refresh; the catalogue is remembered
    """
    from semsearch.store.ann import parse_size
    from semsearch.write.build import BuildOptions, build_index

    if recover or recover_to is not None:
        if recover and recover_to is not None:
            raise SemsearchCliError("choose one of --recover and --recover-to VERSION")
        _recover(sources, index_dir, wait, as_json, recover_to)
        return
    if batch_size < 1:
        raise SemsearchCliError(f"--batch-size must be a positive integer, got {batch_size}")
    if no_catalogue and catalogues:
        raise SemsearchCliError("choose one of --catalogue and --no-catalogue")
    summary = build_index(
        list(sources) or None,
        index_dir,
        BuildOptions(
            model=model,
            backend=backend,
            precision=precision,
            reading=reading,
            full=full,
            relayout=relayout,
            skip_bad=skip_bad,
            drop_unreadable=drop_unreadable,
            follow_links=follow_links,
            near=not no_near,
            batch_size=batch_size,
            progress=not quiet and not as_json,
            wait=wait,
            ann=ann,
            memory_budget=parse_size(memory_budget) if memory_budget is not None else None,
            engine=engine,
            address=address,
            actors=actors,
            catalogues=[] if no_catalogue else (list(catalogues) or None),
            rewrite=optimize,
        ),
        embedder=embedder_of(ctx),
    )
    from semsearch.core.safe_text import clean_text, json_text

    for line in summary.skipped:  # lines can quote a record: no control character reaches the terminal
        click.echo(f"semsearch: skipped {clean_text(line, one_line=True)}", err=True)
    uncatalogued = (summary.catalogue or {}).get("uncatalogued", [])
    if summary.catalogue is not None and list_uncatalogued:
        # Read from the live version, so a refresh with nothing to do lists them without writing a version.
        uncatalogued = summary.catalogue["uncatalogued"] = _uncatalogued(index_dir)
    if summary.catalogue is not None and not list_uncatalogued:
        summary.catalogue.pop("uncatalogued", None)
    for line in (summary.catalogue or {}).get("ties", []):
        click.echo(f"semsearch: catalogue tie: {clean_text(line, one_line=True)}", err=True)
    if as_json:
        click.echo(json_text(json.dumps(summary.to_dict(), ensure_ascii=False)))
        return
    if summary.unchanged:
        click.echo(
            f"up to date: {count(summary.documents, 'document')} from {count(summary.files, 'file')}, "
            f"no source or setting changed "
            f"since {summary.version}; nothing written ({summary.seconds:.1f} s). --full rebuilds anyway."
        )
        if list_uncatalogued:
            if summary.catalogue is not None:
                from semsearch.write.catalogue import summary_line

                click.echo(summary_line(summary.catalogue))
            _echo_uncatalogued(summary.catalogue, uncatalogued)
        return
    click.echo(
        f"read {count(summary.read, 'abstract')} from {count(summary.files, 'file')}: "
        f"{count(summary.documents, 'document')} "
        f"({count(summary.duplicates, 'duplicate')}, {count(summary.near_duplicates, 'near-duplicate')} merged)"
    )
    click.echo(
        f"encoded: {summary.encoded}, from cache: {summary.cached}, added: {summary.added}, removed: {summary.removed}"
    )
    if summary.title_only or summary.aliases:
        click.echo(f"title-only documents: {summary.title_only}, former ids kept as aliases: {summary.aliases}")
    if summary.catalogue is not None:
        from semsearch.write.catalogue import summary_line

        click.echo(summary_line(summary.catalogue))
    if list_uncatalogued:
        _echo_uncatalogued(summary.catalogue, uncatalogued)
    if summary.rewritten_because:
        click.echo(f"rewrote the index whole rather than appending a segment: {summary.rewritten_because}")
    appended = f" + {summary.segments} appended segment(s); --optimize merges them" if summary.segments else ""
    click.echo(f"vectors: {summary.ann}{appended}")
    on_ray = ", encoded on ray" if summary.engine == "ray" else ""
    click.echo(f"index: {summary.index} ({summary.version}, {summary.backend}{on_ray}) in {summary.seconds:.1f} s")


def _uncatalogued(index_dir: Path) -> list[dict[str, str]]:
    """The live version's documents that no catalogue record matched, as {id, label}."""
    from semsearch.query.search import Index
    from semsearch.write.catalogue import MATCH_KEY

    with Index.open(index_dir) as idx:
        return [{"id": d.id, "label": d.label()} for d in idx.store.iter_documents() if MATCH_KEY not in d.metadata]


def _echo_uncatalogued(catalogue: dict[str, Any] | None, rows: list[dict[str, str]]) -> None:
    """``--list-uncatalogued``'s lines: one per document no record matched."""
    from semsearch.core.paperinfo import plain_text

    if catalogue is None:
        click.echo("uncatalogued: no catalogue (give one with --catalogue FILE)")
    for row in rows:
        click.echo(f"uncatalogued: {row['id']}  {plain_text(row['label'])}")


def _recover(sources: tuple[str, ...], index_dir: Path, wait: bool, as_json: bool, to: str | None) -> None:
    """``semsearch index --recover`` (or ``--recover-to VERSION``): re-point CURRENT, say what was done."""
    from semsearch.store.versions import recover

    flag = "--recover" if to is None else "--recover-to"
    if sources:
        raise SemsearchCliError(f"{flag} takes no SOURCES: it only points CURRENT back at a version")
    done = recover(index_dir, wait=wait, to=to)
    if as_json:
        click.echo(json.dumps(done.to_dict()))
    elif done.recovered:
        click.echo(f"recovered: {done.problem}; CURRENT now names {done.version} (nothing was deleted)")
    else:
        click.echo(f"nothing to recover: CURRENT names {done.version}, a version of {index_dir}")


@cli.command()
@request_options("search")
@index_option
@click.option("--model", help="Refuse to answer unless the index was built with this model.")
@output_options
@click.pass_context
def query(
    ctx: click.Context,
    query: str,
    k: int,
    mode: str,
    where: tuple[str, ...],
    diverse: bool,
    min_score: float | None,
    index_dir: Path,
    model: str | None,
    fusion: str | None,
    exact: bool,
    as_json: bool,
    as_jsonl: bool,
    fmt: str | None,
) -> None:
    """Find the abstracts that best answer TEXT ('-' reads it from stdin).

    Each hit shows rank, score, title (or the abstract's opening words), id, sources, and the
    sentence that matched best with the query's words highlighted.
    """
    from semsearch.query.search import Index
    from semsearch.query.syntax import parse_query

    text = _read_text_arg(query)
    if query == "-":
        check_read_text(ctx, "query", text)  # as bounded as one typed on the command line
    with Index.open(index_dir, embedder=embedder_of(ctx), model=model) as idx:
        hits = idx.search(
            text, k, mode=mode, where=where, min_score=min_score, diverse=diverse, fusion=fusion, exact=exact
        )
        parsed = parse_query(text)  # read without error: the search did
        spelling = idx.spell(text, exact=exact or mode == "dense")
        _warn_if_stale(idx)
        _warn_where(idx, (*where, *parsed.where))  # year:, venue:, title: in the text are filters too
        _say_spelling(spelling, mode, exact, found=bool(hits), table=not (as_json or as_jsonl or fmt))
        catalogued = idx.manifest.catalogue is not None
    _print_hits(
        hits, as_json, as_jsonl, fmt, catalogued=catalogued, parsed=parsed.to_dict(), spelling=spelling.to_dict()
    )


def _say_spelling(spelling: Any, mode: str, exact: bool, *, found: bool, table: bool) -> None:
    """On stderr: what BM25 searched when typos were corrected (tables only), and why BM25 alone found nothing."""
    if spelling.changed and table:
        click.echo(f"semsearch: {spelling.describe()}", err=True)
    if mode == "lexical" and not found and spelling.text:
        tried = "with typos corrected" if spelling.changed else "as typed"  # --exact corrects none
        hint = "" if exact or spelling.changed else "; no word was close enough to a frequent word to correct"
        click.echo(
            f"semsearch: no document holds any of the words searched for ({tried}): {spelling.text}{hint}; "
            "try --mode hybrid, which also reads meaning",
            err=True,
        )


query.help = f"{inspect.cleandoc(query.help or '')}\n\n{HELP_SCORES}"


@cli.command()
@request_options("related")
@click.option("--text", help="Find papers related to this abstract text instead of an indexed paper.")
@click.option(
    "--file",
    "file_",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Find papers related to the abstract in this text file.",
)
@index_option
@output_options
@click.pass_context
def related(
    ctx: click.Context,
    id: str | None,
    k: int,
    where: tuple[str, ...],
    min_score: float | None,
    diverse: bool,
    text: str | None,
    file_: Path | None,
    index_dir: Path,
    as_json: bool,
    as_jsonl: bool,
    fmt: str | None,
) -> None:
    """Papers nearest to one you know: by DOC_ID (or an external id such as a BEIR _id), --text or --file.

    The paper itself and its duplicates are never returned. Scores are cosine similarities; a paper's 100
    nearest are ordered by its own subject words too (its most distinctive words), so its topic comes first.
    """
    from semsearch.query.search import Index

    doc_id = id
    given = [x for x in (doc_id, text, file_) if x is not None]
    if len(given) != 1:
        raise SemsearchCliError("give exactly one of DOC_ID, --text or --file")
    if file_ is not None:
        try:
            text = file_.read_text(encoding="utf-8-sig")
        except (OSError, UnicodeDecodeError) as exc:
            raise SemsearchCliError(f"cannot read {file_}: {getattr(exc, 'strerror', None) or exc}") from exc
    with Index.open(index_dir, embedder=embedder_of(ctx)) as idx:
        explain = fmt is None  # a citation export never shows a sentence
        if doc_id is not None:
            hits = idx.related(doc_id, k, where=where, min_score=min_score, diverse=diverse, explain=explain)
        else:
            hits = idx.related_to_text(
                text or "", k, where=where, min_score=min_score, diverse=diverse, explain=explain
            )
        _warn_if_stale(idx)
        _warn_where(idx, where)
        catalogued = idx.manifest.catalogue is not None
    _print_hits(hits, as_json, as_jsonl, fmt, catalogued=catalogued)


@cli.command()
@request_options("export")
@index_option
@click.option(
    "--out", type=click.Path(dir_okay=False, path_type=Path), help="Write to this file instead of standard output."
)
def export(ids: tuple[str, ...], where: tuple[str, ...], format: str, index_dir: Path, out: Path | None) -> None:
    """Export documents as citations: the IDS given (ids, id prefixes, external ids or citation keys), else
    every document, narrowed by --where.

    \b
      semsearch export 6a24ce769ac8de0d wen2025neurips-differentially > refs.bib
      semsearch export --where venue=neurips --where "year>=2025" --format csljson --out refs.json
      semsearch query "federated privacy" -k 5 --format bibtex     # the hits of a query
    """
    from semsearch.query.search import Index
    from semsearch.reader.export import export as export_papers
    from semsearch.reader.export import select_documents

    with Index.open(index_dir) as idx:
        docs = select_documents(idx, ids, where)
        if where and not docs:
            _warn_where(idx, where)  # as query does: why the filter matched nothing (a field no document has)
        catalogued = idx.manifest.catalogue is not None
    fmt = format
    text = export_papers(docs, fmt)
    _notice_untitled(docs, catalogued)  # first: it then stays ahead of the citations through any pipe
    if out is None:
        click.echo(text, nl=False)
        return
    from semsearch.core.fileio import write_output

    write_output(out, text)  # the one --out writer: never replaces a link, a FIFO or a device
    click.echo(f"exported {count(len(docs), 'document')} to {out} ({fmt})", err=True)


@cli.command()
@index_option
@click.option("--json", "as_json", is_flag=True, help="Print the manifest facts as JSON.")
def info(index_dir: Path, as_json: bool) -> None:
    """Show what an index holds: model, dimension, documents, sources, size on disk, build time."""
    from semsearch.faces.render import info_text, to_json
    from semsearch.query.search import Index

    with Index.open(index_dir) as idx:
        facts = idx.info()
    click.echo(to_json(facts.to_dict()) if as_json else info_text(facts))


@cli.command()
@index_option
@click.option("--json", "as_json", is_flag=True, help="Print {ok, problems} as JSON.")
def verify(index_dir: Path, as_json: bool) -> None:
    """Check an index end to end: manifest, checksums, vector and document counts, ids, model.

    Exits 1 when anything is wrong, naming each problem.
    """
    from semsearch.write.verify import verify_index

    problems = verify_index(index_dir)
    if as_json:
        click.echo(json.dumps({"ok": not problems, "problems": problems}))
    elif not problems:
        click.echo(f"ok: {index_dir} is sound")
    for line in problems if not as_json else []:
        click.echo(f"semsearch: {line}", err=True)
    if problems:
        sys.exit(1)


@cli.command(name="map")
@index_option
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default="map.html",
    show_default=True,
    help="HTML file to write.",
)
@click.option("--open", "open_", is_flag=True, help="Open the file in a web browser afterwards.")
def map_(index_dir: Path, out: Path, open_: bool) -> None:
    """Write the index's map of the corpus as one self-contained HTML file (works offline).

    The map is computed when the index is built: each point is a paper laid out by the similarity
    of its embedding, coloured by cluster, with clusters named by their most distinctive words.
    Hover shows a title, click shows the paper, the search box lights up matching titles
    (map.html#q=WORDS opens with them lit). Layout: PCA below 1,000 documents, else UMAP;
    set SEMSEARCH_MAP=pca, umap or off when running `semsearch index` to choose.
    """
    from semsearch.faces.map_page import write_map_html

    data = write_map_html(index_dir, out)
    click.echo(
        f"map: {out} ({count(data['documents'], 'document')}, {count(len(data['clusters']), 'cluster')}, "
        f"{data['method']})"
    )
    if open_:
        import webbrowser

        webbrowser.open(out.resolve().as_uri())


@cli.command()
@click.argument("ids", nargs=-1)
@click.option(
    "--source",
    "sources",
    multiple=True,
    help="Remove what this source file, or every file under this folder, provided (repeatable).",
)
@index_option
@click.option("--wait", is_flag=True, help="Wait for another writer of this index instead of failing.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as one JSON line.")
def remove(ids: tuple[str, ...], sources: tuple[str, ...], index_dir: Path, wait: bool, as_json: bool) -> None:
    """Remove documents by id, or everything a --source file provided.

    A document that other sources also provide keeps those. A removed --source file stays out
    of later `semsearch index` refreshes until it is named as a source again; a removed id comes
    back with the next build from a source that still provides it.
    """
    from semsearch.write.remove import remove_documents

    summary = remove_documents(index_dir, ids=ids, sources=sources, wait=wait)
    if as_json:
        click.echo(json.dumps(summary.to_dict()))
    else:
        click.echo(f"removed: {summary.removed}, documents: {summary.documents} ({summary.version})")


@cli.command()
@index_option
@click.option(
    "--host", default=options.DEFAULT_HOST, show_default=True, help="Address to listen on (default: this machine only)."
)
@click.option(
    "--port", type=int, default=options.DEFAULT_PORT, show_default=True, help="Port to listen on (0: any free one)."
)
@click.option("--access-log", is_flag=True, help="Log every request to stderr.")
@click.option(
    "--allow-tags", is_flag=True, help="Let the page's like / not-for-me buttons write tags (same-origin JSON POST)."
)
@click.option(
    "--allow-host",
    "allow_hosts",
    multiple=True,
    metavar="NAME",
    help="Also answer requests for this host name (repeat), e.g. the machine's DNS name behind --host 0.0.0.0.",
)
@click.option(
    "--workers",
    type=int,
    default=1,
    show_default=True,
    help="Server processes sharing the port (one per core answers on every core); each follows new versions.",
)
@click.pass_context
def serve(
    ctx: click.Context,
    index_dir: Path,
    host: str,
    port: int,
    access_log: bool,
    allow_tags: bool,
    allow_hosts: tuple[str, ...],
    workers: int,
) -> None:
    """Browse an index in a web browser: a search page at / and a JSON API under /api (docs at /docs).

    Read-only unless --allow-tags. When `semsearch index` publishes a new version of the index, the server answers
    from it from the next request on, without a restart. It answers only requests addressed to its own names
    (localhost, the --host address, the machine's names when bound to 0.0.0.0, and --allow-host ones) from its
    own pages: a web page elsewhere cannot read or tag the library (421 / 403).
    """
    from semsearch.faces.serve import check_installed, run_server

    check_installed()

    if not 0 <= port <= 65535:
        raise SemsearchCliError(f"--port must be 0..65535, got {port}")
    from semsearch.faces.workers import check_workers

    check_workers(workers)

    def ready(url: str) -> None:
        click.echo(f"semsearch: serving {index_dir} at {url} (Ctrl-C stops)", err=True)

    run_server(
        index_dir,
        host=host,
        port=port,
        embedder=embedder_of(ctx),
        access_log=access_log,
        ready=ready,
        allow_tags=allow_tags,
        allow_hosts=allow_hosts,
        workers=workers,
    )


@cli.command()
@index_option
@click.option("--http", is_flag=True, help="Serve over streamable HTTP at /mcp instead of stdio.")
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="With --http: address to listen on (the default: this machine only; the endpoint has no authentication).",
)
@click.option("--port", type=int, default=8765, show_default=True, help="With --http: port (0: any free one).")
@click.option(
    "--budget",
    type=int,
    default=8000,
    show_default=True,
    help="Characters of JSON per tool result (about 4 per token); longer lists end early with a next_offset.",
)
@click.option(
    "--allow-host",
    "allow_hosts",
    multiple=True,
    metavar="NAME",
    help="With --http: also answer requests for this host name (repeat), e.g. the machine's DNS name.",
)
@click.pass_context
def mcp(
    ctx: click.Context, index_dir: Path, http: bool, host: str, port: int, budget: int, allow_hosts: tuple[str, ...]
) -> None:
    """Serve the index to LLM agents over the Model Context Protocol (stdio by default).

    \b
    Tools: {tools}; papers are also resources paper://ID.
    Read-only; a version published by `semsearch index` is picked up on the next call.
    A desktop client launches it over stdio (docs: How-to guides, An agent over MCP):
      semsearch mcp --index indexes/default
      semsearch mcp --http --port 8765          # http://127.0.0.1:8765/mcp
    """
    import logging

    from semsearch.faces.mcp_server import check_installed, run_server

    check_installed()
    # stdout belongs to the protocol: every log line goes to stderr (index swaps at INFO, the SDK's at WARNING).
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="semsearch: %(name)s: %(message)s")
    logging.getLogger("semsearch").setLevel(logging.INFO)
    if not 0 <= port <= 65535:
        raise SemsearchCliError(f"--port must be 0..65535, got {port}")

    def ready(where: str) -> None:
        click.echo(f"semsearch: MCP server over {index_dir} on {where} (Ctrl-C stops)", err=True)

    if allow_hosts and not http:
        raise SemsearchCliError("--allow-host applies to --http only (stdio has no host names)")
    run_server(
        index_dir,
        http=http,
        host=host,
        port=port,
        budget=budget,
        embedder=embedder_of(ctx),
        ready=ready,
        allow_hosts=allow_hosts,
    )


mcp.help = (mcp.help or "").replace("{tools}", ", ".join(op.mcp for op in OPERATIONS if op.mcp))


def _eval_suffix(model: str | None) -> str:
    """Another model gets its own default eval index (indexes/eval-scifact-all-mpnet-base-v2), so none rebuilds."""
    from semsearch.encode.models import DEFAULT_MODEL

    return "" if model in (None, DEFAULT_MODEL) else "-" + "".join(c if c.isalnum() else "-" for c in Path(model).name)


@cli.command(name="eval")
@click.argument("data", required=False, type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option("--corpus", type=click.Path(dir_okay=False, path_type=Path), help="BEIR corpus.jsonl.")
@click.option("--queries", type=click.Path(dir_okay=False, path_type=Path), help="BEIR queries.jsonl.")
@click.option("--qrels", type=click.Path(dir_okay=False, path_type=Path), help="BEIR qrels TSV.")
@click.option("--split", default="test", show_default=True, help="Which qrels/SPLIT.tsv to read from DATA.")
@click.option(
    "--index",
    "index_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Index to build or reuse [default: indexes/eval-<corpus folder>].",
)
@click.option("--mode", "modes", multiple=True, type=click.Choice(options.MODES), help="Modes (default: all).")
@click.option(
    "--model",
    help="Model for a new index, e.g. all-mpnet-base-v2 (see: semsearch models) [default: all-MiniLM-L6-v2].",
)
@click.option("--backend", type=click.Choice(options.BACKENDS), default=options.BACKENDS[0], show_default=True)
@click.option(
    "--precision", type=click.Choice(options.PRECISIONS), default=options.DEFAULT_PRECISION, show_default=True
)
@click.option(
    "--reading",
    type=click.Choice(options.READINGS),
    help="How vectors read long abstracts [default: sentences with onnx, else truncated; see: semsearch index --help].",
)
@click.option("--fusion", type=click.Choice(options.FUSIONS), help="Hybrid's weighting [default: the index's].")
@click.option(
    "--tune",
    is_flag=True,
    help="Then weigh hybrid fusions on these judged queries and record the best in the index if it clearly wins.",
)
@click.option("--wait", is_flag=True, help="Wait for another writer of the index instead of failing.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object keyed by mode.")
@click.pass_context
def eval_(
    ctx: click.Context,
    data: Path | None,
    corpus: Path | None,
    queries: Path | None,
    qrels: Path | None,
    split: str,
    index_dir: Path | None,
    modes: tuple[str, ...],
    model: str | None,
    backend: str,
    precision: str,
    reading: str | None,
    fusion: str | None,
    tune: bool,
    wait: bool,
    as_json: bool,
) -> None:
    """Measure retrieval quality on BEIR-format DATA (corpus.jsonl, queries.jsonl, qrels/SPLIT.tsv).

    \b
    Prints nDCG@10 (trec_eval's definition, graded gains), Recall@100 and MRR@10 for each mode
    (--json adds each query's scores, for paired comparisons: scripts/bench_quality.py --compare).
    Corpus entries with no text and no title are skipped and counted; title-only ones are kept.
    The corpus is indexed once (exact duplicates merged only) and reused while it is unchanged:
      semsearch eval ../shared/data/scifact --split test

    \b
    --tune then ranks the judged queries under each hybrid weighting (the index's, adaptive, alpha 0 to 1)
    and records the best in the index when it beats the index's by two standard errors, so that
    `semsearch query` on that index uses it. Tune on one split, report on another:
      semsearch eval DATA --split train --tune
      semsearch eval DATA --split test
    """
    from semsearch.eval.evaluate import EVAL_MODES, EvalData, run_eval
    from semsearch.faces.render import eval_table
    from semsearch.write.build import BuildOptions

    embedder = embedder_of(ctx)
    if reading is None and embedder is None and backend == "onnx":
        reading = options.DEFAULT_READING  # as --help says, even for an eval index built under another reading
    where = EvalData.locate(data, split, corpus, queries, qrels)
    target = index_dir or Path("indexes") / f"eval-{where.corpus.resolve().parent.name}{_eval_suffix(model)}"
    results = run_eval(
        where,
        target,
        modes=modes or EVAL_MODES,
        embedder=embedder,
        options=BuildOptions(
            model=model, backend=backend, precision=precision, reading=reading, progress=not as_json, wait=wait
        ),
        progress=not as_json,
        fusion=fusion,
        tune=tune,
        split=split if data is not None else "",
    )
    click.echo(json.dumps(results) if as_json else eval_table(results))


def _add_models_command() -> None:
    from semsearch.faces.cli_models import models

    cli.add_command(models)


_add_models_command()


def main() -> None:
    """Console-script entry point."""
    # OpenBLAS starts one thread per core when numpy is imported; semsearch does no large BLAS work
    # (ONNX Runtime and FAISS have their own threads), and the pool costs a cold query ~50 ms here.
    # A value the user set wins.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    cli(prog_name="semsearch")


# Tags, recommendations and arrivals live in their own module; registered here, their single call site.
from semsearch.faces.cli_recs import register as _register_recs  # noqa: E402

_register_recs(cli)
