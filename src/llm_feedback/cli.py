"""The project's commands: `kedro run` (Kedro's own, plus a clean stop on Ctrl-C, after
submitting batches, and a plain answer when the run was only planned) and `kedro
push-to-hub`.

Interrupted, a run stops its calls, leaves every answer received in the request cache,
stops the embedded model server and says in one line how to resume; it exits with 130,
the shell's code for SIGINT, and prints no traceback. A run that submitted Batch API jobs
and does not wait for them (`batch_wait: false`) says which, and exits with 75
(EX_TEMPFAIL: try again later), since it wrote no dataset. With `plan_only: true` it
prints the plan and exits 0; a plan above `max_cost_usd` prints why and exits 1.

An expected error (a bad parameter or input file, an endpoint that cannot do its job, a
request cache that cannot be used: `llm_feedback.core.errors`) prints its one message and exits
with 1; its traceback goes to the log file (info.log), or to the terminal with `kedro run
--verbose` or LLM_FEEDBACK_VERBOSE=1.
"""

import difflib
import gc
import logging
import os
import re
import sqlite3
import sys
import tempfile
from pathlib import Path

import click
from kedro.config import MissingConfigException
from kedro.framework.cli.project import run as kedro_run
from kedro.framework.cli.utils import _split_params
from kedro.framework.session import KedroSession
from kedro.framework.startup import ProjectMetadata
from kedro.io.core import Version
from kedro.validation import ParameterValidationError

from llm_feedback.backends import stop_local_servers
from llm_feedback.core.errors import (
    BatchPending,
    CacheError,
    ConfigError,
    CostLimitExceeded,
    EndpointError,
    InputError,
    OutputError,
    PlanOnly,
)
from llm_feedback.hooks import RunGuardHooks, refuse_a_stale_push
from llm_feedback.pipeline_registry import pipeline_names
from llm_feedback.pipelines.run_record_hooks import load_run_record
from llm_feedback.publishing.dataset_card import (
    DEFAULT_LICENSE,
    annotate_judge_agreement,
    dataset_card_validation,
    judge_validation_section,
)
from llm_feedback.publishing.hub import HUB_DATASETS, build_push, hub_token, send_push
from llm_feedback.runs.record import (
    card_lineage,
    judge_identity_of,
    recorded_judge,
    recorded_test_split,
)

SIGINT_EXIT_CODE = 130
BATCH_PENDING_EXIT_CODE = 75
EXPECTED_ERROR_EXIT_CODE = 1
EXPECTED_ERRORS = (InputError, ConfigError, EndpointError, CacheError, OutputError)
VERBOSE_ENV = "LLM_FEEDBACK_VERBOSE"


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


def expected_error(error: BaseException) -> BaseException | None:
    """The expected error behind `error` (Kedro wraps a dataset's in a DatasetError).

    Args:
        error: what the run raised.

    Returns:
        The expected error in its chain of causes, or None.
    """
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, EXPECTED_ERRORS):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def _traceback_to_log_files(error: BaseException) -> list[str]:
    """Write `error`'s traceback to the log files only (not the terminal); their paths."""
    record = logging.LogRecord(
        __name__,
        logging.ERROR,
        __file__,
        0,
        "run stopped: %s",
        (error,),
        (type(error), error, error.__traceback__),
    )
    files = []
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.FileHandler):
            handler.handle(record)
            files.append(handler.baseFilename)
    return files


def check_pipeline_names(options: dict) -> None:
    """Refuse `--pipelines`/`--pipeline` names the project does not have, listing those it
    has (Kedro's own error is a traceback that names none).

    Args:
        options: `kedro run`'s options.
    """
    asked = list(options.get("pipelines") or [])
    if options.get("pipeline"):
        asked.append(str(options["pipeline"]))
    known = pipeline_names()
    unknown = [name for name in asked if name not in known]
    if unknown:
        close = difflib.get_close_matches(unknown[0], known, n=1)
        raise ConfigError(
            f"--pipelines: no pipeline named {', '.join(map(repr, unknown))}"
            + (f" (did you mean {close[0]!r}?)" if close else "")
            + f"; the pipelines are {', '.join(known)}"
        )


# One failure of Kedro's parameter validation: "- Parameter '<key>': [Failed to instantiate
# <Type> for parameter '<key>': ]<the parser's message>".
KEDRO_PARAMETER_FAILURE = re.compile(
    r"^- Parameter '(?P<key>[^']*)': (?:Failed to instantiate \w+ for parameter '[^']*': )?"
    r"(?P<message>.*)$",
    re.MULTILINE,
)


def parameter_error(error: ParameterValidationError) -> ConfigError:
    """Kedro's parameter validation failure (a header line and one line per block, the
    parser's message wrapped in Kedro's words) as one ConfigError of the parsers' messages.

    Args:
        error: what Kedro raised when a typed block (`params.blocks`) failed its check.

    Returns:
        A ConfigError whose message is each failing block's message, joined by "; ", each
        naming its parameter.
    """
    messages = [
        found["message"]
        if found["key"] in found["message"]
        else f"{found['key']}: {found['message']}"
        for found in KEDRO_PARAMETER_FAILURE.finditer(str(error))
    ]
    return ConfigError("; ".join(messages) or " ".join(str(error).split()))


def _report_expected_error(error: BaseException, expected: BaseException) -> None:
    stop_local_servers()
    logs = _traceback_to_log_files(error)
    where = f"the traceback is in {', '.join(logs)}; " if logs else ""
    click.echo(f"error: {expected}", err=True)
    click.echo(f"({where}kedro run --verbose or {VERBOSE_ENV}=1 prints it here)", err=True)
    sys.exit(EXPECTED_ERROR_EXIT_CODE)


@cli.command(
    name="run",
    params=[
        *kedro_run.params,
        click.Option(
            ["--verbose"],
            is_flag=True,
            default=False,
            help=f"Print the traceback of an expected error too (or set {VERBOSE_ENV}=1).",
        ),
    ],
    help=kedro_run.help,
    context_settings=kedro_run.context_settings,
)
@click.pass_context
def run(ctx: click.Context, verbose: bool, **options: object) -> None:
    verbose = verbose or os.environ.get(VERBOSE_ENV, "") not in ("", "0")
    try:
        check_pipeline_names(options)
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
    except BatchPending as pending:
        stop_local_servers()
        click.echo(f"batches pending: {pending}", err=True)
        sys.exit(BATCH_PENDING_EXIT_CODE)
    except ParameterValidationError as error:  # a typed block (params.blocks) failed its check
        if verbose:
            raise
        _report_expected_error(error, parameter_error(error))
    except Exception as error:
        expected = expected_error(error)
        if expected is None or verbose:
            raise
        _report_expected_error(error, expected)
    else:
        # Everything is saved and closed: the interpreter's exit need not walk every object
        # the run made (pandas, pyarrow, openai: 0.2 s of each run's exit, measured).
        gc.freeze()


class OneLineError(click.ClickException):
    """A command's expected error, shown as `kedro run` shows one: `error: <message>`."""

    def show(self, file: object = None) -> None:
        """Print the error as one `error:` line on stderr.

        Args:
            file: click's output file (unused: always stderr).
        """
        click.echo(f"error: {self.format_message()}", err=True)


def refuse_an_empty_table(dataset: object, table: object, name: str, version: str | None) -> None:
    """`push-to-hub`: a version without rows is refused by name (the Hub's library fails on
    it with a traceback that names neither the table nor the version).

    Args:
        dataset: the catalog dataset pushed.
        table: what it loaded (a DataFrame or a table on disk).
        name: the dataset's name.
        version: the version pushed (None: the latest).
    """
    rows = table.num_rows if hasattr(table, "num_rows") else len(table)
    if rows:
        return
    version = version or dataset.resolve_load_version()
    raise InputError(
        f"{name} version {version} has no rows: nothing to push (the run that wrote it kept "
        f"none; {'pair_drops of the same version says why; ' if name == 'preference_pairs' else ''}"
        f"rerun it, or push another version with --version)"
    )


# The pipeline that writes each dataset push-to-hub can send.
WRITTEN_BY = {"ultrafeedback": "annotate", "preference_pairs": "report"}


@cli.command(name="push-to-hub")
@click.option("--dataset", "name", type=click.Choice(list(HUB_DATASETS)), required=True)
@click.option("--repo-id", required=True, help="The Hub dataset repository, owner/name.")
@click.option("--public", is_flag=True, help="Create the repository public (default: private).")
@click.option(
    "--split",
    default=None,
    help="The split to write (default: train); preference pairs go up as their own train "
    "and test splits.",
)
@click.option("--version", default=None, help="The dataset version to push (default: latest).")
@click.option("--env", "-e", default=None, help="Kedro configuration environment.")
@click.option(
    "--params", default="", callback=_split_params, help="Runtime parameters, e.g. data_root=x."
)
@click.option(
    "--all-columns",
    is_flag=True,
    help="ultrafeedback: push our own columns too (default: the public columns only).",
)
@click.option(
    "--license", "license_id", default=DEFAULT_LICENSE, show_default=True, help="Card licence."
)
@click.option(
    "--judge-card",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="The judge's validation card (markdown) to put in the dataset card.",
)
@click.option(
    "--dry-run", is_flag=True, help="Build and check the push, print it and its card, send nothing."
)
@click.option(
    "--allow-mixed-runs",
    is_flag=True,
    help="Push even when a table the dataset is computed from has a newer version.",
)
@click.pass_obj
def push_to_hub(
    metadata: ProjectMetadata,
    *,
    name: str,
    repo_id: str,
    public: bool,
    split: str | None,
    version: str | None,
    env: str | None,
    params: dict,
    all_columns: bool,
    license_id: str,
    judge_card: Path | None,
    dry_run: bool,
    allow_mixed_runs: bool,
) -> None:
    """Push `ultrafeedback` or `preference_pairs` to the Hugging Face Hub (`pip install -e
    ".[hub]"`). The token comes from conf/local/credentials.yml (huggingface.token) or
    HF_TOKEN and is never printed."""
    from llm_feedback.pipelines.datasets import ParquetDataset

    # The table is read a batch at a time into an Arrow file here, which the upload reads.
    with (
        tempfile.TemporaryDirectory(prefix="llmfb-push-") as workdir,
        KedroSession.create(
            project_path=metadata.project_path, env=env, runtime_params=params
        ) as session,
    ):
        context = session.load_context()
        try:
            credentials = context.config_loader["credentials"]
        except MissingConfigException:
            credentials = {}
        try:
            token, source = hub_token(credentials, os.environ)
            if version is None:  # a version named with --version is asked for
                allow = allow_mixed_runs or bool(
                    (context.params.get("report") or {}).get("allow_mixed_runs")
                )
                refuse_a_stale_push(context.catalog, name, allow)
            dataset = context.catalog.get(name, version=Version(version, None) if version else None)
            if not dataset.exists():
                which = f"version {version}" if version else "version"
                root = context.params.get("data_root", "data")
                raise InputError(
                    f"{name} has no {which} under data root {root}: write it first "
                    f"(kedro run --pipelines {WRITTEN_BY[name]})"
                )
            table = dataset.source() if isinstance(dataset, ParquetDataset) else dataset.load()
            refuse_an_empty_table(dataset, table, name, version)
            # The card describes the run that wrote this version, not today's configuration.
            pushed = version or dataset.resolve_load_version()
            record = load_run_record(context.catalog, pushed)
            judge, settings = card_lineage(record, pushed)
            validation = judge_card.read_text(encoding="utf-8") if judge_card else None
            identity = judge_identity_of(record)
            test_split = recorded_test_split(record) if name == "preference_pairs" else None
            # The cards reviewers' labels made of the annotate judge count beside the rest.
            from llm_feedback.validation.card import add_card  # noqa: PLC0415 - matplotlib

            labelled = context.catalog.load("annotate_judge_validation_history")
            if validation is None and identity is not None:
                validation = dataset_card_validation(
                    add_card(context.catalog.load("judge_validation_history"), labelled),
                    identity,
                )
            if identity is not None:
                validation = (
                    judge_validation_section(validation)
                    + "\n\n"
                    + annotate_judge_agreement(labelled, identity["judge_key"])
                )
            push = build_push(
                table,
                name=name,
                repo_id=repo_id,
                token=token,
                token_source=source,
                private=not public,
                split=split,
                public_only=not all_columns,
                license=license_id,
                judge=judge,
                judge_endpoint=recorded_judge(record).endpoint_words(),
                settings=settings,
                judge_card=validation,
                workdir=Path(workdir),
                contamination=context.catalog.load("contamination_counts"),
                test_split=test_split,
            )
        except (ConfigError, InputError) as error:
            raise OneLineError(str(error)) from None
        click.echo(push.describe())
        if dry_run:
            click.echo("dataset card (README.md):")
            click.echo(push.card)
            click.echo("dry run: nothing was sent")
            return
        click.echo(f"pushed: {send_push(push)}")
