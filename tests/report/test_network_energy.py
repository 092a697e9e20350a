"""The network's energy: the bits NPUs send, at each dimension's picojoules per bit, beside the compute's."""

from __future__ import annotations

from pathlib import Path

import pytest

from stratasim.config import load_study
from stratasim.kernel.errors import ConfigError
from stratasim.kernel.grid import Grid
from stratasim.kernel.units import UnitError, parse_energy_per_bit_pj
from stratasim.study import run_study

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
MIB = 1 << 20


def _ring_study(tmp_path: Path, energy: str) -> Path:
    path = tmp_path / "ring.yaml"
    path.write_text(
        "workload: {kind: collective, collective: all_reduce, size: 1MiB}\nsystem: {algorithm: ring, splits: 1}\n"
        f"network:\n  topology: [{{kind: ring, size: 4, bandwidth: 50GB/s, latency: 500ns{energy}}}]\n",
        encoding="utf-8",
    )
    return path


def test_a_ring_all_reduce_costs_its_bits_at_the_link_price(tmp_path: Path) -> None:
    """A ring all-reduce of 1 MiB on 4 NPUs: each NPU sends 2 x 3/4 MiB; at 1.3 pJ/bit, 4 x 1.5 MiB x 8 x 1.3 pJ."""
    report = run_study(load_study(_ring_study(tmp_path, ", energy_per_bit: 1.3pJ/bit")))
    expected = 4 * (3 * MIB // 2) * 8 * 1.3
    assert report.network_energy_pj == pytest.approx(expected, rel=1e-12)
    data = report.to_dict()
    assert data["network_energy_pj"] == pytest.approx(expected, rel=1e-12)
    assert data["energy_pj"] == data["compute_energy_pj"] + data["network_energy_pj"]
    assert data["network_power_w"] == pytest.approx(expected / report.total_time_ps)  # 1 pJ per ps is 1 W
    assert "network energy" in report.to_text()
    plain = run_study(load_study(_ring_study(tmp_path, "")))
    assert plain.network_energy_pj is None and "network_energy_pj" not in plain.to_dict()
    assert "network energy" not in plain.to_text()


def test_each_dimension_at_its_own_price_the_network_default_elsewhere(tmp_path: Path) -> None:
    """The quickstart's two dimensions priced apart add up to the two priced together, and a dimension without
    a figure of its own takes ``network.energy_per_bit``."""
    quickstart = EXAMPLES / "quickstart.yaml"
    first = run_study(load_study(quickstart, ["network.topology.0.energy_per_bit=2pJ/bit"]))
    second = run_study(load_study(quickstart, ["network.topology.1.energy_per_bit=10pJ/bit"]))
    both = run_study(
        load_study(quickstart, ["network.energy_per_bit=10pJ/bit", "network.topology.0.energy_per_bit=2pJ/bit"])
    )
    assert first.network_energy_pj and second.network_energy_pj
    assert both.network_energy_pj == pytest.approx(first.network_energy_pj + second.network_energy_pj, rel=1e-12)
    sent = [
        sum(size for npu in first.result.per_npu for d, size in npu.bytes_sent_per_dim if d == dim) for dim in (0, 1)
    ]
    assert first.network_energy_pj == pytest.approx(8 * 2 * sent[0], rel=1e-12)
    assert second.network_energy_pj == pytest.approx(8 * 10 * sent[1], rel=1e-12)


def test_point_to_point_bytes_count_on_the_dimensions_they_cross() -> None:
    """A pipeline's activations cross the pipeline's dimension only, and are priced with the collectives."""
    report = run_study(load_study(EXAMPLES / "transformer.yaml"))
    p2p = {dim for npu in report.result.per_npu for dim, size in npu.p2p_bytes_per_dim if size}
    assert p2p and len(p2p) == 1
    assert Grid((2, 3, 4)).dims_between(0, 1) == (0,) and Grid((2, 3, 4)).dims_between(0, 2 + 6 * 3) == (1, 2)
    assert Grid((2, 3, 4)).dims_between(5, 5) == ()


@pytest.mark.parametrize(
    ("text", "pj"), [("1.3pJ/bit", 1.3), ("500fJ/bit", 0.5), ("2nJ/b", 2000.0), ("4pJ/bit", 4.0), ("0pJ/bit", 0.0)]
)
def test_energy_per_bit_units(text: object, pj: float) -> None:
    assert parse_energy_per_bit_pj(text) == pytest.approx(pj)


@pytest.mark.parametrize("text", ["-1pJ/bit", "5W", "3pJ", "pJ/bit", True, 4, "0"])
def test_bad_energy_per_bit_units(text: object) -> None:
    with pytest.raises(UnitError):
        parse_energy_per_bit_pj(text)


@pytest.mark.parametrize(
    ("override", "where"),
    [
        ("network.energy_per_bit=-1pJ/bit", "network.energy_per_bit"),
        ("network.topology.0.energy_per_bit=5W", "network.topology[0].energy_per_bit"),
    ],
)
def test_a_bad_energy_per_bit_names_its_key(override: str, where: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_study(EXAMPLES / "quickstart.yaml", [override])
    assert [place for place, _ in caught.value.problems] == [where]
