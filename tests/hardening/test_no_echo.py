"""A file a study names but may not own — a device or fabric include, a profile table, a communicator-groups file —
is never echoed back in an error: what is wrong is said by the keys StrataSim expected, positions and types
(issue 15, item 5). Each test points at a "credentials" file and checks that none of its words come back."""

from __future__ import annotations

from pathlib import Path

import pytest

from stratasim.chakra import et_def_pb2 as et
from stratasim.compute_layer.profile_table import load_profile
from stratasim.config import load_study
from stratasim.kernel.errors import StrataSimError
from stratasim.study.run import check_study, run_study
from stratasim.system_layer.engine.graph_plan import plan_graph
from stratasim.v1 import compute_pb2, workload_pb2
from stratasim.workload_layer.traces.chakra import write_trace
from stratasim.workload_layer.traces.comm_groups import read_comm_groups
from stratasim.workload_layer.traces.convert import write_graphs
from stratasim.workload_layer.transformer.routing_trace import read_routing_trace

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = (ROOT / "examples" / "quickstart.yaml").read_text(encoding="utf-8")
SECRETS = ("aws_secret_access_key", "AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI", "hunter2", "s3cr3t_colour")


def error_of(action: object) -> str:
    with pytest.raises(StrataSimError) as caught:
        action()  # type: ignore[operator]
    return str(caught.value)


def assert_no_echo(message: str) -> None:
    for secret in SECRETS:
        assert secret not in message, message


def study_with(tmp: Path, section: str) -> Path:
    (tmp / "study").mkdir()
    start = QUICKSTART.index("  topology:")
    end = QUICKSTART.index("compute:")
    text = (
        QUICKSTART[:start] + "  topology: {kind: graph, file: ../creds.yaml}\n" + QUICKSTART[end:]
        if section == "graph"
        else QUICKSTART.replace("device: h100", "device: {file: ../creds.yaml}")
    )
    (tmp / "study" / "s.yaml").write_text(text, encoding="utf-8")
    return tmp / "study" / "s.yaml"


@pytest.mark.parametrize("section", ["device", "graph"])
@pytest.mark.parametrize(
    "creds",
    [
        "aws_secret_access_key: AKIAIOSFODNN7EXAMPLE\n",
        "preset: h100\npeak: {bf16: wJalrXUtnFEMI}\nmemory_bandwidth: hunter2\n",
        "chips: AKIAIOSFODNN7EXAMPLE\nswitches: [hunter2]\nbandwidth: wJalrXUtnFEMI\n",
        "aws_secret_access_key: 1\naws_secret_access_key: 2\n",
        "[aws_secret_access_key, AKIAIOSFODNN7EXAMPLE]\n",
        "s3cr3t_colour: {hunter2: wJalrXUtnFEMI}\n",
        "chips:\n  - {id: hunter2, links: [{to: wJalrXUtnFEMI}]}\n  - {id: AKIAIOSFODNN7EXAMPLE, links: [{to: hunter2}]}\n"
        "bandwidth: 50GB/s\nlatency: 1us\n",
    ],
    ids=["unknown key", "bad values", "bad fabric values", "duplicate key", "not a mapping", "nested", "bad link"],
)
def test_included_files_are_not_echoed(tmp_path: Path, section: str, creds: str) -> None:
    study = study_with(tmp_path, section)
    (tmp_path / "creds.yaml").write_text(creds, encoding="utf-8")
    message = error_of(lambda: load_study(study))
    assert_no_echo(message)
    assert "creds.yaml" in message


def test_what_is_wrong_is_still_said(tmp_path: Path) -> None:
    study = study_with(tmp_path, "device")
    (tmp_path / "creds.yaml").write_text("preset: h100\nmemory_bandwidth: hunter2\nsecret_thing: 1\n", encoding="utf-8")
    message = error_of(lambda: load_study(study))
    assert "compute.device.memory_bandwidth: cannot read its value as a bandwidth; write it like 100GB/s" in message
    assert "compute.device: a key StrataSim does not know, expected one of preset, name, peak" in message
    assert "its contents are not shown" in message and "secret_thing" not in message


def test_the_study_s_own_keys_are_still_echoed(tmp_path: Path) -> None:
    """The study is the user's own: its values come back as before, next to the included file's."""
    study = study_with(tmp_path, "device")
    study.write_text(study.read_text().replace("{file: ../creds.yaml}", "{file: ../creds.yaml, tdp: warm}"))
    (tmp_path / "creds.yaml").write_text("preset: h100\n", encoding="utf-8")
    assert "cannot read 'warm' as a power" in error_of(lambda: load_study(study))


@pytest.mark.parametrize(
    "table",
    [
        "aws_secret_access_key,AKIAIOSFODNN7EXAMPLE\nwJalrXUtnFEMI,hunter2\n",
        "device,kind,dtype,m,k,n,time,s3cr3t_colour\nh100,gemm,bf16,1,1,1,1us,hunter2\n",
        "device,kind,dtype,m,k,n,time\nhunter2,wJalrXUtnFEMI,AKIAIOSFODNN7EXAMPLE,s3cr3t_colour,1,1,hunter2\n",
        "device,kind,dtype,m,k,n,time,energy_pj\nh100,gemm,bf16,1,1,1,1us,hunter2\n",
    ],
    ids=["not a profile", "unknown column", "bad cells", "bad energy"],
)
def test_profile_tables_are_not_echoed(tmp_path: Path, table: str) -> None:
    (tmp_path / "creds.csv").write_text(table, encoding="utf-8")
    message = error_of(lambda: load_profile(tmp_path / "creds.csv"))
    assert_no_echo(message)
    assert "creds.csv" in message and "line " in message


@pytest.mark.parametrize(
    "text",
    [
        '[{"device": "hunter2", "kind": "AKIAIOSFODNN7EXAMPLE", "dtype": "bf16", "m": "wJalrXUtnFEMI", "time": 1}]',
        '{"rows": ["AKIAIOSFODNN7EXAMPLE"]}',
        '[{"aws_secret_access_key": "AKIAIOSFODNN7EXAMPLE"}]',
    ],
)
def test_json_profiles_are_not_echoed(tmp_path: Path, text: str) -> None:
    (tmp_path / "creds.json").write_text(text, encoding="utf-8")
    assert_no_echo(error_of(lambda: load_profile(tmp_path / "creds.json")))


@pytest.mark.parametrize(
    "text",
    [
        '{"aws_secret_access_key": "AKIAIOSFODNN7EXAMPLE"}',
        '{"auths": {"hunter2": "wJalrXUtnFEMI"}}',
        '{"aws_secret_access_key": [0, "hunter2"]}',
        '{"aws_secret_access_key": [0], "aws_secret_access_key": [1]}',
        '["AKIAIOSFODNN7EXAMPLE"]',
    ],
)
def test_comm_group_files_are_not_echoed(tmp_path: Path, text: str) -> None:
    (tmp_path / "creds.json").write_text(text, encoding="utf-8")
    message = error_of(lambda: read_comm_groups(tmp_path / "creds.json"))
    assert_no_echo(message)
    assert "creds.json" in message


# A trace's node names are its own text: errors about its nodes name them by id (the graph's ``foreign_names``).
SECRET = "hunter2_AKIAIOSFODNN7EXAMPLE"


def _node(node_id: int, *deps: int, **fields: object) -> workload_pb2.Node:
    fields.setdefault("type", workload_pb2.COMP_NODE)
    return workload_pb2.Node(id=node_id, name=f"{SECRET}_{node_id}", data_deps=deps, **fields)  # type: ignore[arg-type]


_ALL_REDUCE = {"type": workload_pb2.COMM_COLL_NODE, "comm_type": workload_pb2.ALL_REDUCE, "comm_bytes": 1024}
TRACE_ERRORS = {  # what the engine refuses, each with what it says by id
    "dangling dependency": ([_node(1), _node(2, 9)], "node 2: depends on node 9, which is not in the graph"),
    "cycle": ([_node(1, 3), _node(2, 1), _node(3, 2)], "node 1: is part of a dependency cycle: 1 -> 3 -> 2 -> 1"),
    "id twice": ([_node(1), _node(1)], "node 1: the id 1 is used twice"),
    "negative duration": ([_node(1, duration_ps=-5)], "node 1: negative duration -5 ps"),
    "bad peer": ([_node(1, type=workload_pb2.COMM_SEND_NODE, peer=7, comm_bytes=8)], "node 1: peer NPU 7 must be"),
    "bad group": ([_node(1, group=[0, 5], **_ALL_REDUCE)], "node 1: group names NPU 5"),
    "missing block": ([_node(1, type=workload_pb2.BLOCK_NODE, block=3)], "node 1: runs block 3, but the graph has 0"),
    "operator without compute": (
        [_node(1, op=compute_pb2.OperatorDesc(name="gemm"))],
        "node 1 is an operator to price, but the study has no compute section",
    ),
    "collective the algorithm cannot run": ([_node(1, **_ALL_REDUCE)], "node 1 (all_reduce): "),
}


def _trace_study(tmp: Path, nodes: list[workload_pb2.Node], npus: int = 2) -> Path:
    graphs = [workload_pb2.ExecutionGraph(npu=npu, nodes=nodes) for npu in range(npus)]
    write_graphs(tmp / "t", graphs)
    algorithm = "halving_doubling" if npus == 3 else "ring"
    (tmp / "s.yaml").write_text(
        f"workload: {{kind: stratasim_trace, path: {tmp / 't'}}}\nsystem: {{algorithm: {algorithm}}}\n"
        f"network:\n  topology: [{{kind: switch, size: {npus}, bandwidth: 50GB/s, latency: 500ns}}]\n"
    )
    return tmp / "s.yaml"


@pytest.mark.parametrize(
    ("nodes", "said", "run"),
    [
        (nodes, said, run)
        for nodes, said in TRACE_ERRORS.values()
        for run in (False, True)
        if run or "operator" not in said
    ],  # check prices nothing: an operator without a compute section waits for run
    ids=[
        f"{name}-{command}"
        for name, (_, said) in TRACE_ERRORS.items()
        for command in ("check", "run")
        if command == "run" or "operator" not in said
    ],
)
def test_a_traces_node_names_are_not_echoed(
    tmp_path: Path, nodes: list[workload_pb2.Node], said: str, run: bool
) -> None:
    npus = 3 if "all_reduce" in said else 2  # halving-doubling cannot run on 3 NPUs
    study = load_study(_trace_study(tmp_path, nodes, npus))
    message = error_of(lambda: run_study(study) if run else check_study(study))
    assert said in message and SECRET not in message, message


def test_a_chakra_traces_node_names_are_not_echoed(tmp_path: Path) -> None:
    nodes = [
        et.Node(id=1, name=SECRET, type=et.COMP_NODE, duration_micros=1, data_deps=[3]),
        et.Node(id=2, name=SECRET, type=et.COMP_NODE, duration_micros=1, data_deps=[1]),
        et.Node(id=3, name=SECRET, type=et.COMP_NODE, duration_micros=1, data_deps=[2, 9]),
    ]
    for rank in range(2):
        write_trace(tmp_path / f"t.{rank}.et", et.GlobalMetadata(), nodes)
    (tmp_path / "s.yaml").write_text(
        f"workload: {{kind: chakra, path: {tmp_path / 't'}}}\n"
        "network:\n  topology: [{kind: switch, size: 2, bandwidth: 50GB/s, latency: 500ns}]\n"
    )
    message = error_of(lambda: check_study(load_study(tmp_path / "s.yaml")))
    assert "node 3: depends on node 9" in message and SECRET not in message, message


def test_our_own_graphs_still_name_their_nodes() -> None:
    graph = workload_pb2.ExecutionGraph(nodes=[_node(1), _node(2, 9)])
    assert f"node 2 ('{SECRET}_2'): depends on node 9" in error_of(lambda: plan_graph(graph, 0, 2))


# Every input kind a user names by path, with whatever a file named by mistake may hold: the parsers' own messages
# (a YAML tag, an alias, a key written twice) are said without what they quote (issue 27).
UNPARSABLE = {
    "yaml tag": "!hunter2 AKIAIOSFODNN7EXAMPLE\n",
    "yaml alias": "aws_secret_access_key: *hunter2\n",
    "yaml duplicate key": "hunter2: 1\nhunter2: 2\n",
    "json duplicate key": '{"hunter2": 1, "hunter2": 2}\n',
    "yaml bad float": "a: !!float hunter2_AKIAIOSFODNN7EXAMPLE\n",
    "yaml tab": "hunter2:\n\tAKIAIOSFODNN7EXAMPLE: 1\n",
    "credentials": '{"aws_secret_access_key": "AKIAIOSFODNN7EXAMPLE", "hunter2": ["wJalrXUtnFEMI"]}\n',
    "ini": "[default]\naws_secret_access_key = AKIAIOSFODNN7EXAMPLE\n",
    "scalar": "hunter2_AKIAIOSFODNN7EXAMPLE\n",
}


@pytest.mark.parametrize("creds", UNPARSABLE.values(), ids=UNPARSABLE.keys())
def test_a_device_file_is_not_echoed(tmp_path: Path, creds: str) -> None:
    study = study_with(tmp_path, "device")
    (tmp_path / "creds.yaml").write_text(creds, encoding="utf-8")
    message = error_of(lambda: load_study(study))
    assert_no_echo(message)
    assert "creds.yaml" in message


@pytest.mark.parametrize("creds", UNPARSABLE.values(), ids=UNPARSABLE.keys())
def test_an_astra_network_file_is_not_echoed(tmp_path: Path, creds: str) -> None:
    from stratasim.importers.astra import read_astra

    system = ROOT / "tests" / "data" / "astra-sim-inputs" / "system" / "HGX-H100-validated.json"
    (tmp_path / "creds.yml").write_text(creds, encoding="utf-8")
    message = error_of(lambda: read_astra(tmp_path / "creds.yml", system))
    assert_no_echo(message)
    assert "creds.yml" in message


@pytest.mark.parametrize("creds", UNPARSABLE.values(), ids=UNPARSABLE.keys())
def test_a_sweeps_base_is_not_echoed(tmp_path: Path, creds: str) -> None:
    """Refused when the sweep is read, before a trial could store the base's keys in the results store."""
    from stratasim.explore.sweep_file import load_sweep

    (tmp_path / "creds.yaml").write_text(creds, encoding="utf-8")
    (tmp_path / "sweep.yaml").write_text(
        "base: creds.yaml\nspace: {system.splits: [1]}\nobjectives: [{metric: total_time_ns, goal: min}]\n"
        "search: {method: grid}\n"
    )
    message = error_of(lambda: load_sweep(tmp_path / "sweep.yaml"))
    assert_no_echo(message)
    assert "creds.yaml" in message


@pytest.mark.parametrize(
    "trace",
    [
        "arrival_s,prompt_tokens,output_tokens\nhunter2,1,1\n",
        "arrival_s,prompt_tokens,output_tokens\n1,AKIAIOSFODNN7EXAMPLE,1\n",
        "arrival_s,prompt_tokens,output_tokens\n1,1,wJalrXUtnFEMI\n",
        "TIMESTAMP,ContextTokens,GeneratedTokens\nhunter2,1,1\n",
        "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-02-30 00:00:00 hunter2,1,1\n",
        "arrival_s,prompt_tokens,output_tokens,hunter2\n1,1,1\n",
        "aws_secret_access_key,AKIAIOSFODNN7EXAMPLE\nwJalrXUtnFEMI,hunter2\n",
        '{"arrival_s": 1, "prompt_tokens": "hunter2", "output_tokens": 1}\n',
        '{"aws_secret_access_key": "AKIAIOSFODNN7EXAMPLE"}\n',
        '{"hunter2": 1, "hunter2": 2}\n',
        '["AKIAIOSFODNN7EXAMPLE"]\n',
        "session,turn,arrival_s,think_s,new_prompt_tokens,output_tokens\nhunter2,hunter2,1,,1,1\n",
        "session,turn,arrival_s,think_s,new_prompt_tokens,output_tokens\nhunter2,0,1,,1,1\nhunter2,2,,1,1,1\n",
        "session,turn,arrival_s,think_s,new_prompt_tokens,output_tokens\nhunter2,0,1,,1,1\nhunter2,1,,-hunter2,1,1\n",
        "arrival_s,prompt_tokens,output_tokens,prefix_id,prefix_tokens\n1,1,1,hunter2,AKIAIOSFODNN7EXAMPLE\n",
        '{"session": "hunter2", "turn": 0, "arrival_s": 1, "new_prompt_tokens": 1, "output_tokens": "hunter2"}\n',
    ],
)
@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_a_serving_trace_is_not_echoed(tmp_path: Path, trace: str, suffix: str) -> None:
    from stratasim.workload_layer.serving.trace_file import read_trace

    (tmp_path / f"creds{suffix}").write_text(trace, encoding="utf-8")
    message = error_of(lambda: read_trace(tmp_path / f"creds{suffix}"))
    assert_no_echo(message)
    assert "creds" in message


@pytest.mark.parametrize(
    "text",
    [
        "aws_secret_access_key,hunter2\n",
        "layer,expert,tokens\nhunter2,0,1\n",
        "layer,expert,tokens\n0,AKIAIOSFODNN7EXAMPLE,1\n",
        "layer,expert,tokens\n0,1,wJalrXUtnFEMI\n",
        "layer,expert,tokens\n0,1,1,s3cr3t_colour\n",
    ],
    ids=["not a routing trace", "bad layer", "bad expert", "bad tokens", "extra cell"],
)
def test_routing_traces_are_not_echoed(tmp_path: Path, text: str) -> None:
    (tmp_path / "creds.csv").write_text(text, encoding="utf-8")
    message = error_of(lambda: read_routing_trace(str(tmp_path / "creds.csv"), 1, 8))
    assert_no_echo(message)
    assert "creds.csv" in message and "line " in message
