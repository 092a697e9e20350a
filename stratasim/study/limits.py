"""What a run, a conversion or an export may take unless the command line or the caller says otherwise: the
defaults of :mod:`stratasim.study.budget` and :mod:`stratasim.study.export`, in a module that imports nothing, so
that the command line can quote them in its help without importing the study runner."""

__all__ = ["DEFAULT_MAX_EVENTS", "DEFAULT_MAX_MEMORY", "DEFAULT_MAX_NPUS"]

DEFAULT_MAX_MEMORY = 2 * 2**30
"""Bytes a run's estimate may reach by default. The estimate is two to three times what runs take, so a run within
it stays under about 1 GB (issue 15), while Megatron's 1T-parameter plan, the largest example (1.9 GiB estimated,
0.65 GB used), still fits."""

DEFAULT_MAX_EVENTS = 10**9
"""Engine events a run may process by default: an hour or so at the engine's pace; the estimate is an upper one."""

DEFAULT_MAX_NPUS = 128
"""The most NPUs an export writes files for unless told otherwise (``--max-npus``)."""
