"""``system.algorithm: nccl``: each phase runs the algorithm and protocol NCCL itself would pick, as its steps.

The choice is NCCL's tuning model (:mod:`stratasim.system_layer.collectives.nccl_tuning`) on the phase's line: along
the innermost dimension the line is one node of ``n`` GPUs on NVLink (NVLS when the dimension's switch has
``in_network_reduction``); along an outer one it is ``n`` nodes of one GPU each (CollNet/SHARP when that switch
reduces, PAT for all-gather and reduce-scatter). ``system.nccl`` forces an algorithm, protocol or channel count as
``NCCL_ALGO``, ``NCCL_PROTO`` and ``NCCL_NCHANNELS`` do. The phase then runs as steps on the network:

- ``ring``: the ring's steps; ``tree``: the double binary tree's; ``pat``: PAT's, Bruck's all-gather farthest
  peer first (:mod:`~stratasim.system_layer.collectives.nccl_pat`);
- ``nvls``, ``nvls_tree``, ``collnet_*``: in-network reduction, by the dimension's switch itself (a
  :class:`~stratasim.system_layer.collectives.steps.Step` ``at_switch``; the network holds every GPU's contribution
  until the last is in, then sends each its result: :mod:`stratasim.network_layer.switch_reduction`). One step per
  GPU: an all-reduce sends ``S (n + 1) / n`` up and gets as much down — NVLS's ``multimem.ld_reduce`` reads every
  GPU's buffer (``S`` up) and returns each its reduced share (``S/n`` down), and its ``multimem.st`` sends that share
  up (``S/n``) to be multicast to all (``S`` down), the two pipelined chunk by chunk over NCCL's channels, so one
  step carries both; a reduce-scatter sends ``S`` up and gets its share down, an all-gather its share up and ``S``
  down. Each link carries what the lock-step emulation before it carried for an all-reduce, and a GPU waits for the
  slowest contribution. No GPU reduces anything;
- every message carries the protocol's wire bytes: LL sends a 4-byte flag with every 4 bytes of data (x2), LL128
  8 bytes of flag in every 128 (x16/15), Simple its data; NVLS also runs at NCCL's ``nvlsEfficiency`` for the
  generation (0.85 on Hopper, tuning.cc 139-144).

NCCL's latency for the pick (its base and per-step hardware latencies, tuning.cc 149-176 and 384-435) is spread
evenly over the plan's steps (position 0's; one at a reducing switch), less the network latency each step's message pays already, so a tiny
collective takes what NCCL's model estimates. An all-to-all runs NCCL's point-to-point exchange: direct, Simple.
"""

from __future__ import annotations

from fractions import Fraction
from functools import lru_cache, partial

from stratasim.kernel.errors import WorkloadError
from stratasim.kernel.grid import DimensionLinks
from stratasim.system_layer.collectives.algorithms import PhasePlan, plan_phase
from stratasim.system_layer.collectives.nccl_pat import pat_shares, pat_steps
from stratasim.system_layer.collectives.nccl_tuning import ARCHS, Choice, Communicator, choose
from stratasim.system_layer.collectives.steps import Step, share_bytes
from stratasim.system_layer.nccl_options import REDUCING_ALGORITHMS, NcclOptions

__all__ = ["NCCL", "communicator", "nccl_choice", "plan_nccl_phase"]

NCCL = "nccl"
"""The ``system.algorithm`` name that lets NCCL's tuning model choose."""

_WIRE = {"simple": Fraction(1), "ll": Fraction(2), "ll128": Fraction(128, 120)}
_NVLS_EFFICIENCY = (Fraction(0), Fraction(0), Fraction(85, 100), Fraction(74, 100))
_GB = 10**9


def communicator(links: tuple[DimensionLinks, ...], dim: int, n: int, settings: NcclOptions) -> Communicator:
    """The communicator NCCL would see on a line of ``n`` NPUs along ``dim`` (a flat group: the first dimension's
    links, no in-network reduction)."""
    if not links:
        raise WorkloadError(
            "system.algorithm: nccl reads each dimension's bandwidth; give network.topology as a list of "
            "dimensions (a fabric's links, or a logical_topology, are not known to NCCL's tuning model)"
        )
    link = links[min(max(dim, 0), len(links) - 1)]
    gbps = link.bandwidth / _GB
    inner = dim <= 0
    reduces = link.in_network_reduction and dim >= 0
    return Communicator(
        ranks=n,
        nodes=1 if inner else n,
        intra_gbps=gbps,
        inter_gbps=gbps,
        channels=settings.channels or 16,
        nvls=inner and reduces,
        collnet=not inner and reduces,
        arch=settings.arch,
        nvswitch=links[0].kind == "switch",
    )


def nccl_choice(
    collective: str, links: tuple[DimensionLinks, ...], dim: int, n: int, size: int, settings: NcclOptions
) -> Choice:
    """NCCL's algorithm, protocol and channels for ``collective`` of ``size`` bytes on the line of ``n`` NPUs along
    ``dim``; :class:`WorkloadError` naming ``system.nccl`` when what it forces cannot run there."""
    if collective == "all_to_all":
        return Choice("direct", "simple", settings.channels or 16, 0.0)
    comm = communicator(links, dim, n, settings)
    try:
        return choose(comm, collective, size, settings.algorithm_at(dim), settings.protocol)
    except ValueError as exc:
        where = "the innermost dimension" if dim <= 0 else f"dimension {dim}"
        raise WorkloadError(f"system.nccl: {exc} (a line of {n} NPUs along {where})") from None


@lru_cache(maxsize=4096)
def _at_switch(
    efficiency: Fraction, delay_ps: int, collective: str, n: int, data_bytes: int, position: int
) -> tuple[Step, ...]:
    """A switch that reduces, in the network (one step: this GPU's contribution up, its result down once every
    GPU's is in), each way's bytes at ``efficiency``: see the module's docstring."""
    whole = _wire_bytes(data_bytes, 1 / efficiency)
    share = _wire_bytes(share_bytes(data_bytes, n), 1 / efficiency)
    up, down = {
        "all_reduce": (whole + share, whole + share),
        "reduce_scatter": (whole, share),
        "all_gather": (share, whole),
    }.get(collective, (whole, whole))
    return (Step((), up, 1, delay_ps=delay_ps, at_switch=True, result_bytes=down),)


@lru_cache(maxsize=4096)
def _on_the_wire(
    algorithm: str, factor: Fraction, delay_ps: int, collective: str, n: int, data_bytes: int, position: int
) -> tuple[Step, ...]:
    """``algorithm``'s steps with every message carrying ``factor`` times its bytes (the protocol's flags; what is
    reduced stays the data) and every step ``delay_ps`` longer."""
    steps = plan_phase(collective, algorithm, -1, n, data_bytes).steps_for(position)
    if factor == 1 and not delay_ps:
        return steps
    return tuple(
        Step(s.offsets, _wire_bytes(s.bytes, factor), s.need, s.tag, s.wait, s.reduces, s.reduced_bytes, delay_ps)
        for s in steps
    )


def _step_delay_ps(choice: Choice, link: DimensionLinks, steps: int) -> int:
    """NCCL's latency for the pick spread over the plan's ``steps``, less what the network charges each step's
    message already (two hops through a switch, one otherwise)."""
    if not steps:
        return 0
    network_ps = (2 if link.kind == "switch" else 1) * link.latency_ps
    return max(0, round(choice.latency_us * 1e6 / steps) - network_ps)


def _wire_bytes(size: int, factor: Fraction) -> int:
    return -(-(size * factor.numerator) // factor.denominator)


def _steps_algorithm(choice: Choice, collective: str) -> str:
    """The StrataSim algorithm whose steps run NCCL's pick."""
    if choice.algorithm == "tree":
        return "double_binary_tree" if collective == "all_reduce" else "ring"
    return choice.algorithm  # ring, direct


def plan_nccl_phase(
    collective: str,
    dim: int,
    n: int,
    data_bytes: int,
    links: tuple[DimensionLinks, ...],
    settings: NcclOptions,
) -> PhasePlan:
    """The phase of ``collective`` on lines of ``n`` NPUs along ``dim`` as NCCL would run it; its ``algorithm``
    reads ``nccl:<algorithm>/<protocol>/<channels>`` (``nccl:nvls/simple/16``)."""
    choice = nccl_choice(collective, links, dim, n, data_bytes, settings)
    name = f"{NCCL}:{choice.algorithm}/{choice.protocol}/{choice.channels}"
    link = links[min(max(dim, 0), len(links) - 1)]
    if choice.algorithm in REDUCING_ALGORITHMS:
        efficiency = Fraction(1)
        if choice.algorithm.startswith("nvls"):
            efficiency = _NVLS_EFFICIENCY[ARCHS.index(settings.arch)]
        planner = partial(_at_switch, efficiency, _step_delay_ps(choice, link, 1))
    elif choice.algorithm == "pat":  # Simple only
        delay = _step_delay_ps(choice, link, len(pat_shares(n)))
        planner = partial(pat_steps, delay)
    else:
        steps_algorithm = _steps_algorithm(choice, collective)
        base = plan_phase(collective, steps_algorithm, dim, n, data_bytes)  # refuses what it cannot run, saying why
        delay = _step_delay_ps(choice, link, len(base.steps_for(0)))
        planner = partial(_on_the_wire, steps_algorithm, _WIRE[choice.protocol], delay)
    return PhasePlan(dim, n, name, collective, data_bytes, planner, choice.algorithm in REDUCING_ALGORITHMS)
