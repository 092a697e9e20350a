"""A package's public names imported from their modules when first asked for (PEP 562), so that importing the
package stays light: a command that needs none of them never loads their modules."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(package: str, homes: Mapping[str, str]) -> Callable[[str], Any]:
    """The module ``__getattr__`` of ``package``: each name of ``homes`` imported from its home module (a path
    relative to ``package``) on first use and then kept on the package; any other name an ``AttributeError``."""

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{home}"), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
