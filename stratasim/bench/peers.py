"""The peers' own cases: a suite row that names ASTRA-sim runs the input files ASTRA-sim ran, and its peer figures
are those measured on them.

Each case is a folder ``benchmarks/peers/astra-sim/<case>/`` (shipped as package data, see :data:`DATA`) holding
ASTRA-sim's inputs — ``network.yml``, ``system.json``, ``remote_memory.json`` — and two data files:

- ``case.json``: the ASTRA-sim binary that runs the case and its workload, a collective microbenchmark as ASTRA-sim's
  generator (``examples/workload/microbenchmarks/generator_scripts``) writes it: per rank one ``.et`` file holding
  Chakra's ``GlobalMetadata`` (version 0.0.4) and one ``COMM_COLL_NODE`` (``comm_type``, ``comm_size`` in bytes).
  The files are written at bench time into a temporary folder (a 16,384-rank set is not worth committing).
- ``peer.json``: what the binary measured on these inputs: its simulated time in ns (cycles), wall time and peak
  memory, with the machine, date, load, commit and build that produced them.

StrataSim runs the same case as ``stratasim import astra --network network.yml --system system.json --workload
<the .et files>`` would: the imported study replays the traces, every NPU simulated, as ASTRA-sim does.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stratasim.bench.studies import run_study_file
from stratasim.chakra.et_def_pb2 import (
    ALL_GATHER,
    ALL_REDUCE,
    ALL_TO_ALL,
    COMM_COLL_NODE,
    REDUCE_SCATTER,
    AttributeProto,
    GlobalMetadata,
    Node,
)
from stratasim.importers.astra import BACKENDS, Backend, read_astra, to_yaml
from stratasim.kernel.errors import StrataSimError
from stratasim.workload_layer.traces.chakra import write_trace

__all__ = ["DATA", "AstraRun", "PeerFigures", "peer_figures", "write_workload", "import_case", "measure_astra"]

DATA = Path(__file__).resolve().parent / "data"
"""The files the suite runs, shipped with the package: copies of the repository's (``tools/sync_bench_data.py``)."""

ASTRA_CASES = "benchmarks/peers/astra-sim"
_COMM_TYPES = {
    "all_reduce": ALL_REDUCE,
    "all_gather": ALL_GATHER,
    "reduce_scatter": REDUCE_SCATTER,
    "all_to_all": ALL_TO_ALL,
}
_WORKLOAD = ("collective", "comm_size", "npus")


@dataclass(frozen=True)
class AstraRun:
    """An ASTRA-sim case of ``benchmarks/peers/astra-sim/<case>``, run by StrataSim through the importer."""

    case: str

    @property
    def folder(self) -> Path:
        """The case's shipped folder."""
        return DATA / ASTRA_CASES / self.case


@dataclass(frozen=True)
class PeerFigures:
    """What the peer measured on the case: its ``binary``, simulated time in ns, wall seconds, peak MB, and where
    the figures come from (machine, date, load)."""

    binary: str
    simulated_ns: int
    wall_s: float
    peak_mb: float | None
    source: str


def _load(path: Path, keys: tuple[str, ...]) -> dict[str, Any]:
    """The JSON object of ``path``, which must hold ``keys``; a :class:`StrataSimError` naming the file (and the
    key) otherwise."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise StrataSimError(f"{path}: cannot read the peer's case: {exc}") from None
    missing = [key for key in keys if not isinstance(data, dict) or key not in data]
    if missing:
        raise StrataSimError(f"{path}: {', '.join(missing)}: required")
    result: dict[str, Any] = data
    return result


def _binary(run: AstraRun) -> str:
    """The ASTRA-sim binary of ``case.json``, one of :data:`~stratasim.importers.astra.BACKENDS`'."""
    binary = _load(run.folder / "case.json", ("binary",))["binary"]
    if binary not in BACKENDS.values():
        raise StrataSimError(f"{run.folder / 'case.json'}: binary: expected one of {', '.join(BACKENDS.values())}")
    return str(binary)


def peer_figures(run: AstraRun) -> PeerFigures:
    """The figures of the case's ``peer.json``."""
    binary = _binary(run)
    data = _load(run.folder / "peer.json", ("simulated_ns", "wall_s", "machine", "date", "load"))
    source = f"{binary} on {ASTRA_CASES}/{run.case}, {data['machine']}, {data['date']} ({data['load']})"
    return PeerFigures(binary, data["simulated_ns"], data["wall_s"], data.get("peak_mb"), source)


def write_workload(run: AstraRun, folder: Path) -> Path:
    """Write the case's microbenchmark traces (``case.json``'s ``workload``) into ``folder``; their prefix
    (``<folder>/<collective>``, ASTRA-sim's ``--workload-configuration``)."""
    path = run.folder / "case.json"
    spec = _load(path, ("workload",))["workload"]
    collective, size, npus = (spec.get(key) if isinstance(spec, dict) else None for key in _WORKLOAD)
    if collective not in _COMM_TYPES or not isinstance(size, int) or not isinstance(npus, int) or min(size, npus) < 1:
        raise StrataSimError(
            f"{path}: workload: expected collective (one of {', '.join(_COMM_TYPES)}), comm_size (bytes) and npus "
            f"(whole numbers above 0); got {spec!r}"
        )
    prefix = folder / collective
    for rank in range(npus):
        node = Node(id=rank, name=f"{collective}_{npus}npus_{size >> 20}MB", type=COMM_COLL_NODE)
        node.attr.append(AttributeProto(name="is_cpu_op", bool_val=False))
        node.attr.append(AttributeProto(name="comm_type", int64_val=_COMM_TYPES[collective]))
        node.attr.append(AttributeProto(name="comm_size", int64_val=size))
        write_trace(f"{prefix}.{rank}.et", GlobalMetadata(version="0.0.4"), [node])
    return prefix


def import_case(run: AstraRun, folder: Path) -> Path:
    """Write the case's traces and the study ``stratasim import astra`` makes of its inputs into ``folder``; the
    study file's path."""
    prefix = write_workload(run, folder)
    backend: Backend = "congestion_aware" if _binary(run) == BACKENDS["congestion_aware"] else "analytical"
    imported = read_astra(
        run.folder / "network.yml", run.folder / "system.json", backend=backend, trace=prefix.name, name=run.case
    )
    study = folder / "study.yaml"
    study.write_text(to_yaml(imported.study, imported.comments), encoding="utf-8")
    return study


def measure_astra(run: AstraRun, timeout_s: float, memory_bytes: int) -> dict[str, Any]:
    """Run the case's imported study in a child process under the limits; its figures, or ``{"error": ...}``."""
    if not run.folder.is_dir():
        return {"error": f"{ASTRA_CASES}/{run.case} not shipped (python tools/sync_bench_data.py)"}
    with tempfile.TemporaryDirectory(prefix="stratasim-peer-") as folder:
        try:
            study = import_case(run, Path(folder))
        except StrataSimError as exc:
            return {"error": " ".join(str(exc).split())}
        return run_study_file(str(study), timeout_s, memory_bytes=memory_bytes)
