"""Collective times on the analytical network against their closed forms, exact to the picosecond.

Notation: N NPUs on a line, S the collective's buffer per NPU, m = S/N, alpha the latency of one hop, B the
bandwidth, ser(x) = ceil(x * 1e12 / B) ps. One chunk and no endpoint delay unless stated.

Most closed forms are cases of ``stratasim/validate/cases.yaml`` (suite ``closed_forms``, each stating its formula),
shared with ``stratasim validate``, which runs them through a study; here they run on the system layer directly.
"""

from __future__ import annotations

import pytest

from stratasim.kernel.units import parse_bandwidth, parse_bytes, parse_time_ps
from stratasim.validate.cases import Case, case
from tests.system_layer.helpers import FC, RING, SWITCH, run_collective, ser, topology

B = 50 * 10**9  # 50 GB/s
ALPHA = 500_000  # 500 ns
KINDS = {"ring": RING, "fully_connected": FC, "switch": SWITCH}
CLOSED_FORMS = [
    case("closed_forms", name)
    for name in (
        "ring all_reduce on 2",
        "ring all_reduce on 3",
        "ring all_reduce on 8",
        "ring all_reduce on 16",
        "ring reduce_scatter on 8",
        "ring all_gather on 8",
        "direct all_reduce on fully connected 8",
        "direct all_reduce on switch 8",
        "direct all_to_all on fully connected 16",
        "direct all_to_all on switch 16",
        "ring all_reduce on switch 4",
        "ring reduce_scatter on 4x4",
        "ring all_gather on 4x fully connected 2",
        "ring all_reduce on 8 with endpoint delay",
        "ring then direct all_reduce on 4x fully connected 4",
    )
]


@pytest.mark.parametrize("form", CLOSED_FORMS, ids=lambda form: form.name)
def test_collective_time_is_its_closed_form(form: Case) -> None:
    dims = [
        (KINDS[dim["kind"]], dim["size"], int(parse_bandwidth(dim["bandwidth"])), parse_time_ps(dim["latency"]))
        for dim in form.inputs["topology"]
    ]
    algorithm = form.inputs.get("algorithm", "ring")
    options = {
        "algorithm": {"*": tuple([algorithm] if isinstance(algorithm, str) else algorithm)},
        "endpoint_delay": form.inputs.get("endpoint_delay", "0ns"),
    }
    result = run_collective(topology(*dims), form.inputs["collective"], parse_bytes(form.inputs["size"]), **options)
    assert result.total_time_ps == form.check("total_time_ps").expected


def test_ring_all_to_all_relays_shrinking_messages() -> None:
    # Step k (k = 1..N-1) forwards the N-k shares still travelling: sum over k of alpha + ser(k*m).
    n, size = 8, 8 << 20
    m = size // n
    result = run_collective(topology((RING, n, B, ALPHA)), "all_to_all", size)
    assert result.total_time_ps == sum(ALPHA + ser(k * m, B) for k in range(1, n))


def test_two_dimensional_all_reduce_runs_a_full_all_reduce_per_dimension() -> None:
    # Baseline order: AR(dim 0) of S then AR(dim 1) of S; phase d costs 2(n_d - 1)(alpha_d + ser_d(S/n_d)).
    n0, n1, size = 4, 8, 1 << 20
    b1, a1 = 25 * 10**9, 1_000_000
    result = run_collective(topology((RING, n0, B, ALPHA), (SWITCH, n1, b1, a1)), "all_reduce", size)
    phase0 = 2 * (n0 - 1) * (ALPHA + ser(size // n0, B))
    phase1 = 2 * (n1 - 1) * (2 * a1 + ser(size // n1, b1))
    assert result.total_time_ps == phase0 + phase1
    assert result.collectives[0].network_delay_ps_per_phase == (phase0, phase1)
