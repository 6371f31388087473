"""The project's `kedro run`: Kedro's own command, plus a clean stop on Ctrl-C and a plain
answer when the run was only planned.

Interrupted, a run stops its calls, leaves every answer received in the request cache,
stops the embedded model server and says in one line how to resume; it exits with 130,
the shell's code for SIGINT, and prints no traceback. With `plan_only: true` it prints the
plan and exits 0; a plan above `max_cost_usd` prints why and exits 1.
"""

import sqlite3
import sys
from pathlib import Path

import click
from kedro.framework.cli.project import run as kedro_run

from llm_feedback.backends import stop_local_servers
from llm_feedback.hooks import RunGuardHooks
from llm_feedback.planning import CostLimitExceeded, PlanOnly

SIGINT_EXIT_CODE = 130


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
    except PlanOnly as plan:
        click.echo(str(plan))
    except CostLimitExceeded as stop:
        click.echo(f"stopped before the first call: {stop}", err=True)
        sys.exit(1)
    except KeyboardInterrupt:
        stop_local_servers()
        click.echo(
            f"interrupted: {_cached_answers(RunGuardHooks.current_request_cache)}; "
            "run the same command to resume",
            err=True,
        )
        sys.exit(SIGINT_EXIT_CODE)
