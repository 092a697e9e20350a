"""``stratasim cost``: one operator's cost as a table or JSON, several backends side by side, and bad input as
one ``error:`` line with exit 2 — including a profile that lacks the shape asked, or is malformed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stratasim.kernel.work_limit import MAX_WORK
from tests.compute_layer.profile_helpers import write_table
from tests.helpers import RunCli, stratasim_process

# 4096³ BF16 GEMM on an H100 (989.4 TFLOPS): ceil(137438953472e12 / 989.4e12) = 138911415 ps (138911414.99...), compute bound.
GEMM_4096_PS = 138911415


def test_json_pins_the_roofline_numbers(run_cli: RunCli) -> None:
    code, out, _ = run_cli(
        "cost",
        "gemm",
        "--m",
        "4096",
        "--n",
        "4096",
        "--k",
        "4096",
        "--dtype",
        "bf16",
        "--backend",
        "roofline",
        "--device",
        "h100",
        "--datasheet",
        "--json",
    )
    assert code == 0
    data = json.loads(out)
    assert data["costs"][0]["calibration"] == ""
    assert data["operator"] == {
        "kind": "gemm",
        "shape": [4096, 4096, 4096],
        "dtype": "bf16",
        "flops": 2 * 4096**3,
        "bytes": 3 * 4096**2 * 2,
    }
    (row,) = data["costs"]
    assert row["backend"] == "roofline" and row["duration_ps"] == GEMM_4096_PS and row["bound"] == "compute"
    assert row["basis"] == "datasheet"  # --datasheet: no fitted efficiency model
    # On chip, H100's 256x256 tiles re-read A and B 4096/256 = 16 times each and write C once.
    sram = (16 + 16 + 1) * 4096**2 * 2
    assert row["energy_pj"] == 700 * GEMM_4096_PS and row["traffic"] == {"dram": 3 * 4096**2 * 2, "sram": sram}


def test_key_value_form_equals_the_flags(run_cli: RunCli) -> None:
    _, flags, _ = run_cli("cost", "gemm", "--m", "64", "--k", "32", "--n", "16", "--device", "a100", "--json")
    _, pairs, _ = run_cli("cost", "gemm", "M=64", "K=32", "N=16", "--device", "a100", "--json")
    assert flags == pairs


def test_table_compares_backends(tmp_path: Path, run_cli: RunCli) -> None:
    table = str(write_table(tmp_path))
    code, out, _ = run_cli(
        "cost",
        "gemm",
        "M=1536",
        "K=1024",
        "N=1024",
        "--backend",
        "roofline",
        "--backend",
        "profile",
        "--profile",
        table,
        "--device",
        "h100",
    )
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("gemm [1536, 1024, 1024] bf16") and "on h100" in lines[0]
    roofline = next(line for line in lines if line.strip().startswith("roofline"))
    profile = next(line for line in lines if line.strip().startswith("profile"))
    assert "compute" in roofline and "dram" in roofline
    assert "15 us" in profile and "2.000 uJ" in profile and "unknown" in profile
    # Each row says where its time comes from: the preset's model fitted to runs, the profile's measurements.
    assert lines[1].split()[4] == "basis" and "fitted to runs" in roofline and "  measured  " in profile


def test_each_row_gives_its_basis_in_json(run_cli: RunCli) -> None:
    code, out, _ = run_cli(
        "cost",
        "gemm",
        "M=256",
        "K=256",
        "N=256",
        "--backend",
        "roofline",
        "--backend",
        "measured",
        "--device",
        "h100",
        "--json",
    )
    assert code == 0
    assert [(row["backend"], row["basis"]) for row in json.loads(out)["costs"]] == [
        ("roofline", "fitted_to_runs"),
        ("measured", "fitted_to_operators"),
    ]


def test_elementwise(run_cli: RunCli) -> None:
    code, out, _ = run_cli("cost", "elementwise", "shape=1024x1024", "--device", "h100", "--json")
    (row,) = json.loads(out)["costs"]
    assert code == 0 and row["bound"] == "memory" and row["traffic"] == {"dram": 2 * 2**20 * 2, "sram": 2 * 2**20 * 2}


def test_an_elementwise_function_is_named_and_priced_by_the_measured_backend(run_cli: RunCli) -> None:
    def cost(*function: str, json_out: bool = True) -> tuple[int, str, str]:
        options = ("--backend", "measured", "--device", "h100", *(("--json",) if json_out else ()))
        code, out, err = run_cli("cost", "elementwise", "shape=4096x4096", "flops=8", *function, *options)
        return code, out, err

    rmsnorm, layernorm = (json.loads(cost(f"function={name}")[1]) for name in ("rmsnorm", "layernorm"))
    assert rmsnorm["operator"]["function"] == "rmsnorm"
    assert rmsnorm["costs"][0]["duration_ps"] < layernorm["costs"][0]["duration_ps"]
    inferred = json.loads(cost()[1])  # no function: inferred from 8 FLOPs an element, a layernorm
    assert "function" not in inferred["operator"] and inferred["costs"] == layernorm["costs"]
    code, text, _ = cost("function=rmsnorm", json_out=False)
    assert code == 0 and text.startswith("elementwise [16777216] bf16 rmsnorm: 134,217,728 FLOPs")
    code, _, err = cost("function=rms")
    assert code == 2 and "elementwise: unknown element-wise function 'rms'; expected one of add" in err


def test_conv_is_priced_by_roofline_and_timeloop(run_cli: RunCli) -> None:
    code, out, _ = run_cli(
        "cost",
        "conv",
        "N=1",
        "K=32",
        "C=16",
        "P=8",
        "Q=8",
        "R=3",
        "S=3",
        "--dtype",
        "int8",
        "--backend",
        "timeloop",
        "--device",
        "systolic-32x32-os",
        "--json",
    )
    (row,) = json.loads(out)["costs"]
    assert code == 0 and row["duration_ps"] == 412_000 and row["bound"] == "compute"


def test_a_backend_lacking_the_shape_is_a_row_when_compared(tmp_path: Path, run_cli: RunCli) -> None:
    table = str(write_table(tmp_path))
    code, out, _ = run_cli(
        "cost",
        "gemm",
        "M=8192",
        "K=1024",
        "N=1024",
        "--backend",
        "roofline",
        "--backend",
        "profile",
        "--profile",
        table,
        "--device",
        "h100",
        "--json",
    )
    rows = json.loads(out)["costs"]
    assert code == 0 and "duration_ps" in rows[0] and "m=1024..2048" in rows[1]["error"]


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (
            ("gemm", "M=8192", "K=1024", "N=1024", "--backend", "profile", "--profile", "{table}", "--device", "h100"),
            ("m=8192 is outside the measured range m=1024..2048", "does not extrapolate"),
        ),
        (
            (
                "gemm",
                "M=1024",
                "K=1024",
                "N=1024",
                "--backend",
                "profile",
                "--profile",
                "{table}",
                "--device",
                "h100",
                "--dtype",
                "fp32",
            ),
            ("has no gemm fp32 on 'h100'",),
        ),
        (("gemm", "M=1", "K=1", "N=1", "--backend", "nope", "--device", "h100"), ("no compute backend named 'nope'",)),
        (("gemm", "M=1", "K=1", "N=1", "--device", "v100"), ("has no device 'v100'", "a100, b200")),
        (("gemm", "M=1", "K=1", "--device", "h100"), ("gemm: missing n",)),
        (("gemm", "M=1", "K=x", "N=1", "--device", "h100"), ("k='x': expected an integer",)),
        (("gemm", "M=0", "K=1", "N=1", "--device", "h100"), ("m must be a positive integer",)),
        (("gemm", "M=1", "K=1", "N=1", "Q=3", "--device", "h100"), ("unknown key(s) q",)),
        (("conv", "N=1", "K=1", "C=1", "P=1", "Q=1", "R=1", "--device", "h100"), ("conv: missing s",)),
        (("gemm", "M=1", "K=1", "N=1", "--m", "2", "--device", "h100"), ("m is given twice",)),
        (("gemm", "M=1", "K=1", "N=1", "--device", "h100", "--dtype", "fp4"), ("unknown dtype 'fp4'",)),
        (("gemm", "M=1", "K=1", "N=1", "--backend", "profile", "--device", "h100"), ("compute.profile: FILE",)),
        (
            ("gemm", "M=1", "K=1", "N=1", "--backend", "profile", "--profile", "{bad}", "--device", "h100"),
            ("bad.csv", "line 3, time: a time cannot be negative"),
        ),
        (
            ("gemm", "M=1", "K=1", "N=1", "--backend", "profile", "--profile", "{short}", "--device", "h100"),
            ("short.csv", "missing column(s) time"),
        ),
    ],
)
def test_bad_input_is_one_error_line(
    tmp_path: Path, run_cli: RunCli, args: tuple[str, ...], fragments: tuple[str, ...]
) -> None:
    files = {
        "table": str(write_table(tmp_path)),
        "bad": str(
            write_table(
                tmp_path,
                "device,kind,dtype,m,k,n,time\nh100,gemm,bf16,1,1,1,1us\nh100,gemm,bf16,2,1,1,-1us\n",
                "bad.csv",
            )
        ),
        "short": str(write_table(tmp_path, "device,kind,dtype,m,k,n\n", "short.csv")),
    }
    code, out, err = run_cli("cost", *(arg.format(**files) for arg in args))
    assert code == 2 and out == "" and err.startswith("error: ") and "Traceback" not in err
    for fragment in fragments:
        assert fragment in err


def test_serve_refuses_a_malformed_profile_before_listening(tmp_path: Path) -> None:
    bad = write_table(tmp_path, "device,kind,dtype,m,k,n,time\nh100,gemm,bf16,1,1,1,soon\n")
    done = stratasim_process(
        "serve", "compute", "--backend", "profile", "--profile", str(bad), "--listen", "127.0.0.1:0"
    )
    assert done.returncode == 2 and done.stderr.startswith("error: ") and "line 2, time" in done.stderr
    assert "listening" not in done.stdout


def test_run_with_a_malformed_profile_names_the_line(tmp_path: Path) -> None:
    write_table(tmp_path, "device,kind,dtype,m,k,n,time\nh100,gemm,bf16,1,1,1,-2ns\n")
    study = tmp_path / "s.yaml"
    study.write_text(
        "workload: {kind: collective, collective: all_reduce, size: 1MiB}\n"
        "network: {topology: [{kind: ring, size: 2, bandwidth: 50GB/s, latency: 1us}]}\n"
        "compute: {backend: profile, device: h100, profile: times.csv}\n",
        encoding="utf-8",
    )
    done = stratasim_process("run", str(study))
    assert done.returncode == 2 and done.stderr.startswith("error: ") and "Traceback" not in done.stderr
    assert "times.csv" in done.stderr and "line 2, time: a time cannot be negative" in done.stderr


# Two backends, each with its own device, in order.
ROOFLINE_AND_TIMELOOP = (
    "--backend",
    "roofline",
    "--backend",
    "timeloop",
    "--device",
    "h100",
    "--device",
    "systolic-32x32-os",
)


def test_backends_compare_each_on_its_own_device(run_cli: RunCli) -> None:
    """Issue 14's defect: backends name their devices differently, so one --device could not serve several
    --backend; one --device per --backend, in order, prices each on its own."""
    code, out, _ = run_cli(
        "cost", "gemm", "M=4096", "K=4096", "N=4096", *ROOFLINE_AND_TIMELOOP, "--json", "--datasheet"
    )
    assert code == 0
    data = json.loads(out)
    assert "device" not in data and [(row["backend"], row["device"]) for row in data["costs"]] == [
        ("roofline", "h100"),
        ("timeloop", "systolic-32x32-os"),
    ]
    assert data["costs"][0]["duration_ps"] == GEMM_4096_PS and data["costs"][1]["duration_ps"] > GEMM_4096_PS
    code, out, _ = run_cli("cost", "gemm", "M=4096", "K=4096", "N=4096", *ROOFLINE_AND_TIMELOOP)
    assert code == 0 and "device" in out.splitlines()[1] and "systolic-32x32-os" in out


def test_devices_pair_with_backends_and_a_systolic_array_may_have_any_shape(run_cli: RunCli) -> None:
    backends = ("--backend", "roofline", "--backend", "timeloop", "--backend", "roofline")
    code, _, err = run_cli("cost", "gemm", "M=8", "K=8", "N=8", *backends, "--device", "h100", "--device", "h100")
    assert code == 2 and "got 2 devices for 3 backends" in err
    # A systolic array of any shape, which the Timeloop-style model prices though it lists only its presets.
    code, out, _ = run_cli(
        "cost", "gemm", "M=64", "K=64", "N=64", "--backend", "timeloop", "--device", "systolic-48x16-ws"
    )
    assert code == 0 and "systolic-48x16-ws" in out


def test_presets_price_with_their_fitted_model_and_say_so(run_cli: RunCli) -> None:
    """Issue 14: a preset's default is its efficiency model fitted to measurements, named in every output."""
    code, out, _ = run_cli("cost", "gemm", "M=4096", "K=4096", "N=4096", "--device", "h100", "--json")
    assert code == 0
    (row,) = json.loads(out)["costs"]
    # 4096 x 4096 in 16 x 16 tiles is 65,536 of them, as near whole waves on 66 SMs as makes no difference:
    # 65,536 / 65,538 of the work is useful, at 0.508 of peak.
    assert abs(row["duration_ps"] * 0.508 * 65536 / 65538 - GEMM_4096_PS) < 2
    assert row["calibration"].startswith("compute 0.508 of peak") and "MosaicML" in row["calibration"]
    code, out, _ = run_cli(
        "cost",
        "gemm",
        "M=64",
        "K=64",
        "N=64",
        "--device",
        "h100",
        "--device",
        "eyeriss-like",
        "--backend",
        "roofline",
        "--backend",
        "timeloop",
    )
    assert code == 0
    assert "roofline calibration: compute 0.508" in out
    assert "timeloop calibration: none: the datasheet's (or the architecture model's) figures" in out


def test_a_described_device_prices_as_the_study_would(run_cli: RunCli) -> None:
    """``--device`` takes what ``compute.device`` takes: H100 at half its memory bandwidth doubles a memory-bound
    operator's time, as the roofline prices the described device."""
    from stratasim.compute_layer.device_section import DeviceSection
    from stratasim.compute_layer.device_wire import device_message
    from stratasim.compute_layer.roofline import RooflineCompute
    from stratasim.kernel import operators
    from stratasim.v1 import compute_pb2

    half = "{preset: h100, memory_bandwidth: 1.675TB/s}"
    code, out, _ = run_cli("cost", "elementwise", "shape=67108864", "--device", half, "--datasheet", "--json")
    assert code == 0
    slow = device_message(DeviceSection.model_validate({"preset": "h100", "memory_bandwidth": "1.675TB/s"}).device())
    request = compute_pb2.EstimateRequest(
        device="h100",
        ops=[operators.elementwise([1 << 26], compute_pb2.BF16)],
        roofline_device=slow,
        calibration=compute_pb2.Calibration(datasheet=True),
    )
    (expected,) = RooflineCompute().estimate(request).costs
    (row,) = json.loads(out)["costs"]
    assert (row["device"], row["duration_ps"], row["bound"]) == ("h100", expected.duration_ps, "memory")
    _, preset, _ = run_cli("cost", "elementwise", "shape=67108864", "--device", "h100", "--datasheet", "--json")
    assert json.loads(preset)["costs"][0]["duration_ps"] < row["duration_ps"]


def test_a_whole_accelerator_from_a_file_is_the_preset_and_keys_beside_it_override(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_cli: RunCli
) -> None:
    import yaml

    from stratasim.compute_layer.timeloop import accelerator
    from tests.compute_layer.test_described_accelerator import _written

    monkeypatch.chdir(tmp_path)
    (tmp_path / "chip.yaml").write_text(yaml.safe_dump(_written(accelerator("systolic-32x32-ws"))), encoding="utf-8")
    gemm = ("gemm", "M=256", "K=512", "N=128", "--dtype", "int8", "--backend", "timeloop", "--json")
    _, named, _ = run_cli("cost", *gemm, "--device", "systolic-32x32-ws")
    code, from_file, _ = run_cli("cost", *gemm, "--device", "{file: chip.yaml}")
    assert code == 0 and json.loads(from_file) == json.loads(named)
    _, wider, _ = run_cli("cost", *gemm, "--device", "{file: chip.yaml, pe_cols: 64, name: wide}")
    (row,) = json.loads(wider)["costs"]
    assert row["device"] == "wide" and row["duration_ps"] < json.loads(named)["costs"][0]["duration_ps"]


def test_each_backend_takes_its_own_described_device(run_cli: RunCli) -> None:
    code, out, _ = run_cli(
        "cost",
        "gemm",
        "M=4096",
        "K=4096",
        "N=4096",
        "--dtype",
        "fp16",
        "--backend",
        "roofline",
        "--backend",
        "wafer",
        "--device",
        "{preset: h100, memory_bandwidth: 1TB/s}",
        "--device",
        "{preset: palm-wafer, dram_bandwidth: 128GB/s, name: slow}",
        "--json",
    )
    assert code == 0
    assert [(row["backend"], row["device"]) for row in json.loads(out)["costs"]] == [
        ("roofline", "h100"),
        ("wafer", "slow"),
    ]


@pytest.mark.parametrize(
    ("backend", "device", "fragment"),
    [
        ("roofline", "{preset: h100, memory_bandwidth: 4TB}", "--device.memory_bandwidth: unknown bandwidth unit 'TB'"),
        ("roofline", "{preset: h10}", "--device.preset: unknown preset 'h10'; did you mean 'h100'?"),
        ("timeloop", "{preset: gemini}", "--device.preset: unknown device 'gemini'; did you mean 'gemmini'?"),
        ("wafer", "{name: w, tiles: {x: 2}}", "--device.tiles.y: required"),
        (
            "roofline",
            "{preset: gemmini}",
            "--device: a described accelerator (compute.device as a mapping) is priced by "
            "the timeloop backend; roofline takes",
        ),
        ("roofline", "{file: missing.yaml}", "--device.file: missing.yaml: no such file"),
        ("roofline", "{preset: h100", "--device: cannot read '{preset: h100' as YAML"),
    ],
)
def test_a_bad_described_device_is_an_error_naming_the_flag(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    run_cli: RunCli,
    backend: str,
    device: str,
    fragment: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli("cost", "gemm", "M=64", "K=64", "N=64", "--backend", backend, "--device", device)
    assert code == 2 and out == "" and fragment in err and "Traceback" not in err, err


def test_an_operator_beyond_the_work_limit_is_refused_in_process_before_any_work(run_cli: RunCli) -> None:
    # A 2^58-row GEMM: the timeloop mapper would factor its extent for about a billion steps (minutes).
    code, out, err = run_cli(
        "cost", "gemm", f"M={2**58}", "K=2", "N=2", "--backend", "timeloop", "--device", "systolic-128x128-ws"
    )
    assert code == 2 and out == "" and len(err.splitlines()) == 1
    assert "pricing it would take some 1,073,741,829 steps" in err
    assert f"beyond the limit of {MAX_WORK:,} for one request; refused before any work" in err


def test_launch_prices_a_short_operator_at_the_hosts_issue_time(run_cli: RunCli) -> None:
    args = ("cost", "elementwise", "shape=4096", "function=add", "--backend", "measured", "--device", "h100", "--json")
    _, graph, _ = run_cli(*args)
    code, eager, _ = run_cli(*args, "--launch", "8us")
    assert code == 0
    assert json.loads(graph)["costs"][0]["duration_ps"] < 8_000_000 == json.loads(eager)["costs"][0]["duration_ps"]
    assert "launched eagerly" in json.loads(eager)["costs"][0]["calibration"]


@pytest.mark.parametrize(
    ("launch", "said"),
    [
        ("eager", "'launch: eager' needs the host's time to issue one kernel, which the profile of 'h100' did not"),
        ("fast", "--launch: expected graph, eager or the host's time to issue one kernel"),
        ("-3us", "--launch: expected graph, eager or the host's time to issue one kernel"),
    ],
)
def test_a_launch_cost_cannot_use_is_one_error(launch: str, said: str, run_cli: RunCli) -> None:
    code, out, err = run_cli(
        "cost", "elementwise", "shape=4096", "--backend", "measured", "--device", "h100", f"--launch={launch}"
    )
    assert code == 2 and out == "" and len(err.splitlines()) == 1 and said in err
