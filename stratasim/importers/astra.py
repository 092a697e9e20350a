"""Import ASTRA-sim 2.x analytical inputs, a network YAML and a system JSON, as a StrataSim study.

The study keeps ASTRA-sim's semantics (``preset: astra_compat``, see ``reference/ASTRA-SIM-SEMANTICS.md``)
and states its units exactly: the network's "GB/s" are ASTRA-sim's 2^30 bytes/s, written ``50GiB/s``;
``local-mem-bw`` is GB/s of 10^9 bytes, written ``1600GB/s``; times are ns. Numbers keep the digits of the
file. Every problem of a file is raised at once, as one :class:`~stratasim.kernel.errors.ConfigError` naming the file
and the key; what each system key becomes is decided in :mod:`stratasim.importers._astra_system`.

ASTRA-sim's workloads are Chakra traces: given one (``--workload PREFIX``, ASTRA-sim's
``--workload-configuration``), the study replays it (``kind: chakra``); otherwise its workload is the one
collective the caller names (by default a 1 MiB all-reduce, which a comment in the output says).

ASTRA-sim's network file does not say which analytical backend it is for: the binary run on it does
(``AstraSim_Analytical_Congestion_Unaware`` or ``..._Congestion_Aware``), so the caller says it (``--backend``,
``analytical`` by default) and a comment in the output records the choice.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml

from stratasim.config.study_file import parse_study
from stratasim.importers._astra_system import (
    Problems,
    SystemImport,
    describe,
    plain,
    read_system,
    unknown_key,
)
from stratasim.kernel.errors import ConfigError, InputError, StrataSimError
from stratasim.kernel.safe_load import CONFIG_BYTES, YAML_BYTES, parse_json, parse_yaml, read_text

__all__ = [
    "AstraImport",
    "BACKENDS",
    "DEFAULT_COLLECTIVE",
    "DEFAULT_SIZE",
    "import_astra",
    "read_astra",
    "to_yaml",
]

DEFAULT_COLLECTIVE = "all_reduce"
DEFAULT_SIZE = "1MiB"

Backend = Literal["analytical", "congestion_aware"]
BACKENDS: dict[str, str] = {
    "analytical": "AstraSim_Analytical_Congestion_Unaware",
    "congestion_aware": "AstraSim_Analytical_Congestion_Aware",
}
"""The study's network backend for the inputs of each of ASTRA-sim's analytical binaries."""

_KINDS = {"Ring": "ring", "FullyConnected": "fully_connected", "Switch": "switch"}
_NETWORK_KEYS = ("topology", "npus_count", "bandwidth", "latency")


@dataclass(frozen=True)
class AstraImport:
    """An imported study: the ``study`` mapping (valid for :func:`~stratasim.config.parse_study`) and the
    ``comments`` to write above it (where it came from, ASTRA-sim keys ignored, defaults filled in)."""

    study: dict[str, Any]
    comments: tuple[str, ...]


def _read(path: Path, problems: Problems, limit: int = CONFIG_BYTES) -> str | None:
    try:
        return read_text(path, limit, "file")
    except InputError as exc:
        problems.append((exc.where, exc.what))
        return None


def _load_yaml(path: Path, problems: Problems) -> object:
    text = _read(path, problems, YAML_BYTES)
    try:
        return None if text is None else parse_yaml(text, str(path))
    except InputError as exc:
        problems.append((exc.where, exc.what))
        return None


def _load_json(path: Path, problems: Problems) -> object:
    text = _read(path, problems)
    try:
        return None if text is None else parse_json(text, str(path), unique_keys=True)
    except InputError as exc:
        problems.append((exc.where, exc.what))
        return None


def _kind(value: object) -> str:
    if isinstance(value, str) and value in _KINDS:
        return _KINDS[value]
    raise ValueError(f"expected one of {', '.join(_KINDS)} (ASTRA-sim's analytical topologies), got {value!r}")


def _npus(value: object) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and value > 1:
        return value
    raise ValueError(f"expected a whole number of NPUs larger than 1, as ASTRA-sim requires, got {value!r}")


def _measure(what: str, *, zero_ok: bool) -> Callable[[object], float]:
    def parse(value: object) -> float:
        if (
            isinstance(value, (int, float))
            and not isinstance(value, bool)
            and math.isfinite(value)
            and (value > 0 or (zero_ok and value == 0))
        ):
            return value
        raise ValueError(f"expected {what}, got {value!r}")

    return parse


_COLUMNS: dict[str, Callable[[object], Any]] = {
    "topology": _kind,
    "npus_count": _npus,
    "bandwidth": _measure("a positive number of GB/s (ASTRA-sim's GB/s are 2^30 bytes/s)", zero_ok=False),
    "latency": _measure("a non-negative number of ns", zero_ok=True),
}


def _topology(data: object, problems: Problems) -> list[dict[str, Any]]:
    """The network YAML's four per-dimension lists → ``network.topology`` entries (empty on any problem)."""
    if not isinstance(data, Mapping) or not any(key in data for key in _NETWORK_KEYS):
        said = f"not an ASTRA-sim network file: expected {', '.join(_NETWORK_KEYS)}; found {describe(data)}"
        problems.append(("", said))
        return []
    problems.extend((str(key), unknown_key(str(key), _NETWORK_KEYS)) for key in data if key not in _NETWORK_KEYS)
    columns: dict[str, list[Any]] = {}
    for key, parse in _COLUMNS.items():
        values = data.get(key)
        if key not in data:
            problems.append((key, "required: a list with one entry per dimension"))
        elif not isinstance(values, list) or not values:
            like = f", such as [{values}]" if not isinstance(values, list) else ""
            problems.append((key, f"expected a non-empty list, one entry per dimension{like}; got {values!r}"))
        else:
            columns[key] = []
            for index, value in enumerate(values):
                try:
                    columns[key].append(parse(value))
                except ValueError as exc:
                    problems.append((f"{key}[{index}]", str(exc)))
    lengths = {key: len(data[key]) for key in columns}
    if len(set(lengths.values())) > 1:
        said = ", ".join(f"{key} {length}" for key, length in lengths.items())
        problems.append(("", f"topology, npus_count, bandwidth and latency need one entry per dimension; got {said}"))
    if problems:
        return []
    return [
        {"kind": kind, "size": size, "bandwidth": f"{plain(bandwidth)}GiB/s", "latency": f"{plain(latency)}ns"}
        for kind, size, bandwidth, latency in zip(*columns.values())
    ]


def _raise(files: Sequence[tuple[Path, Problems]]) -> None:
    """One ConfigError for the file with problems; if both have some, one naming both, keys prefixed by file."""
    bad = [(path, problems) for path, problems in files if problems]
    if len(bad) == 1:
        [(path, problems)] = bad
        raise ConfigError(str(path), problems)
    if bad:
        merged = [
            (f"{path.name}: {key}" if key else path.name, message)
            for path, problems in bad
            for key, message in problems
        ]
        raise ConfigError(" and ".join(str(path) for path, _ in bad), merged)


def read_astra(
    network_path: str | Path,
    system_path: str | Path,
    *,
    collective: str | None = None,
    size: str | int | None = None,
    npus: int | None = None,
    name: str | None = None,
    backend: Backend = "analytical",
    trace: str | None = None,
) -> AstraImport:
    """Read an ASTRA-sim network YAML and system JSON; return the study and the comments that explain it.

    ``trace``, a Chakra trace prefix (``<trace>.<rank>.et``, relative to the study file's folder), makes the
    workload replay it; otherwise ``collective`` and ``size`` (a quantity such as ``"1MiB"``, or bytes) make the
    workload, on ``npus`` NPUs if given (else all of them); left out, they default to :data:`DEFAULT_COLLECTIVE`
    and :data:`DEFAULT_SIZE`. ``backend`` is the network backend (:data:`BACKENDS`). ``name`` defaults to the
    network file's stem. The study is validated before it is returned; every problem raises one
    :class:`ConfigError`.
    """
    _check_choices(backend, trace, collective, size, npus)
    network_path, system_path = Path(network_path), Path(system_path)
    network_problems: Problems = []
    system_problems: Problems = []
    network = _load_yaml(network_path, network_problems)
    topology = [] if network_problems else _topology(network, network_problems)
    system_data = _load_json(system_path, system_problems)
    workload = _workload(collective, size, npus, trace)
    system = SystemImport({}, ())
    if not system_problems:
        runs = workload.get("collective", "")  # a trace's collectives are not known here: none is required
        sizes = tuple(entry["size"] for entry in topology) or None
        system = read_system(system_data, sizes, runs, system_problems)
    _raise([(network_path, network_problems), (system_path, system_problems)])
    study = {
        "name": name or network_path.stem,
        "workload": workload,
        "system": system.section,
        "network": {"backend": backend, "topology": topology},
    }
    comments = [
        f"imported from ASTRA-sim 2.x inputs {network_path} and {system_path}",
        f"network: backend {backend}, for {BACKENDS[backend]} (the network file does not say; choose with --backend)",
        *system.comments,
        *_assumed(workload, () if trace is not None else (("collective", collective), ("size", size))),
    ]
    parse_study(study, f"study imported from {network_path} and {system_path}")
    return AstraImport(study, tuple(comments))


def _check_choices(
    backend: str, trace: str | None, collective: str | None, size: str | int | None, npus: int | None
) -> None:
    """Refuse a backend not in :data:`BACKENDS`, and a trace given with a collective, a size or NPUs."""
    if backend not in BACKENDS:
        raise StrataSimError(f"--backend: expected {' or '.join(BACKENDS)}, got {backend!r}")
    if trace is not None and (collective, size, npus) != (None, None, None):
        raise StrataSimError("--workload (a Chakra trace) takes no --collective, --size or --npus: the trace says them")


def _workload(collective: str | None, size: str | int | None, npus: int | None, trace: str | None) -> dict[str, Any]:
    """The study's workload: the trace replayed, else the collective of ``size`` (each defaulted) on ``npus``."""
    if trace is not None:
        return {"kind": "chakra", "path": trace}
    workload: dict[str, Any] = {
        "kind": "collective",
        "collective": DEFAULT_COLLECTIVE if collective is None else collective,
        "size": DEFAULT_SIZE if size is None else f"{size}B" if isinstance(size, int) else size,
    }
    if npus is not None:
        workload["npus"] = npus
    return workload


def _assumed(workload: dict[str, Any], given: tuple[tuple[str, object], ...]) -> list[str]:
    """The comment naming the workload's keys assumed (those of ``given`` left out), if any."""
    assumed = [f"{key} {workload[key]}" for key, value in given if value is None]
    if not assumed:
        return []
    return [
        f"workload: ASTRA-sim's come as Chakra traces, not imported; assumed {' and '.join(assumed)} "
        "(choose with --collective and --size)"
    ]


def import_astra(
    network_path: str | Path,
    system_path: str | Path,
    *,
    collective: str | None = None,
    size: str | int | None = None,
    npus: int | None = None,
    name: str | None = None,
    backend: Backend = "analytical",
    trace: str | None = None,
) -> dict[str, Any]:
    """The study mapping of :func:`read_astra` (same arguments), without its comments."""
    return read_astra(
        network_path, system_path, collective=collective, size=size, npus=npus, name=name, backend=backend, trace=trace
    ).study


def to_yaml(study: Mapping[str, Any], comments: Sequence[str] = ()) -> str:
    """The study as YAML, each comment a ``#`` line above it; topology entries and lists stay on one line."""
    header = "".join(f"# {line}\n" for comment in comments for line in comment.splitlines())
    body = yaml.safe_dump(dict(study), sort_keys=False, default_flow_style=None, allow_unicode=True, width=120)
    return header + body
