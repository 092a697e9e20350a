"""Pydantic's validation errors as the problems a study reports: ``(dotted.path, short message)`` pairs, with
a "did you mean" suggestion for unknown keys, following nested sections, lists and tagged unions."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, get_args, get_origin

from pydantic import BaseModel, Tag, ValidationError

from stratasim.kernel.errors import did_you_mean

__all__ = ["unknown_key", "validated_section"]


def _path(loc: Sequence[int | str]) -> str:
    """A pydantic location as the dotted path a user writes (``network.topology[1].bandwidth``); a mapping's key
    that is itself wrong is named by the key (pydantic adds ``[key]`` after it)."""
    text = ""
    for part in loc:
        if part == "[key]":
            continue
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _tagged(annotation: Any, tag: str) -> Any:
    """The member of a tagged union ``annotation`` whose tag is ``tag``, or None."""
    if get_origin(annotation) is Annotated:  # a union with its discriminator, as a dict's values are
        annotation = get_args(annotation)[0]
    for member in get_args(annotation):
        if any(isinstance(meta, Tag) and meta.tag == tag for meta in getattr(member, "__metadata__", ())):
            return get_args(member)[0]
    return None


def _walk(model: type[BaseModel], loc: Sequence[int | str]) -> tuple[list[int | str], list[str]]:
    """``loc`` without the tags pydantic adds for tagged unions (they are not keys), and the keys allowed where
    it points (for suggestions), following nested sections, lists, mappings and tagged unions."""
    path: list[int | str] = []
    current: Any = model
    for part in loc:
        if isinstance(part, int):
            path.append(part)
            continue
        if get_origin(current) is dict:  # a key of a mapping, then its value's type
            path.append(part)
            current = get_args(current)[1]
            continue
        member = _tagged(current, part)
        if member is not None:
            current = member
        else:
            path.append(part)
            is_model = isinstance(current, type) and issubclass(current, BaseModel)
            field = _keys(current).get(part) if is_model else None
            current = None if field is None else field.annotation
        for inner in getattr(current, "__args__", ()):  # list[X] and X | None
            if isinstance(inner, type) and issubclass(inner, BaseModel):
                current = inner
    keys = list(_keys(current)) if isinstance(current, type) and issubclass(current, BaseModel) else []
    return path, keys


def _keys(model: type[BaseModel]) -> dict[str, Any]:
    """A model's fields by the key a study writes: the field's alias where it has one (``copy`` for ``copy_``)."""
    return {field.alias or name: field for name, field in model.model_fields.items()}


def unknown_key(key: str, allowed: Sequence[str]) -> str:
    """The message for an unknown ``key``: the closest allowed key as a suggestion, and every allowed one."""
    return (
        f"unknown key; {did_you_mean(key, allowed)}expected one of {', '.join(allowed)}" if allowed else "unknown key"
    )


def _problems(exc: ValidationError, model: type[BaseModel], prefix: str) -> list[tuple[str, str]]:
    """Pydantic's errors as ``(dotted.path, short message)`` pairs under ``prefix``."""
    problems = []
    errors = exc.errors(include_url=False)
    for error in errors:
        if _echo_of_an_item(error, errors):
            continue
        path, _ = _walk(model, error["loc"])
        loc = (prefix, *path)
        kind, message = error["type"], error["msg"]
        if kind == "missing":
            message = "required"
        elif kind == "extra_forbidden":
            message = unknown_key(str(loc[-1]), _walk(model, error["loc"][:-1])[1])
        else:
            message = message.removeprefix("Value error, ").removeprefix("Assertion failed, ")
            if kind != "value_error" and isinstance(error.get("input"), (str, int, float, bool)):
                message += f", got {error['input']!r}"
        problems.append((_path(loc), message[:1].lower() + message[1:]))
    return problems


def _echo_of_an_item(error: Any, errors: Sequence[Any]) -> bool:
    """Whether ``error`` is a list's "too short after validation" that only repeats an error of one of its items
    (pydantic counts the items left once a bad one is dropped): the item's own error says what is wrong."""
    loc = tuple(error["loc"])
    return (
        error["type"] == "too_short"
        and "after validation" in error["msg"]
        and any(len(other["loc"]) > len(loc) and tuple(other["loc"][: len(loc)]) == loc for other in errors)
    )


def validated_section(model: type[BaseModel], data: object, prefix: str, problems: list[tuple[str, str]]) -> Any:
    """``data`` validated as ``model``, or None with every problem appended to ``problems`` under ``prefix``."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems.extend(_problems(exc, model, prefix))
        return None
