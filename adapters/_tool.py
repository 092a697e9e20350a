"""What the adapters share: lazy imports naming the extra, a silenced and contained run, the layers they price.

An adapter runs a third-party simulator in-process on one operator at a time: :func:`load` imports it (or says
which extra to install), :func:`contained` swallows what it prints and turns whatever it raises (``exit()``
included) into one :class:`ToolFailure`, and :func:`layer_of` reads the GEMM or convolution off the wire.
"""

from __future__ import annotations

import importlib
import io
import logging
import warnings
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from dataclasses import dataclass
from types import ModuleType

from stratasim.v1 import common_pb2, compute_pb2

__all__ = ["Rejected", "ToolFailure", "Gemm", "Conv", "load", "contained", "layer_of", "label_of"]


class Rejected(Exception):
    """A device, operator or environment an adapter cannot price with; carries the wire error."""

    def __init__(self, code: common_pb2.Error.Code.ValueType, message: str, where: str) -> None:
        super().__init__(message)
        self.error = common_pb2.Error(code=code, message=message, where=where)


class ToolFailure(Exception):
    """The simulator itself failed; the message names what it raised and the last thing it printed."""


@dataclass(frozen=True)
class Gemm:
    """``batch`` independent ``m x k`` by ``k x n`` products."""

    m: int
    k: int
    n: int
    batch: int = 1


@dataclass(frozen=True)
class Conv:
    """``n`` images of ``c`` channels convolved with ``k`` ``r x s`` filters into ``p x q`` outputs, unpadded."""

    n: int
    k: int
    c: int
    p: int
    q: int
    r: int
    s: int
    stride: int = 1

    @property
    def height(self) -> int:
        """Input rows, (P - 1)·stride + R."""
        return (self.p - 1) * self.stride + self.r

    @property
    def width(self) -> int:
        """Input columns, (Q - 1)·stride + S."""
        return (self.q - 1) * self.stride + self.s


def label_of(op: compute_pb2.OperatorDesc, index: int) -> str:
    """How error messages name ``ops[index]``."""
    return f"ops[{index}]" + (f" ({op.name!r})" if op.name else "")


def layer_of(op: compute_pb2.OperatorDesc, index: int, backend: str) -> Gemm | Conv:
    """The GEMM or convolution ``op`` describes; :class:`Rejected` for other kinds or malformed shapes."""
    label, shape = label_of(op, index), list(op.shape)
    if op.kind not in (compute_pb2.GEMM, compute_pb2.CONV):
        kind = compute_pb2.OperatorKind.Name(op.kind) if op.kind in compute_pb2.OperatorKind.values() else op.kind
        message = (
            f"{label}: the {backend} backend prices GEMM and CONV only, not {kind}; "
            "route other kinds to another backend (compute.per_kind)"
        )
        raise Rejected(common_pb2.Error.UNSUPPORTED, message, f"ops[{index}].kind")
    gemm = op.kind == compute_pb2.GEMM
    lengths, expected = ((3, 4), "[M, K, N] or [B, M, K, N]") if gemm else ((7, 8), "[N, K, C, P, Q, R, S, stride]")
    if len(shape) not in lengths or min(shape) <= 0:
        message = f"{label}: shape {shape} is not {expected} of positive sizes"
        raise Rejected(common_pb2.Error.INVALID_ARGUMENT, message, f"ops[{index}].shape")
    if gemm:
        batch, m, k, n = shape if len(shape) == 4 else [1, *shape]
        return Gemm(m, k, n, batch)
    return Conv(*shape)


def load(module: str, backend: str, tool: str, extra: str) -> ModuleType:
    """Import ``module`` of ``tool``; :class:`Rejected` naming ``pip install 'stratasim[extra]'`` if it fails."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        message = (
            f"the {backend} backend needs {tool}, which cannot be imported ({exc}): pip install 'stratasim[{extra}]'"
        )
        raise Rejected(common_pb2.Error.FAILED_PRECONDITION, message, "backend") from None


@contextmanager
def contained(logger: str) -> Iterator[None]:
    """Run a simulator quietly, and turn anything it raises (``exit()`` too) into a :class:`ToolFailure` quoting
    its last words. What it prints, its warnings and what ``logger`` logs (ERROR and above; the rest is dropped)
    are kept from the terminal and the host's logs; handlers it adds to the root logger (``logging.basicConfig``)
    are removed afterwards. Redirection is process-wide, so callers run one simulation at a time."""
    said = io.StringIO()
    root, own, keep = logging.getLogger(), logging.getLogger(logger), logging.StreamHandler(said)
    handlers, root_level, own_state = list(root.handlers), root.level, (own.level, own.propagate)
    own.setLevel(logging.ERROR)
    own.propagate = False
    own.addHandler(keep)
    try:
        with redirect_stdout(said), redirect_stderr(said), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. SCALE-Sim's numpy deprecations, one per layer
            yield
    except (Exception, SystemExit) as exc:
        lines = [line.strip() for line in said.getvalue().splitlines() if line.strip()]
        what = "it exited" if isinstance(exc, SystemExit) else f"{type(exc).__name__}: {exc}".rstrip(": ")
        raise ToolFailure(what + (f" (its last output: {lines[-1]!r})" if lines else "")) from exc
    finally:
        for handler in [h for h in root.handlers if h not in handlers]:
            root.removeHandler(handler)
        root.setLevel(root_level)
        own.removeHandler(keep)
        own.level, own.propagate = own_state
