"""``stratasim import astra``: every reference pair becomes a study file that ``stratasim check`` accepts; bad
input ends with exit code 2 and one ``error:`` message, never a traceback. Run in-process through ``main``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from tests.helpers import RunCli
from tests.importers.conftest import RING_8
from tests.importers.reference_pairs import REFERENCE

Files = Callable[..., tuple[Path, Path]]


@pytest.mark.parametrize(
    ("network", "system_file"), list(REFERENCE), ids=[pair[1] + "+" + pair[0] for pair in REFERENCE]
)
def test_import_then_check(run_cli: RunCli, inputs: Path, tmp_path: Path, network: str, system_file: str) -> None:
    study = tmp_path / "f.yaml"
    code, out, err = run_cli(
        "import",
        "astra",
        "--network",
        str(inputs / network),
        "--system",
        str(inputs / system_file),
        "-o",
        str(study),
    )
    assert (code, err, out) == (0, "", f"wrote {study}\n")
    code, out, err = run_cli("check", str(study))
    assert code == 0, err
    assert out.startswith(f"OK: {Path(network).stem} — ")


def test_prints_yaml_without_output_and_honours_the_options(run_cli: RunCli, files: Files) -> None:
    network, system_file = files()
    code, out, err = run_cli(
        "import",
        "astra",
        "--network",
        str(network),
        "--system",
        str(system_file),
        "--collective",
        "reduce_scatter",
        "--size",
        "8MiB",
        "--npus",
        "4",
        "--name",
        "rs",
    )
    assert (code, err) == (0, "")
    assert out.startswith("# imported from ASTRA-sim 2.x inputs ")
    study = yaml.safe_load(out)
    assert study["name"] == "rs"
    assert study["workload"] == {"kind": "collective", "collective": "reduce_scatter", "size": "8MiB", "npus": 4}


@pytest.mark.parametrize(
    ("network", "system", "changes", "fragment"),
    [
        (None, '{\n  "endpoint-delay": 10,,\n}', {}, "sys.json: 1 problem\n  line 2, column 24: invalid JSON"),
        (None, None, {"endpoint-dealy": 10}, "closest known keys: 'endpoint-delay'"),
        (
            "topology: [Ring, Ring]\nnpus_count: [4, 4]\nbandwidth: [50]\nlatency: [5, 5]\n",
            None,
            {},
            "need one entry per dimension; got topology 2, npus_count 2, bandwidth 1, latency 2",
        ),
        (
            None,
            None,
            {"all-reduce-implementation": ["direct0"]},
            "all-reduce-implementation[0]: 'direct0': N is the number of peers in flight",
        ),
        (None, None, {"scheduling-policy": "EXPLICIT"}, "scheduling-policy: 'EXPLICIT' is not supported yet"),
        (None, None, {"track-local-mem": 1}, "track-local-mem: set to 1: "),
    ],
    ids=["json-syntax", "unknown-key", "list-lengths", "algorithm", "explicit", "track-local-mem"],
)
def test_bad_input_is_one_clear_error(
    run_cli: RunCli,
    files: Files,
    network: str | None,
    system: str | None,
    changes: dict[str, object],
    fragment: str,
) -> None:
    net, sys_file = files(network=network or RING_8, system=system, **changes)
    code, out, err = run_cli("import", "astra", "--network", str(net), "--system", str(sys_file))
    assert (code, out) == (2, "")
    assert err.startswith("error: ") and fragment in err, err
    assert "Traceback" not in err


def test_missing_file_and_unwritable_output(run_cli: RunCli, files: Files, tmp_path: Path) -> None:
    network, system_file = files()
    code, _, err = run_cli("import", "astra", "--network", str(tmp_path / "no.yml"), "--system", str(system_file))
    assert code == 2 and err == f"error: {tmp_path / 'no.yml'}: 1 problem\n  <top>: no such file\n"
    output = tmp_path / "missing" / "f.yaml"
    code, _, err = run_cli(
        "import", "astra", "--network", str(network), "--system", str(system_file), "-o", str(output)
    )
    assert code == 2 and err.startswith(f"error: {output}: 1 problem\n  <top>: cannot write the study")


def test_usage_errors(run_cli: RunCli) -> None:
    assert run_cli("import", "astra", "--network", "n.yml")[0] == 2  # --system missing
    assert run_cli("import", "astra", "--network", "n", "--system", "s", "--collective", "gather")[0] == 2


SWITCH_8 = "harness_generated_configs/1D_Switch8_ring"
ALL_REDUCE = "workload/microbenchmarks/all_reduce_8npus_1MB/all_reduce"


@pytest.mark.parametrize(
    ("options", "backend", "cycles"),
    [((), "analytical", 92440), (("--backend", "congestion_aware"), "congestion_aware", 126600)],
)
def test_the_backend_is_kept_and_said(
    run_cli: RunCli,
    inputs: Path,
    tmp_path: Path,
    options: tuple[str, ...],
    backend: str,
    cycles: int,
) -> None:
    """ASTRA-sim's network file does not say which analytical binary it is for: ``--backend`` does (ASTRA-sim's
    congestion-unaware and -aware figures for a ring all-reduce through a switch of 8, README of the inputs)."""
    study = tmp_path / "s.yaml"
    code, _, err = run_cli(
        "import",
        "astra",
        "--network",
        str(inputs / SWITCH_8 / "network.yml"),
        "--system",
        str(inputs / SWITCH_8 / "system.json"),
        "--workload",
        str(inputs / ALL_REDUCE),
        "-o",
        str(study),
        *options,
    )
    assert (code, err) == (0, "")
    text = study.read_text(encoding="utf-8")
    assert f"# network: backend {backend}, for AstraSim_Analytical_Congestion_" in text
    loaded = yaml.safe_load(text)
    assert loaded["network"]["backend"] == backend
    assert loaded["workload"] == {"kind": "chakra", "path": str(inputs / ALL_REDUCE)}
    assert "workload:" not in text.split("\nname:")[0]  # nothing assumed
    code, out, err = run_cli("run", str(study))
    assert code == 0 and f"({cycles * 1000} ps)" in out


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (("--backend", "ns3"), "error: --backend: expected analytical or congestion_aware, got 'ns3'\n"),
        (
            ("--workload", "t", "--size", "1MiB"),
            "error: --workload (a Chakra trace) takes no --collective, --size or --npus: the trace says them\n",
        ),
    ],
)
def test_bad_backend_or_workload_is_one_error(
    run_cli: RunCli, inputs: Path, options: tuple[str, ...], message: str
) -> None:
    code, out, err = run_cli(
        "import",
        "astra",
        "--network",
        str(inputs / "network/Ring_8npus.yml"),
        "--system",
        str(inputs / "system/Ring_4chunks.json"),
        *options,
    )
    assert (code, out, err) == (2, "", message)
