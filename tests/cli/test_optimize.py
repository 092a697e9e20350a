"""``stratasim optimize``: the plan, the solver, the estimate's terms and the simulated time as text or JSON; bad
input one ``error:`` line and exit code 2, run as a user would, in a child process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import stratasim_process

ROOT = Path(__file__).resolve().parents[2]
SWEEP = """\
base: {base}
space:
  plan: {{generator: parallelism, tp: [4, 8], pp: [8], schedule: [interleaved], virtual_stages: [4], micro_batch: [1],
         recompute: [selective], zero: [1], sequence_parallel: [false]}}
objectives: [{{metric: total_time_ns, goal: min}}]
search: {{method: milp}}
"""


@pytest.fixture
def sweep_file(tmp_path: Path) -> Path:
    path = tmp_path / "plans.yaml"
    path.write_text(SWEEP.format(base=ROOT / "examples" / "gpt3_175b.yaml"), encoding="utf-8")
    return path


def test_json_gives_the_plan_gap_estimate_and_simulated_time(sweep_file: Path) -> None:
    done = stratasim_process("optimize", str(sweep_file), "--json", timeout=120, check=True)
    result = json.loads(done.stdout)
    assert result["plan"]["workload.parallelism.tp"] == 4 and result["status"] == "optimal" and result["gap"] == 0
    assert result["candidates"] == 2 and abs(result["difference"]) < 1e-4
    assert result["total_time_ns"] == pytest.approx(result["estimate_ns"], rel=1e-4)


def test_text_shows_the_solver_terms_and_difference(sweep_file: Path) -> None:
    done = stratasim_process(
        "optimize", str(sweep_file), "--objective", "perf_per_watt", "--set", "network.topology.1.bandwidth=400Gbps",
        timeout=120, check=True,
    )  # fmt: skip
    for fragment in (
        "plan:",
        "solver: optimal, gap 0",
        "pipeline_bubble",
        "simulated: ",
        "(estimate ",
        "perf_per_watt",
    ):
        assert fragment in done.stdout


def test_no_simulate_leaves_the_simulated_time_out(sweep_file: Path) -> None:
    result = json.loads(stratasim_process("optimize", str(sweep_file), "--no-simulate", "--json", check=True).stdout)
    assert result["total_time_ns"] is None and result["estimate_ns"] > 0


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["examples/quickstart.yaml"], "optimize finds the best plan of a kind: transformer study"),
        (["examples/gpt3_175b.yaml", "--objective", "speed"], "argument --objective: invalid choice: 'speed'"),
        (["examples/gpt3_175b.yaml", "--time-limit", "-1"], "expected a positive number of seconds, got '-1'"),
        (["examples/gpt3_175b.yaml", "--set", "network.nope=1"], "network.nope"),
        (["no/such/file.yaml"], "no/such/file.yaml"),
        (["examples/explore/quickstart_sweep.yaml"], "space: the MILP searches one parallelism generator's plans"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], fragment: str) -> None:
    done = stratasim_process("optimize", *args, timeout=60)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert fragment in done.stderr


def test_no_plan_fits_is_one_error(sweep_file: Path) -> None:
    text = sweep_file.read_text(encoding="utf-8").replace("zero: [1]", "zero: [1], memory: 1GiB")
    sweep_file.write_text(text, encoding="utf-8")
    done = stratasim_process("optimize", str(sweep_file), timeout=60)
    assert done.returncode == 2 and done.stderr.startswith("error: no plan fits: the memory row binds")
