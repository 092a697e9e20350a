"""ASTRA-sim 2.x's system JSON → a StrataSim ``system:`` section, with one decision per key ASTRA-sim reads.

The keys are those ``Sys`` and ``CollectiveImplLookup`` read at astra-sim 518bd51, plus the ASTRA-sim 1.0 keys
its shipped examples still carry. Each one is

* translated into a study key (``scheduling-policy`` → ``scheduling``, ``local-mem-bw`` → ``local_mem_bw``...);
* a problem when it changes ASTRA-sim's results in a way StrataSim does not model (``track-local-mem: 1``,
  ``replay-only: 1``, ``model-shared-bus: 1``, a custom collective), or when ASTRA-sim's behaviour without it is
  undefined (no ``scheduling-policy``, no ``preferred-dataset-splits``...);
* listed in the "ignored ASTRA-sim keys" comment when set to a value that matters elsewhere but that the study
  does not use (``roofline-enabled: 1`` prices compute nodes, and an imported collective workload has none);
* a problem when it asks for what neither tool computes: ASTRA-sim 1.0's Themis-style ``intra-`` and
  ``inter-dimension-scheduling`` policies, which 2.x no longer reads (it runs FIFO and ascending);
* type-checked and otherwise dropped when ASTRA-sim itself makes no use of it here (``L``, ``o``, ``g``, ``G`` and
  ``local-reduction-delay`` only drive the memory-bus model of ``model-shared-bus: 1``).

Any other key is a problem naming the closest known keys: in ASTRA-sim a misspelt key silently does nothing.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["SystemImport", "describe", "plain", "read_system", "unknown_key"]

Problems = list[tuple[str, str]]

# ASTRA-sim's key prefix of each collective → the study's collective name.
_COLLECTIVES = {
    "all-reduce": "all_reduce",
    "all-gather": "all_gather",
    "reduce-scatter": "reduce_scatter",
    "all-to-all": "all_to_all",
}
_ALGORITHMS = {
    "ring": "ring",
    "direct": "direct",
    "halvingDoubling": "halving_doubling",
    "doubleBinaryTree": "double_binary_tree",
    "oneRing": "one_ring",
    "oneDirect": "one_direct",
    "oneHalvingDoubling": "one_halving_doubling",
}
_FLAT = ("oneRing", "oneDirect", "oneHalvingDoubling")
_NO_ALL_TO_ALL = ("halvingDoubling", "oneHalvingDoubling")  # HalvingDoubling.cc's constructor: no All_to_All case
# directN / oneDirectN: CollectiveImplLookup.cc, generate_collective_impl_from_input, reads N after the name.
_WINDOWED = re.compile(r"(direct|oneDirect)([0-9]+)")
_SCHEDULING = {"LIFO": "lifo", "FIFO": "fifo"}
_OPTIMIZATION = {"baseline": "baseline", "localBWAware": "local_bw_aware"}
_CUSTOM = (*(f"{prefix}-implementation-custom" for prefix in _COLLECTIVES), "per-node-custom-implementation")
_UNSUPPORTED = {  # flag → why it cannot be imported when on (ASTRA-sim tests model-shared-bus == 1, others != 0)
    "track-local-mem": "ASTRA-sim then tracks local memory use from each node's inputs and outputs; with traces "
    "that carry none (such as its collective microbenchmarks) no NPU ever finishes. StrataSim does not model "
    "it; set it to 0",
    "replay-only": "ASTRA-sim then replays every node's recorded duration instead of simulating it; not "
    "supported, set it to 0",
    "model-shared-bus": "ASTRA-sim then models the NPU-memory bus with LogGP (L, o, g, G, "
    "local-reduction-delay); not supported, set it to 0",
}
_REQUIRED = {  # key → what it takes, and why ASTRA-sim's behaviour without it cannot be reproduced
    "scheduling-policy": "LIFO or FIFO; without it ASTRA-sim's policy is undefined",
    "collective-optimization": "baseline or localBWAware; without it ASTRA-sim's choice is undefined",
    "preferred-dataset-splits": "a whole number ≥ 1; ASTRA-sim divides every collective by it, 0 by default",
    "local-mem-bw": "GB/s; ASTRA-sim charges every reduction 3 × bytes / local-mem-bw, 0 by default",
}
_INERT = ("L", "o", "g", "G", "local-reduction-delay", "peak-perf", "local-mem-trace-filename")
_UNREAD = {"boost-mode": 0}
# Themis-style scheduling (ASTRA-sim 1.0's text configs set these, Sys::parse_var). ASTRA-sim 2.x
# (518bd51) reads neither key: its Sys constructor sets FIFO and Ascending and Sys::initialize_sys never changes
# them, so the other policies' branches in Sys::generate_collective and Sys::ask_for_schedule never run. The value
# both run is accepted; any other asks for what neither computes, which would be a silent wrong answer.
_SCHEDULERS = {
    "intra-dimension-scheduling": (
        "FIFO",
        {
            "RG": "ASTRA-sim 1.0's RG order (alternating reduce-scatter and all-gather chunks in a dimension's queue)",
            "smallestFirst": "ASTRA-sim 1.0's smallest-chunk-first order within a dimension's queue",
            "lessRemainingPhaseFirst": "ASTRA-sim 1.0's order by fewest phases left within a dimension's queue",
        },
    ),
    "inter-dimension-scheduling": (
        "ascending",
        {
            "roundRobin": "ASTRA-sim 1.0's round-robin rotation of each chunk's first dimension",
            "offlineGreedy": "Themis's offline greedy dimension order (ASTRA-sim 1.0's OfflineGreedy.cc)",
            "offlineGreedyFlex": "Themis's offline greedy order with flexible chunk sizes (OfflineGreedy.cc)",
            "themis": "Themis's offline greedy dimension order (ASTRA-sim 1.0 calls it offlineGreedy)",
        },
    ),
}
KNOWN_KEYS = (
    "scheduling-policy",
    "collective-optimization",
    "preferred-dataset-splits",
    "active-chunks-per-dimension",
    "endpoint-delay",
    "local-mem-bw",
    *(f"{prefix}-implementation" for prefix in _COLLECTIVES),
    *_CUSTOM,
    *_UNSUPPORTED,
    "roofline-enabled",
    "trace-enabled",
    *_INERT,
    *_UNREAD,
    *_SCHEDULERS,
)


@dataclass(frozen=True)
class SystemImport:
    """The ``system:`` section and the comments (ignored keys, defaults written out) to show above the study."""

    section: dict[str, Any]
    comments: tuple[str, ...]


def plain(number: float) -> str:
    """A number as written in the file, without a redundant ``.0``: 50.0 → ``50``, 936.25 → ``936.25``."""
    return str(int(number)) if isinstance(number, float) and number.is_integer() else repr(number)


def describe(data: object) -> str:
    """What a file holds instead of the expected mapping, by its shape only: a file named by mistake (a credentials
    file) is never echoed."""
    if not isinstance(data, Mapping):
        return "an empty file" if data is None else f"a {type(data).__name__}"
    count = len(data)
    return (
        f"a mapping of {count} other key{'s' * (count != 1)} (its contents are not shown)"
        if data
        else "an empty mapping"
    )


def unknown_key(key: str, known: Collection[str]) -> str:
    """The message for a key ASTRA-sim does not read, naming the known keys closest to it."""
    close = difflib.get_close_matches(key, list(known), n=3, cutoff=0.5)
    hint = f"closest known keys: {', '.join(repr(name) for name in close)}" if close else f"known: {', '.join(known)}"
    return f"not a key ASTRA-sim 2.x reads (it would silently ignore it); {hint}"


def _number(value: object, what: str, *, least: float, strict: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"expected {what}, got {value!r}")
    if value < least or (strict and value == least):
        raise ValueError(f"expected {what}, got {value!r}")
    return value


def _whole(least: int, unit: str = "") -> Callable[[object], int]:
    def parse(value: object) -> int:
        number = _number(value, f"a whole number{unit} ≥ {least}", least=least, strict=False)
        if number != int(number):
            raise ValueError(f"expected a whole number{unit} ≥ {least}, got {value!r}")
        return int(number)

    return parse


def _choice(names: Mapping[str, str], *not_yet: str) -> Callable[[object], str]:
    def parse(value: object) -> str:
        if isinstance(value, str) and value in names:
            return names[value]
        if value in not_yet:
            raise ValueError(f"{value!r} is not supported yet; use one of {', '.join(names)}")
        raise ValueError(f"expected one of {', '.join(names)}, got {value!r}")

    return parse


def _positive(unit: str) -> Callable[[object], float]:
    def parse(value: object) -> float:
        return _number(value, f"a positive number of {unit}", least=0, strict=True)

    return parse


def _flag(value: object) -> float:
    return _number(value, "0 or 1", least=-math.inf, strict=False)


def _any_number(value: object) -> float:
    return _number(value, "a number", least=-math.inf, strict=False)


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise ValueError(f"expected a string, got {value!r}")
    return value


def _get(
    data: Mapping[str, Any], key: str, parse: Callable[[object], Any], problems: Problems, default: Any = None
) -> Any:
    """``parse(data[key])``; ``default`` when the key is absent; None when its value is wrong (a problem then)."""
    if key not in data:
        return default
    try:
        return parse(data[key])
    except ValueError as exc:
        problems.append((key, str(exc)))
        return None


def _algorithm(name: object, width: int | None) -> str:
    """The study's name for ASTRA-sim's algorithm ``name`` run over ``width`` NPUs (None: not known)."""
    if name == "doubleBinaryTree" and width is not None and width & (width - 1):
        # BinaryTree.cc numbers 2^floor(log2 n) nodes in order: the other NPUs of the line belong to no tree.
        raise ValueError(
            f"doubleBinaryTree needs a power of two NPUs, not {width}: ASTRA-sim's BinaryTree leaves "
            "the others out of its trees"
        )
    if isinstance(name, str) and name in _ALGORITHMS:
        return _ALGORITHMS[name]
    windowed = _WINDOWED.fullmatch(name) if isinstance(name, str) else None
    if windowed:
        window = int(windowed[2])
        # AllToAll.cc (the constructor) keeps min(N, peers) messages in flight: 0 sends nothing, and a window
        # wider than the NPUs there are says something the user did not get.
        if window < 1 or (width is not None and window > width):
            most = "" if width is None else f" up to {width}"
            raise ValueError(f"{name!r}: N is the number of peers in flight; give {windowed[1]}N with N from 1{most}")
        return f"{_ALGORITHMS[windowed[1]]}:{window}"
    close = difflib.get_close_matches(str(name), list(_ALGORITHMS), n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    raise ValueError(f"unknown algorithm {name!r}; {hint}expected one of {', '.join(_ALGORITHMS)}, directN, oneDirectN")


def _width(sizes: tuple[int, ...] | None, dim: int | None) -> int | None:
    """NPUs of dimension ``dim`` (None: all of them flattened into one), or None when the network is not known."""
    if not sizes:
        return None
    return math.prod(sizes) if dim is None else sizes[min(dim, len(sizes) - 1)]


def _flattened(key: str, names: list[object], problems: Problems, comments: list[str]) -> list[object] | None:
    """The list a ``one*`` algorithm leaves of ``names``, or None when it has none.

    ASTRA-sim's GeneralComplexTopology (its constructor) stops at the first ``one*`` entry: it runs that
    algorithm over every NPU as one logical dimension and drops the entries after it. Entries before it would
    run per dimension and then the flat one over all NPUs again; StrataSim runs a flattened algorithm alone.
    """
    first = next((i for i, name in enumerate(names) if isinstance(name, str) and name.startswith(_FLAT)), None)
    if first is None:
        return None
    if first > 0:
        problems.append(
            (
                f"{key}[{first}]",
                f"{names[first]!r} after per-dimension algorithms: ASTRA-sim would run "
                f"{names[0]!r} on dimension 0 and then {names[first]!r} over all NPUs again; give "
                f"{names[first]!r} alone (one logical dimension) or one algorithm per dimension",
            )
        )
        return []
    if any(name != names[0] for name in names[1:]):
        comments.append(f"{key}: ASTRA-sim runs {names[0]!r} over all NPUs and ignores the entries after it")
    return names[:1]


def _algorithms(
    data: Mapping[str, Any], sizes: tuple[int, ...] | None, collective: str, problems: Problems, comments: list[str]
) -> dict[str, list[str]]:
    """``*-implementation`` lists → {collective: algorithms per dimension}.

    ASTRA-sim runs a collective over as many dimensions as its list has entries (the first ones) and rejects
    longer lists; StrataSim repeats a short list's last entry. A short list is therefore a problem for the
    workload's collective and a comment for the others, which the study does not run.
    """
    algorithm: dict[str, list[str]] = {}
    for prefix, name in _COLLECTIVES.items():
        key = f"{prefix}-implementation"
        names = data.get(key)
        if key not in data:
            if name == collective:
                problems.append((key, f"required for the {name} workload: ASTRA-sim has no algorithm for it"))
            else:
                comments.append(f"{key} not set: StrataSim would run ring for {name}")
            continue
        if not isinstance(names, list) or not names:
            problems.append((key, f"expected a non-empty list of algorithm names, one per dimension, got {names!r}"))
            continue
        dims = None if sizes is None else len(sizes)
        flat = _flattened(key, names, problems, comments)
        mapped = []
        for index, value in enumerate(names if flat is None else flat):
            width = _width(sizes, None if flat is not None else index)
            try:
                mapped.append(_algorithm(value, width))
            except ValueError as exc:
                problems.append((f"{key}[{index}]", str(exc)))
        if name == collective == "all_to_all" and any(value in _NO_ALL_TO_ALL for value in names):
            problems.append(
                (
                    key,
                    "ASTRA-sim's HalvingDoubling has no all-to-all (its constructor exits on one); give "
                    "ring, direct, directN or their one* forms",
                )
            )
        if flat is not None:
            if dims is not None and len(names) > dims:
                problems.append(
                    (key, f"{len(names)} algorithms for {dims} dimension(s); ASTRA-sim takes at most one per dimension")
                )
            algorithm[name] = mapped
            continue
        _check_count(key, name, len(names), dims, collective, problems, comments)
        algorithm[name] = mapped
    return algorithm


def _check_count(
    key: str, name: str, count: int, dims: int | None, collective: str, problems: Problems, comments: list[str]
) -> None:
    """``key`` lists ``count`` algorithms for ``name`` over ``dims`` dimensions: too many is a problem; too few is
    one for the workload's ``collective`` and a comment for the others."""
    if dims is not None and count > dims:
        said = f"{count} algorithms for {dims} dimension(s)"
        problems.append((key, f"{said}; ASTRA-sim takes at most one per dimension"))
    elif dims is not None and count < dims:
        said = (
            f"{count} algorithm(s) for {dims} dimensions: ASTRA-sim runs {name} over the first "
            f"{count} dimension(s) only, StrataSim would repeat the last entry"
        )
        if name == collective:
            problems.append((key, f"{said}; give one algorithm per dimension"))
        else:
            comments.append(f"{key}: {said}")


def _ignored(data: Mapping[str, Any], problems: Problems) -> list[str]:
    """Check the keys the study cannot honour or does not need; return the ignored ones worth a mention."""
    for key in _CUSTOM:
        if key in data:
            problems.append((key, f"custom collectives (Chakra ET {data[key]!r}) are not supported yet; remove it"))
    for key, why in _UNSUPPORTED.items():
        value = _get(data, key, _flag, problems)
        if value is not None and (value == 1 if key == "model-shared-bus" else value != 0):
            problems.append((key, f"set to {data[key]!r}: {why}"))
    inert = {key: _get(data, key, _text if key.endswith("filename") else _any_number, problems) for key in _INERT}
    ignored = []
    roofline = _get(data, "roofline-enabled", _flag, problems)
    if roofline:
        ignored.append(f"roofline-enabled: {data['roofline-enabled']} (prices compute nodes; the workload has none)")
        if inert["peak-perf"] is not None:
            ignored.append(f"peak-perf: {data['peak-perf']} (used by the roofline only)")
    if _get(data, "trace-enabled", _flag, problems):
        ignored.append(f"trace-enabled: {data['trace-enabled']} (ASTRA-sim's debug log)")
    for key, default in _UNREAD.items():
        if key in data and data[key] != default:
            ignored.append(f"{key}: {data[key]!r} (ASTRA-sim 2.x does not read it)")
    for key, (runs, known) in _SCHEDULERS.items():
        if key in data and data[key] != runs:
            asked = known.get(data[key]) if isinstance(data[key], str) else None
            what = f"it asks for {asked}, which" if asked else f"{data[key]!r} is not a policy ASTRA-sim knows; any"
            problems.append(
                (
                    key,
                    f"{what} StrataSim does not model, and ASTRA-sim 2.x does not read this key: it "
                    f"runs {runs!r} whatever it says. Set it to {runs!r} (or remove it) to import what "
                    "ASTRA-sim 2.x computes",
                )
            )
    return ignored


def read_system(data: object, sizes: tuple[int, ...] | None, collective: str, problems: Problems) -> SystemImport:
    """Translate a parsed system JSON for a network of ``sizes`` NPUs per dimension (None if unknown) and a
    workload of ``collective``; append every problem to ``problems``."""
    if not isinstance(data, Mapping) or not any(key in data for key in KNOWN_KEYS):
        said = f"not an ASTRA-sim system file: expected keys such as {', '.join(_REQUIRED)}; found {describe(data)}"
        problems.append(("", said))
        return SystemImport({}, ())
    problems.extend((str(key), unknown_key(str(key), KNOWN_KEYS)) for key in data if key not in KNOWN_KEYS)
    problems.extend((key, f"required ({why})") for key, why in _REQUIRED.items() if key not in data)
    comments: list[str] = []
    defaults = [
        f"{key} {value}"
        for key, value in (("endpoint-delay", "10 ns"), ("active-chunks-per-dimension", 1))
        if key not in data
    ]
    endpoint_delay = _get(data, "endpoint-delay", _whole(0, " of ns"), problems, default=10)
    local_mem_bw = _get(data, "local-mem-bw", _positive("GB/s"), problems)
    section = {
        "preset": "astra_compat",
        "algorithm": _algorithms(data, sizes, collective, problems, comments),
        "splits": _get(data, "preferred-dataset-splits", _whole(1), problems),
        "active_chunks": _get(data, "active-chunks-per-dimension", _whole(1), problems, default=1),
        "scheduling": _get(data, "scheduling-policy", _choice(_SCHEDULING, "EXPLICIT"), problems),
        "endpoint_delay": None if endpoint_delay is None else f"{endpoint_delay}ns",
        "local_mem_bw": None if local_mem_bw is None else f"{plain(local_mem_bw)}GB/s",
        "collective_optimization": _get(data, "collective-optimization", _choice(_OPTIMIZATION), problems),
    }
    ignored = _ignored(data, problems)
    if ignored:
        comments.insert(0, f"ignored ASTRA-sim keys: {'; '.join(ignored)}")
    if defaults:
        comments.append(f"not set, so ASTRA-sim's defaults are written out: {', '.join(defaults)}")
    return SystemImport({key: value for key, value in section.items() if value is not None}, tuple(comments))
