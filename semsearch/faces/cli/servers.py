"""The commands that start a face rather than run an operation: ``serve``, ``mcp``, and ``map`` (a page)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from semsearch.app.operations import OPERATIONS
from semsearch.core import options
from semsearch.core.wording import count
from semsearch.faces.cli.common import SemsearchCliError, embedder_of, index_option


@click.command(name="map")
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


@click.command()
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


@click.command()
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
