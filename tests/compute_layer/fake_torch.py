"""A stand-in for the parts of PyTorch :class:`~stratasim.compute_layer.measured.cuda_timing.CudaTimer` uses, on a
simulated GPU clock: every kernel takes a fixed time, captured kernels run when their graph replays, a kernel
launched eagerly takes at least the host's time to issue it, and autograd refuses capture unless told to allow it
(PyTorch captures a backward pass where its whole-network capture's rules are kept), so the timing method is checked
without PyTorch or a GPU."""

from __future__ import annotations

import contextlib
import types
from collections.abc import Iterator
from typing import Any

KERNEL_US = 2.0
"""What any forward kernel takes on the fake GPU."""
BACKWARD_US = 5.0
"""What a backward pass takes on top of its forward kernel."""


class FakeGpu:
    """The clock (microseconds), the graph being captured, if any, and the host's time to issue one kernel."""

    def __init__(self, host_us: float = 0.0, capture_autograd: bool = False) -> None:
        self.now_us, self.host_us = 0.0, host_us
        self.capturing: FakeGraph | None = None
        self.launches = 0
        self.capture_autograd = capture_autograd

    def run(self, us: float) -> None:
        self.launches += 1
        if self.capturing is not None:
            self.capturing.kernels.append(us)
        else:  # launched eagerly: the stream runs at the host's pace when the kernel is shorter
            self.now_us += max(us, self.host_us)


class FakeGraph:
    def __init__(self, gpu: FakeGpu) -> None:
        self.gpu, self.kernels = gpu, list[float]()

    def replay(self) -> None:
        self.gpu.now_us += sum(self.kernels)


class FakeTensor:
    def __init__(self, gpu: FakeGpu, grad: bool = False) -> None:
        self.gpu, self.grad = gpu, grad

    def _kernel(self, *_: object) -> FakeTensor:
        self.gpu.run(KERNEL_US)
        return FakeTensor(self.gpu, self.grad)

    __add__ = __mul__ = __matmul__ = clone = _kernel

    def backward(self, gradient: FakeTensor) -> None:
        if self.gpu.capturing is not None and not self.gpu.capture_autograd:
            raise RuntimeError("autograd cannot be captured")
        self.gpu.run(BACKWARD_US)


class FakeEvent:
    def __init__(self, gpu: FakeGpu) -> None:
        self.gpu, self.at_us = gpu, 0.0

    def record(self) -> None:
        self.at_us = self.gpu.now_us

    def elapsed_time(self, end: FakeEvent) -> float:
        return (end.at_us - self.at_us) / 1000.0  # milliseconds, as CUDA events report


class FakeNorm:
    def __init__(self, *_: object, **__: object) -> None:
        pass

    def __call__(self, x: FakeTensor) -> FakeTensor:
        return x._kernel()


def fake_torch(host_us: float = 0.0, capture_autograd: bool = False) -> tuple[Any, FakeGpu]:
    """A module answering what the timer asks of ``torch``, and its GPU (whose host issues a kernel in
    ``host_us``; whose autograd refuses capture unless ``capture_autograd``)."""
    gpu = FakeGpu(host_us, capture_autograd)

    def tensor(*_: object, requires_grad: bool = False, **__: object) -> FakeTensor:
        return FakeTensor(gpu, requires_grad)

    def kernel(first: FakeTensor, *_: object, **__: object) -> FakeTensor:
        return first._kernel()

    @contextlib.contextmanager
    def graph(captured: FakeGraph) -> Iterator[None]:
        gpu.capturing = captured
        try:
            yield
        finally:
            gpu.capturing = None

    stream = types.SimpleNamespace(wait_stream=lambda other: None)
    cuda = types.SimpleNamespace(
        is_available=lambda: True,
        synchronize=lambda: None,
        Stream=lambda: stream,
        current_stream=lambda: stream,
        stream=lambda s: contextlib.nullcontext(),
        CUDAGraph=lambda: FakeGraph(gpu),
        graph=graph,
        Event=lambda enable_timing=False: FakeEvent(gpu),
    )
    functional = types.SimpleNamespace(scaled_dot_product_attention=kernel, gelu=kernel, silu=kernel)
    torch = types.SimpleNamespace(
        cuda=cuda,
        bfloat16="bf16",
        float16="fp16",
        device=lambda name: name,
        randn=tensor,
        ones=tensor,
        randn_like=tensor,
        bmm=kernel,
        softmax=kernel,
        no_grad=contextlib.nullcontext,
        nn=types.SimpleNamespace(functional=functional, LayerNorm=FakeNorm, RMSNorm=FakeNorm),
    )
    return torch, gpu
