"""How kernels reach the GPU: back to back from a CUDA graph (``graph``, what the profiles measured) or one by one
from the host (``eager``), and what eager launch adds to an operator's time.

The fitted model prices each kernel as CUDA-graph replay measured it: no gap between kernels. An eager framework
(PyTorch without graphs) issues every kernel from the host; while a kernel's GPU time is longer than the host's time
to issue the next, the host runs ahead and the launch is hidden, but when it is shorter the stream runs at the
host's pace. In steady state each kernel then costs the larger of its GPU time and the host's issue time, and an
operator of ``k`` kernels costs ``max(modelled time, k x host time)`` (:func:`eager_seconds`).

The host time is a measurement, never fitted per case: the study gives it (``compute.launch: {eager: 8us}``) or
``stratasim profile`` measured it on the device (the device file's ``launch.eager_s``). The shipped h100 and h200
profiles did not measure it, so ``eager`` on them needs the study's time (:func:`needs_host_time`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from stratasim.kernel.units import format_time_ps

if TYPE_CHECKING:
    from stratasim.compute_layer.backend_section import LaunchKey

__all__ = ["EAGER_KERNELS", "Launch", "eager_seconds", "needs_host_time"]

EAGER_KERNELS = {"silu_mul": 2}
"""Kernels eager PyTorch launches for a profiled class that launches more than one: ``silu_mul`` is SiLU, then the
product (the reference profiles' README says so: its time is two kernels'). Every other class is one kernel."""

_PS_PER_SECOND = 10**12


@dataclass(frozen=True)
class Launch:
    """``eager`` or not, and the host's issue time per kernel the study gave (``host_s`` seconds; None: the device's
    measured one)."""

    eager: bool = False
    host_s: float | None = None

    @staticmethod
    def of(key: LaunchKey | None) -> Launch:
        """The launch ``compute.launch`` says (None: ``graph``)."""
        if key is None or key == "graph":
            return Launch()
        if key == "eager":
            return Launch(eager=True)
        return Launch(eager=True, host_s=key.eager / _PS_PER_SECOND)

    def host_seconds(self, measured_s: float | None, device: str) -> float | None:
        """The host's issue time per kernel on ``device`` (whose profile measured ``measured_s``, None: did not);
        None under graph launch; ValueError (:func:`needs_host_time`) when eager has no time."""
        if not self.eager:
            return None
        host_s = self.host_s if self.host_s is not None else measured_s
        if host_s is None:
            raise ValueError(needs_host_time(device))
        return host_s

    def described(self, host_s: float | None) -> str:
        """What the calibration line adds: nothing under graph launch, else the host time and where it comes from."""
        if host_s is None:
            return ""
        source = "given by compute.launch or --launch" if self.host_s is not None else "measured by stratasim profile"
        time = format_time_ps(round(host_s * _PS_PER_SECOND))
        return f"; launched eagerly: each kernel at least the host's {time} to issue it ({source})"


def eager_seconds(seconds: float, kernels: int, host_s: float) -> float:
    """An operator of ``kernels`` kernels modelled at ``seconds`` when the host issues each in ``host_s``."""
    return max(seconds, kernels * host_s)


def needs_host_time(device: str) -> str:
    """What to say of ``launch: eager`` on a device whose profile did not measure the host's issue time."""
    return (
        f"'launch: eager' needs the host's time to issue one kernel, which the profile of {device!r} did not "
        f"measure: give it (launch: {{eager: 8us}}), or measure it with stratasim profile and price on the device "
        f"file it writes (device: {{file: NAME.device.yaml}})"
    )
