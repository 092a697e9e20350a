"""A serving study opened for the pricing oracle (``stratasim serve serving``): its pools' pricers as
:func:`~stratasim.study.serving.serve` builds them for its own run, asked by an external scheduler through
:mod:`stratasim.remote.serving_service`, so the oracle's prices are the in-process run's to the picosecond.

What the server reads is confined: a study given by path must lie under the server's study root; a study's text, or
a file under the root, may name files (a trace, a device or graph file, a profile) only under the root, and none
without one; and it may place no layer in another process (``spawn``, ``endpoint``, tokens and certificates): the
oracle prices in its own process and reads nothing a client could not send it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from stratasim.config.overrides import apply_overrides
from stratasim.config.study_file import Study, parse_study
from stratasim.kernel.errors import ConfigError, WorkloadError
from stratasim.kernel.safe_load import YAML_BYTES, parse_yaml, read_text
from stratasim.kernel.serving import Iteration, IterationShape, KvMove
from stratasim.remote.limits import check_topology
from stratasim.remote.serving_oracle import StudyRefused, StudyRequest
from stratasim.study.run import prepare_workload
from stratasim.study.serving import OpenedPricers, check_devices, open_pricers
from stratasim.v1 import serving_pb2
from stratasim.workload_layer.serving.workload import ServingRequestsWorkload

__all__ = ["OpenedServingStudy", "open_served_study"]

_FILE_KEYS = frozenset({"file", "path", "profile"})
"""Keys whose value is a file a study reads (a device or graph ``file``, a trace's ``path``, a ``profile``)."""
_PLACEMENT_KEYS = frozenset({"spawn", "endpoint", "tls_ca", "token_file", "token_env"})
"""Keys that place a layer in another process, or name its credentials."""
_TEXT_SOURCE = "study.yaml"
"""The name a study sent as text is read under (in the study root, when the server has one)."""


def open_served_study(request: StudyRequest) -> OpenedServingStudy:
    """The serving study ``request`` gives (its text, or its path under the request's root), its overrides applied,
    opened for pricing (module docstring); :class:`StudyRefused` for what the server may not read, another
    :class:`~stratasim.kernel.errors.StrataSimError` for a study that cannot be served (a topology beyond the
    request's limits among them, refused before any backend builds it)."""
    data, source = _read(request.text, request.path, request.root)
    if not isinstance(data, Mapping):
        raise ConfigError(source, [("", "expected a mapping with workload, system and network")])
    data, problems = apply_overrides(data, request.overrides)
    if problems:
        raise ConfigError(source, problems)
    _check_reads(data, Path(source).parent, request.root)
    study = parse_study(data, source)
    check_topology(study.topology_proto(), request.limits)
    workload, _ = prepare_workload(study)
    if not isinstance(workload, ServingRequestsWorkload):
        raise WorkloadError(
            f"workload.kind: the oracle prices serving studies (kind: serving), not {study.workload.kind!r}"
        )
    check_devices(study, workload)
    return OpenedServingStudy(study, workload)


def _read(text: str | None, path: str | None, root: Path | None) -> tuple[Any, str]:
    """The study's data and the file it stands for (its files relative to that file's folder)."""
    if path is not None:
        if root is None:
            raise StudyRefused(
                "path: this server reads no study files (send the study's text, or start the server "
                "with --study-root DIR)"
            )
        file = _under(root / path, root, "path", path)
        return parse_yaml(read_text(file, YAML_BYTES, "file"), str(file)), str(file)
    source = str((root or Path(".")) / _TEXT_SOURCE)
    return parse_yaml(text or "", source), source


def _under(file: Path, root: Path, key: str, given: object) -> Path:
    """``file`` resolved, refused unless it lies under ``root``."""
    resolved = file.resolve()
    if not resolved.is_relative_to(root.resolve()):
        raise StudyRefused(f"{key}: {given!r} is outside this server's study root")
    return resolved


def _check_reads(data: Mapping[str, Any], folder: Path, root: Path | None) -> None:
    """Refuse a study naming a file outside ``root`` (any, without one; relative ones from ``folder``) or placing a
    layer in another process (module docstring)."""
    for key, value in _leaves(data, ""):
        name = key.rpartition(".")[2]
        if name in _PLACEMENT_KEYS and value not in (None, False):
            raise StudyRefused(f"{key}: the oracle runs the study's layers in its own process; remove it")
        if name in _FILE_KEYS and isinstance(value, str):
            if root is None:
                raise StudyRefused(f"{key}: this server reads no files (start it with --study-root DIR)")
            _under(folder / value, root, key, value)


def _leaves(node: object, key: str) -> Iterator[tuple[str, object]]:
    """Every ``(dotted key, value)`` under ``node``, mappings and lists walked."""
    if isinstance(node, Mapping):
        for name, value in node.items():
            yield from _leaves(value, f"{key}.{name}" if key else str(name))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _leaves(value, f"{key}[{index}]")
    else:
        yield key, node


class OpenedServingStudy:
    """A serving study's pricers on its own backends, open until :meth:`close` (a
    :class:`~stratasim.remote.serving_oracle.ServedStudy`)."""

    def __init__(self, study: Study, workload: ServingRequestsWorkload) -> None:
        self._workload = workload
        self._stack = ExitStack()
        try:
            self._opened = open_pricers(study, workload, self._stack)
        except BaseException:
            self._stack.close()
            raise
        self.description = _description(study, workload, self._opened)

    def price_iteration(self, pool: int, shape: IterationShape) -> tuple[tuple[int, ...], float]:
        """Each stage's time for ``shape`` on pool ``pool`` and its energy, as the in-process loop's pricer says."""
        iteration = Iteration(shape, self._workload.works(shape, pool))
        pricer = self._opened.pricers[pool]
        price = pricer(iteration)
        return (price if isinstance(price, tuple) else (price,)), pricer.energy_pj(iteration)

    def price_experts(self, pool: int, group_tokens: int, member_tokens: int) -> tuple[int, float]:
        """The expert part of an iteration of a group of pool ``pool`` and its energy."""
        work = self._workload.expert_work(group_tokens, member_tokens, pool)
        pricer = self._opened.pricers[pool]
        return pricer.experts(work), pricer.expert_energy_pj(work)

    def price_kv_moves(self, source: int, moves: tuple[KvMove, ...]) -> tuple[int, ...]:
        """Picoseconds until each move from replica ``source`` has arrived."""
        return self._opened.transfer(source, moves)

    def close(self) -> None:
        """Close the study's backends."""
        self._stack.close()


def _description(
    study: Study, workload: ServingRequestsWorkload, opened: OpenedPricers
) -> serving_pb2.ServingDescription:
    """The study's pools as a client sizes its scheduler and cache by them."""
    config, pools, first = workload.config, [], 0
    for index, (pool, capacity) in enumerate(zip(config.pools, opened.capacities, strict=True)):
        budget = workload.kv_budget(capacity[0] or 0, index)
        known = capacity[0] is not None or pool.scheduler.kv_capacity is not None
        pools.append(
            serving_pb2.ServingPoolInfo(
                name=pool.name,
                role=pool.role,
                replicas=pool.replicas,
                first_replica=first,
                tp=pool.parallelism.tp,
                pp=pool.parallelism.pp,
                ep=pool.parallelism.ep,
                kv_blocks=budget.blocks if known else 0,
                block_size=pool.scheduler.block_size,
                memory_capacity_bytes=capacity[0] or 0,
                memory_unknown=capacity[1],
                kv_bytes_per_npu=budget.kv_bytes if known else 0,
            )
        )
        first += pool.replicas
    return serving_pb2.ServingDescription(
        study=study.name,
        pools=pools,
        kv_bytes_per_token=workload.kv_bytes_per_token(),
        max_context=config.model.seq_len,
        bucket=config.bucket,
    )
