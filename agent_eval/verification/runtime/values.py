"""Values beyond JSON across the grading boundary: a tagged encoding of declared types.

A grader declares the types its calls carry (``Grader.value_types``); only
those cross, in both directions (arguments and effect results to the
solution, return values and effect arguments back). On the wire a value of
such a type is a JSON object with a ``$type`` tag::

    {"$type": "date", "value": "2026-12-03"}
    {"$type": "datetime", "value": "2026-12-03T16:30:00+01:00"}
    {"$type": "time", "value": "16:30:00"}
    {"$type": "timedelta", "value": 5400000000}          (microseconds)
    {"$type": "decimal", "value": "12.50"}
    {"$type": "bytes", "value": "aGk="}                  (base64)
    {"$type": "posix-path", "value": "a/b.txt"}          (also windows-path)
    {"$type": "enum", "name": "Priority", "value": "high"}
    {"$type": "record", "name": "Slot", "fields": {...}}
    {"$type": "map", "value": {...}}                     (a dict with a "$type" key)

Enums and records are named by their ``__qualname__``. Decoding is strict:
an unknown tag, a tag of a type not declared, a malformed or oversized
value, a record with missing or extra fields are refused with a
:class:`ValueRefused` naming where. The trusted side only ever builds the
classes the grader declared (looked up by name in its own table); nothing
the other side sends is imported, evaluated or unpickled. In the solution's
process a declared enum or record is found by its module and name (a type the
grader defines itself is looked up on the solution's module instead).

Standard library only: staged into the sandbox beside ``codec``.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import datetime as dt
import decimal
import enum
import gc
import importlib
import math
import re
import sys
import typing
from collections.abc import Callable, Iterable, Mapping
from pathlib import PurePath, PurePosixPath, PureWindowsPath
from typing import Any, Literal

__all__ = [
    "MAX_DECIMAL_EXPONENT",
    "MAX_DEPTH",
    "NO_TYPES",
    "DeclarationError",
    "NonJsonValue",
    "ValueRefused",
    "ValueTypes",
    "decode",
    "encode",
]

TYPE_KEY = "$type"
MAX_DEPTH = 64
"""Deepest nesting of lists, objects, records and tags a value may have."""
MAX_TEXT_CHARS = 64
"""Longest ISO form of a date, time or datetime."""
MAX_DECIMAL_CHARS = 1000
MAX_DECIMAL_EXPONENT = decimal.DefaultContext.Emax
"""A decimal's adjusted exponent is within the default context's range, so the
grader's arithmetic on it cannot overflow the context or take unbounded time."""
MAX_PATH_CHARS = 4096
MAX_NAME_CHARS = 200
_DECIMAL = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")
_SCALAR_TAGS: dict[type, tuple[str, ...]] = {
    dt.datetime: ("datetime",),
    dt.date: ("date",),
    dt.time: ("time",),
    dt.timedelta: ("timedelta",),
    decimal.Decimal: ("decimal",),
    bytes: ("bytes",),
    PurePosixPath: ("posix-path",),
    PureWindowsPath: ("windows-path",),
    PurePath: ("posix-path", "windows-path"),
}
_TIMEDELTA_MAX_US = (dt.timedelta.max.days * 86400 + 86399) * 10**6 + 999999

Shape = Literal["enum", "dataclass", "namedtuple", "typeddict"]
Resolve = Callable[[str | None, str], object]
"""Finds a declared type in the solution's process: (module or None, qualname) -> class."""


class NonJsonValue(TypeError):
    """A value has no form across the boundary (not JSON-native and not a declared type)."""

    def __init__(self, type_name: str, where: str) -> None:
        super().__init__(f"a non-JSON value of type {type_name}{where}")
        self.type_name = type_name


class ValueRefused(ValueError):
    """An encoded value cannot be decoded: unknown tag, undeclared type, malformed, oversized."""

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(f"{where or 'the value'}: {problem}")


class DeclarationError(TypeError):
    """A grader's ``value_types`` names something the codec cannot carry."""


@dataclasses.dataclass
class _Named:
    """A declared enum or record type."""

    shape: Shape
    name: str
    module: str | None
    fields: tuple[str, ...] = ()
    required: tuple[str, ...] = ()
    cls: object = None

    @property
    def kind(self) -> str:
        return "enum" if self.shape == "enum" else "record"


def _shape_of(cls: object) -> Shape | None:
    if isinstance(cls, type) and issubclass(cls, enum.Enum):
        return "enum"
    if isinstance(cls, type) and dataclasses.is_dataclass(cls):
        return "dataclass"
    if isinstance(cls, type) and issubclass(cls, tuple) and hasattr(cls, "_fields"):
        return "namedtuple"
    if typing.is_typeddict(cls):
        return "typeddict"
    return None


def _named(cls: type, shape: Shape) -> _Named:
    name = cls.__qualname__
    module = cls.__module__ if cls.__module__ in sys.modules else None
    if shape == "dataclass":
        fields = dataclasses.fields(cls)
        if any(not f.init for f in fields):
            raise DeclarationError(f"the dataclass {name} has fields its constructor does not take")
        names = tuple(f.name for f in fields)
        required = tuple(
            f.name
            for f in fields
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        )
        return _Named(shape, name, module, names, required, cls)
    if shape == "namedtuple":
        names = tuple(cls._fields)  # type: ignore[attr-defined]
        defaults = getattr(cls, "_field_defaults", {})
        return _Named(shape, name, module, names, tuple(n for n in names if n not in defaults), cls)
    if shape == "typeddict":
        names = tuple(cls.__annotations__)
        required = tuple(n for n in names if n in cls.__required_keys__)  # type: ignore[attr-defined]
        return _Named(shape, name, module, names, required, cls)
    return _Named(shape, name, module, (), (), cls)


class ValueTypes:
    """The types beyond JSON one task's calls may carry, and how to find their classes.

    Built from the grader's declaration on the trusted side (:meth:`declared`),
    from its wire form in the solution's process (:meth:`from_wire`).
    """

    def __init__(
        self, tags: Iterable[str], named: Iterable[_Named], resolve: Resolve | None = None
    ) -> None:
        self.tags = frozenset(tags)
        self.named = {entry.name: entry for entry in named}
        self._resolve = resolve

    @classmethod
    def declared(cls, types: Iterable[object]) -> ValueTypes:
        """The table of a grader's ``value_types``.

        Raises:
            DeclarationError: An entry is not a supported scalar type, enum,
                dataclass, NamedTuple or TypedDict, or two share a name.
        """
        tags: set[str] = set()
        named: dict[str, _Named] = {}
        for declared in types:
            if isinstance(declared, type) and declared in _SCALAR_TAGS:
                tags.update(_SCALAR_TAGS[declared])
                continue
            shape = _shape_of(declared)
            if shape is None or not isinstance(declared, type):
                hint = (
                    " (paths cross as pure paths: declare PurePosixPath or PurePath)"
                    if isinstance(declared, type) and issubclass(declared, PurePath)
                    else ""
                )
                raise DeclarationError(
                    f"value_types: {declared!r} is not a type the grading codec carries "
                    "(date, time, datetime, timedelta, Decimal, bytes, a pure path, an enum, "
                    f"a dataclass, a NamedTuple or a TypedDict){hint}"
                )
            entry = _named(declared, shape)
            if entry.name in named:
                raise DeclarationError(f"value_types: two types are named {entry.name!r}")
            named[entry.name] = entry
        return cls(tags, named.values())

    def wire(self) -> dict[str, Any]:
        """The declaration as the solution's process receives it (names, never classes)."""
        return {
            "tags": sorted(self.tags),
            "named": [
                {
                    "shape": e.shape,
                    "name": e.name,
                    "module": e.module,
                    "fields": list(e.fields),
                    "required": list(e.required),
                }
                for e in self.named.values()
            ],
        }

    @classmethod
    def from_wire(cls, data: object, resolve: Resolve) -> ValueTypes:
        """The table the trusted side sent; classes are found through *resolve* when first used."""
        if not isinstance(data, dict):
            return cls((), ())
        entries = [
            _Named(
                shape=e["shape"],
                name=str(e["name"]),
                module=None if e.get("module") is None else str(e["module"]),
                fields=tuple(map(str, e.get("fields", ()))),
                required=tuple(map(str, e.get("required", ()))),
            )
            for e in data.get("named", ())
            if isinstance(e, dict) and e.get("shape") in typing.get_args(Shape)
        ]
        return cls(map(str, data.get("tags", ())), entries, resolve)

    def class_of(self, entry: _Named, where: str) -> Any:
        """The class of a declared type, resolved once (in the solution's process, by name)."""
        if entry.cls is None and self._resolve is not None:
            try:
                found = self._resolve(entry.module, entry.name)
            except Exception as exc:
                raise ValueRefused(
                    where, f"the declared type {entry.name} cannot be found: {exc}"
                ) from None
            if _shape_of(found) != entry.shape:
                raise ValueRefused(where, f"{entry.name} is not the declared {entry.shape}")
            entry.cls = found
        if entry.cls is None:
            raise ValueRefused(where, f"the declared type {entry.name} cannot be found")
        return entry.cls

    def entry_for(self, value: object) -> _Named | None:
        """The declared enum or record *value* is an instance of, matched by name and shape."""
        entry = self.named.get(type(value).__qualname__)
        if entry is None:
            return None
        shape = _shape_of(type(value))
        if entry.shape == "enum":
            return entry if shape == "enum" else None
        return entry if shape in ("dataclass", "namedtuple") else None


NO_TYPES = ValueTypes((), ())
"""No declared types: only JSON crosses."""


def resolver(solution: object) -> Resolve:
    """Find declared types in the solution's process: by module, else on *solution*."""

    def resolve(module: str | None, qualname: str) -> object:
        target: object = solution if module is None else importlib.import_module(module)
        for part in qualname.split("."):
            target = getattr(target, part)
        return target

    return resolve


# -- encoding ----------------------------------------------------------------------------


def _at(where: str) -> str:
    return f" at {where.lstrip('.')}" if where else ""


def _scalar(value: object) -> tuple[str, Any] | None:
    """(tag, wire value) of a scalar the codec knows, or None."""
    if isinstance(value, dt.datetime):
        return "datetime", value.isoformat()
    if isinstance(value, dt.date):
        return "date", value.isoformat()
    if isinstance(value, dt.time):
        return "time", value.isoformat()
    if isinstance(value, dt.timedelta):
        return "timedelta", (value.days * 86400 + value.seconds) * 10**6 + value.microseconds
    if isinstance(value, decimal.Decimal):
        return "decimal", str(value)
    if isinstance(value, bytes | bytearray):
        return "bytes", base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, PureWindowsPath):
        return "windows-path", str(value)
    if isinstance(value, PurePath):
        return "posix-path", str(value)
    return None


def encode(value: Any, types: ValueTypes = NO_TYPES, *, _depth: int = 0, _where: str = "") -> Any:
    """The wire form of *value*: JSON, with declared types tagged.

    Tuples become lists; an undeclared dataclass or object with ``to_dict()``
    becomes its dict form. Anything else, an undeclared scalar type, non-string
    dict keys, NaN/Infinity and nesting deeper than ``MAX_DEPTH`` raise
    NonJsonValue.
    """
    if _depth > MAX_DEPTH:
        raise NonJsonValue(f"nested deeper than {MAX_DEPTH} levels", _at(_where))
    deeper = _depth + 1
    entry = types.entry_for(value)
    if entry is not None:
        if entry.shape == "enum":
            member = value.value
            if member is not None and not isinstance(member, str | int | float | bool):
                raise NonJsonValue(f"{type(value).__qualname__} (a non-JSON member)", _at(_where))
            return {TYPE_KEY: "enum", "name": entry.name, "value": encode(member, _where=_where)}
        fields = _fields(value) if dataclasses.is_dataclass(value) else dict(value._asdict())
        record = encode(fields, types, _depth=deeper, _where=_where)
        return {TYPE_KEY: "record", "name": entry.name, "fields": record}
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise NonJsonValue(f"float ({value})", _at(_where))
        return float(value)
    scalar = _scalar(value)
    if scalar is not None:
        tag, wire = scalar
        if tag not in types.tags:
            raise NonJsonValue(type(value).__qualname__, _at(_where))
        if tag == "decimal" and not _decimal_in_range(value, wire):
            raise NonJsonValue(f"Decimal ({bounded_repr(wire)})", _at(_where))
        return {TYPE_KEY: tag, "value": wire}
    if isinstance(value, list | tuple):
        return [
            encode(item, types, _depth=deeper, _where=f"{_where}[{i}]")
            for i, item in enumerate(value)
        ]
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise NonJsonValue(f"dict key {type(key).__name__}", _at(_where))
            out[key] = encode(item, types, _depth=deeper, _where=f"{_where}.{key}")
        return {TYPE_KEY: "map", "value": out} if TYPE_KEY in out else out
    to_dict = getattr(type(value), "to_dict", None)
    if callable(to_dict):
        return encode(value.to_dict(), types, _depth=deeper, _where=_where)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return encode(_fields(value), types, _depth=deeper, _where=_where)
    raise NonJsonValue(type(value).__qualname__, _at(_where))


def _decimal_in_range(value: decimal.Decimal, text: str) -> bool:
    return (
        value.is_finite()
        and len(text) <= MAX_DECIMAL_CHARS
        and abs(value.adjusted()) <= MAX_DECIMAL_EXPONENT
    )


def _fields(value: Any) -> dict[str, Any]:
    return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}


def bounded_repr(text: str, limit: int = 40) -> str:
    """*text* quoted and cut, for a message about a refused value."""
    return repr(text if len(text) <= limit else text[:limit] + "...")


# -- decoding ----------------------------------------------------------------------------
#
# Decoding runs in the trusted parent on whatever the solution sends, so its cost
# is linear in the value's size: a location ("a[0].b") is a chain of (parent, step)
# pairs, made in constant time per container and turned into text only when a
# value is refused, with each key cut to a few characters.

Location = tuple[Any, "str | int"] | None
"""Where a value sits in the whole: None at the top, else (the parent's location, key or index)."""
_SHOWN_KEY_CHARS = 40


def _place(location: Location) -> str:
    """The text of *location*: ``a[0].b`` (long keys cut), ``the value`` at the top."""
    steps: list[str] = []
    while location is not None:
        location, step = location
        if isinstance(step, int):
            steps.append(f"[{step}]")
        else:
            shown = step if len(step) <= _SHOWN_KEY_CHARS else step[:_SHOWN_KEY_CHARS] + "..."
            steps.append(f".{shown}")
    return "".join(reversed(steps)).lstrip(".") or "the value"


def _refused(location: Location, problem: str) -> ValueRefused:
    return ValueRefused(_place(location), problem)


def _only(data: dict[str, Any], keys: set[str], tag: str, at: Location) -> None:
    if len(data) != len(keys) or any(k not in data for k in keys):
        keys_given = [bounded_repr(k) for k in sorted(data)[:8]]
        raise _refused(at, f"a {tag!r} value has the keys {keys_given}, not {sorted(keys)}")


def _text(data: dict[str, Any], limit: int, tag: str, at: Location) -> str:
    text = data["value"]
    if not isinstance(text, str):
        raise _refused(at, f"a {tag!r} value must be a string")
    if len(text) > limit:
        raise _refused(at, f"a {tag!r} value is longer than {limit} characters")
    return text


def _decode_scalar(tag: str, data: dict[str, Any], at: Location) -> Any:
    if tag == "timedelta":
        micro = data["value"]
        if not isinstance(micro, int) or isinstance(micro, bool) or abs(micro) > _TIMEDELTA_MAX_US:
            raise _refused(at, "a 'timedelta' value must be an integer of microseconds")
        return dt.timedelta(microseconds=micro)
    if tag == "decimal":
        text = _text(data, MAX_DECIMAL_CHARS, tag, at)
        if not _DECIMAL.fullmatch(text):
            raise _refused(at, f"{bounded_repr(text)} is not a finite decimal")
        number = decimal.Decimal(text)
        if not _decimal_in_range(number, text):
            raise _refused(at, f"{bounded_repr(text)} is outside the decimal range")
        return number
    if tag == "bytes":
        text = _text(data, sys.maxsize, tag, at)
        try:
            return base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError):
            raise _refused(at, "a 'bytes' value is not base64") from None
    if tag in ("posix-path", "windows-path"):
        text = _text(data, MAX_PATH_CHARS, tag, at)
        return PurePosixPath(text) if tag == "posix-path" else PureWindowsPath(text)
    parse: type[dt.date | dt.time] = {"date": dt.date, "time": dt.time, "datetime": dt.datetime}[
        tag
    ]
    text = _text(data, MAX_TEXT_CHARS, tag, at)
    try:
        parsed = parse.fromisoformat(text)
    except ValueError:
        raise _refused(at, f"{bounded_repr(text)} is not an ISO {tag}") from None
    if tag == "date" and isinstance(parsed, dt.datetime):
        raise _refused(at, f"{bounded_repr(text)} is not an ISO date")
    if isinstance(parsed, dt.datetime | dt.time) and parsed.utcoffset() == dt.timedelta(0):
        # Python 3.11 reads an offset under a second ("+00:00:00.000001") as UTC itself.
        written = _SUB_SECOND_OFFSET.search(text)
        if written is not None:
            sign = -1 if written["sign"] == "-" else 1
            offset = dt.timedelta(microseconds=sign * int(written["micro"]))
            return parsed.replace(tzinfo=dt.timezone(offset))
    return parsed


_SUB_SECOND_OFFSET = re.compile(r"(?P<sign>[+-])00:00:00\.(?P<micro>[0-9]{6})$")


_SCALAR_NAMES = frozenset(t for tags in _SCALAR_TAGS.values() for t in tags)


def _declared(types: ValueTypes, data: dict[str, Any], kind: str, at: Location) -> _Named:
    name = data["name"]
    if not isinstance(name, str) or len(name) > MAX_NAME_CHARS:
        raise _refused(at, f"an {kind!r} value needs a name of up to {MAX_NAME_CHARS} chars")
    entry = types.named.get(name)
    if entry is None or entry.kind != kind:
        raise _refused(at, f"{bounded_repr(name)} is not a declared {kind} type")
    return entry


def _decode_enum(types: ValueTypes, data: dict[str, Any], at: Location) -> Any:
    _only(data, {TYPE_KEY, "name", "value"}, "enum", at)
    entry = _declared(types, data, "enum", at)
    member = data["value"]
    if member is not None and not isinstance(member, str | int | float | bool):
        raise _refused(at, f"an {entry.name} value must be a JSON scalar")
    cls = types.class_of(entry, _place(at))
    try:
        return cls(member)
    except Exception:  # the enum's own lookup refused the value
        shown = bounded_repr(member) if isinstance(member, str) else repr(member)
        raise _refused(at, f"{shown} is not a value of {entry.name}") from None


def _decode_record(types: ValueTypes, data: dict[str, Any], depth: int, at: Location) -> Any:
    _only(data, {TYPE_KEY, "name", "fields"}, "record", at)
    entry = _declared(types, data, "record", at)
    given = data["fields"]
    if not isinstance(given, dict):
        raise _refused(at, f"the fields of an {entry.name} must be an object")
    missing = [f for f in entry.required if f not in given]
    if missing or len(given) > len(entry.fields) or any(f not in entry.fields for f in given):
        extra = sorted(f for f in given if f not in entry.fields)
        raise _refused(
            at,
            f"an {entry.name} needs the fields {list(entry.fields)}: "
            f"missing {missing}, unknown {[f[:40] for f in extra[:8]]}",
        )
    fields = _decode_object(given, types, depth, at)
    if entry.shape == "typeddict":
        return fields
    cls = types.class_of(entry, _place(at))
    try:
        return cls(**fields)
    except Exception as exc:  # the declared constructor refused the fields
        problem = f"an {entry.name} cannot be built: {type(exc).__name__}"
        raise _refused(at, problem) from None


def _decode_list(items: list[Any], types: ValueTypes, depth: int, at: Location) -> list[Any]:
    if items and depth >= MAX_DEPTH:
        raise _refused((at, 0), f"nested deeper than {MAX_DEPTH} levels")
    out: list[Any] = []
    append = out.append
    deeper = depth + 1
    for i, item in enumerate(items):
        kind = type(item)
        if kind is str or kind is int or kind is bool or item is None:
            append(item)
        elif kind is list:
            append(_decode_list(item, types, deeper, (at, i)))
        elif kind is dict and TYPE_KEY not in item:
            append(_decode_object(item, types, deeper, (at, i)))
        else:
            append(_decode(item, types, deeper, (at, i)))
    return out


def _decode_object(
    items: dict[str, Any], types: ValueTypes, depth: int, at: Location
) -> dict[str, Any]:
    if items and depth >= MAX_DEPTH:
        raise _refused((at, next(iter(items))), f"nested deeper than {MAX_DEPTH} levels")
    out: dict[str, Any] = {}
    deeper = depth + 1
    for key, item in items.items():
        kind = type(item)
        if kind is str or kind is int or kind is bool or item is None:
            out[key] = item
        elif kind is list:
            out[key] = _decode_list(item, types, deeper, (at, key))
        elif kind is dict and TYPE_KEY not in item:
            out[key] = _decode_object(item, types, deeper, (at, key))
        else:
            out[key] = _decode(item, types, deeper, (at, key))
    return out


def _decode(data: Any, types: ValueTypes, depth: int, at: Location) -> Any:
    if depth > MAX_DEPTH:
        raise _refused(at, f"nested deeper than {MAX_DEPTH} levels")
    if data is None or isinstance(data, bool | int | str):
        return data
    if isinstance(data, float):
        if not math.isfinite(data):
            raise _refused(at, f"{data} is not JSON")
        return data
    if isinstance(data, list):
        return _decode_list(data, types, depth, at)
    if not isinstance(data, dict):
        raise _refused(at, f"a {type(data).__name__} is not JSON")
    if TYPE_KEY not in data:
        return _decode_object(data, types, depth, at)
    tag = data[TYPE_KEY]
    if tag == "map":
        _only(data, {TYPE_KEY, "value"}, "map", at)
        inner = data["value"]
        if not isinstance(inner, dict):
            raise _refused(at, "a 'map' value must be an object")
        return _decode_object(inner, types, depth, at)
    if tag == "enum":
        return _decode_enum(types, data, at)
    if tag == "record":
        return _decode_record(types, data, depth, at)
    if not isinstance(tag, str) or tag not in _SCALAR_NAMES:
        shown = bounded_repr(tag) if isinstance(tag, str) else type(tag).__name__
        raise _refused(at, f"unknown tag {shown}")
    _only(data, {TYPE_KEY, "value"}, tag, at)
    if tag not in types.tags:
        raise _refused(at, f"a {tag!r} value, a type the task does not declare")
    try:
        return _decode_scalar(tag, data, at)
    except (ArithmeticError, ValueError) as exc:
        if isinstance(exc, ValueRefused):
            raise
        # A value the checks above let through that the type itself refuses
        # (an exponent or a duration out of range): refused, never raised on.
        raise _refused(at, f"a {tag!r} value out of range: {type(exc).__name__}") from None


def decode(data: Any, types: ValueTypes = NO_TYPES) -> Any:
    """The value *data* (parsed JSON) encodes; see the module docstring for the tags.

    Takes time linear in the size of *data*, whatever its shape: it runs in the
    trusted parent on what the solution sent.

    Raises:
        ValueRefused: An unknown tag, a type not in *types*, a malformed or
            oversized value, nesting deeper than ``MAX_DEPTH``.
    """
    # Decoding makes no reference cycles: the collector, which a value of many
    # small containers would set off again and again, waits until it is done.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _decode(data, types, 0, None)
    finally:
        if collecting:
            gc.enable()
