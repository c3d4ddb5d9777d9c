"""A declared value crosses the grading boundary as itself, and nothing else crosses.

Every type the codec carries (dates, times, datetimes with offsets,
durations, decimals, bytes, pure paths, the library's enums, dataclass,
NamedTuple and TypedDict records) survives encoding, JSON text and decoding
equal and of the same type, in both directions: the trusted side's table
holds the declared classes, the solution's side finds them by name. Decoding
is strict: an unknown tag, a type not declared, a malformed, oversized or
too deeply nested value, an enum name or value not declared, a record with
missing or unknown fields are refused with a message saying where; the
trusted side never imports anything to decode.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import importlib
import json
import re
import sys
import types
from decimal import Decimal
from pathlib import Path, PurePath, PurePosixPath, PureWindowsPath
from typing import Any, NamedTuple, TypedDict

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from agent_eval.verification.runtime.values import (
    MAX_DECIMAL_EXPONENT,
    MAX_DEPTH,
    DeclarationError,
    NonJsonValue,
    ValueRefused,
    ValueTypes,
    decode,
    encode,
    resolver,
)


class Priority(enum.Enum):
    LOW = "low"
    HIGH = "high"


class Level(enum.IntEnum):
    ONE = 1
    TWO = 2


@dataclasses.dataclass(frozen=True)
class Slot:
    day: dt.date
    length: dt.timedelta
    price: Decimal
    note: str = ""


class Point(NamedTuple):
    x: int
    y: int


class Entry(TypedDict):
    path: PurePosixPath
    size: int


DECLARED = (
    dt.date,
    dt.time,
    dt.datetime,
    dt.timedelta,
    Decimal,
    bytes,
    PurePath,
    Priority,
    Level,
    Slot,
    Point,
    Entry,
)
TRUSTED = ValueTypes.declared(DECLARED)
SOLUTION = ValueTypes.from_wire(TRUSTED.wire(), resolver(sys.modules[__name__]))
EXAMPLES = settings(max_examples=60, deadline=None)

offsets = st.timedeltas(
    min_value=-dt.timedelta(hours=23, minutes=59), max_value=dt.timedelta(hours=23, minutes=59)
).map(dt.timezone)
zones = st.none() | offsets
decimals = st.decimals(allow_nan=False, allow_infinity=False).filter(
    lambda d: abs(d.adjusted()) <= MAX_DECIMAL_EXPONENT
)
posix_paths = st.lists(st.text(st.characters(blacklist_characters="/\0"), min_size=1), max_size=4)


def across(value: Any, sender: ValueTypes = SOLUTION, receiver: ValueTypes = TRUSTED) -> Any:
    """*value* as the other side sees it, through JSON text as on the pipe."""
    return decode(json.loads(json.dumps(encode(value, sender))), receiver)


def same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b and str(a) == str(b)


@EXAMPLES
@given(st.dates())
def test_a_date_round_trips(value: dt.date) -> None:
    assert same(across(value), value) and same(across(value, TRUSTED, SOLUTION), value)


@EXAMPLES
@given(st.datetimes(timezones=zones))
@example(dt.datetime(2000, 1, 1, tzinfo=dt.timezone(dt.timedelta(microseconds=1))))
def test_a_datetime_round_trips_with_its_offset(value: dt.datetime) -> None:
    back = across(value)
    assert same(back, value) and back.utcoffset() == value.utcoffset()


@EXAMPLES
@given(st.times(timezones=zones))
@example(dt.time(tzinfo=dt.timezone(dt.timedelta(microseconds=1))))
@example(dt.time(1, tzinfo=dt.timezone(-dt.timedelta(microseconds=999_999))))
def test_a_time_round_trips_with_its_offset(value: dt.time) -> None:
    back = across(value, TRUSTED, SOLUTION)
    assert same(back, value) and back.utcoffset() == value.utcoffset()


@EXAMPLES
@given(st.timedeltas())
def test_a_duration_round_trips_to_the_microsecond(value: dt.timedelta) -> None:
    assert same(across(value), value) and same(across(value, TRUSTED, SOLUTION), value)


@EXAMPLES
@given(decimals)
def test_a_decimal_round_trips_digit_for_digit(value: Decimal) -> None:
    assert same(across(value), value) and same(across(value, TRUSTED, SOLUTION), value)


@EXAMPLES
@given(st.binary(max_size=512))
def test_bytes_round_trip(value: bytes) -> None:
    assert same(across(value), value) and across(bytearray(value)) == value


@EXAMPLES
@given(posix_paths)
def test_pure_paths_of_both_flavours_round_trip(parts: list[str]) -> None:
    posix, windows = PurePosixPath(*parts), PureWindowsPath(*parts)
    assert same(across(posix), posix) and same(across(windows, TRUSTED, SOLUTION), windows)


def test_a_concrete_path_the_solution_returns_arrives_as_a_pure_path(tmp_path: Path) -> None:
    assert same(across(tmp_path / "x.txt"), PurePosixPath(tmp_path / "x.txt"))


@EXAMPLES
@given(st.sampled_from(Priority), st.sampled_from(Level))
def test_the_librarys_enums_round_trip_by_name_and_value(prio: Priority, level: Level) -> None:
    assert across([prio, level]) == [prio, level]
    assert across({"p": prio}, TRUSTED, SOLUTION)["p"] is prio
    assert encode(prio, TRUSTED) == {"$type": "enum", "name": "Priority", "value": prio.value}


@EXAMPLES
@given(
    st.builds(Slot, st.dates(), st.timedeltas(), decimals, st.text(max_size=20)),
    st.builds(Point, st.integers(), st.integers()),
    posix_paths,
)
def test_records_round_trip_as_their_declared_type(
    slot: Slot, point: Point, parts: list[str]
) -> None:
    assert same(across(slot), slot) and same(across(slot, TRUSTED, SOLUTION), slot)
    assert same(across(point), point)
    entry = Entry(path=PurePosixPath(*parts), size=3)
    wire = {"$type": "record", "name": "Entry", "fields": encode(dict(entry), TRUSTED)}
    assert decode(wire, TRUSTED) == entry


@EXAMPLES
@given(st.dictionaries(st.sampled_from(["$type", "a", "$effect"]), st.integers()))
def test_a_plain_dict_with_a_type_key_stays_a_plain_dict(value: dict[str, int]) -> None:
    assert same(across(value), value)


def test_without_a_declaration_only_json_and_plain_dict_forms_cross() -> None:
    none = ValueTypes.declared(())
    assert across({"a": (1, "x")}, none, none) == {"a": [1, "x"]}
    with pytest.raises(NonJsonValue, match="type date at day"):
        encode(Slot(dt.date(2026, 1, 1), dt.timedelta(0), Decimal(1)), none)
    for value in (dt.date(2026, 1, 1), Decimal("1.5"), b"x", PurePosixPath("a")):
        with pytest.raises(NonJsonValue, match=type(value).__name__):
            encode(value, none)
    assert across(Priority.LOW, TRUSTED, TRUSTED) is Priority.LOW


def date_of(text: str) -> dict[str, Any]:
    return {"$type": "date", "value": text}


@pytest.mark.parametrize(
    ("wire", "message"),
    [
        ({"$type": "set", "value": [1]}, "unknown tag 'set'"),
        ({"$type": 3, "value": 1}, "unknown tag int"),
        ({"$type": "date", "value": "2026-12-03", "x": 1}, "has the keys"),
        (date_of("2026-13-01"), "not an ISO date"),
        (date_of("2026-12-03T10:00:00"), "not an ISO date"),
        (date_of("2" * 65), "longer than 64 characters"),
        ({"$type": "timedelta", "value": "5"}, "integer of microseconds"),
        ({"$type": "timedelta", "value": 10**30}, "integer of microseconds"),
        ({"$type": "timedelta", "value": True}, "integer of microseconds"),
        ({"$type": "decimal", "value": "NaN"}, "not a finite decimal"),
        ({"$type": "decimal", "value": "1" * 1001}, "longer than 1000"),
        ({"$type": "decimal", "value": 1.5}, "must be a string"),
        ({"$type": "decimal", "value": "1e1000000"}, "outside the decimal range"),
        ({"$type": "decimal", "value": "1e-99999999999999999999"}, "out of range"),
        ({"$type": "timedelta", "value": -(10**6) * 86400 * 999999999 - 1}, "out of range"),
        ({"$type": "bytes", "value": "!!"}, "not base64"),
        ({"$type": "posix-path", "value": "a" * 4097}, "longer than 4096"),
        ({"$type": "enum", "name": "os.system", "value": "ls"}, "not a declared enum type"),
        ({"$type": "enum", "name": "Slot", "value": "low"}, "not a declared enum type"),
        ({"$type": "enum", "name": "Priority", "value": "urgent"}, "'urgent' is not a value of"),
        ({"$type": "enum", "name": "Priority", "value": ["low"]}, "JSON scalar"),
        ({"$type": "enum", "name": "x" * 201, "value": 1}, "name of up to 200"),
        ({"$type": "record", "name": "Priority", "fields": {}}, "not a declared record type"),
        ({"$type": "record", "name": "Point", "fields": {"x": 1}}, "missing ['y']"),
        ({"$type": "record", "name": "Point", "fields": {"x": 1, "y": 2, "z": 3}}, "unknown ['z']"),
        ({"$type": "record", "name": "Point", "fields": [1, 2]}, "must be an object"),
        ({"$type": "map", "value": [1]}, "must be an object"),
        ({"a": [{"b": {"$type": "nope"}}]}, "a[0].b: unknown tag"),
    ],
)
def test_a_malformed_unknown_or_undeclared_value_is_refused_saying_where(
    wire: Any, message: str
) -> None:
    with pytest.raises(ValueRefused, match=re.escape(message)):
        decode(wire, TRUSTED)


def test_a_tag_of_a_type_the_task_does_not_declare_is_refused() -> None:
    only_dates = ValueTypes.declared((dt.date,))
    assert decode(date_of("2026-12-03"), only_dates) == dt.date(2026, 12, 3)
    for wire in ({"$type": "decimal", "value": "1"}, {"$type": "windows-path", "value": "a"}):
        with pytest.raises(ValueRefused, match="does not declare"):
            decode(wire, only_dates)
    posix_only = ValueTypes.declared((PurePosixPath,))
    with pytest.raises(ValueRefused, match="does not declare"):
        decode({"$type": "windows-path", "value": "a"}, posix_only)


def test_nesting_deeper_than_the_bound_is_refused_both_ways() -> None:
    wire: Any = date_of("2026-12-03")
    for _ in range(MAX_DEPTH + 2):
        wire = [wire]
    with pytest.raises(ValueRefused, match="nested deeper"):
        decode(wire, TRUSTED)
    value: Any = dt.date(2026, 12, 3)
    for _ in range(MAX_DEPTH + 2):
        value = [value]
    with pytest.raises(NonJsonValue, match="nested deeper"):
        encode(value, TRUSTED)


def test_a_record_its_declared_constructor_refuses_is_refused_not_raised() -> None:
    @dataclasses.dataclass
    class Positive:
        n: int

        def __post_init__(self) -> None:
            if self.n <= 0:
                raise ValueError("not positive")

    table = ValueTypes.declared((Positive,))
    with pytest.raises(ValueRefused, match="cannot be built: ValueError"):
        decode({"$type": "record", "name": Positive.__qualname__, "fields": {"n": 0}}, table)


def test_the_trusted_side_never_imports_to_decode(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(name: str, package: str | None = None) -> Any:
        raise AssertionError(f"imported {name}")

    monkeypatch.setattr(importlib, "import_module", refuse)
    slot = Slot(dt.date(2026, 12, 3), dt.timedelta(hours=1), Decimal("9.50"))
    assert across([slot, Priority.HIGH], SOLUTION, TRUSTED) == [slot, Priority.HIGH]
    with pytest.raises(ValueRefused):
        decode({"$type": "enum", "name": "subprocess.Popen", "value": "ls"}, TRUSTED)


WINDOW = """
import dataclasses, datetime

@dataclasses.dataclass(frozen=True)
class Window:
    start: datetime.date
"""


def module_of(name: str, source: str) -> types.ModuleType:
    """A module that, like the verifier's grader, is not importable by name."""
    made = types.ModuleType(name)
    exec(source, made.__dict__)
    return made


def test_a_type_the_grader_defines_is_found_on_the_solutions_module() -> None:
    grader, solution = module_of("task_grader", WINDOW), module_of("solution", WINDOW)
    trusted = ValueTypes.declared((grader.Window, dt.date))
    assert trusted.wire()["named"][0]["module"] is None
    side = ValueTypes.from_wire(trusted.wire(), resolver(solution))
    sent = across(grader.Window(dt.date(2026, 1, 2)), trusted, side)
    assert type(sent) is solution.Window and sent.start == dt.date(2026, 1, 2)
    returned = across(solution.Window(dt.date(2026, 1, 3)), side, trusted)
    assert type(returned) is grader.Window and returned.start == dt.date(2026, 1, 3)


def test_a_declared_type_the_solution_does_not_define_is_refused_on_its_side() -> None:
    grader = module_of("task_grader", WINDOW)
    trusted = ValueTypes.declared((grader.Window, dt.date))
    side = ValueTypes.from_wire(trusted.wire(), resolver(types.ModuleType("solution")))
    with pytest.raises(ValueRefused, match="Window cannot be found"):
        across(grader.Window(dt.date(2026, 1, 2)), trusted, side)


@pytest.mark.parametrize(
    ("declared", "message"),
    [
        ((Path,), "declare PurePosixPath"),
        ((set,), "is not a type the grading codec carries"),
        ((Slot, Slot), "two types are named 'Slot'"),
    ],
)
def test_a_declaration_of_what_the_codec_cannot_carry_is_refused(
    declared: tuple[type, ...], message: str
) -> None:
    with pytest.raises(DeclarationError, match=message):
        ValueTypes.declared(declared)


def test_a_dataclass_with_fields_its_constructor_skips_cannot_be_declared() -> None:
    @dataclasses.dataclass
    class Derived:
        a: int
        b: int = dataclasses.field(init=False, default=0)

    with pytest.raises(DeclarationError, match="constructor does not take"):
        ValueTypes.declared((Derived,))
