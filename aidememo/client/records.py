"""`Record`: the base of the client's typed answers, on the standard library only.

A record class lists its fields as annotations (a default makes one optional); parsing a JSON
answer checks each field against its annotation (`str`, `int`, `float`, `bool`, `Any`, `None`,
unions, `Literal[...]`, `list[...]` and nested records) and ignores fields the class does not
name, so a client keeps working against a server that added one. Records are frozen values:
equal when their fields are. The methods keep the names pydantic gives them
(`model_validate`, `model_validate_json`, `model_dump`, `model_copy`), so code written against
pydantic models runs unchanged, while an agent command pays for none of pydantic's import
(its models cost most of a command's start-up). Each class reads its annotations once, when
it first parses.
"""

from __future__ import annotations

import json
import types
import typing
from collections.abc import Callable
from typing import Any, ClassVar, Literal, TypeVar, dataclass_transform

R = TypeVar("R", bound="Record")
Check = Callable[[Any, str], Any]
_MISSING: Any = object()


class RecordError(ValueError):
    """An answer that does not fit the record: `where` names the field (dotted path)."""


def _fail(where: str, what: str, value: Any) -> RecordError:
    shown = repr(value)
    return RecordError(f"{where or 'the answer'}: expected {what}, got {shown[:60]}")


def _scalar(kind: type) -> Check:
    def check(value: Any, where: str) -> Any:
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            return float(value)
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise _fail(where, kind.__name__, value)
        return value

    return check


def _checker(hint: Any) -> Check:
    """The check of one annotation."""
    if hint is Any:
        return lambda value, where: value
    if hint is type(None) or hint is None:
        return _scalar(type(None))
    if isinstance(hint, type) and issubclass(hint, Record):
        return hint._parse
    if hint in (str, int, float, bool):
        return _scalar(hint)
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is Literal:
        allowed, kinds = args, {type(arg) for arg in args}

        def literal(value: Any, where: str) -> Any:
            if value not in allowed or type(value) not in kinds:
                raise _fail(where, f"one of {list(allowed)}", value)
            return value

        return literal
    if origin is list:
        item = _checker(args[0])

        def items(value: Any, where: str) -> Any:
            if not isinstance(value, list):
                raise _fail(where, "a list", value)
            return [item(v, f"{where}[{i}]") for i, v in enumerate(value)]

        return items
    if origin in (types.UnionType, typing.Union):
        options = [_checker(arg) for arg in args]

        def union(value: Any, where: str) -> Any:
            for option in options:
                try:
                    return option(value, where)
                except RecordError:
                    continue
            raise _fail(where, " or ".join(_name(arg) for arg in args), value)

        return union
    raise TypeError(f"a record field cannot be annotated {hint!r}")


def _name(hint: Any) -> str:
    return "null" if hint is type(None) else getattr(hint, "__name__", str(hint))


def _dump(value: Any) -> Any:
    if isinstance(value, Record):
        return value.model_dump()
    if isinstance(value, list):
        return [_dump(v) for v in value]
    return value


@dataclass_transform(kw_only_default=True, frozen_default=True)
class Record:
    """A frozen, typed value parsed from a JSON object (see the module's docstring)."""

    _fields: ClassVar[dict[str, tuple[Check, Any]] | None] = None

    @classmethod
    def _schema(cls) -> dict[str, tuple[Check, Any]]:
        fields = cls.__dict__.get("_fields")
        if fields is None:
            hints = typing.get_type_hints(cls)
            fields = {
                name: (_checker(hint), getattr(cls, name, _MISSING))
                for name, hint in hints.items()  # a base class's fields first
                if not name.startswith("_") and typing.get_origin(hint) is not ClassVar
            }
            cls._fields = fields
        return fields

    def __init__(self, **values: Any) -> None:
        for name, (_, default) in self._schema().items():
            value = values.pop(name, default)
            if value is _MISSING:
                raise TypeError(f"{type(self).__name__} needs {name}")
            object.__setattr__(self, name, value)
        if values:
            raise TypeError(f"{type(self).__name__} has no field {next(iter(values))}")

    @classmethod
    def _parse(cls: type[R], value: Any, where: str = "") -> R:
        if isinstance(value, cls):
            return value
        if not isinstance(value, dict):
            raise _fail(where, f"a {cls.__name__} object", value)
        record = cls.__new__(cls)
        for name, (check, default) in cls._schema().items():
            inner = f"{where}.{name}" if where else name
            found = value.get(name, _MISSING)
            if found is _MISSING:
                if default is _MISSING:
                    raise RecordError(f"{inner}: missing")
                found = default
            else:
                found = check(found, inner)
            object.__setattr__(record, name, found)
        return record

    @classmethod
    def model_validate(cls: type[R], value: Any) -> R:
        """The record of a decoded JSON object; `RecordError` when it does not fit."""
        return cls._parse(value)

    @classmethod
    def model_validate_json(cls: type[R], data: bytes | str) -> R:
        """The record of a JSON text; `RecordError` when it is not JSON or does not fit."""
        try:
            value = json.loads(data)
        except ValueError as exc:
            raise RecordError(f"not JSON: {exc}") from None
        return cls._parse(value)

    def model_dump(self, *, mode: str = "json") -> dict[str, Any]:
        """The fields as a JSON-ready dict (records and lists of them dumped too)."""
        return {name: _dump(getattr(self, name)) for name in self._schema()}

    def model_copy(self: R, *, update: dict[str, Any] | None = None) -> R:
        """A copy with the fields of `update` replaced (not checked, as with pydantic)."""
        copy = type(self).__new__(type(self))
        for name in self._schema():
            object.__setattr__(copy, name, getattr(self, name))
        for name, value in (update or {}).items():
            object.__setattr__(copy, name, value)
        return copy

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Record) or type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in self._schema())

    def __hash__(self) -> int:
        return hash((type(self), *(_frozen(getattr(self, n)) for n in self._schema())))

    def __repr__(self) -> str:
        inner = ", ".join(f"{n}={getattr(self, n)!r}" for n in self._schema())
        return f"{type(self).__name__}({inner})"


def _frozen(value: Any) -> Any:
    return tuple(_frozen(v) for v in value) if isinstance(value, list) else value
