"""Running the cases of ``cases.yaml``: each case's figures worked out as a user's run would work them out (a study
file through :func:`~stratasim.study.run.run_study`, ASTRA-sim inputs through the importer, an operator through
the compute backend, held-out profile rows through the ``measured`` backend) and set against the expected values,
one :class:`Row` per figure."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from stratasim.compute_layer.timeloop import TimeloopCompute
from stratasim.config.study_file import load_study, parse_study
from stratasim.importers.astra import import_astra
from stratasim.kernel import operators
from stratasim.kernel.errors import StrataSimError
from stratasim.study.run import run_study
from stratasim.system_layer.operators import OperatorPricer, PricingError
from stratasim.v1 import compute_pb2
from stratasim.validate.cases import DATA, Case, Check, Suite
from stratasim.validate.operator_rows import operator_checks

__all__ = ["Row", "figures", "validate"]

_PS_PER_CYCLE = 1000
"""ASTRA-sim's cycles and the SCALE-Sim-like presets' clock: 1 GHz."""


@dataclass(frozen=True)
class Row:
    """One figure checked: what was expected, what came out (None when the run failed: ``problem`` says why)."""

    suite: str
    case: str
    metric: str
    expected: float
    got: float | None
    tolerance: str
    passed: bool
    problem: str = ""

    @property
    def error(self) -> float | None:
        """``got / expected - 1``, None when nothing came out (or something did where 0 was expected)."""
        if self.got is None or (self.expected == 0 and self.got != 0):
            return None
        return 0.0 if self.expected == 0 else self.got / self.expected - 1

    @property
    def label(self) -> str:
        """``suite / case / metric``, how a failure names the row."""
        return f"{self.suite} / {self.case} / {self.metric}"


def _study(inputs: Mapping[str, Any]) -> dict[str, float]:
    """A shipped study file's total time and training figures."""
    report = run_study(load_study(DATA / inputs["study"]))
    return {"total_time_ps": report.total_time_ps, **(report.training or {})}


def _astra(inputs: Mapping[str, Any]) -> dict[str, float]:
    """ASTRA-sim's network and system files imported and run on one collective, or replaying one of its Chakra
    traces: the time in ASTRA-sim's cycles, and the compute and exposed communication."""
    base = DATA / "astra-sim-inputs"
    study = import_astra(
        base / inputs["network"], base / inputs["system"], collective=inputs.get("collective"), size=inputs.get("size")
    )
    if "workload" in inputs:
        study["workload"] = {"kind": "chakra", "path": str(base / inputs["workload"])}
    report = run_study(parse_study(study, "validate"))
    return {
        "cycles": report.total_time_ps / _PS_PER_CYCLE,
        "compute_time_ns": report.compute_time_ns,
        "exposed_comm_ns": report.exposed_comm_ns,
    }


def _closed_form(inputs: Mapping[str, Any]) -> dict[str, float]:
    """One collective on an analytical topology, one chunk: its total time."""
    system = {
        "splits": 1,
        "endpoint_delay": inputs.get("endpoint_delay", "0ns"),
        "algorithm": inputs.get("algorithm", "ring"),
    }
    study = {
        "name": "closed-form",
        "system": system,
        "workload": {"kind": "collective", "collective": inputs["collective"], "size": inputs["size"]},
        "network": {"backend": "analytical", "topology": inputs["topology"]},
    }
    return {"total_time_ps": run_study(parse_study(study, "validate")).total_time_ps}


def _scalesim(inputs: Mapping[str, Any]) -> dict[str, float]:
    """One int8 layer on a SCALE-Sim-like preset of the built-in timeloop model, in cycles of its 1 GHz clock."""
    args = {key: value for key, value in inputs.items() if key not in ("device", "layer", "kind")}
    build = operators.gemm if inputs["kind"] == "gemm" else operators.conv2d
    op = build(**args, dtype=compute_pb2.INT8, name=inputs["layer"])
    try:
        (cost,) = OperatorPricer(TimeloopCompute(), inputs["device"]).costs([op])
    except PricingError as error:
        raise StrataSimError(error.reason) from None
    return {"cycles": cost.duration_ps // _PS_PER_CYCLE}


_RUNNERS: dict[str, Callable[[Mapping[str, Any]], dict[str, float]]] = {
    "study": _study,
    "astra": _astra,
    "closed_form": _closed_form,
    "scalesim": _scalesim,
}


def figures(kind: str, case: Case) -> dict[str, float]:
    """The figures ``case`` (of a suite of ``kind``) produces, by metric name."""
    return _RUNNERS[kind](case.inputs)


def _checked(kind: str, case: Case) -> Sequence[tuple[Check, float | None]]:
    """Each check of ``case`` with the figure its run gives (None when the run reports none); an ``operator``
    case's checks are made as it runs, its expected values being the operators the run picks."""
    if kind == "operator":
        return operator_checks(case)
    got = figures(kind, case)
    return [(check, got.get(check.metric)) for check in case.checks]


def _rows(kind: str, case: Case) -> Iterator[Row]:
    try:
        checked = _checked(kind, case)
    except StrataSimError as exc:
        # An operator case has no checks before it runs: its failure is one row, over its held-out operators.
        failed = case.checks or (Check("held_out_ops", len(case.inputs["rows"]), tolerance=0),)
        for check in failed:
            yield Row(case.suite, case.name, check.metric, check.expected, None, check.allowed, False, str(exc))
        return
    for check, value in checked:
        passed = value is not None and check.passes(value)
        problem = "" if value is not None else f"the run reports no {check.metric}"
        yield Row(case.suite, case.name, check.metric, check.expected, value, check.allowed, passed, problem)


def validate(
    suites: Iterable[Suite], *, full: bool = False, progress: Callable[[Case], None] | None = None
) -> list[Row]:
    """Every row of ``suites``' short cases (every case with ``full``), in order; ``progress`` is told of each
    case as it starts."""
    rows: list[Row] = []
    for suite in suites:
        for case in suite.cases:
            if full or case.short:
                if progress is not None:
                    progress(case)
                rows.extend(_rows(suite.kind, case))
    return rows
