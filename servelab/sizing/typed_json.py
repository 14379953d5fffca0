"""Read a JSON object into a frozen dataclass, by the dataclass's own annotations: the one JSON edge of plans.

Handles what plan types hold: int, float (a JSON integer is taken as a float), str, bool, `object` (any JSON
value, as it is), `X | None`, unions of those, `tuple[X, ...]`, `dict[str, X]` and nested dataclasses. An
absent field takes the dataclass's default; absent and without one, it is missing. Unknown keys are ignored.
A wrong type or a missing field is a one-line ConfigError naming the field, e.g. "plans[0].context is a
string, not an integer".
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Mapping
from typing import Any, TypeVar, Union, cast, get_args, get_origin, get_type_hints

from servelab.errors import ConfigError

T = TypeVar("T")
_NONE = type(None)
_KIND_NAMES = {
    int: "an integer",
    float: "a number",
    str: "a string",
    bool: "a boolean",
    tuple: "a list",
    dict: "an object",
}


def json_kind(value: object) -> str:
    """What a JSON value is, in words for a message: "a list", "a string", "null" …"""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, Mapping):
        return "an object"
    # "a null", as the messages of plan files have always said
    return {str: "a string", _NONE: "a null"}.get(type(value), type(value).__name__)


def from_json(cls: type[T], data: object, where: str = "") -> T:
    """`cls` (a dataclass) from the JSON object `data`; `where` names it in messages ("plans[0]")."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where or 'the value'} is {json_kind(data)}, not an object")
    hints = get_type_hints(cls)
    values: dict[str, Any] = {}
    missing = []
    for field in dataclasses.fields(cls):  # type: ignore[arg-type]
        if field.name in data:
            values[field.name] = _read(hints[field.name], data[field.name], _at(where, field.name))
        elif field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
            missing.append(field.name)
    if missing:
        raise ConfigError(f"{where or 'the object'} lacks {', '.join(missing)}")
    return cls(**values)


def _at(where: str, name: str) -> str:
    """The name of a field inside `where`: "plans[0].context"; after a "FILE:" prefix, "FILE: model"."""
    if not where:
        return name
    return f"{where} {name}" if where.endswith(":") else f"{where}.{name}"


def _read(hint: Any, value: object, where: str) -> Any:
    origin = get_origin(hint)
    if origin in (Union, types.UnionType):
        return _read_union(get_args(hint), value, where)
    if not _takes(hint, value):
        raise ConfigError(f"{where} is {json_kind(value)}, not {_describe(hint)}")
    if origin is tuple:
        (item, _) = get_args(hint)
        return tuple(_read(item, v, f"{where}[{i}]") for i, v in enumerate(cast("list[object]", value)))
    if origin is dict:
        (_, item) = get_args(hint)
        entries = cast("Mapping[str, object]", value)
        return {str(k): _read(item, v, _at(where, str(k))) for k, v in entries.items()}
    if dataclasses.is_dataclass(hint):
        return from_json(hint, value, where)  # type: ignore[arg-type]
    return float(value) if hint is float else value  # type: ignore[arg-type]


def _read_union(options: tuple[Any, ...], value: object, where: str) -> Any:
    for option in options:
        if _takes(option, value):
            return _read(option, value, where)
    named = " or ".join(_describe(o) for o in options if o is not _NONE)
    raise ConfigError(f"{where} is {json_kind(value)}, not {named}")


def _takes(hint: Any, value: object) -> bool:
    """Whether `value` is the JSON kind `hint` reads (its items are checked as they are read)."""
    origin = get_origin(hint) or hint
    if hint is object:
        return True
    if hint is _NONE:
        return value is None
    if isinstance(value, bool):
        return hint is bool
    if hint is float:
        return isinstance(value, int | float)
    if origin is tuple:
        return isinstance(value, list | tuple)
    if origin is dict or dataclasses.is_dataclass(hint):
        return isinstance(value, Mapping)
    return isinstance(value, origin)


def _describe(hint: Any) -> str:
    origin = get_origin(hint) or hint
    return "an object" if dataclasses.is_dataclass(hint) else _KIND_NAMES.get(origin, str(hint))
