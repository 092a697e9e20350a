"""Running a sweep's trials on a Dask ``distributed`` scheduler (``stratasim sweep --cluster ADDRESS``).

Each trial is one task; the results come back as they finish and are kept in the store by the process that
submitted them, so the store and a resumed run behave as with local workers. Dask is the ``explore`` extra.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from stratasim.kernel.errors import StrataSimError

__all__ = ["on_cluster"]

_CONNECT_TIMEOUT = "10s"


def on_cluster(
    address: str, calls: Sequence[tuple[Any, ...]], task: Callable[..., Any], keep: Callable[[Any], None]
) -> None:
    """Run ``task(*call)`` for each of ``calls`` on the scheduler at ``address``, calling ``keep`` with each result
    as it finishes; an unreachable scheduler is one error naming it."""
    try:
        from distributed import Client, as_completed
    except ImportError:
        raise StrataSimError("--cluster needs Dask's distributed: pip install 'stratasim[explore]'") from None
    try:
        client = Client(address, timeout=_CONNECT_TIMEOUT, set_as_default=False)
    except (OSError, TimeoutError, ValueError) as exc:
        raise StrataSimError(f"--cluster {address}: cannot reach a Dask scheduler there ({exc})") from None
    try:
        futures = [client.submit(task, *call, pure=False) for call in calls]
        try:
            with client.as_current():
                for future in as_completed(futures):
                    keep(future.result())
        except BaseException:
            client.cancel(futures)
            raise
    finally:
        client.close()
