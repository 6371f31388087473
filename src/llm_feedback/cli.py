"""The project's `kedro run`: Kedro's own command, plus a clean stop on Ctrl-C and after
submitting batches.

Interrupted, a run stops its calls, leaves every answer received in the request cache,
stops the embedded model server and says in one line how to resume; it exits with 130,
the shell's code for SIGINT, and prints no traceback. A run that submitted Batch API jobs
and does not wait for them (`batch_wait: false`) says which, and exits with 75
(EX_TEMPFAIL: try again later), since it wrote no dataset.
"""

import sqlite3
import sys
from pathlib import Path

import click
from kedro.framework.cli.project import run as kedro_run

from llm_feedback.backends import stop_local_servers
from llm_feedback.errors import BatchPending
from llm_feedback.hooks import RunGuardHooks

SIGINT_EXIT_CODE = 130
BATCH_PENDING_EXIT_CODE = 75


@click.group(name="llm_feedback")
def cli() -> None:
    """Commands of the llm_feedback project."""


def _cached_answers(cache: str | None) -> str:
    if not cache or not Path(cache).is_file():
        return "no answered calls are cached"
    try:
        with sqlite3.connect(f"file:{cache}?mode=ro", uri=True, timeout=5) as db:
            count = db.execute("SELECT COUNT(*) FROM responses").fetchone()[0]
    except sqlite3.Error:
        return f"answered calls are cached in {cache}"
    return f"{count:,} answered calls are cached in {cache}"


@cli.command(
    name="run",
    params=kedro_run.params,
    help=kedro_run.help,
    context_settings=kedro_run.context_settings,
)
@click.pass_context
def run(ctx: click.Context, **options: object) -> None:
    try:
        ctx.invoke(kedro_run, **options)
    except KeyboardInterrupt:
        stop_local_servers()
        click.echo(
            f"interrupted: {_cached_answers(RunGuardHooks.current_request_cache)}; "
            "run the same command to resume",
            err=True,
        )
        sys.exit(SIGINT_EXIT_CODE)
    except BatchPending as pending:
        stop_local_servers()
        click.echo(f"batches pending: {pending}", err=True)
        sys.exit(BATCH_PENDING_EXIT_CODE)
