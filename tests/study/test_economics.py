"""A study's system price and power and its performance per dollar and per watt (stratasim.study.economics)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from stratasim.compute_layer.silicon import silicon_power_w, silicon_price_usd
from stratasim.config.economics_section import EconomicsSection
from stratasim.config.study_file import parse_study
from stratasim.kernel.errors import ConfigError
from stratasim.study.economics import (
    SystemHardware,
    achieved_throughput,
    price_system,
    study_economics,
    study_hardware,
)
from tests.helpers import RunCli

_RING = {"kind": "ring", "latency": "500ns"}


def _study(economics: dict[str, Any] | None = None, **changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": "economics",
        "workload": {"kind": "collective", "collective": "all_reduce", "size": "1MiB"},
        "network": {
            "topology": [
                {**_RING, "size": 8, "bandwidth": "50GB/s"},
                {"kind": "switch", "size": 4, "bandwidth": "25GB/s", "latency": "1us"},
            ]
        },
        "compute": {"backend": "roofline", "device": "h100"},
        "economics": economics if economics is not None else {},
    }
    data.update(changes)
    return data


def test_dfmodels_readme_system_is_priced_as_dfmodel_prices_it() -> None:
    # DFModel's README: 1024 RDUs of $16,522.25 and 444.7 W with 300 GB/s of DDR, on an 8 x 128 torus of 50 GB/s
    # PCIe links; DFModel prints "System Cost 17757184.0" and "System Power 511325.01" (Gurobi's float32).
    economics = {"memory": "ddr4", "links": "pcie4", "memory_bandwidth": "300GB/s", "peak": "614.4TFLOPS"}
    topology = [{**_RING, "size": 8, "bandwidth": "50GB/s"}, {**_RING, "size": 128, "bandwidth": "50GB/s"}]
    study = parse_study(_study(economics, network={"topology": topology}), "readme")
    found = study_economics(study)
    assert found.chip_price_usd == pytest.approx(16522.25023)  # the price curve passes through it
    assert found.system_price_usd == pytest.approx(17757184.0, rel=1e-7)
    assert found.npus * silicon_power_w(614.4e12) + 1024 * 48.744 + 6032 == pytest.approx(found.system_power_w)
    exact = parse_study(_study({**economics, "chip_power": "444.7061955W"}, network={"topology": topology}), "x")
    assert study_economics(exact).system_power_w == pytest.approx(511325.01, rel=1e-7)


def test_a_small_system_by_hand() -> None:
    # 32 H100s (989.4 TFLOPS, 3.35 TB/s HBM3) on a ring of 8 NVLink4 links of 50 GB/s by a switch of 4 at 25 GB/s.
    found = study_economics(parse_study(_study(), "small"))
    chip_price, chip_power = silicon_price_usd(989.4e12), silicon_power_w(989.4e12)
    memory_price, memory_power = 3350 * 1.0, 3350 * 3.9 * 8 / 1000  # $1 and 3.9 pJ/bit per GB/s
    # ring: 32 links, 2 x 32 / 8 = 8 ports at 50 GB/s; switch: 32 / 8 = 4 endpoints, 4 links and 4 ports at 25 GB/s
    network_price = 50 * (32 * 2 + 8 * 24) + 25 * (4 * 2 + 4 * 24)
    network_power = 50 * 0.052 * (32 + 8) + 25 * 0.052 * (4 + 4)
    assert found.system_price_usd == pytest.approx(32 * (chip_price + memory_price) + network_price)
    assert found.system_power_w == pytest.approx(32 * (chip_power + memory_power) + network_power)
    assert found.perf_per_dollar(10.0) == pytest.approx(10.0 / found.system_price_usd)
    assert found.perf_per_watt(10.0) == pytest.approx(10.0 / found.system_power_w)


def test_every_figure_can_be_overridden() -> None:
    overrides = {
        "chip_price_usd": 1000,
        "chip_power": "100W",
        "memory_price_usd_per_gbps": 2,
        "memory_power_w_per_gbps": 0.5,
        "link_price_usd_per_gbps": 1,
        "link_power_w_per_gbps": 0,
        "switch_price_usd_per_gbps": 0,
        "switch_power_w_per_gbps": 0,
        "memory_bandwidth": "100GB/s",
    }
    found = study_economics(parse_study(_study(overrides), "overridden"))
    assert found.system_price_usd == pytest.approx(32 * (1000 + 200) + 50 * 32 + 25 * 4)
    assert found.system_power_w == pytest.approx(32 * (100 + 50))


def test_links_per_dimension_and_cheaper_memory_change_the_bill() -> None:
    hardware = SystemHardware(989.4e12, 3.35e12, parse_study(_study(), "x").topology_proto())
    default = price_system(hardware)
    per_dimension = price_system(hardware, EconomicsSection(links=("nvlink4", "pcie4"), memory="ddr4"))
    assert per_dimension.network.price_usd == default.network.price_usd  # DFModel: one price per GB/s for both
    assert per_dimension.memory_power_w > default.memory_power_w  # DDR4 moves a byte for more energy than HBM


def test_the_chip_comes_from_the_device_or_the_section() -> None:
    assert study_hardware(parse_study(_study(), "h100")).peak_flops == pytest.approx(989.4e12)
    described = _study(compute={"backend": "roofline", "device": {"preset": "h100", "peak": {"bf16": "500TFLOPS"}}})
    assert study_hardware(parse_study(described, "x")).peak_flops == pytest.approx(500e12)
    assert study_hardware(parse_study(_study({"peak": "2PFLOPS"}), "x")).peak_flops == pytest.approx(2e15)


def test_the_throughput_is_the_runs_own() -> None:
    assert achieved_throughput(2 * 10**12, {"samples_per_second": 5.0}, None) == (5.0, "samples/s")
    assert achieved_throughput(2 * 10**12, None, {"tokens_per_second": 7.0}) == (7.0, "tokens/s")
    assert achieved_throughput(2 * 10**12, None, None) == (0.5, "iterations/s")


def _problems(data: dict[str, Any]) -> list[tuple[str, str]]:
    with pytest.raises(ConfigError) as caught:
        parse_study(data, "bad.yaml")
    return caught.value.problems


@pytest.mark.parametrize(
    ("economics", "key", "said"),
    [
        ({"memory": "hbm4"}, "economics.memory", "unknown memory technology 'hbm4'"),
        ({"links": "nvlink5"}, "economics.links", "unknown link technology 'nvlink5'"),
        ({"links": ["nvlink4"]}, "economics.links", "1 technologies for 2 network.topology dimensions"),
        ({"chip_price_usd": -5}, "economics.chip_price_usd", "greater than 0"),
        ({"chip_power": "-3W"}, "economics.chip_power", ""),
        ({"memory_price_usd_per_gbps": -1}, "economics.memory_price_usd_per_gbps", "greater than or equal to 0"),
        ({"switch_power_w_per_gbps": -1}, "economics.switch_power_w_per_gbps", "greater than or equal to 0"),
        ({"budget": 3}, "economics.budget", ""),
    ],
)
def test_bad_economics_is_one_problem_naming_the_key(economics: dict[str, Any], key: str, said: str) -> None:
    ((where, message),) = _problems(_study(economics))
    assert where == key and said in message


def test_a_study_without_a_device_must_give_the_chip() -> None:
    data = _study()
    del data["compute"]
    assert [where for where, _ in _problems(data)] == ["economics.peak", "economics.memory_bandwidth"]


def test_a_fabric_is_not_priced() -> None:
    fabric = {"topology": {"kind": "torus", "shape": [4, 4], "bandwidth": "50GB/s", "latency": "500ns"}}
    ((where, message),) = _problems(_study(network=fabric))
    assert where == "economics" and "list of dimensions" in message


def _write(tmp_path: Path, data: dict[str, Any]) -> str:
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return str(path)


def test_the_report_has_a_cost_block_only_when_asked(tmp_path: Path, run_cli: RunCli) -> None:
    code, out, _ = run_cli("run", _write(tmp_path, _study()), "--json")
    cost = json.loads(out)["cost"]
    assert code == 0 and cost["throughput_unit"] == "iterations/s"
    assert cost["perf_per_dollar"] == pytest.approx(cost["throughput"] / cost["system_price_usd"])
    assert cost["perf_per_watt"] == pytest.approx(cost["throughput"] / cost["system_power_w"])
    plain = _study()
    del plain["economics"]
    code, out, _ = run_cli("run", _write(tmp_path, plain), "--json")
    assert code == 0 and "cost" not in json.loads(out)
    code, out, _ = run_cli("run", _write(tmp_path, _study()))
    assert code == 0 and "system cost      $" in out


def test_bad_economics_on_the_command_line_is_one_message(tmp_path: Path, run_cli: RunCli) -> None:
    code, out, err = run_cli("run", _write(tmp_path, _study({"memory": "sram"})))
    assert code != 0 and not out
    assert "economics.memory: unknown memory technology 'sram'" in err and "Traceback" not in err
