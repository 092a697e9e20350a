"""The network the ns3 worker runs, bound through cppyy: ``_packet_net.cpp`` compiled once into a shared library
cached under the user's cache directory, then bound from ``_packet_net.h`` alone, which names no ns-3 type.

Why: cppyy parsing ns-3's headers is what makes ns-3 slow to start. ``from ns import ns`` includes the headers of
all of ns-3's 42 modules (some 11 s of CPU; 20-25 s on a loaded 2-core machine), and compiling the network in
cppyy parses those of the three it uses again (2-3 s more). A library built by the system's C++ compiler (``$CXX``,
else ``c++``; 3-4 s of CPU, once) needs neither: a later start is importing cppyy and loading the library.

The cache: ``$XDG_CACHE_HOME/stratasim/ns3/<key>/`` (``~/.cache`` when the variable is unset), where ``key`` is a
digest of the network's source and header, the ns-3 install (its version, headers and libraries, each library's
size and time) and the compiler (its path and ``--version``) with its flags, so a changed source, ns-3 or compiler
builds a library of its own. Each library is written under a temporary name and renamed into place with its
SHA-256 beside it, so no worker loads a half-written one, and one whose digest does not match is built again;
workers starting together with no library wait for the one that compiles it (a lock file). Where the library
cannot be had (no compiler, the cache unwritable, the compiler or the loader failing), cppyy compiles the source
in the worker as before, at each start, and :func:`load` says why in its note.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Ns3Install", "cache_key", "cache_root", "find_install", "load"]

SOURCE = Path(__file__).with_name("_packet_net.cpp")
HEADER = SOURCE.with_suffix(".h")
LIBRARY = "libstratasim_ns3.so"
MODULES = ("core", "network", "point-to-point")
"""The ns-3 modules the network uses, each before those that need it."""
FLAGS = ("-std=c++20", "-O2", "-fPIC", "-shared")
_COMPILE_SECONDS = 600


@dataclass(frozen=True)
class Ns3Install:
    """Where ns-3's headers and the libraries of :data:`MODULES` (in that order) are, and its version."""

    include: Path
    libraries: tuple[Path, ...]
    version: str


def find_install() -> Ns3Install:
    """The ns-3 of the ``ns3`` wheel (``pip install 'stratasim[ns3]'``); :class:`OSError` when it is incomplete."""
    spec = importlib.util.find_spec("ns3")
    if spec is None or not spec.submodule_search_locations:
        raise OSError("ns-3's Python bindings (package ns3) are not installed")
    root = Path(next(iter(spec.submodule_search_locations)))
    for libdir in (root / "lib64", root / "lib"):
        cores = sorted(libdir.glob("libns*-core.so"))
        found = [re.fullmatch(r"libns(\d[\w.]*)-core\.so", core.name) for core in cores]
        versions = [match.group(1) for match in found if match is not None]
        if versions:
            version = versions[0]
            libraries = tuple(libdir / f"libns{version}-{module}.so" for module in MODULES)
            missing = [str(library) for library in libraries if not library.is_file()]
            if missing:
                raise OSError(f"ns-3 {version} lacks {', '.join(missing)}")
            return Ns3Install(root / "include", libraries, version)
    raise OSError(f"no ns-3 core library under {root}")


def cache_root() -> Path:
    """``$XDG_CACHE_HOME/stratasim/ns3``, or ``~/.cache/stratasim/ns3`` when the variable is unset or empty."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "stratasim" / "ns3"


def cache_key(source: bytes, header: bytes, install: Ns3Install, compiler: str) -> str:
    """The digest naming a compiled network: its source and header, the ns-3 install and the ``compiler`` (its
    path and version) with :data:`FLAGS`."""
    digest = hashlib.sha256()
    parts = [source, header, install.version.encode(), str(install.include).encode(), compiler.encode()]
    for library in install.libraries:  # where each is, and which build (a reinstall changes its time)
        stat = library.stat()
        parts.append(f"{library} {stat.st_size} {stat.st_mtime_ns}".encode())
    parts.append(" ".join(FLAGS).encode())
    for part in parts:
        digest.update(len(part).to_bytes(8, "little") + part)
    return digest.hexdigest()[:24]


def load(cppyy: Any) -> tuple[Any, str]:
    """Bind ``cppyy`` to the network; its namespace (``Build`` makes a network) and a note, empty unless the
    cached library could not be had and cppyy compiled the source instead (the note says why)."""
    install = find_install()
    cppyy.include(str(HEADER))
    try:
        cppyy.load_library(str(_library(install)))
    except (OSError, subprocess.SubprocessError, RuntimeError) as exc:
        _compile_in_cppyy(cppyy, install)
        why = (str(exc).strip().splitlines() or [type(exc).__name__])[-1][:300]
        return cppyy.gbl.stratasim_ns3, (
            f"ns3 network: no compiled network from the cache {cache_root()} ({why}); cppyy compiled it "
            "instead, which parses ns-3's headers at each start (seconds more)"
        )
    return cppyy.gbl.stratasim_ns3, ""


def _compile_in_cppyy(cppyy: Any, install: Ns3Install) -> None:
    """The slow way: cppyy parses ns-3's headers and compiles the source, bound to ns-3's libraries."""
    cppyy.add_include_path(str(install.include))
    cppyy.add_include_path(str(SOURCE.parent))
    for library in install.libraries:
        cppyy.load_library(str(library))
    cppyy.cppdef(SOURCE.read_text(encoding="utf-8"))


def _library(install: Ns3Install) -> Path:
    """The cached library of the network, compiled first unless a sound one is there. One worker compiles it;
    others starting meanwhile wait for it (a lock file beside it), then load what it built."""
    compiler = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")
    if not compiler:
        raise OSError("no C++ compiler: set CXX or install c++")
    version = subprocess.run([compiler, "--version"], capture_output=True, text=True, check=True, timeout=60)
    source, header = SOURCE.read_bytes(), HEADER.read_bytes()
    directory = cache_root() / cache_key(source, header, install, f"{compiler}\n{version.stdout}")
    library = directory / LIBRARY
    if _sound(library):
        return library
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / "lock", "wb") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not _sound(library):
            _compile(compiler, install, library)
    return library


def _compile(compiler: str, install: Ns3Install, library: Path) -> None:
    """Compile the network into ``library``, its SHA-256 beside it, both renamed into place when whole."""
    with tempfile.TemporaryDirectory(dir=library.parent, prefix="build-") as scratch:
        built = Path(scratch) / LIBRARY
        command = [compiler, *FLAGS, f"-I{SOURCE.parent}", f"-I{install.include}", str(SOURCE), "-o", str(built)]
        command += [*map(str, install.libraries), f"-Wl,-rpath,{install.libraries[0].parent}"]
        done = subprocess.run(command, capture_output=True, text=True, timeout=_COMPILE_SECONDS)
        if done.returncode != 0:
            said = [line for line in done.stderr.splitlines() if line.strip()]
            raise OSError(f"{Path(compiler).name} failed: {said[-1] if said else done.returncode}")
        (Path(scratch) / "sha256").write_text(_sha256(built))
        os.replace(built, library)
        os.replace(Path(scratch) / "sha256", _digest_of(library))


def _sound(library: Path) -> bool:
    """Whether ``library`` is there whole: its SHA-256 matches the one written beside it."""
    digest = _digest_of(library)
    return library.is_file() and digest.is_file() and digest.read_text().strip() == _sha256(library)


def _digest_of(library: Path) -> Path:
    return library.with_name(f"{library.name}.sha256")


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
