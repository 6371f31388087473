"""Peak memory and time of each report node at UltraFeedback scale.

    python benchmarks/report_scale.py [--prompts 64000] [--tiles 1,4,16]
    python benchmarks/report_scale.py --workdir DIR --node NAME   # one node, JSON on stdout

The annotate tables of `--prompts` prompts x 4 completions are made by `scale.py`'s stages
(against the project's server, texts of UltraFeedback's sizes) in a temporary workdir. For
each `--tiles` factor K, the workdir's tables are then written K times over, each copy's
prompt ids prefixed so that they stay distinct and in prompt order, saved as the catalog
saves them (a table past 512 MiB as a folder of parts): the report's inputs at K times the
prompts, without running the annotate stages again (their texts and judge
replies repeat, which only the cost table's copy detection sees: it counts one copy's
calls). Each node of the report pipeline that reads those tables then runs in a fresh
process, given its inputs as the catalog loads them (`ParquetSource`s, the project's
`report` parameters), its outputs saved by the catalog's datasets, so its peak RSS and
time are its own. Every node runs once at every size.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from common import cpu_seconds, peak_rss_mib, save  # noqa: E402

# The sitting's own process imports nothing heavy and reads no table: Linux keeps a
# process's peak RSS across fork and exec, so each child's peak would start from its own.

# The report's dataset -> the file scale.py writes it to.
SCALE_FILES = {
    "completions": "completions.parquet",
    "aspect_annotations": "aspects.parquet",
    "critiques": "critique.parquet",
    "overall_scores": "score_fix.parquet",
}
ANNOTATE_STAGES = ("sample", "generate", "aspects", "critique", "score_fix")


def table_nodes() -> list:
    """The report nodes that read the annotate tables (the figures of small tables and the
    report's text read what these wrote)."""
    from llm_feedback.pipelines.report.pipeline import create_pipeline

    return [
        node
        for node in create_pipeline().nodes
        if set(SCALE_FILES) & set(node.inputs) and node.name != "render_report"
    ]


def node_input(name: str, workdir: Path, params: dict):
    from llm_feedback.storage.parquet_source import ParquetSource

    if name in SCALE_FILES:
        return ParquetSource(str(workdir / SCALE_FILES[name]))
    if name == "params:report":
        return params
    if name == "decontamination_questions":
        return ""
    raise KeyError(f"report_scale: no input for {name}")


def run_node(name: str, workdir: Path) -> dict:
    import yaml

    params = yaml.safe_load((ROOT / "conf/base/parameters_report.yml").read_text())["report"]
    node = next(node for node in table_nodes() if node.name == name)
    cpu = cpu_seconds()
    started = time.perf_counter()
    outputs = node.func(*(node_input(input_name, workdir, params) for input_name in node.inputs))
    # Saved as the catalog saves them: a lazy output (the viewer's site) does its work here.
    with tempfile.TemporaryDirectory(prefix="report-outputs-", dir=workdir) as folder:
        values = outputs if len(node.outputs) > 1 else (outputs,)
        for output, value in zip(node.outputs, values, strict=True):
            output_dataset(output, Path(folder)).save(value)
    return {
        "node": name,
        "wall_s": time.perf_counter() - started,
        "cpu_s": cpu_seconds() - cpu,
        "peak_rss_mib": peak_rss_mib(),
    }


def output_dataset(name: str, folder: Path):
    """`name`'s dataset as conf/base/catalog_report.yml declares it, its data root `folder`."""
    import yaml
    from kedro.io import AbstractDataset

    entries = yaml.safe_load((ROOT / "conf/base/catalog_report.yml").read_text())
    pattern = name.removesuffix("_figure")
    entry = dict(entries[name] if name in entries else entries["{figure}_figure"])
    entry["filepath"] = (
        entry["filepath"]
        .replace("${runtime_params:data_root,data}", str(folder))
        .replace("{figure}", pattern)
    )
    entry.pop("metadata", None)
    return AbstractDataset.from_config(name, entry, load_version=None, save_version=None)


class _Tiled:
    """A table of `source` written `copies` times over, a row group at a time, each copy's
    prompt ids prefixed: `to_parquet` as the catalog's `ParquetDataset` calls it, so a copy
    past `PART_BYTES` is written as parts, as the catalog writes it."""

    def __init__(self, source: str, copies: int) -> None:
        from llm_feedback.storage.parquet_source import ParquetSource

        self._source = ParquetSource(source)
        self._copies = copies

    def _groups(self):
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        for copy in range(self._copies):
            for part in self._source.part_paths():
                parquet = pq.ParquetFile(part)
                for group in range(parquet.num_row_groups):
                    table = parquet.read_row_group(group)
                    where = table.schema.get_field_index("prompt_id")
                    kind = table.schema.field(where).type
                    ids = pc.binary_join_element_wise(
                        pa.scalar(f"t{copy:03d}", kind), table.column(where), pa.scalar("-", kind)
                    )
                    yield table.set_column(where, "prompt_id", ids)

    def to_parquet(self, path, *, index=None, row_group_size=None, **kwargs) -> None:
        from llm_feedback.storage.spool import write_parquet

        schema = self._source.schema
        write_parquet(path, schema, self._groups(), index, row_group_size, **kwargs)


def tile(source: Path, workdir: Path, copies: int) -> None:
    """`source`'s tables written `copies` times into `workdir`, as the catalog saves them."""
    from common import save_table

    workdir.mkdir(parents=True, exist_ok=True)
    for name in SCALE_FILES.values():
        save_table(_Tiled(str(source / name), copies), workdir / name)


def table_files(workdir: Path) -> list[dict]:
    """Each input table's size on disk and how many files hold it."""
    from common import on_disk

    return [{"dataset": name, **on_disk(workdir / file)} for name, file in SCALE_FILES.items()]


def _python(*args: str, results: Path | None = None) -> subprocess.CompletedProcess:
    """A script in a fresh process; `results`: where it saves its JSON (not the sitting's)."""
    env = {**os.environ, **({"BENCH_RESULTS_DIR": str(results)} if results else {})}
    command = [sys.executable, *args]
    done = subprocess.run(command, check=False, capture_output=True, text=True, cwd=ROOT, env=env)
    if done.returncode:
        sys.stderr.write(done.stdout[-4000:] + done.stderr[-4000:])
        raise SystemExit(f"report_scale: {' '.join(args[:4])} exited {done.returncode}")
    return done


def sitting(prompts: int, copies: list[int]) -> dict:
    results, tables = [], []
    with tempfile.TemporaryDirectory(prefix="llmfb-report-scale-") as folder:
        base = Path(folder) / "base"
        for stage in ANNOTATE_STAGES:
            _python(
                str(HERE / "scale.py"), "--stage", stage, "--prompts", str(prompts),
                "--workdir", str(base), results=Path(folder) / "stages",
            )  # fmt: skip
        nodes = json.loads(_python(__file__, "--list-nodes").stdout.strip().splitlines()[-1])
        for count in copies:
            workdir = base if count == 1 else Path(folder) / f"x{count}"
            if count != 1:
                _python(__file__, "--workdir", str(workdir), "--tile-from", str(base),
                        "--copies", str(count))  # fmt: skip
            listed = json.loads(
                _python(__file__, "--workdir", str(workdir), "--list-tables")
                .stdout.strip()
                .splitlines()[-1]
            )
            tables.extend({**table, "prompts": prompts * count} for table in listed)
            for node in nodes:
                done = _python(__file__, "--workdir", str(workdir), "--node", node)
                result = json.loads(done.stdout.strip().splitlines()[-1])
                results.append({**result, "prompts": prompts * count, "copies": count})
                print(f"  {node} at {prompts * count:,}: {result['peak_rss_mib']:,.0f} MiB")
            if count != 1:
                shutil.rmtree(workdir)
    return {"base_prompts": prompts, "results": results, "tables": tables}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--prompts", type=int, default=64_000)
    parser.add_argument("--tiles", default="1,4,16", help="copies of the tables, e.g. 1,4,16")
    parser.add_argument("--workdir", default=None, help="with --node: the tables' folder")
    parser.add_argument("--node", default=None, help="run one report node, print its JSON")
    parser.add_argument("--list-nodes", action="store_true")
    parser.add_argument("--list-tables", action="store_true", help="with --workdir")
    parser.add_argument("--tile-from", default=None, help="write --copies of these tables")
    parser.add_argument("--copies", type=int, default=1)
    args = parser.parse_args()
    if args.list_nodes:
        print(json.dumps([node.name for node in table_nodes()]))  # the last line: Kedro logs
        return
    if args.list_tables:
        print(json.dumps(table_files(Path(args.workdir))))
        return
    if args.tile_from:
        tile(Path(args.tile_from), Path(args.workdir), args.copies)
        return
    if args.node:
        print(json.dumps(run_node(args.node, Path(args.workdir))))
        return
    copies = [int(part) for part in args.tiles.split(",") if part.strip()]
    save("report_scale", sitting(args.prompts, copies))


if __name__ == "__main__":
    main()
