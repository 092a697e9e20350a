"""An operator written as people write it on a command line: a kind and ``key=value`` texts.

``stratasim cost gemm M=256 K=256 N=256`` and ``stratasim roofline --op gemm:M=256,K=256,N=256`` both read their
operator here.
"""

from __future__ import annotations

from collections.abc import Mapping

from stratasim.kernel import elementwise_functions, operators
from stratasim.kernel.errors import BackendError
from stratasim.v1 import compute_pb2

__all__ = ["KINDS", "operator_from"]

# Each kind's keys and whether they are required; ``b`` is the GEMM's batch.
KINDS: Mapping[str, Mapping[str, bool]] = {
    "gemm": {"m": True, "k": True, "n": True, "batch": False},
    "conv": {key: key != "stride" for key in ("n", "k", "c", "p", "q", "r", "s", "stride")},
    "elementwise": {"shape": True, "flops_per_element": False, "inputs": False, "function": False},
    "attention": {
        "batch": True,
        "queries": True,
        "keys": True,
        "head_dim": True,
        "group": False,
        "causal": False,
        "backward": False,
    },
}
_ALIASES = {"b": "batch", "flops": "flops_per_element"}


def _integer(kind: str, key: str, text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise BackendError(f"{kind} {key}={text!r}: expected an integer") from None


def _flag(kind: str, key: str, text: str) -> bool:
    if text.strip().lower() in {"true", "1", "yes"}:
        return True
    if text.strip().lower() in {"false", "0", "no"}:
        return False
    raise BackendError(f"{kind} {key}={text!r}: expected true or false")


def operator_from(kind: str, given: Mapping[str, str], dtype: str) -> compute_pb2.OperatorDesc:
    """The operator of ``kind`` from ``{key: text}`` (keys case-insensitive; ``shape`` as ``1024x1024``)."""
    if kind not in KINDS:
        raise BackendError(f"unknown operator kind {kind!r}; expected one of {', '.join(KINDS)}")
    keys = KINDS[kind]
    values = {_ALIASES.get(key.lower(), key.lower()): text for key, text in given.items()}
    unknown = sorted(set(values) - set(keys))
    missing = [key for key, required in keys.items() if required and key not in values]
    if unknown or missing:
        problem = f"unknown key(s) {', '.join(unknown)}" if unknown else f"missing {', '.join(missing)}"
        raise BackendError(f"{kind}: {problem}; a {kind} takes {', '.join(f'{k}=' for k in keys)}")
    try:
        parsed_dtype = operators.parse_dtype(dtype)
        if kind == "gemm":
            m, k, n = (_integer(kind, key, values[key]) for key in ("m", "k", "n"))
            batch = _integer(kind, "batch", values.get("batch", "1"))
            return operators.gemm(m, k, n, parsed_dtype, batch=batch)
        if kind == "conv":
            n, k, c, p, q, r, s = (_integer(kind, key, values[key]) for key in "nkcpqrs")
            stride = _integer(kind, "stride", values.get("stride", "1"))
            return operators.conv2d(n, k, c, p, q, r, s, stride, parsed_dtype)
        if kind == "attention":
            sizes = [_integer(kind, key, values[key]) for key in ("batch", "queries", "keys", "head_dim")]
            return operators.attention(
                *sizes,
                group=_integer(kind, "group", values.get("group", "1")),
                causal=_flag(kind, "causal", values.get("causal", "false")),
                backward=_flag(kind, "backward", values.get("backward", "false")),
                dtype=parsed_dtype,
            )
        shape = [_integer(kind, "shape", part) for part in values["shape"].lower().replace(",", "x").split("x")]
        flops = _integer(kind, "flops_per_element", values.get("flops_per_element", "1"))
        inputs = _integer(kind, "inputs", values.get("inputs", "1"))
        function = compute_pb2.ELEMENTWISE_FUNCTION_UNSPECIFIED
        if "function" in values:
            function = elementwise_functions.parse_function(values["function"])
        return operators.elementwise(shape, parsed_dtype, flops_per_element=flops, inputs=inputs, function=function)
    except ValueError as exc:
        raise BackendError(f"{kind}: {exc}") from None
