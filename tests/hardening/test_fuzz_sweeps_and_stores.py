"""Fuzzing sweep files with generators and results stores (issue 27): whatever the generator's options, a sweep is
sized and refused (or expanded) within a small budget with only StrataSim's own errors; whatever valid JSON of the
wrong shape a store's rows hold, ``stratasim results`` and a resumed sweep give one StrataSim error, never a
traceback.

CI runs each with a small fixed budget (derandomized, so a failure repeats); ``pytest -m fuzz`` runs the long
budget as well (``STRATASIM_FUZZ_EXAMPLES``, default 10,000 examples each).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stratasim.cli.results import to_text
from stratasim.explore.inputs import input_digests
from stratasim.explore.results import read_results
from stratasim.explore.run import run_sweep
from stratasim.explore.space import check_points, expand, resolve
from stratasim.explore.store import ResultStore, check_trials
from stratasim.explore.sweep_file import GENERATORS, load_sweep, parse_sweep
from stratasim.study.budget import Budget
from tests.hardening.budgets import ci_budget, long_budget
from tests.hardening.test_fuzz_parsers import SCALARS, VALUES, expect_only_our_errors

ROOT = Path(__file__).resolve().parents[2]
CI = ci_budget(100)
LONG = long_budget()
SMALL = Budget(max_memory=2**20, max_events=100_000)
"""A generator of at most 100 candidates, a list of at most 512 trials: each example stays well under a second."""

TINY: dict[str, Any] = {
    "name": "tiny",
    "workload": {
        "kind": "transformer",
        "model": {"layers": 4, "hidden": 64, "heads": 4, "seq_len": 32, "vocab": 128},
        "parallelism": {"tp": 1, "pp": 1, "dp": 8, "micro_batch": 1, "global_batch": 16},
    },
    "system": {"algorithm": "ring"},
    "network": {
        "backend": "analytical",
        "topology": [{"kind": "ring", "size": 8, "bandwidth": "50GB/s", "latency": "1us"}],
    },
    "compute": {"backend": "roofline", "device": "h100"},
}
PLAUSIBLE: dict[str, list[Any]] = {
    "tp": [[1, 2], [1, 2, 4, 8], [3]],
    "pp": [[1, 2], [4], [10**12]],
    "ep": [[1, 2]],
    "cp": [[1, 2], [2, 4], [10**12]],
    "hsdp": [[1, 8], [2], [10**12]],
    "max_tp": [1, 2, 10**12],
    "max_pp": [2, 10**12],
    "schedule": [
        ["1f1b"],
        ["interleaved"],
        ["gpipe", "1f1b"],
        ["zb_h1", "zb_h2"],
        ["zb_v", "dualpipev"],
        ["dualpipe"],
        ["1f1b", "zb_h2", "dualpipev", "interleaved"],
    ],
    "virtual_stages": [[2], [2, 4]],
    "micro_batch": [[1, 2], [10**15]],
    "max_micro_batch": [1, 4, 10**9],
    "recompute": [["none"], ["full"]],
    "zero": [[0], [1, 3]],
    "sequence_parallel": [[False], [True, False]],
    "order": ["all", [["tp", "pp", "dp"]]],
    "keep": [["zero", "recompute", "schedule", "micro_batch", "sequence_parallel"], ["zero"]],
    "memory": ["80GB", "1MiB"],
    "chips": [8, 12, 13, 10**9, 2**62, [8, 16]],
    "kinds": [["torus"], ["random"], ["mesh", "switch"], ["torus", "mesh", "switch", "random"]],
    "dimensions": [[1], [2, 3], [3]],
    "bandwidth": ["50GB/s", ["50GB/s", "25GB/s"]],
    "latency": ["1us", ["1us", "2us"]],
    "distinct_orders": [True, False],
    "random": [
        {"count": 3},
        {"count": 10**12},
        {"count": 2, "links_per_chip": 1e300},
        {"count": 1, "links_per_chip": 3},
        {"count": 1, "links_per_chip": 1.7976931348623157e308},
    ],
    "switch": [{"bandwidth": "10GB/s"}],
    "fill_dp": [True, False],
    "rows": [[1, 2], [4]],
    "cols": [[2], [10**9]],
    "pes": [[16], [2**62]],
    "dataflow": [["os", "ws"]],
    "buffers": [{"sram": [1, 2]}],
    "max_aspect": [1, 4],
}
"""Values each generator option may plausibly take (huge ones included): most examples get past validation."""
CHIPS = st.sampled_from(PLAUSIBLE["chips"])


def _entries(name: str) -> st.SearchStrategy[dict[str, Any]]:
    """Entries of generator ``name``: a few of its own options, mostly with plausible values (topology's chips
    always given, as it is required)."""
    options = sorted(option for option in GENERATORS[name].model_fields if option != "generator")
    given_options = st.dictionaries(st.sampled_from(options), VALUES, max_size=3).flatmap(
        lambda weird: st.fixed_dictionaries(
            {}, optional={option: st.sampled_from(PLAUSIBLE.get(option, [1])) for option in options}
        ).map(lambda plausible: {**plausible, **weird} if len(weird) < 2 else plausible)
    )
    chips = CHIPS.map(lambda chips: {"chips": chips}) if name == "topology" else st.just({})
    return st.tuples(given_options, chips).map(lambda parts: {"generator": name, **parts[1], **parts[0]})


GENERATOR_ENTRIES = st.one_of(
    *(_entries(name) for name in sorted(GENERATORS)),
    st.fixed_dictionaries({"generator": VALUES}, optional={"tp": VALUES, "chips": VALUES}),
)
BATCHES = st.sampled_from([16, 8 * 10**15, 2**62, 24])
SEARCHES = st.one_of(
    st.just({"method": "grid"}),
    st.fixed_dictionaries({"method": st.just("random"), "trials": st.sampled_from([1, 5, 10**12]), "seed": SCALARS}),
)


def fuzz_generator(entry: object, batch: int, search: object, folder: Path) -> None:
    study = json.loads(json.dumps(TINY))
    study["workload"]["parallelism"]["global_batch"] = batch
    data = {"study": study, "space": {"plan": entry, "system.splits": [1, 2]}, "search": search}

    def expand_it() -> None:
        sweep = parse_sweep(data, "sweep.yaml", folder)
        input_digests(sweep)
        space = resolve(sweep, SMALL)
        check_points(sweep, space, SMALL)
        expand(sweep, space, SMALL)

    expect_only_our_errors(expand_it)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz-sweeps")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store of four finished trials over a list and a log range."""
    folder = tmp_path_factory.mktemp("fuzz-store")
    shutil.copy(ROOT / "examples" / "quickstart.yaml", folder / "base.yaml")
    (folder / "sweep.yaml").write_text(
        "base: base.yaml\nspace:\n  system.algorithm: [ring, direct]\n"
        "  network.topology.0.bandwidth: {low: 25GB/s, high: 100GB/s, log: true, count: 2}\n"
        "objectives: [{metric: total_time_ns}]\nconstraints: [{metric: exposed_comm_ns, max: 1e12}]\n",
        encoding="utf-8",
    )
    sweep = load_sweep(folder / "sweep.yaml")
    kept = ResultStore.for_sweep(folder / "store.db", sweep)
    try:
        run_sweep(sweep, kept)
    finally:
        kept.close()
    return folder / "store.db"


CELL = st.one_of(VALUES, st.integers(min_value=2**1023, max_value=2**1100))
"""A value in a stored column: any JSON, or a whole number beyond a double (JSON holds any)."""
COLUMN_JSON = st.one_of(
    VALUES.map(json.dumps),
    st.fixed_dictionaries({"system.algorithm": CELL, "network.topology.0.bandwidth": CELL}).map(json.dumps),
    st.dictionaries(st.sampled_from(["total_time_ns", "exposed_comm_ns", "x"]), CELL).map(json.dumps),
)
ROW = st.fixed_dictionaries(
    {},
    optional={
        "params": st.one_of(COLUMN_JSON, SCALARS),
        "metrics": st.one_of(COLUMN_JSON, SCALARS),
        "status": st.one_of(st.sampled_from(["done", "failed"]), SCALARS),
        "error": SCALARS,
        "wall_seconds": SCALARS,
        "number": SCALARS,
        "fidelity": st.one_of(st.sampled_from([0, 1]), SCALARS),
        "definition": st.one_of(COLUMN_JSON, SCALARS),
    },
)


def fuzz_store(store: Path, folder: Path, row: dict[str, Any], which: int) -> None:
    db = folder / "fuzzed.db"
    shutil.copy(store, db)
    with sqlite3.connect(db) as connection:
        definition = connection.execute("SELECT definition FROM sweep").fetchone()[0]
        for column, value in row.items():
            value = str(value) if isinstance(value, float) and value != value else value  # NaN is NULL to SQLite
            with contextlib.suppress(sqlite3.IntegrityError, OverflowError):  # what the schema itself refuses
                if column == "definition":
                    connection.execute("UPDATE sweep SET definition = ?", (value,))
                else:
                    connection.execute(f"UPDATE trials SET {column} = ? WHERE number = ?", (value, which))
    connection.close()

    def read_back() -> None:
        found = read_results(db)
        to_text(found, 10)
        found.to_json()
        found.rows()

    def resume() -> None:
        opened = ResultStore(db, definition)
        try:
            check_trials(load_sweep(store.parent / "sweep.yaml").section, opened.finished(0).values(), db)
        finally:
            opened.close()

    expect_only_our_errors(read_back)
    expect_only_our_errors(resume)


@CI
@given(GENERATOR_ENTRIES, BATCHES, SEARCHES)
def test_sweep_files_with_generators(folder: Path, entry: object, batch: int, search: object) -> None:
    fuzz_generator(entry, batch, search, folder)


@CI
@given(ROW, st.integers(min_value=0, max_value=3))
def test_results_store_rows(store: Path, folder: Path, row: dict[str, Any], which: int) -> None:
    fuzz_store(store, folder, row, which)


@pytest.mark.fuzz
@LONG
@given(GENERATOR_ENTRIES, BATCHES, SEARCHES, ROW, st.integers(min_value=0, max_value=3))
def test_long_budget(
    folder: Path, store: Path, entry: object, batch: int, search: object, row: dict[str, Any], which: int
) -> None:
    """Both fuzzers above, with the long budget (``pytest -m fuzz``)."""
    fuzz_generator(entry, batch, search, folder)
    fuzz_store(store, folder, row, which)
