"""``stratasim.run`` and the report's notebook methods: the same numbers as the command line, one clear error."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

import stratasim
from stratasim.kernel.errors import ConfigError, StrataSimError
from stratasim.v1 import workload_pb2
from stratasim.workload_layer.graph_sequence import GraphSequence

QUICKSTART = Path(__file__).resolve().parents[1] / "examples" / "quickstart.yaml"


def test_run_takes_a_path_a_mapping_or_a_study_with_the_same_result() -> None:
    by_path = stratasim.run(QUICKSTART, system__splits=8)
    assert by_path.result == stratasim.run(str(QUICKSTART), **{"system.splits": 8}).result
    assert by_path.result == stratasim.run(stratasim.load_study(QUICKSTART, ["system.splits=8"])).result
    import yaml

    data = yaml.safe_load(QUICKSTART.read_text(encoding="utf-8"))
    assert by_path.result == stratasim.run(data, system__splits=8).result
    assert by_path.result != stratasim.run(data).result


def test_bad_input_is_one_error_naming_the_key() -> None:
    with pytest.raises(ConfigError) as caught:
        stratasim.run(QUICKSTART, system__splits=0, network__bogus=1)
    assert {place for place, _ in caught.value.problems} == {"system.splits", "network.bogus"}
    with pytest.raises(StrataSimError, match="a Study is validated already"):
        stratasim.run(stratasim.load_study(QUICKSTART), system__splits=2)
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        stratasim.nothing  # noqa: B018 - the lazy exports refuse what they do not have


def test_to_json_is_report_json_and_tables_need_pandas() -> None:
    report = stratasim.run(QUICKSTART)
    assert json.loads(report.to_json()) == json.loads(json.dumps(report.to_dict()))
    with pytest.raises(StrataSimError, match="no table 'npus'"):
        report.to_dataframe("npus")
    try:
        import pandas  # noqa: F401
    except ImportError:
        with pytest.raises(StrataSimError, match="pip install pandas"):
            report.to_dataframe()
    else:
        frame = report.to_dataframe()
        assert list(frame["npu"]) == list(range(32)) and "exposed_comm_ns" in frame.columns


def test_import_stratasim_stays_light() -> None:
    """A spawned server imports the package: the notebook API is imported only when asked for."""
    code = "import sys, stratasim; print(sorted(m for m in ('numpy', 'stratasim.study', 'grpc') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_a_source_checkout_imports_its_layers() -> None:
    """Python started in the repository's root finds ``stratasim`` there, not the installed copy: the layers, the
    folder's siblings, must still import as ``stratasim.<layer>`` (a plain ``pip install .`` maps them only in
    site-packages). Simulated by dropping the editable install's finder."""
    root = Path(__file__).resolve().parents[1]
    code = (
        "import sys; sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in repr(f)]; "
        "import stratasim, stratasim.system_layer as layer; print(layer.__file__); "
        "print(stratasim.run('examples/quickstart.yaml').total_time_ps)"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True)
    where, total = done.stdout.split()
    assert (
        Path(where) == root / "system_layer" / "__init__.py" and int(total) == stratasim.run(QUICKSTART).total_time_ps
    )


def test_a_study_builds_only_the_graphs_of_the_npus_it_simulates(monkeypatch: pytest.MonkeyPatch) -> None:
    """A transformer's graphs are built NPU by NPU as the engine reads them: a run standing one NPU for many builds
    only the stand-ins' (reading every graph made Megatron's 1T row take 53 s instead of 6)."""
    built: list[int] = []
    original = GraphSequence.__init__

    def counting(self: GraphSequence, count: int, build: Callable[[int], workload_pb2.ExecutionGraph]) -> None:
        original(self, count, lambda npu: (built.append(npu), build(npu))[1])

    monkeypatch.setattr(GraphSequence, "__init__", counting)
    result = stratasim.run(QUICKSTART.parent / "transformer.yaml").result
    assert result.simulated_npus < result.npus and len(set(built)) <= result.simulated_npus
