"""One server built and run from its options (:class:`ServeOptions`): what ``stratasim serve`` runs once its command
line is read, and what a spawned server runs — forked from the run (:mod:`stratasim.remote.forked`), or as ``python
-m stratasim.remote.serve_main OPTIONS`` (:mod:`stratasim.remote.launch`), its options one JSON argument.

It imports gRPC, the registry and the backends served, no more (a compute backend's section adds pydantic), so a
spawned server listens within a fraction of a second.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stratasim.kernel import registry
from stratasim.kernel.errors import BackendError, StrataSimError
from stratasim.remote.serve_options import TOKEN_ENV, ServeOptions

if TYPE_CHECKING:
    from stratasim.compute_layer.backend_section import BackendSection
    from stratasim.remote.security import ServerSecurity

__all__ = ["main", "run", "serve_with", "server_security"]


def serve_with(options: ServeOptions, factories: Mapping[str, Callable[..., Any]] | None = None) -> None:
    """Serve as ``options`` say until SIGTERM or SIGINT; :class:`StrataSimError` for bad options, before listening
    (a layer named twice, an unknown backend, a bad profile table). The compute backend reads what it needs of its
    section (a study's, whose other backends may read the rest); ``factories`` adds backends by name (the serving
    layer's study opener, which the command line gives)."""
    from stratasim import remote  # gRPC is only needed when serving

    also = [] if options.also is None else [options.also]
    if also and also[0][0] == options.layer:
        raise StrataSimError(f"--also: {options.layer} is served already; name the other layer")
    compute = dict([(options.layer, options.backend), *also]).get("compute")
    orphaned = threading.Event()
    if options.spawned_in is not None:
        _stop_when_orphaned(orphaned)
    try:
        remote.serve(
            options.layer,
            options.backend,
            options.listen,
            factories={**(factories or {}), **(_compute_factory(compute, options.section) or {})},
            also=also,
            security=server_security(options),
            limits=options.limits,
            study_root=None if options.study_root is None else Path(options.study_root),
        )
    finally:
        if orphaned.is_set() and options.spawned_in is not None:
            shutil.rmtree(options.spawned_in, ignore_errors=True)


def _stop_when_orphaned(orphaned: threading.Event) -> None:
    """Watch stdin, the pipe the spawning run holds open: once it closes (the run died, whatever killed it), set
    ``orphaned`` and stop this server as SIGTERM does. A pipe, not Linux's parent-death signal: it works wherever
    the server runs, forked or started as a new interpreter, and a closed pipe cannot be missed."""

    def watch() -> None:
        try:
            while os.read(0, 4096):
                pass
        except OSError:  # stdin closed or unreadable: no run to watch any more
            pass
        orphaned.set()
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="stratasim-watch-run", daemon=True).start()


def _compute_factory(compute: str | None, section: BackendSection | None) -> dict[str, Callable[[], Any]] | None:
    """The compute backend ``compute`` built from ``section``, ahead of the registry's (which builds it with its
    defaults); None without a section. The server builds it before listening: a bad section fails there."""
    if section is None or compute is None:
        return None
    factory = registry.load("compute", compute)

    def build() -> Any:
        try:
            return factory(section)
        except ValueError as exc:  # a value the backend cannot take, e.g. an objective its mapper does not know
            raise BackendError(f"compute backend {compute!r}: {exc}") from None

    return {compute: build}


def server_security(options: ServeOptions) -> ServerSecurity:
    """The server's TLS material and token from the files ``options`` name (and ``$STRATASIM_TOKEN``), every file
    read now: a missing one fails before listening, naming its option."""
    from stratasim.remote.security import ServerSecurity, read_pem, token_from

    if (options.tls_cert is None) != (options.tls_key is None):
        raise StrataSimError("--tls-cert and --tls-key go together: give both for TLS, or neither")
    if options.tls_client_ca is not None and options.tls_cert is None:
        raise StrataSimError("--tls-client-ca asks clients for certificates over TLS: give --tls-cert and --tls-key")
    env = TOKEN_ENV if options.token_file is None and TOKEN_ENV in os.environ else None
    token = token_from(options.token_file, env, what_file="--token-file", what_env="the server's token")
    return ServerSecurity(
        token=token,
        certificate=None if options.tls_cert is None else read_pem(options.tls_cert, "--tls-cert"),
        private_key=None if options.tls_key is None else read_pem(options.tls_key, "--tls-key", key=True),
        client_ca=None if options.tls_client_ca is None else read_pem(options.tls_client_ca, "--tls-client-ca"),
    )


def run(options: ServeOptions) -> int:
    """:func:`serve_with`, for a spawned server: 0 when stopped, 2 with one ``error: ...`` line for bad options."""
    try:
        serve_with(options)
    except StrataSimError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m stratasim.remote.serve_main OPTIONS``: serve as the JSON ``OPTIONS`` (:meth:`ServeOptions.to_json`)
    say; 2 with one ``error: ...`` line when they cannot be read."""
    arguments = sys.argv[1:] if argv is None else list(argv)
    try:
        if len(arguments) != 1:
            raise ValueError(f"expected one argument, the options as JSON; got {len(arguments)}")
        options = ServeOptions.from_json(arguments[0])
    except (ValueError, KeyError, TypeError) as exc:
        print(f"error: malformed server options: {exc}", file=sys.stderr)
        return 2
    return run(options)


if __name__ == "__main__":
    # The backends are closed and the server stopped by now: exit without the interpreter's teardown (gRPC's
    # threads, numpy), some tens of milliseconds a run spawning this server would otherwise wait for.
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
