"""The ``operator`` cases: the ``measured`` compute backend on the profile rows its fit never saw.

One case per GPU and kind of the fixed held-out split (:func:`~stratasim.compute_layer.measured.split.split_rows`)
of each GPU's profile, read from its copy under ``data/``, so the rows follow the shipped data and split and
cannot drift from them. Every held-out operator of the kind is priced by the backend through the one
:class:`~stratasim.system_layer.operators.OperatorPricer`, and two operators are checked, each its measured time
(expected) against the price (got), in microseconds:

- ``median_op_us``: the operator whose |error| is the kind's median (the upper middle one of an even count), within
  :data:`~stratasim.compute_layer.measured.evaluation.MEDIAN_TARGET`: the row passes when the median |error| does;
- ``worst_long_op_us``: the worst of those longer than :data:`~stratasim.compute_layer.measured.evaluation.LONG_US`,
  within :data:`~stratasim.compute_layer.measured.evaluation.WORST_TARGET` (no row when none is that long).

A kind that misses the target today is listed in the suite's ``known_misses`` with the wider tolerance it meets,
and its rows say :data:`~stratasim.validate.cases.KNOWN_MISS` beside that tolerance. The cases are made by
:func:`~stratasim.validate.cases.load_cases`; this module runs them.
"""

from __future__ import annotations

from collections.abc import Mapping

from stratasim.compute_layer.measured.backend import MeasuredCompute
from stratasim.compute_layer.measured.evaluation import LONG_US
from stratasim.compute_layer.measured.profile_rows import ProfileRow
from stratasim.kernel import elementwise_functions, operators
from stratasim.kernel.errors import StrataSimError
from stratasim.system_layer.operators import OperatorPricer, PricingError
from stratasim.v1 import compute_pb2
from stratasim.validate.cases import KNOWN_MISS, OPERATOR_TARGETS, Case, Check

__all__ = ["descriptor", "operator_checks"]

_ELEMENTWISE = {
    "copy": (0, 1),
    "softmax": (5, 1),
    "layernorm": (8, 1),
    "rmsnorm": (8, 1),
    "gelu": (3, 1),
    "add": (1, 2),
    "silu_mul": (6, 2),
}
"""FLOPs per element and inputs of each profiled element-wise kind's descriptor, as the model builders write them;
the descriptor also names the kind as its function (``rmsnorm`` is ``compute_pb2.RMSNORM``), which the backend
prices it as (:data:`~stratasim.compute_layer.measured.pricing.FUNCTION_CLASSES`)."""


def descriptor(row: ProfileRow) -> compute_pb2.OperatorDesc:
    """The bf16 operator descriptor of the profiled operator ``row``, as a study would describe it."""
    kind = row.kind
    if kind in ("gemm", "bmm"):
        batch = row.dim("B") if kind == "bmm" else 1
        return operators.gemm(row.dim("M"), row.dim("K"), row.dim("N"), batch=batch)
    if kind == "attention_causal":
        seq, backward = row.dim("seq"), row.shape["pass_"] == "backward"
        return operators.attention(
            row.dim("batch_heads"), seq, seq, row.dim("head_dim"), causal=True, backward=backward
        )
    if kind == "attention_decode":
        group = row.dim("heads") // row.dim("kv_heads")
        return operators.attention(
            row.dim("batch") * row.dim("heads"), 1, row.dim("context"), row.dim("head_dim"), group=group
        )
    flops, inputs = _ELEMENTWISE[kind]
    function = elementwise_functions.parse_function(kind)
    return operators.elementwise([row.dim("elements")], flops_per_element=flops, inputs=inputs, function=function)


def _check(metric: str, row: ProfileRow, wider: Mapping[str, float]) -> Check:
    """``metric``'s check of ``row``: its measured time within the target, or the known miss's wider tolerance."""
    if metric in wider:
        return Check(metric, row.us, tolerance=wider[metric], note=KNOWN_MISS)
    return Check(metric, row.us, tolerance=OPERATOR_TARGETS[metric])


def operator_checks(case: Case) -> list[tuple[Check, float]]:
    """The checks of an ``operator`` case, each with the backend's price of its operator in microseconds."""
    rows: tuple[ProfileRow, ...] = case.inputs["rows"]
    pricer = OperatorPricer(MeasuredCompute(), case.inputs["device"])
    try:
        priced = [duration / 1e6 for duration in pricer.durations_ps(descriptor(row) for row in rows)]
    except PricingError as error:
        raise StrataSimError(error.reason) from None
    ranked = sorted(zip(rows, priced), key=lambda pair: abs(pair[1] / pair[0].us - 1))
    chosen = {"median_op_us": ranked[len(ranked) // 2]}
    long = [pair for pair in ranked if pair[0].us > LONG_US]
    if long:
        chosen["worst_long_op_us"] = long[-1]
    wider = case.inputs["known_misses"]
    return [(_check(metric, row, wider), got) for metric, (row, got) in chosen.items()]
