"""RESULTS.md from measured JSON: every figure in it is read or computed here, none typed.

`render(meta, runs, before_after)` writes the whole file of one `bench.py` sitting: `runs`
maps a run's key (see `bench.py`: `throughput`, `annotate_latency`, `scale_64000_aspects`,
...) to the JSON that run wrote, one per repetition. Each section renderer takes the list of
its repetitions' JSON and returns Markdown; the scripts that write their own section when
run alone (`chaos.py`, `default_run.py`, `before_after.py`) use the same renderers.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Callable, Mapping, Sequence

import results_estimates
import results_judging
import results_runs
from results_cells import cells, inline, median, on_disk, paired
from results_cells import table as _table

# Row labels of the contenders the throughput scripts write; an unknown key (a contender
# added later) is shown under its own name.
CLIENT_LABELS = {
    "ours": "`LLMClient`",
    "ours_with_cache_writes": "`LLMClient`, writing the request cache",
    "ours_cached_rerun": "`LLMClient`, cached rerun (no call made)",
    "ours_2_workers": "`LLMClient`, 2 worker processes (CPU of all processes)",
    "plain_async_openai": "bare `AsyncOpenAI`, same requests",
}
SCALE_LABELS = {  # in pipeline order
    "sample": "sample (read a record batch at a time)",
    "generate": "generate",
    "aspects": "annotate: aspect ratings",
    "critique": "annotate: critiques",
    "score_fix": "annotate: score fix (re-scores)",
    "export": "annotate: UltraFeedback export",
}


def _contenders(section: dict, rate_key: str) -> list[str]:
    return [key for key, value in section.items() if isinstance(value, dict) and rate_key in value]


def _n_requests(run: dict) -> int:
    """Requests in a timed batch: the scripts record its rate and wall time."""
    return round(run["requests_per_s"] * run["wall_s"])


# --- sections -----------------------------------------------------------------------------


def throughput(runs: Sequence[dict]) -> str:
    first = runs[0]
    bound = first["bound_requests_per_s"]
    latency = [run["latency_run"] for run in runs]
    zero = [run["zero_latency_run"] for run in runs]
    workers = f" {first['workers']} worker processes." if "workers" in first else ""
    lines = [
        "## The client against the bound (`throughput.py`)",
        "",
        f"{_n_requests(latency[0]['ours']):,} generation-sized requests per contender, "
        f"{first['latency_s']} s a call, {first['concurrency']} in flight: bound "
        f"{bound:.0f} calls/s.{workers} The bare client is an `AsyncOpenAI` loop with "
        "a semaphore sending the same requests.",
        "",
    ]
    rows = []
    for key in _contenders(latency[0], "requests_per_s"):
        rates = [section[key]["requests_per_s"] for section in latency]
        to_bare = paired(
            latency,
            lambda section, key=key: section[key]["requests_per_s"],
            lambda section: section["plain_async_openai"]["requests_per_s"],
        )
        share = format(median(rates) / bound, ".3f")
        if key == "plain_async_openai":
            rows.append([CLIENT_LABELS[key], *cells(rates, ".1f"), share, ""])
        else:
            label = CLIENT_LABELS.get(key, key)
            rows.append([label, *cells(rates, ".1f"), f"**{share}**", format(to_bare, ".3f")])
    lines += _table(
        ["contender", "calls/s min", "median", "max", "share of bound", "/ bare client"], rows
    )
    lines += [
        "",
        f"At zero latency the client's own CPU is the limit ({_n_requests(zero[0]['ours']):,} "
        "requests per contender): CPU per call of the transport.",
        "",
    ]
    rows = []
    for key in _contenders(zero[0], "requests_per_s"):
        cpu = [section[key]["cpu_ms_per_request"] for section in zero]
        to_bare = paired(
            zero,
            lambda section, key=key: section[key]["cpu_ms_per_request"],
            lambda section: section["plain_async_openai"]["cpu_ms_per_request"],
        )
        rows.append(
            [
                CLIENT_LABELS.get(key, key),
                *cells((section[key]["requests_per_s"] for section in zero), ",.0f"),
                *cells(cpu, ".3f"),
                "" if key == "plain_async_openai" else f"{to_bare:.3f}",
            ]
        )
    lines += _table(
        [
            "contender",
            "calls/s min",
            "median",
            "max",
            "CPU ms/call min",
            "median",
            "max",
            "CPU / bare client",
        ],
        rows,
    )
    return "\n".join(lines)


ANNOTATE_CALLS = (
    ("aspects", "aspect ratings"),
    ("critiques", "critiques"),
    ("plain_async_openai_same_aspect_requests", "bare `AsyncOpenAI`, same aspect requests"),
)


def annotate_path(at_latency: Sequence[dict], at_zero: Sequence[dict]) -> str:
    """The annotate stages (aspect ratings, critiques) on one judge client, at a latency and
    at zero latency."""
    lines = ["## The annotate path (`annotate_throughput.py`)", ""]
    bare = ANNOTATE_CALLS[-1][0]
    if at_latency:
        first = at_latency[0]
        bound = first["bound_calls_per_s"]
        lines += [
            f"{first['prompts']:,} prompts, each aspect call rating all completions of a "
            f"prompt; {first['latency_s']} s a call, {first['concurrency']} in flight: bound "
            f"{bound:.0f} calls/s. The bare client sends the same aspect requests.",
            "",
        ]
        rows = []
        for key, label in ANNOTATE_CALLS:
            rates = [run[key]["calls_per_s"] for run in at_latency]
            to_bare = ""
            if key == "aspects":
                to_bare = format(
                    paired(
                        at_latency,
                        lambda run: run["aspects"]["calls_per_s"],
                        lambda run: run[bare]["calls_per_s"],
                    ),
                    ".3f",
                )
            share = format(median(rates) / bound, ".3f")
            if key != bare:
                share = f"**{share}**"
            rows.append([label, *cells(rates, ".1f"), share, to_bare])
        lines += _table(
            ["calls", "calls/s min", "median", "max", "share of bound", "/ bare client"], rows
        )
    if at_zero:
        lines += [
            "",
            f"At zero latency ({at_zero[0]['prompts']:,} prompts): CPU per call of the annotate "
            "path and calls/s end to end.",
            "",
        ]
        aspects_cpu_to_bare = paired(
            at_zero,
            lambda run: run["aspects"]["cpu_ms_per_call"],
            lambda run: run[bare]["cpu_ms_per_call"],
        )
        rows = [
            [
                label,
                *cells((run[key]["calls_per_s"] for run in at_zero), ",.0f"),
                *cells((run[key]["cpu_ms_per_call"] for run in at_zero), ".3f"),
                format(aspects_cpu_to_bare, ".3f") if key == "aspects" else "",
            ]
            for key, label in ANNOTATE_CALLS
        ]
        header = ["calls", "calls/s min", "median", "max", "CPU ms/call min", "median", "max"]
        lines += _table([*header, "CPU / bare client"], rows)
    return "\n".join(lines)


def kedro_annotate(runs: Sequence[dict]) -> str:
    first = runs[0]
    bound = first["bound_calls_per_s"]

    def bare_rate(run: dict) -> float:
        return run["plain_async_openai_same_requests"]["calls_per_s"]

    contenders = [
        ("`kedro run`, judge window", lambda run: run["kedro_run"]["calls_per_s"]),
        ("`kedro run`, whole process", lambda run: run["kedro_run"]["calls_per_s_process"]),
        ("bare `AsyncOpenAI`, same requests", bare_rate),
    ]
    # Sittings before the floors were measured have no raw loop: its row is left out.
    has_floors = all("raw_aiohttp_same_requests" in run for run in runs)
    if has_floors:
        contenders.append(
            (
                "raw aiohttp loop, same bodies, answers unread",
                lambda run: run["raw_aiohttp_same_requests"]["calls_per_s"],
            )
        )
    rows = []
    for label, rate in contenders:
        rates = [rate(run) for run in runs]
        share = format(median(rates) / bound, ".3f")
        if label.endswith("judge window"):
            share = f"**{share}**"
        to_bare = "" if rate is bare_rate else format(paired(runs, rate, bare_rate), ".3f")
        rows.append([label, *cells(rates, ".1f"), share, to_bare])
    calls = median(run["kedro_run"]["calls"] for run in runs)
    walls = inline((run["kedro_run"]["process_wall_s"] for run in runs), ".1f")
    floors = []
    if has_floors:
        floors = [
            "",
            "Around the judge window, s (min | median | max): process start to the first call "
            f"{inline((run['kedro_run']['first_call_after_s'] for run in runs), '.2f')}; last "
            "answer to the process's end (the fix node, the saves) "
            f"{inline((run['kedro_run']['after_last_answer_s'] for run in runs), '.2f')}; "
            "`python -m kedro --version` in the project "
            f"{inline((run['kedro_start_s'] for run in runs), '.2f')}. The whole process at "
            "best, the raw loop's calls/s after that start-up and nothing else: "
            f"{inline((run['process_ceiling_ratio_of_bound'] for run in runs), '.3f')} "
            "of the bound.",
        ]
    return "\n".join(
        [
            "## `kedro run --pipelines annotate` (`kedro_annotate.py`)",
            "",
            f"A `kedro run` subprocess on {first['prompts']:,} prompts "
            f"({first['completions']:,} completions), its judge the project's server at "
            f"{first['latency_s']} s a call, {first['concurrency']} in flight: bound "
            f"{bound:.0f} calls/s; {calls:,.0f} judge calls (aspects, critiques, re-scores). "
            "Counted over the judge window (first call received to last answered, the saves "
            "and loads between nodes included) and over the whole process. The bare client "
            "replays the very requests the server recorded.",
            "",
            *_table(
                ["contender", "calls/s min", "median", "max", "share of bound", "/ bare client"],
                rows,
            ),
            "",
            f"Process wall time, s (min | median | max): {walls}.",
            *floors,
        ]
    )


JUDGE_LABELS = {
    "single_1_10": "judge library, MT-Bench grade `[[N]]`",
    "binary": "judge library, binary verdict",
    "client_only": "`LLMClient` alone, the grading requests built beforehand",
}


def judge(runs: Sequence[dict]) -> str:
    first = runs[0]
    bound = first["bound_judgments_per_s"]

    def client_rate(run: dict) -> float:
        return run["client_only"]["judgments_per_s"]

    rows = []
    for key, label in JUDGE_LABELS.items():
        rates = [run[key]["judgments_per_s"] for run in runs]
        to_client = ""
        if key != "client_only":
            rate = lambda run, key=key: run[key]["judgments_per_s"]  # noqa: E731
            to_client = format(paired(runs, rate, client_rate), ".3f")
        share = format(median(rates) / bound, ".3f")
        rows.append(
            [
                label,
                *cells(rates, ".1f"),
                share if key == "client_only" else f"**{share}**",
                to_client,
            ]
        )
    zero = [run["zero_latency"] for run in runs]
    # At zero latency the script times the grading judge ("judge") and the bare client.
    zero_rows = [
        [
            JUDGE_LABELS[label_key],
            *cells((section[key]["judgments_per_s"] for section in zero), ",.0f"),
            *cells((section[key]["cpu_ms_per_judgment"] for section in zero), ".3f"),
        ]
        for key, label_key in (("judge", "single_1_10"), ("client_only", "client_only"))
    ]
    return "\n".join(
        [
            "## The judge library (`judge_throughput.py`)",
            "",
            f"{first['judgments']:,} judgments per kind, free-text replies parsed by the judge; "
            f"{first['latency_s']} s a call, {first['concurrency']} in flight: bound "
            f"{bound:.0f} judgments/s.",
            "",
            *_table(
                ["contender", "judgments/s min", "median", "max", "share of bound", "/ client"],
                rows,
            ),
            "",
            f"At zero latency ({zero[0]['judgments']:,} grading judgments): CPU per judgment.",
            "",
            *_table(
                ["contender", "judgments/s min", "median", "max", "CPU ms min", "median", "max"],
                zero_rows,
            ),
        ]
    )


def scale(runs: Sequence[dict]) -> str:
    """Peak RSS and wall time of each stage at each size; the slope of peak RSS per prompt."""
    by_stage: dict[str, dict[int, list[dict]]] = {}
    for run in runs:
        stage = run["benchmark"].removeprefix("scale_")
        by_stage.setdefault(stage, {}).setdefault(run["prompts"], []).append(run)
    stages = [stage for stage in SCALE_LABELS if stage in by_stage]
    stages += sorted(set(by_stage) - set(stages))
    sizes = sorted({run["prompts"] for run in runs})
    rows = []
    for stage in stages:
        for prompts, reps in sorted(by_stage[stage].items()):
            rows.append(
                [
                    SCALE_LABELS.get(stage, stage),
                    f"{prompts:,}",
                    f"{reps[0]['completions']:,}",
                    f"{reps[0]['stages'][stage]['rows']:,}",
                    on_disk(reps[0]["stages"][stage].get("output")),
                    f"{median(rep['stages'][stage]['wall_s'] for rep in reps):.1f}",
                    f"{len(reps)}",
                    *cells((rep["peak_rss_mib"] for rep in reps), ".0f"),
                ]
            )
    lines = [
        "## UltraFeedback scale: peak memory per stage (`scale.py`)",
        "",
        "Each stage runs in a fresh process, as a Kedro node works between loading its inputs "
        "and saving its output, against the project's server at zero latency: what is "
        "measured is our code (sampling, requests, cache, parsing, tables), not a model, on "
        "texts of UltraFeedback's sizes (`scale.py`: completions, rationales and critiques "
        "of its mean lengths). Peak RSS is that process's maximum resident set; written: "
        "the stage's table as the catalog saves it (past `PART_BYTES`, a folder of parts).",
        "",
        *_table(
            [
                "stage",
                "prompts",
                "completions",
                "rows out",
                "written",
                "wall s (median)",
                "runs",
                "peak RSS MiB min",
                "median",
                "max",
            ],
            rows,
        ),
    ]
    if len(sizes) > 1:
        slope_rows = []
        for stage in stages:
            points = {
                p: median(rep["peak_rss_mib"] for rep in reps)
                for p, reps in by_stage[stage].items()
            }
            if len(points) < 2:
                continue
            fit = statistics.linear_regression(list(points), list(points.values()))
            last, before = sizes[-1], sizes[-2]
            growth = (
                f"{points[last] / points[before]:.2f}"
                if last in points and before in points
                else ""
            )
            slope_rows.append(
                [
                    SCALE_LABELS.get(stage, stage),
                    *(f"{points[size]:.0f}" if size in points else "" for size in sizes),
                    f"**{fit.slope * 1024:.2f}**",
                    growth,
                ]
            )
        lines += [
            "",
            "Median peak RSS against the prompt count, its least-squares slope (what each "
            "further prompt costs in memory) and its growth from the second-largest size to "
            "the largest (one: flat).",
            "",
            *_table(
                [
                    "stage",
                    *(f"MiB at {size:,} prompts" for size in sizes),
                    "KiB per prompt",
                    f"MiB at {sizes[-1]:,} / at {sizes[-2]:,}",
                ],
                slope_rows,
            ),
        ]
    return "\n".join(lines)


# Run key -> renderer of its repetitions, in the order of RESULTS.md; the annotate path and
# the scale stages gather several run keys each (see `render`).
SINGLE_RUN_SECTIONS: tuple[tuple[str, Callable[[Sequence[dict]], str]], ...] = (
    ("kedro_annotate", kedro_annotate),
    ("judge_throughput", judge),
)
LATER_SECTIONS: tuple[tuple[str, Callable[[Sequence[dict]], str]], ...] = (
    ("batch_api", results_runs.batch_api),
    ("chaos", results_runs.chaos),
    ("rate_limits", results_runs.rate_limits),
    ("embedded_model", results_runs.embedded_model),
    ("default_run", results_runs.default_run),
    ("default_run_under_load", results_runs.default_run_under_load),
    ("ray_throughput", results_runs.ray_throughput),
    ("injection", results_judging.injection),
    ("stats_scale", results_judging.stats_scale),
    ("viewer_scale", results_judging.viewer_scale),
    ("report_scale", results_judging.report_scale),
    ("cache_scale", results_judging.cache_scale),
    ("judge_cost", results_judging.judge_cost),
    ("embedded_judge_card", results_judging.embedded_judge_card),
    ("anchors", results_judging.anchors),
    ("ppi_coverage", results_estimates.ppi_coverage),
)


def header(meta: dict) -> str:
    lines = [
        "# Benchmark results",
        "",
        f"Written by `{meta['command']}` (`make bench` runs it) from the JSON of one sitting, "
        f"kept in `{meta['results_dir']}`: no figure in this file is typed by hand, and "
        "rerunning the command replaces them all.",
        "",
        f"- Machine: {meta['machine']}. Absolute figures hold for this machine only; the "
        "claims are the ratios: to the concurrency/latency bound, and to a bare "
        "`AsyncOpenAI` loop sending the same requests in the same repetition.",
        f"- Sitting: {meta['started']} to {meta['finished']}; repetitions: "
        f"{meta['repetitions']}, each benchmark a fresh process against the project's server in a "
        "process of its own, the groups of contenders in alternating order from one "
        "repetition to the next. Tables give min | median | max over the repetitions; a "
        "ratio to the bare client is the median of the ratios within each repetition.",
    ]
    lines.append(f"- Benchmarks: {', '.join(meta['groups'])}.")
    if meta.get("quick"):
        lines.append(
            "- Quick mode: tiny sizes and one repetition, to check the machinery; not figures "
            "to quote."
        )
    if meta.get("skipped"):
        skipped = "; ".join(f"`{key}` ({why})" for key, why in meta["skipped"].items())
        lines.append(f"- Not run in this sitting: {skipped}.")
    return "\n".join(lines)


def _marked(name: str, text: str) -> str:
    """The markers `common.write_section` finds when one script rewrites its own section."""
    return f"<!-- {name}:start -->\n{text}\n<!-- {name}:end -->"


_SECTION = re.compile(
    r"<!-- (?P<name>[a-z0-9-]+):start -->\n(?P<body>.*?)\n<!-- (?P=name):end -->", re.S
)
RERUN_NOTE = (
    "- Sections whose first line reads *Rerun alone* come from a later sitting of their own "
    "groups (`bench.py --sections`), named there; the others from the sitting above."
)


def update_sections(current: str, meta: dict, runs: Mapping[str, Sequence[dict]]) -> str:
    """`current` RESULTS.md with only the sections this (partial) sitting measured replaced
    or appended, each opened by a line naming its own sitting; the rest is left as it was."""
    note = (
        f"*Rerun alone: `{meta['command']}`, {meta['started']} to {meta['finished']}, "
        f"{meta['repetitions']} repetition(s), {meta['machine']}.*"
    )
    rendered = render(meta, runs)
    text = current
    for match in _SECTION.finditer(rendered):
        name, body = match["name"], match["body"]
        title, _, rest = body.partition("\n")
        section = _marked(name, f"{title}\n\n{note}\n{rest}")
        existing = re.search(rf"<!-- {name}:start -->\n.*?\n<!-- {name}:end -->", text, flags=re.S)
        if existing:
            text = text[: existing.start()] + section + text[existing.end() :]
        else:
            text = text.rstrip("\n") + "\n\n" + section + "\n"
    if RERUN_NOTE not in text:
        head, separator, tail = text.partition("\n\n<!--")
        text = head + "\n" + RERUN_NOTE + separator + tail
    return text


def render(
    meta: dict, runs: Mapping[str, Sequence[dict]], before_after_data: dict | None = None
) -> str:
    """The whole of RESULTS.md."""
    sections = [header(meta)]
    if "throughput" in runs:
        sections.append(_marked("throughput", throughput(runs["throughput"])))
    if "annotate_latency" in runs or "annotate_zero" in runs:
        text = annotate_path(runs.get("annotate_latency", []), runs.get("annotate_zero", []))
        sections.append(_marked("annotate-throughput", text))
    for key, renderer in SINGLE_RUN_SECTIONS:
        if key in runs:
            sections.append(_marked(key.replace("_", "-"), renderer(runs[key])))
    scale_runs = [run for key, reps in runs.items() if key.startswith("scale_") for run in reps]
    if scale_runs:
        sections.append(_marked("scale", scale(scale_runs)))
    for key, renderer in LATER_SECTIONS:
        if key in runs:
            sections.append(_marked(key.replace("_", "-"), renderer(runs[key])))
    if before_after_data is not None:
        sections.append(_marked("before-after", results_runs.before_after(before_after_data)))
    return "\n\n".join(sections) + "\n"
