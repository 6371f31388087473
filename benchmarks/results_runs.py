"""RESULTS.md sections of the single-run benchmarks: chaos, the embedded model, the default
run (quiet and under load), Ray and batch mode. Each takes the JSON of every repetition."""

from __future__ import annotations

from collections.abc import Sequence

from results_cells import NO_CELLS, cells, inline, median, paired, spread
from results_cells import table as _table


def chaos(runs: Sequence[dict]) -> str:
    first = runs[0]
    faults = ", ".join(
        f"{share:.0%} {name.replace('_', ' ')}" for name, share in first["faults"].items()
    )
    tables = (
        ("completions", "answered", lambda t: t["failed"]),
        ("aspect_annotations", "read", lambda t: t["unreadable_after_reasks"]),
        ("critiques", "read", lambda t: t["rows"] - t["read"]),
    )
    rows = [
        [
            name,
            *cells((run[name]["rows"] for run in runs), ",.0f"),
            *cells((run[name][good] for run in runs), ",.0f"),
            *cells((bad(run[name]) for run in runs), ",.0f"),
            f"{max(run[name]['lost'] for run in runs)}",
            f"{max(run[name]['duplicated'] for run in runs)}",
        ]
        for name, good, bad in tables
    ]
    export = [run["ultrafeedback_records"] for run in runs]
    rows.append(
        [
            "ultrafeedback records",
            *cells((table["rows"] for table in export), ",.0f"),
            *NO_CELLS,
            *NO_CELLS,
            f"{max(table['lost'] for table in export)}",
            "",
        ]
    )
    header = ["table", "rows min", "median", "max", "answered / read min", "median", "max"]
    header += ["failed / unreadable min", "median", "max", "lost (max)", "duplicated (max)"]
    return "\n".join(
        [
            "## The default pipeline through a faulty server (`chaos.py`)",
            "",
            f"{first['prompts']:,} prompts, sample -> generate -> annotate -> report in one Kedro "
            f"session against the project's server answering {faults}; every attempt draws "
            f"anew. Wall time, s (min | median | max): "
            f"{inline((run['wall_s'] for run in runs), '.1f')}.",
            "",
            *_table(header, rows),
            "",
            "Requests the server received per call the run needed (retries after rate limits, "
            "server errors and stalls, and re-asks of unreadable replies), min | median | max: "
            f"{inline((run['requests_per_needed_call'] for run in runs), '.2f')}; calls failed "
            f"after all retries (max): {max(run['calls_failed_after_retries'] for run in runs)}.",
        ]
    )


def embedded_model(runs: Sequence[dict]) -> str:
    by_slots: dict[int, list[dict]] = {}
    for run in runs:
        for measured in run["runs"]:
            by_slots.setdefault(measured["slots"], []).append(measured)
    rows = [
        [
            f"{slots}",
            *cells((m["tokens_per_s"] for m in measured), ".1f"),
            f"{median(m['speedup_vs_single_stream'] for m in measured):.2f}",
            f"{median(m['mean_latency_s'] for m in measured):.1f}",
        ]
        for slots, measured in sorted(by_slots.items())
    ]
    return "\n".join(
        [
            "## The embedded model (`embedded_model.py`)",
            "",
            "SmolLM2-135M-Instruct served by llama.cpp (xllamacpp) inside the process, "
            f"completions of up to {runs[0]['max_tokens']} tokens, as many requests in flight "
            "as slots; tokens/s counts generated tokens.",
            "",
            *_table(
                [
                    "llama.cpp slots",
                    "tokens/s min",
                    "median",
                    "max",
                    "vs one stream (median)",
                    "mean latency s (median)",
                ],
                rows,
            ),
            "",
            f"Peak RSS with the model loaded (max over repetitions): "
            f"{max(run['peak_rss_mib'] for run in runs):.0f} MiB.",
        ]
    )


def _minutes(seconds: float) -> str:
    return f"{int(seconds // 60)} min {seconds % 60:02.0f} s"


def default_run(results: Sequence[dict]) -> str:
    """`default_run.py`: each result holds its own repetitions (`runs`)."""
    runs = [run for result in results for run in result["runs"]]
    walls = [run["process_wall_s"] for run in runs]
    low, middle, high = spread(walls)
    median_run = sorted(runs, key=lambda run: run["process_wall_s"])[len(runs) // 2]
    settings = results[0].get("params")
    prompts = f"the demo prompts with `--params {settings}`" if settings else "the demo prompts"
    lines = [
        "## The default run (`make run`, install excluded; `default_run.py`)",
        "",
        f"Machine: {results[0]['machine']}. Repetitions: {len(runs)}, each a fresh process and "
        f"a fresh data root (no request cache): the `__default__` pipeline on {prompts}, the "
        "embedded model as generator and judge.",
        "",
        f"- Wall time, process start to exit: median {_minutes(middle)} "
        f"(min {_minutes(low)}, max {_minutes(high)}).",
        f"- Peak RSS: max {max(run['peak_rss_mib'] for run in runs):.0f} MiB over the repetitions.",
        "",
        "Per node, median repetition (llama.cpp counters; prompt tok/s and generated tok/s "
        "are per slot: llama.cpp sums the seconds of every slot):",
        "",
    ]
    rows = []
    for name, node in median_run["nodes"].items():
        if node["wall_s"] < 0.5 and not node.get("calls"):
            continue  # parameter reads and other bookkeeping nodes
        evaluated = node.get("prompt_tokens_total", 0)
        generated = node.get("tokens_predicted_total", 0)
        prompt_rate = evaluated / node["prompt_seconds_total"] if evaluated else 0
        gen_rate = generated / node["tokens_predicted_seconds_total"] if generated else 0
        rows.append(
            [
                name,
                f"{node['wall_s']:.1f}",
                f"{node.get('calls', 0):.0f}",
                f"{evaluated:,.0f}",
                f"{node.get('prompt_tokens_cached_total', 0):,.0f}",
                f"{generated:,.0f}",
                f"{prompt_rate:.0f}",
                f"{gen_rate:.1f}",
            ]
        )
    header = ["node", "wall s", "calls", "prompt tokens evaluated", "prompt tokens from cache"]
    header += ["generated tokens", "prompt tok/s", "generated tok/s"]
    return "\n".join(lines + _table(header, rows))


def ray_throughput(runs: Sequence[dict]) -> str:
    """`ray_throughput.py`: the ray backend and the openai backend on the same requests."""
    first = runs[0]
    bound = first["bound_calls_per_s"]

    def openai_rate(run: dict) -> float:
        return run["openai"]["calls_per_s"]

    rows = []
    for key, label in (("openai", "`openai` backend"), ("ray_backend", "`ray` backend")):
        rates = [run[key]["calls_per_s"] for run in runs]
        steady = [run[key]["steady_calls_per_s"] for run in runs]
        to_openai = ""
        if key != "openai":
            rate = lambda run, key=key: run[key]["calls_per_s"]  # noqa: E731
            to_openai = format(paired(runs, rate, openai_rate), ".3f")
        rows.append(
            [
                label,
                *cells(rates, ".1f"),
                f"{median(rates) / bound:.3f}",
                to_openai,
                f"{median(run[key]['first_call_s'] for run in runs):.2f}",
                *cells(steady, ".1f"),
                f"{median(steady) / bound:.3f}",
            ]
        )
    setup = first["ray"]
    starts = inline((run["ray_backend"]["ray_init_s"] for run in runs), ".1f")
    header = ["backend", "calls/s min", "median", "max", "share of bound", "/ openai"]
    header += ["first call at s", "steady calls/s min", "median", "max", "share of bound"]
    return "\n".join(
        [
            "## The ray backend (`ray_throughput.py`)",
            "",
            f"{first['requests']:,} calls, {first['latency_s']} s each, {first['concurrency']} "
            f"in flight: bound {bound:.0f} calls/s; a local Ray of {setup['cpus']} CPUs, "
            f"{setup['replicas']} workers of up to {setup['batch_size']} rows. Steady is the "
            "server's rate between a tenth and nine tenths of the calls.",
            "",
            *_table(header, rows),
            "",
            f"Starting Ray (once a process, outside the table), s (min | median | max): {starts}; "
            "each stage also starts its worker pool (the time to its first call). On one "
            "machine the ray backend can only lose (the same bound, plus that start-up and "
            "the tail of each batch); it wins where one machine is the limit: workers on many "
            "nodes, or a GPU per vLLM replica.",
        ]
    )


def batch_api(runs: Sequence[dict]) -> str:
    """`batch_api.py`: the client's side of Batch API jobs (JSONL, upload, poll, collect)."""
    first = runs[0]
    figures = (
        ("wall s, first run", "first_wall_s", ".2f"),
        ("client CPU ms per request", "client_cpu_ms_per_request", ".3f"),
        ("wall s, cached rerun", "cached_rerun_wall_s", ".2f"),
        ("peak RSS MiB", "peak_rss_mib", ".0f"),
    )
    rows = [[label, *cells((run[key] for run in runs), form)] for label, key, form in figures]
    return "\n".join(
        [
            "## Batch mode (`batch_api.py`)",
            "",
            f"{first['requests']:,} requests through `mode: batch` in batches of "
            f"{first['batch_max_requests']:,}, the project's server answering at once: what is "
            "measured is the client's side (JSONL, upload, ledger, polling, download, parsing, "
            "cache). Chat calls sent besides (max): "
            f"{max(run['chat_requests_sent'] for run in runs)}.",
            "",
            *_table(["figure", "min", "median", "max"], rows),
        ]
    )


def default_run_under_load(results: Sequence[dict]) -> str:
    """`default_run_under_load.py`: the default run beside one busy loop per core."""
    last = results[-1]
    load = last["load_average_during"]
    settings = f" with `--params {last['params']}`" if last.get("params") else ""
    outcome = (
        f"finished in {_minutes(last['wall_s'])}"
        if last["finished"]
        else f"**did not finish** within its limit of {_minutes(last['limit_s'])}"
    )
    lines = [
        "## The default run under load (`default_run_under_load.py`)",
        "",
        f"Machine: {last['machine']}. The `__default__` pipeline on the demo prompts{settings}, "
        f"the embedded model as generator and judge, a fresh data root, while "
        f"{last['busy_loops']} busy-loop processes keep every core busy: load average "
        f"{last['load_average_before']:.1f} before, {load['mean']:.1f} mean and "
        f"{load['max']:.1f} max during the run.",
        "",
        f"- The run {outcome}; log lines reporting a timed-out call: "
        f"{last['timed_out_call_lines']}.",
    ]
    # Parameter reads and other bookkeeping nodes take no time worth a row.
    walls = [[name, f"{wall:.1f}"] for name, wall in last["node_wall_s"].items() if wall >= 0.5]
    if walls:
        lines += ["", "Wall seconds per node (bookkeeping nodes left out):", ""]
        lines += _table(["node", "wall s"], walls)
    return "\n".join(lines)


def before_after(data: dict) -> str:
    """`before_after.py`'s comparison of two commits, from its results/before_after.json."""
    tolerance = data["tolerance"]
    rows = [
        [
            row["figure"],
            f"{row['median_before']:.4g}",
            f"{row['median_after']:.4g}",
            f"{row['ratio']:.3f}",
            "**yes**" if row["worse_than_tolerance"] else "no",
        ]
        for row in data["figures"]
    ]
    return "\n".join(
        [
            f"## Before and after `{data['after']}` (against `{data['before']}`)",
            "",
            f"Written by `benchmarks/before_after.py` on {data['when']}: {data['cpu']}, "
            f"{data['cores']} cores; {data['repetitions']} interleaved repetitions per "
            "commit, each in fresh processes against the project's server in its own process; "
            f"scale stages at {data['scale_prompts']:,} prompts, run one at a time, "
            "alternating the commits stage by stage. Medians; ratio = after / before; a figure "
            f"is flagged when it is more than {tolerance:.0%} worse.",
            "",
            *_table(
                ["figure", "before", "after", "after / before", f"worse by > {tolerance:.0%}"],
                rows,
            ),
        ]
    )


def _per_minute(part: dict) -> float:
    """Answered calls a minute of wall time."""
    return part["answered"] / part["wall_s"] * 60


def _share_of_limit(run: dict, part: dict) -> float:
    """Answered calls beyond the client's first burst a minute, as a share of the limit."""
    burst = run["rpm"] / 60 * run["client_burst_s"]
    return (part["answered"] - burst) / part["wall_s"] * 60 / run["rpm"]


def rate_limits(runs: Sequence[dict]) -> str:
    first = runs[0]
    rows = [
        [
            name,
            f"{run_of(runs[0])['calls']:,}",
            *cells((run_of(run)["refused_429"] for run in runs), ",.0f"),
            *cells((_per_minute(run_of(run)) for run in runs), ",.0f"),
            *cells((_share_of_limit(run, run_of(run)) for run in runs), ".3f"),
            *cells((run_of(run)["answered"] for run in runs), ",.0f"),
            str(sum(bool(run_of(run)["stopped_by_breaker"]) for run in runs)),
        ]
        for name, key in (
            ("paced (requests_per_minute, tokens_per_minute)", "paced"),
            ("unpaced (concurrency and retries only)", "unpaced"),
            ("Claude (anthropic SDK), paced (both limits set)", "claude_paced"),
            ("Claude (anthropic SDK), no limits set (its rate-limit headers)", "claude_headers"),
        )
        if key in first
        for run_of in [lambda run, key=key: run[key]]
    ]
    header = ["client", "calls", "429s min", "median", "max", "calls/min min", "median", "max"]
    header += ["share of limit after burst min", "median", "max", "answered min", "median", "max"]
    header += ["stopped by the breaker (runs)"]
    return "\n".join(
        [
            "## Provider rate limits (`rate_limits.py`)",
            "",
            f"The project's server enforcing {first['rpm']:,.0f} requests and "
            f"{first['tpm']:,.0f} tokens a minute (buckets of {first['server_burst_s']:g} s), "
            "refusing any excess with 429 and rate-limit headers; 32 calls in flight at most. "
            "Calls a minute count the answered ones; the share of the limit those after the "
            f"client's first burst ({first['client_burst_s']:g} s of the limit).",
            "",
            *_table(header, rows),
        ]
    )
