"""Timing the grid's operators on the CUDA GPU this process runs on, with PyTorch (the ``profile`` extra).

The method is the reference profiles': each operator is called a few times to warm up, then ``reps`` calls are
captured in one CUDA graph, the graph replayed :data:`REPLAYS` times between two CUDA events, and the median time
per call kept — the GPU's own time per kernel, with no Python or launch overhead between kernels. Where capture
fails, the ``reps`` calls run back to back between the events instead. The backward pass of causal attention is
timed as 8 forward-and-backward calls minus 8 forward calls, both captured in graphs as PyTorch's whole-network
capture does (autograd's backward kernels replay like any other); where autograd refuses capture, both run back to
back eagerly (the reference profiles' method), so their difference is never a captured time minus an eager one.
``launch_eager`` is the one-element add called 200 times back to back without a graph: its GPU time (about 1.2 us)
is shorter than the host's time to issue it, so the median per call is the host's issue time per kernel.

PyTorch is imported only by :func:`load_torch`, so the rest of StrataSim never needs it; the timer receives the
module it returns.
"""

from __future__ import annotations

import importlib
import statistics
from collections.abc import Callable
from types import ModuleType
from typing import Any

from stratasim.compute_layer.measured.grid import Case, elementwise_columns
from stratasim.compute_layer.measured.profile_rows import LAUNCH_EAGER
from stratasim.kernel.errors import StrataSimError

__all__ = ["CudaTimer", "NEEDS_TORCH", "NO_GPU", "REPLAYS", "REPS", "ProfilingUnavailable", "load_torch"]

NEEDS_TORCH = "stratasim profile needs PyTorch: pip install 'stratasim[profile]'"
NO_GPU = "stratasim profile found no CUDA GPU (PyTorch sees none): it measures the GPU it runs on"

REPS = {"tiny_kernel": 50, "attention_causal": 8, LAUNCH_EAGER: 200}
"""Calls per timing for the kinds that differ from the default :data:`_DEFAULT_REPS`."""

_DEFAULT_REPS = 12
_WARM = 3
REPLAYS = 5
"""Timings per operator, of which the median is kept."""

_TORCH_DTYPES = {"bf16": "bfloat16", "fp16": "float16"}

Operator = Callable[[], Any]


class ProfilingUnavailable(StrataSimError):
    """PyTorch or a CUDA GPU is missing: the message says which, in one line."""


def load_torch(import_module: Callable[[str], ModuleType] = importlib.import_module) -> ModuleType:
    """The ``torch`` module, once it is known to see a CUDA GPU; :class:`ProfilingUnavailable` otherwise."""
    try:
        torch = import_module("torch")
    except ImportError:
        raise ProfilingUnavailable(NEEDS_TORCH) from None
    if not torch.cuda.is_available():
        raise ProfilingUnavailable(NO_GPU)
    return torch


class CudaTimer:
    """Times one :class:`Case` on GPU 0 with ``torch`` in ``dtype`` (``bf16`` or ``fp16``): microseconds per call."""

    def __init__(self, torch: Any, dtype: str = "bf16") -> None:
        self._torch = torch
        self._dtype = getattr(torch, _TORCH_DTYPES[dtype])
        self._device = torch.device("cuda")
        self.eager_backward = False
        """Whether an attention backward pass was timed eagerly, autograd having refused capture."""

    def __call__(self, case: Case) -> float:
        reps = REPS.get(case.kind, _DEFAULT_REPS)
        if case.kind == "attention_causal" and case.shape["pass_"] == "backward":
            return self._attention_backward(case, reps)
        with self._torch.no_grad():
            if case.kind == LAUNCH_EAGER:
                return self._eager_median(self._operator(case), reps)
            return self._graph_median(self._operator(case), reps)

    def _random(self, *shape: int, grad: bool = False) -> Any:
        return self._torch.randn(*shape, dtype=self._dtype, device=self._device, requires_grad=grad)

    def _operator(self, case: Case) -> Operator:
        """The call that runs ``case`` once, its tensors allocated."""
        torch, kind = self._torch, case.kind
        if kind in ("tiny_kernel", LAUNCH_EAGER):
            one = torch.ones(1, dtype=self._dtype, device=self._device)
            return lambda: one + one
        if kind in ("gemm", "bmm"):
            batch = (case.dim("B"),) if kind == "bmm" else ()
            a = self._random(*batch, case.dim("M"), case.dim("K"))
            b = self._random(*batch, case.dim("K"), case.dim("N"))
            return (lambda: torch.bmm(a, b)) if batch else (lambda: a @ b)
        if kind == "attention_causal":
            return self._attention(case, grad=False)
        if kind == "attention_decode":
            return self._decode(case)
        return self._elementwise(kind, case.dim("elements"))

    def _attention(self, case: Case, grad: bool) -> Operator:
        sdpa = self._torch.nn.functional.scaled_dot_product_attention
        shape = (1, case.dim("batch_heads"), case.dim("seq"), case.dim("head_dim"))
        q, k, v = (self._random(*shape, grad=grad) for _ in range(3))
        return lambda: sdpa(q, k, v, is_causal=True)

    def _decode(self, case: Case) -> Operator:
        sdpa = self._torch.nn.functional.scaled_dot_product_attention
        batch, head_dim = case.dim("batch"), case.dim("head_dim")
        q = self._random(batch, case.dim("heads"), 1, head_dim)
        k = self._random(batch, case.dim("kv_heads"), case.dim("context"), head_dim)
        v = self._random(batch, case.dim("kv_heads"), case.dim("context"), head_dim)
        return lambda: sdpa(q, k, v, enable_gqa=True)

    def _elementwise(self, kind: str, elements: int) -> Operator:
        torch, functional = self._torch, self._torch.nn.functional
        columns = elementwise_columns(elements)
        x, y = self._random(elements // columns, columns), self._random(elements // columns, columns)
        if kind in ("layernorm", "rmsnorm"):
            layer = torch.nn.LayerNorm if kind == "layernorm" else torch.nn.RMSNorm
            norm = layer(columns, device=self._device, dtype=self._dtype)
            return lambda: norm(x)
        operators: dict[str, Operator] = {
            "add": lambda: x + y,
            "gelu": lambda: functional.gelu(x, approximate="tanh"),
            "silu_mul": lambda: functional.silu(x) * y,
            "softmax": lambda: torch.softmax(x, dim=-1),
            "copy": lambda: x.clone(),
        }
        return operators[kind]

    def _attention_backward(self, case: Case, reps: int) -> float:
        """Forward and backward minus forward, both captured, or both eager where autograd refuses capture."""
        forward = self._attention(case, grad=True)
        gradient = self._torch.randn_like(forward())

        def both() -> None:
            forward().backward(gradient)

        captured = self._captured_median(both, reps)
        if captured is None:
            self.eager_backward = True
            return self._eager_median(both, reps) - self._eager_median(forward, reps)
        return captured - self._graph_median(forward, reps)

    def _graph_median(self, operator: Operator, reps: int) -> float:
        """``reps`` calls captured in one CUDA graph, replayed; eager when capture fails (see the module)."""
        captured = self._captured_median(operator, reps)
        return self._eager_median(operator, reps) if captured is None else captured

    def _captured_median(self, operator: Operator, reps: int) -> float | None:
        """``reps`` calls captured in one CUDA graph, replayed; None when capture fails."""
        cuda = self._torch.cuda
        self._warm(operator)
        try:
            side = cuda.Stream()
            side.wait_stream(cuda.current_stream())
            with cuda.stream(side):
                operator()
            cuda.current_stream().wait_stream(side)
            graph = cuda.CUDAGraph()
            with cuda.graph(graph):
                for _ in range(reps):
                    operator()
            graph.replay()
            cuda.synchronize()
        except RuntimeError:
            cuda.synchronize()
            return None
        return self._median(graph.replay, reps)

    def _eager_median(self, operator: Operator, reps: int) -> float:
        self._warm(operator)

        def run() -> None:
            for _ in range(reps):
                operator()

        return self._median(run, reps)

    def _warm(self, operator: Operator) -> None:
        for _ in range(_WARM):
            operator()
        self._torch.cuda.synchronize()

    def _median(self, run: Callable[[], object], calls: int) -> float:
        """The median over :data:`REPLAYS` timings of ``run`` (``calls`` calls), per call, in microseconds."""
        cuda, times = self._torch.cuda, []
        for _ in range(REPLAYS):
            start, end = cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)
            start.record()
            run()
            end.record()
            cuda.synchronize()
            times.append(start.elapsed_time(end) * 1000.0 / calls)
        return float(statistics.median_low(times))
