"""RESULTS.md is rendered from the JSON of a sitting: no typed figure, the right spreads.

Fast: sittings are written by hand (or by a seeded generator) in the folder layout of
`benchmarks/bench.py` and rendered with `bench.py --render`; one test runs a real quick
sitting of one benchmark against the project's server.
"""

from __future__ import annotations

import json
import random
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import KEDRO_CLI_ENV, PROJECT_ROOT, documentation_section

sys.path.insert(0, str(PROJECT_ROOT / "benchmarks"))
import bench  # noqa: E402
import results_cells  # noqa: E402
import results_judging  # noqa: E402
import results_md  # noqa: E402
import results_runs  # noqa: E402

# A number standing on its own (not part of a name such as SmolLM2 or a commit hash).
NUMBER = re.compile(r"(?<![A-Za-z0-9_])\d(?:[\d,]*\d)?(?:\.\d+)?(?![A-Za-z0-9_])")


def write_sitting(directory: Path, meta: dict, repetitions: list[dict[str, dict]]) -> Path:
    """`bench.py`'s layout: sitting.json and rep<k>/<run key>/<name>.json."""
    directory.mkdir(parents=True)
    (directory / "sitting.json").write_text(json.dumps(meta))
    for index, runs in enumerate(repetitions, start=1):
        for key, payload in runs.items():
            folder = directory / f"rep{index}" / key
            folder.mkdir(parents=True)
            (folder / f"{payload.get('benchmark', key)}.json").write_text(json.dumps(payload))
    return directory


def render(directory: Path, tmp_path: Path) -> str:
    output = tmp_path / f"{directory.name}.md"
    bench.main(["--render", str(directory), "--output", str(output)])
    return output.read_text()


def meta(repetitions: int, **extra) -> dict:
    return {
        "command": "python benchmarks/bench.py",
        "results_dir": "benchmarks/results/bench",
        "machine": "Test CPU",
        "started": "dawn",
        "finished": "dusk",
        "repetitions": repetitions,
        "quick": False,
        "groups": ["throughput"],
        "skipped": {},
        **extra,
    }


def client(rate: float, cpu_ms: float, requests: int) -> dict:
    return {"requests_per_s": rate, "cpu_ms_per_request": cpu_ms, "wall_s": requests / rate}


def throughput_run(ours: float, plain: float, ours_cpu: float, plain_cpu: float) -> dict:
    return {
        "benchmark": "throughput",
        "latency_s": 0.2,
        "concurrency": 32,
        "bound_requests_per_s": 160.0,
        "latency_run": {
            "ours": client(ours, 9.0, 1600),
            "plain_async_openai": client(plain, 9.0, 1600),
        },
        "zero_latency_run": {
            "ours": client(600.0, ours_cpu, 3000),
            "plain_async_openai": client(500.0, plain_cpu, 3000),
        },
    }


def row(markdown: str, label: str) -> list[str]:
    """The cells of the first table row whose first cell is `label`."""
    for line in markdown.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells[0] == label:
            return cells[1:]
    raise AssertionError(f"no row {label!r} in:\n{markdown}")


def test_min_median_max_and_paired_ratios_of_three_repetitions(tmp_path):
    runs = [
        {"throughput": throughput_run(150.5, 151.0, 2.25, 3.0)},
        {"throughput": throughput_run(120.3, 150.0, 1.75, 2.0)},
        {"throughput": throughput_run(140.7, 149.0, 2.5, 2.0)},
    ]
    text = render(write_sitting(tmp_path / "sitting", meta(3), runs), tmp_path)
    latency, zero = text.split("At zero latency", 1)
    # calls/s min | median | max, share of the bound (median / 160), ours / bare per repetition
    # (150.5/151, 120.3/150, 140.7/149 -> median 0.944).
    assert row(latency, "`LLMClient`") == ["120.3", "140.7", "150.5", "**0.879**", "0.944"]
    bare = ["149.0", "150.0", "151.0", "0.938", ""]  # 150 / 160; the baseline itself
    assert row(latency, "bare `AsyncOpenAI`, same requests") == bare
    # CPU ms min | median | max and CPU / bare per repetition: 0.75, 0.875, 1.25 -> 0.875.
    ours = row(zero, "`LLMClient`")
    assert ours[3:] == ["1.750", "2.250", "2.500", "0.875"]
    assert "1,600 generation-sized requests" in latency
    assert "3,000 requests per contender" in zero
    assert "repetitions: 3" in text


def kedro_annotate_run(
    window_rate: float, process_rate: float, bare_rate: float, calls: int = 4100
) -> dict:
    """One repetition's JSON of `kedro_annotate.py` (500 prompts, 160 calls/s bound)."""
    return {
        "latency_s": 0.2,
        "concurrency": 32,
        "bound_calls_per_s": 160.0,
        "prompts": 500,
        "completions": 2000,
        "kedro_run": {
            "calls": calls,
            "process_wall_s": calls / process_rate,
            "calls_per_s": window_rate,
            "calls_per_s_process": process_rate,
        },
        "plain_async_openai_same_requests": {"calls_per_s": bare_rate},
    }


def test_the_kedro_run_contender_against_the_bound_and_the_bare_replay():
    run = kedro_annotate_run
    text = results_md.kedro_annotate(
        [run(140.0, 100.0, 150.0), run(120.0, 90.0, 125.0), run(130.0, 80.0, 152.0)]
    )
    # window / bare per repetition: 0.933, 0.96, 0.855 -> 0.933; process: 0.667, 0.72, 0.526
    assert row(text, "`kedro run`, judge window") == [
        "120.0",
        "130.0",
        "140.0",
        "**0.812**",
        "0.933",
    ]
    assert row(text, "`kedro run`, whole process") == ["80.0", "90.0", "100.0", "0.562", "0.667"]
    assert row(text, "bare `AsyncOpenAI`, same requests")[:4] == [
        "125.0",
        "150.0",
        "152.0",
        "0.938",
    ]
    assert "500 prompts (2,000 completions)" in text and "4,100 judge calls" in text
    assert "Process wall time, s (min | median | max): 41.0 | 45.6 | 51.2." in text
    # A sitting from before the floors were measured: no raw loop row, no floor line.
    assert "raw aiohttp" not in text and "at best" not in text


def test_the_kedro_run_beside_the_floors_of_the_machine():
    def run(raw_rate: float, first_call_s: float, tail_s: float, start_s: float) -> dict:
        calls = 4000
        measured = kedro_annotate_run(150.0, calls / 30.0, 145.0, calls=calls)
        measured["kedro_run"].update(first_call_after_s=first_call_s, after_last_answer_s=tail_s)
        return {
            **measured,
            "raw_aiohttp_same_requests": {"calls_per_s": raw_rate},
            "kedro_start_s": start_s,
            "process_ceiling_ratio_of_bound": calls / (calls / raw_rate + start_s) / 160.0,
        }

    text = results_md.kedro_annotate(
        [run(156.8, 2.0, 0.6, 1.0), run(158.4, 1.9, 0.7, 1.1), run(157.6, 2.1, 0.5, 1.2)]
    )
    raw = row(text, "raw aiohttp loop, same bodies, answers unread")
    assert raw == ["156.8", "157.6", "158.4", "0.985", f"{157.6 / 145.0:.3f}"]
    assert "process start to the first call 1.90 | 2.00 | 2.10" in text
    assert "(the fix node, the saves) 0.50 | 0.60 | 0.70" in text
    assert "`python -m kedro --version` in the project 1.00 | 1.10 | 1.20" in text
    # 4,000 calls at 156.8/s after 1.0 s: 26.51 s, 0.943 of 160/s; 158.4 after 1.1: 0.949;
    # 157.6 after 1.2: 0.941.
    assert "nothing else: 0.941 | 0.943 | 0.949 of the bound" in text


def test_an_even_number_of_repetitions_takes_the_middle_two_for_the_median():
    assert results_cells.spread([4.0, 1.0, 3.0, 2.0]) == (1.0, 2.5, 4.0)
    assert results_cells.cells([3.0, 1.0], ".1f") == ["1.0", "2.0", "3.0"]
    assert results_cells.inline([3.0, 1.0], ".1f") == "1.0 | 2.0 | 3.0"


def test_the_slope_of_peak_rss_is_fitted_over_the_sizes():
    runs = [
        {
            "benchmark": "scale_aspects",
            "prompts": prompts,
            "completions": 4 * prompts,
            "stages": {
                "aspects": {
                    "wall_s": 1.0,
                    "rows": 16 * prompts,
                    "output": {"files": prompts // 1000, "mib": prompts / 2},
                }
            },
            "peak_rss_mib": rss,
        }
        for prompts, rss in ((1000, 100.0), (2000, 150.0), (4000, 250.0))
    ]
    per_size, slope = results_md.scale(runs).split("least-squares slope", 1)
    # prompts, completions, rows out, written, wall s, runs, peak RSS min | median | max
    first_size = ["1,000", "4,000", "16,000", "500 MiB in 1 file", "1.0", "1", "100", "100", "100"]
    assert row(per_size, "annotate: aspect ratings") == first_size
    written = [line.split("|")[5].strip() for line in per_size.splitlines() if "aspect" in line]
    assert written == ["500 MiB in 1 file", "1,000 MiB in 2 files", "2,000 MiB in 4 files"]
    # Peak RSS at each size, 50 MiB per 1,000 prompts = 51.2 KiB per prompt, and the
    # growth from 2,000 prompts to 4,000: 250 / 150.
    assert row(slope, "annotate: aspect ratings") == ["100", "150", "250", "**51.20**", "1.67"]


def test_the_report_nodes_table_marks_sizes_a_node_did_not_run_at():
    def result(node: str, prompts: int, rss: float) -> dict:
        return {"node": node, "prompts": prompts, "peak_rss_mib": rss, "wall_s": rss / 100}

    run = {
        "base_prompts": 1000,
        "results": [
            result("rank_models", 1000, 400.0),
            result("rank_models", 2000, 700.0),
            result("estimate_costs", 1000, 300.0),
            result("estimate_costs", 2000, 310.0),
            result("estimate_costs", 4000, 341.0),
        ],
        "tables": [
            {"dataset": "aspect_annotations", "prompts": prompts, "files": files, "mib": mib}
            for prompts, files, mib in ((1000, 1, 258.2), (2000, 2, 516.7), (4000, 3, 1033.1))
        ],
    }
    text = results_judging.report_scale([run])
    assert row(text, "aspect_annotations") == [
        "258 MiB in 1 file",
        "517 MiB in 2 files",
        "1,033 MiB in 3 files",
    ]
    assert row(text, "rank_models") == ["400 (4.0 s)", "700 (7.0 s)", "not run", "1.75"]
    assert row(text, "estimate_costs") == ["300 (3.0 s)", "310 (3.1 s)", "341 (3.4 s)", "1.10"]
    assert "each node run once at each size" in text


def test_the_cache_table_gives_the_lookup_and_call_cost_ratios_of_the_largest_cache():
    def result(entries: int, cpu: float, call: float) -> dict:
        return {
            "entries": entries,
            "file_mib": entries / 1000,
            "write_us_per_entry": 14.0,
            "lookups": 1000,
            "found": 500,
            "lookup_us_per_key": cpu + 0.5,
            "lookup_cpu_us_per_key": cpu,
            "calls": 2048,
            "client_cpu_us_per_call": call,
        }

    text = results_judging.cache_scale(
        [{"batch": 4096, "results": [result(4_000_000, 9.0, 84.0), result(4096, 6.0, 80.0)]}]
    )
    assert "costs 1.50x the CPU of one at 4,096" in text
    assert "a call, lookup included, **1.05x**" in text
    assert row(text, "4,096") == ["4", "14.0", "6.5", "6.0", "80.0"]
    assert row(text, "4,000,000") == ["4,000", "14.0", "9.5", "9.0", "84.0"]


# --- no typed figure: three sittings whose every number differs render no common number ---


def fake_sitting(rng: random.Random, repetitions: int) -> tuple[dict, list[dict[str, dict]]]:
    """A complete sitting (every benchmark, two scale sizes) of random figures."""

    def x(low: float = 1.0, high: float = 900.0) -> float:
        return rng.uniform(low, high)

    def n(low: int = 10, high: int = 90_000) -> int:
        return rng.randint(low, high)

    latency, concurrency, prompts = x(0.05, 0.9), n(8, 200), n()
    sizes = sorted({n(), n()})
    slots = sorted(rng.sample(range(1, 60), 3))
    fault_names = ["rate_limited", "server_error", "stall", "malformed"]
    shares = rng.sample(range(1, 99), 4)
    bound = x()

    def throughput() -> dict:
        return {
            "benchmark": "throughput",
            "latency_s": latency,
            "concurrency": concurrency,
            "bound_requests_per_s": bound,
            "latency_run": {
                key: client(x(), x(), prompts) for key in ("ours", "plain_async_openai")
            },
            "zero_latency_run": {
                key: client(x(), x(), prompts + 1)
                for key in ("ours", "ours_with_cache_writes", "plain_async_openai")
            },
        }

    def annotate(at_latency: bool) -> dict:
        def calls() -> dict:
            return {"calls_per_s": x(), "cpu_ms_per_call": x()}

        return {
            "benchmark": "annotate_throughput",
            "latency_s": latency,
            "concurrency": concurrency,
            "bound_calls_per_s": bound if at_latency else None,
            "prompts": prompts,
            "aspects": calls(),
            "critiques": calls(),
            "plain_async_openai_same_aspect_requests": calls(),
        }

    def scale(stage: str, size: int) -> dict:
        return {
            "benchmark": f"scale_{stage}",
            "prompts": size,
            "completions": size + 3,
            "stages": {
                stage: {
                    "wall_s": x(),
                    "rows": size + 7,
                    "output": {"files": size + 11, "mib": x()},
                }
            },
            "peak_rss_mib": x(),
        }

    def one_repetition() -> dict[str, dict]:
        runs = {
            "throughput": throughput(),
            "annotate_latency": annotate(True),
            "annotate_zero": annotate(False),
            "kedro_annotate": {
                "latency_s": latency,
                "concurrency": concurrency,
                "bound_calls_per_s": bound,
                "prompts": prompts,
                "completions": prompts + 5,
                "kedro_run": {
                    "calls": prompts + 9,
                    "process_wall_s": x(),
                    "calls_per_s": x(),
                    "calls_per_s_process": x(),
                },
                "plain_async_openai_same_requests": {"calls_per_s": x()},
            },
            "judge_throughput": {
                "latency_s": latency,
                "concurrency": concurrency,
                "bound_judgments_per_s": bound,
                "judgments": prompts,
                **{
                    kind: {"judgments_per_s": x(), "cpu_ms_per_judgment": x()}
                    for kind in ("single_1_10", "binary", "client_only")
                },
                "zero_latency": {
                    "judgments": prompts + 11,
                    **{
                        kind: {"judgments_per_s": x(), "cpu_ms_per_judgment": x()}
                        for kind in ("judge", "client_only")
                    },
                },
            },
            "batch_api": {
                "requests": prompts,
                "batch_max_requests": n(),
                "first_wall_s": x(),
                "client_cpu_ms_per_request": x(),
                "cached_rerun_wall_s": x(),
                "peak_rss_mib": x(),
                "chat_requests_sent": n(),
            },
            "chaos": {
                "prompts": prompts,
                "faults": dict(zip(fault_names, (share / 100 for share in shares), strict=True)),
                "wall_s": x(),
                "completions": {
                    "rows": n(),
                    "answered": n(),
                    "failed": n(),
                    "lost": n(),
                    "duplicated": n(),
                },
                "aspect_annotations": {
                    "rows": n(),
                    "read": n(),
                    "unreadable_after_reasks": n(),
                    "lost": n(),
                    "duplicated": n(),
                },
                "critiques": {"rows": n(), "read": n(), "lost": n(), "duplicated": n()},
                "ultrafeedback_records": {"rows": n(), "lost": n()},
                "requests_per_needed_call": x(),
                "calls_failed_after_retries": n(),
            },
            "embedded_model": {
                "max_tokens": prompts,
                "runs": [
                    {
                        "slots": slot,
                        "tokens_per_s": x(),
                        "speedup_vs_single_stream": x(),
                        "mean_latency_s": x(),
                    }
                    for slot in slots
                ],
                "peak_rss_mib": x(),
            },
            "default_run": {
                "machine": "Test CPU",
                "params": f"sample.max_prompts={n()}",
                "runs": [
                    {
                        "process_wall_s": x(60, 6000),
                        "peak_rss_mib": x(),
                        "nodes": {
                            "rate_aspects": {
                                "wall_s": x(),
                                "calls": n(),
                                "prompt_tokens_total": n(),
                                "prompt_tokens_cached_total": n(),
                                "prompt_seconds_total": x(),
                                "tokens_predicted_total": n(),
                                "tokens_predicted_seconds_total": x(),
                            }
                        },
                    }
                ],
            },
            "default_run_under_load": {
                "machine": "Test CPU",
                "busy_loops": n(1, 9),
                "limit_s": x(60, 6000),
                "finished": True,
                "wall_s": x(60, 6000),
                "load_average_before": x(),
                "load_average_during": {"mean": x(), "max": x()},
                "timed_out_call_lines": n(),
                "params": f"sample.max_prompts={n()}",
                "node_wall_s": {"rate_aspects": x(), "generate_completions": x()},
            },
            "ray_throughput": {
                "requests": prompts,
                "latency_s": latency,
                "concurrency": concurrency,
                "bound_calls_per_s": bound,
                "ray": {"cpus": n(), "replicas": n(), "batch_size": n()},
                "openai": {"calls_per_s": x(), "steady_calls_per_s": x(), "first_call_s": x()},
                "ray_backend": {
                    "calls_per_s": x(),
                    "steady_calls_per_s": x(),
                    "first_call_s": x(),
                    "ray_init_s": x(),
                },
            },
        }
        for size in sizes:
            for stage in ("sample", "generate", "aspects", "critique", "score_fix", "export"):
                runs[f"scale_{size}_{stage}"] = scale(stage, size)
        return runs

    sitting_meta = meta(
        repetitions,
        command=f"python benchmarks/bench.py --repetitions {repetitions}",
        started=f"{n(1000, 9999)}-{n(10, 99)}",
        finished=f"{n(1000, 9999)}-{n(10, 99)}",
        groups=["all"],
        skipped={"other": f"{n()} reasons"},
    )
    return sitting_meta, [one_repetition() for _ in range(repetitions)]


def fake_before_after(rng: random.Random) -> dict:
    return {
        "before": "abc",
        "after": "def",
        "when": f"{rng.randint(1000, 9999)}",
        "cpu": "Test CPU",
        "cores": rng.randint(2, 999),
        "repetitions": rng.randint(2, 999),
        "scale_prompts": rng.randint(1000, 99999),
        "tolerance": rng.uniform(0.11, 0.99),
        "figures": [
            {
                "figure": name,
                "median_before": rng.uniform(1, 999),
                "median_after": rng.uniform(1, 999),
                "ratio": rng.uniform(0.1, 9),
                "worse_than_tolerance": False,
            }
            for name in ("calls per second", "peak memory")
        ],
    }


def test_every_number_in_results_md_comes_from_the_json(tmp_path, monkeypatch):
    numbers = []
    for seed, repetitions in ((1, 3), (2, 4), (3, 2)):
        rng = random.Random(seed)
        sitting_meta, runs = fake_sitting(rng, repetitions)
        before_after = tmp_path / f"before_after_{seed}.json"
        before_after.write_text(json.dumps(fake_before_after(rng)))
        monkeypatch.setattr(bench, "BEFORE_AFTER_JSON", before_after)
        text = render(write_sitting(tmp_path / f"sitting{seed}", sitting_meta, runs), tmp_path)
        numbers.append(NUMBER.findall(text))
    # Every section rendered, with as many numbers whatever the figures ...
    for marker in ("throughput", "annotate-throughput", "kedro-annotate", "judge-throughput"):
        assert f"<!-- {marker}:start -->" in text
    for marker in (
        "scale",
        "batch-api",
        "chaos",
        "embedded-model",
        "default-run",
        "ray-throughput",
    ):
        assert f"<!-- {marker}:start -->" in text
    assert "<!-- before-after:start -->" in text
    assert len(numbers[0]) == len(numbers[1]) == len(numbers[2]) > 300
    # ... and none reads the same in three sittings whose JSON share no number: none is typed.
    typed = [trio for trio in zip(*numbers, strict=True) if len(set(trio)) == 1]
    assert typed == []


def test_the_checked_in_before_after_section_renders_from_its_json():
    data = json.loads(bench.BEFORE_AFTER_JSON.read_text())
    text = results_runs.before_after(data)
    first = data["figures"][0]
    assert row(text, first["figure"]) == [
        f"{first['median_before']:.4g}",
        f"{first['median_after']:.4g}",
        f"{first['ratio']:.3f}",
        "**yes**" if first["worse_than_tolerance"] else "no",
    ]


# --- the machinery -------------------------------------------------------------------------


def test_render_refuses_an_unfinished_sitting_and_a_folder_that_is_none(tmp_path, capsys):
    unfinished = {k: v for k, v in meta(1).items() if k != "finished"}
    folder = write_sitting(tmp_path / "unfinished", unfinished, [])
    for directory, message in ((folder, "did not finish"), (tmp_path, "no sitting.json")):
        with pytest.raises(SystemExit) as exit_info:
            bench.main(["--render", str(directory), "--output", str(tmp_path / "out.md")])
        assert message in str(exit_info.value.code)
    assert not (tmp_path / "out.md").exists()


def test_a_json_the_renderers_cannot_read_stops_the_sitting_after_its_first_repetition(
    tmp_path,
):
    broken = throughput_run(150.0, 151.0, 2.0, 3.0)
    del broken["zero_latency_run"]
    folder = write_sitting(tmp_path / "sitting", meta(3), [{"throughput": broken}])
    with pytest.raises(bench.SittingFailed, match="zero_latency_run") as failure:
        bench.check_renders(folder, meta(3))
    assert str(folder) in str(failure.value)


def test_unknown_benchmarks_and_sizes_are_rejected_by_name(capsys):
    for arguments, message in (
        (["--only", "throughput,nonesuch"], "unknown benchmark(s) nonesuch"),
        (["--scale", "16000,-5"], "expected prompt counts"),
        (["--repetitions", "2", "--scale-repetitions", "3"], "--scale-repetitions must be"),
    ):
        with pytest.raises(SystemExit):
            bench.main(arguments)
        assert message in capsys.readouterr().err


def readme_bench_commands() -> list[str]:
    """The bash lines of the documentation's Benchmarks section, comments dropped."""
    section = documentation_section("Benchmarks")
    block = section.split("```bash\n", 1)[1].split("```", 1)[0]
    return [re.split(r"\s+#", line)[0].strip() for line in block.splitlines() if line.strip()]


def make_bench_dry_run(*variables: str) -> list[str]:
    """The bench.py arguments `make bench` would run with these variables (make -n)."""
    dry_run = subprocess.run(
        ["make", "-n", "bench", *variables],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.replace("\\\n", " ")
    command = next(line for line in dry_run.splitlines() if "benchmarks/bench.py" in line)
    return shlex.split(command)[2:]


def test_the_readme_make_bench_options_reach_bench_py():
    commands = readme_bench_commands()
    with_options = next(line for line in commands if line.startswith("make bench BENCH_"))
    assert make_bench_dry_run(*shlex.split(with_options)[2:]) == [
        "--repetitions",
        "5",
        "--scale",
        "16000,64000",
        "--only",
        "throughput,annotate,scale",
        "--scale-repetitions",
        "1",
    ]
    quick = next(line for line in commands if line.endswith("make bench") and "=" in line)
    assert make_bench_dry_run(quick.split()[0]) == ["--quick"]
    assert make_bench_dry_run() == []  # bench.py's own defaults: 3 repetitions, full sizes


def readme_bench_command() -> list[str]:
    line = next(line for line in readme_bench_commands() if line.startswith("python benchmarks/"))
    return shlex.split(line)


def test_the_readme_quick_sitting_writes_results_from_its_own_json(tmp_path):
    """The documented command, a real quick sitting against the project's server, into tmp."""
    command = readme_bench_command()
    assert command[:3] == ["python", "benchmarks/bench.py", "--quick"], command
    results = tmp_path / "sitting"
    subprocess.run(
        [sys.executable, *command[1:], "--results", str(results)],
        cwd=PROJECT_ROOT,
        env=KEDRO_CLI_ENV,
        check=True,
        capture_output=True,
        timeout=300,
    )
    text = (results / "RESULTS.md").read_text()
    measured = json.loads(next((results / "rep1" / "throughput").glob("*.json")).read_text())
    ours = measured["latency_run"]["ours"]["requests_per_s"]
    assert row(text, "`LLMClient`")[:3] == [f"{ours:.1f}"] * 3  # one repetition
    assert "Quick mode" in text
    assert json.loads((results / "sitting.json").read_text())["orders"] == [["throughput"]]


def test_a_quick_sitting_of_the_kedro_run_and_every_scale_stage(tmp_path):
    results = tmp_path / "sitting"
    subprocess.run(
        [sys.executable, "benchmarks/bench.py", "--quick", "--only", "kedro_annotate,scale"]
        + ["--scale", "20,40", "--results", str(results)],
        cwd=PROJECT_ROOT,
        env=KEDRO_CLI_ENV,
        check=True,
        capture_output=True,
        timeout=400,
    )
    _, runs = bench.load_sitting(results)
    (kedro,) = runs["kedro_annotate"]
    prompts = kedro["prompts"]
    # Every aspect of every prompt and every completion's critique reached the server, and
    # the bare client replayed exactly those calls.
    assert kedro["kedro_run"]["calls"] >= 4 * prompts + 4 * prompts
    assert kedro["plain_async_openai_same_requests"]["calls"] == kedro["kedro_run"]["calls"]
    assert kedro["raw_aiohttp_same_requests"]["calls"] == kedro["kedro_run"]["calls"]
    assert 0 < kedro["kedro_run"]["first_call_after_s"] < kedro["kedro_run"]["process_wall_s"]
    assert kedro["kedro_run"]["after_last_answer_s"] > 0 and kedro["kedro_start_s"] > 0
    for size in (20, 40):
        rows = {
            stage: runs[f"scale_{size}_{stage}"][0]["stages"][stage]["rows"]
            for stage in bench.STAGES
        }
        assert rows == {
            "sample": 4 * size,
            "generate": 4 * size,
            "aspects": 16 * size,  # 4 aspects x 4 completions
            "critique": 4 * size,
            "score_fix": 4 * size,
            "export": size,
        }
    text = (results / "RESULTS.md").read_text()
    slope = text.split("least-squares slope", 1)[1]
    for stage in bench.STAGES:
        *_, per_prompt, growth = row(slope, results_md.SCALE_LABELS[stage])
        assert per_prompt.startswith("**") and float(growth) > 0


def test_a_partial_sitting_rewrites_only_its_own_sections(tmp_path):
    full_meta, full_runs = fake_sitting(random.Random(1), 3)
    output = tmp_path / "RESULTS.md"
    bench.main(
        [
            "--render",
            str(write_sitting(tmp_path / "full", full_meta, full_runs)),
            "--output",
            str(output),
        ]
    )
    before = output.read_text()
    _, later_runs = fake_sitting(random.Random(2), 2)
    partial = [{key: run for key, run in rep.items() if key == "chaos"} for rep in later_runs]
    partial_meta = meta(2, groups=["chaos"], command="python benchmarks/bench.py --only chaos")
    partial_meta.update(started="noon", finished="one")
    partial_dir = write_sitting(tmp_path / "partial", partial_meta, partial)
    for _ in range(2):  # twice: the header's note is added once
        bench.main(["--render", str(partial_dir), "--output", str(output), "--sections"])
    after = output.read_text()

    def section(text: str, name: str) -> str:
        return text.split(f"<!-- {name}:start -->")[1].split(f"<!-- {name}:end -->", maxsplit=1)[0]

    alone = results_md.render({**partial_meta}, bench.load_runs(partial_dir))
    assert "*Rerun alone: `python benchmarks/bench.py --only chaos`, noon to one" in section(
        after, "chaos"
    )
    # The chaos section is the partial sitting's, its note aside ...
    rerun = section(after, "chaos").replace(section(after, "chaos").split("\n")[3], "", 1)
    assert NUMBER.findall(rerun) == NUMBER.findall(section(alone, "chaos"))
    assert section(after, "chaos") != section(before, "chaos")
    # ... and every other section is byte for byte the full sitting's.
    for name in ("throughput", "annotate-throughput", "scale", "embedded-model", "default-run"):
        assert section(after, name) == section(before, name)
    assert after.count(results_md.RERUN_NOTE) == 1
    assert after.startswith(before.split("\n\n<!--")[0])
