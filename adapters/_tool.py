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
from types import ModuleType

from stratasim.compute_layer.requests import Rejected, checked_shape
from stratasim.kernel.operator_shapes import ConvShape, GemmShape
from stratasim.v1 import common_pb2, compute_pb2

__all__ = ["ToolFailure", "load", "contained", "layer_of"]


class ToolFailure(Exception):
    """The simulator itself failed; the message names what it raised and the last thing it printed."""


def layer_of(op: compute_pb2.OperatorDesc, index: int, backend: str) -> GemmShape | ConvShape:
    """The GEMM or convolution ``op`` describes; :class:`Rejected` for other kinds or malformed shapes."""
    shape = checked_shape(op, index, backend, kinds=(compute_pb2.GEMM, compute_pb2.CONV))
    assert isinstance(shape, GemmShape | ConvShape)  # the only kinds asked for
    return shape


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
