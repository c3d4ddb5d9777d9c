"""What a solution can write to its child's pipe instead of the child's own frames.

Hypothesis strategies of byte scripts: well-framed messages of every op the
protocol knows (and others) with arbitrary JSON fields, values with lone
surrogates (as JSON escapes, or raw, which is not UTF-8), huge and deep
values, tagged values right and wrong, unknown and out-of-order ops, frames
truncated or announcing more than the limit, and plain garbage. Used in
process against the parent (``test_parent_hostile_frames``) and, as a fixed
corpus drawn once, by the hostile-frame suite in the verifier container.
"""

from __future__ import annotations

import json
import struct
from typing import Any

from hypothesis import strategies as st

__all__ = ["OPS", "frame", "json_values", "messages", "protocol_messages", "scripts"]

OPS = (
    "return",
    "raise",
    "fail",
    "effect",
    "ready",
    "isolated",
    "import-error",
    "sweep-error",
    "isolation-error",
    "call",
    "effect-result",
    "effect-error",
)
"""Every op of the protocol, in both directions: any of them may come at any time."""

_HEADER = struct.Struct(">I")

_characters = st.one_of(
    st.characters(),
    st.integers(0xD800, 0xDFFF).map(chr),  # lone surrogates: valid JSON escapes, not text
    st.sampled_from(["\x00", "\n", "\u202e", "\ufeff", "$", '"', "\\"]),
)
texts = st.text(_characters, max_size=40)
"""Strings as a solution may send them: any code point, lone surrogates included."""

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    texts,
)


def _tagged(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    tags = st.sampled_from(
        [
            *("date", "datetime", "time", "timedelta", "decimal", "bytes", "posix-path"),
            *("map", "enum", "record", "windows-path", "nope"),
        ]
    )
    return st.one_of(
        st.fixed_dictionaries({"$type": tags, "value": children}),
        st.fixed_dictionaries({"$type": tags, "name": texts, "fields": children}),
        st.fixed_dictionaries({"$type": children}),
        st.fixed_dictionaries({"$effect": st.sampled_from(["send", "other"])}),
    )


json_values: st.SearchStrategy[Any] = st.recursive(
    _scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=5),
        st.dictionaries(texts, children, max_size=5),
        _tagged(children),
    ),
    max_leaves=25,
)
"""JSON values of any shape a parser gives, with tagged values right and wrong."""

# Mostly the ids and ops the parent waits for, so that most frames reach its handling.
_ids = st.one_of(st.just(1), st.just(2), st.integers(0, 3), json_values)
_ops = st.one_of(st.sampled_from(OPS[:4]), st.sampled_from(OPS), json_values)
_names = st.one_of(st.sampled_from(["send", "other", "x" * 65, "", "send\n"]), texts)

messages: st.SearchStrategy[dict[str, Any]] = st.fixed_dictionaries(
    {"op": _ops},
    optional={
        "id": _ids,
        "call": _ids,
        "value": json_values,
        "message": st.one_of(texts, json_values),
        "type": st.one_of(texts, json_values),
        "mro": st.one_of(st.lists(texts, max_size=70), json_values),
        "attributes": st.one_of(
            st.dictionaries(st.sampled_from(["code", "field", "errors", "x"]), json_values),
            json_values,
        ),
        "effect": st.one_of(_names, json_values),
        "args": st.one_of(st.lists(json_values, max_size=4), json_values),
        "kwargs": st.one_of(st.dictionaries(texts, json_values, max_size=3), json_values),
    },
)
"""Messages of any op with any fields: the protocol's own shapes and everything else."""

protocol_messages: st.SearchStrategy[dict[str, Any]] = st.one_of(
    st.fixed_dictionaries(
        {"op": st.sampled_from(["fail", "import-error", "sweep-error"]), "message": texts},
        optional={"id": st.just(1), "mro": st.lists(texts, max_size=3)},
    ),
    st.fixed_dictionaries(
        {
            "op": st.just("raise"),
            "id": st.just(1),
            "type": texts,
            "message": texts,
            "mro": st.lists(texts, max_size=3),
            "attributes": st.dictionaries(st.sampled_from(["code", "field"]), json_values),
        }
    ),
    st.fixed_dictionaries({"op": st.just("return"), "id": st.just(1), "value": json_values}),
    st.fixed_dictionaries(
        {
            "op": st.just("effect"),
            "call": st.just(1),
            "effect": _names,
            "args": st.lists(json_values, max_size=3),
            "kwargs": st.dictionaries(texts, json_values, max_size=2),
        }
    ),
)
"""Messages of the protocol's own shapes, with any text and values in them."""


def frame(body: bytes) -> bytes:
    """*body* as one frame: its length, then its bytes."""
    return _HEADER.pack(len(body)) + body


def _json_bytes(value: Any, ascii_only: bool) -> bytes:
    text = json.dumps(value, ensure_ascii=ascii_only, separators=(",", ":"))
    # Without escapes a lone surrogate is written raw: bytes that are not UTF-8.
    return text.encode("utf-8", "surrogatepass")


@st.composite
def _message_frame(draw: st.DrawFn) -> bytes:
    shaped = draw(st.one_of(protocol_messages, messages))
    return frame(_json_bytes(shaped, draw(st.booleans())))


_deep = st.integers(60, 3000).map(
    lambda n: frame(b'{"op":"return","id":1,"value":' + b"[" * n + b"]" * n + b"}")
)
_wide = st.integers(1, 60_000).map(
    lambda n: frame(b'{"op":"return","id":1,"value":[' + b",".join([b"{}"] * n) + b"]}")
)
_bad_bodies = st.sampled_from(
    [
        b'{"op":"return","id":1,"value":' + b"9" * 5000 + b"}",  # past int's digit limit
        b'{"op":"return","id":1,"value":1e999}',  # a float that parses as infinity
        b'{"op":"return","id":1,"value":NaN}',
        b'{"op":"fail","id":1,"message":"bad \\ud800"}',
        b'{"op":"fail","id":1,"message":"bad \xed\xa0\x80"}',  # a surrogate as UTF-8 bytes
        b'{"op":"effect","call":1,"effect":"send","args":["\\udfff"],"kwargs":{}}',
        b"\xff\xfe{}",
        b"[]",
        b'"ready"',
        b"",
        b'{"op":"return","id":1,"value":"ok"',
        b'{"op":"return","id":1,"id":2,"value":"ok"}',
    ]
).map(frame)
_truncated = st.tuples(st.integers(1, 1 << 16), st.binary(max_size=64)).map(
    lambda pair: _HEADER.pack(pair[0] + len(pair[1])) + pair[1]
)
_oversized = st.integers((1 << 20) + 1, (1 << 32) - 1).map(_HEADER.pack)
_ready = st.just(frame(b'{"op":"ready"}'))
_returns = st.builds(
    lambda call, value: frame(_json_bytes({"op": "return", "id": call, "value": value}, True)),
    st.integers(1, 3),
    st.one_of(st.just("ok"), json_values),
)

chunks = st.one_of(
    _message_frame(),
    _message_frame(),
    _returns,
    _ready,
    _bad_bodies,
    _deep,
    _wide,
    _truncated,
    _oversized,
    st.binary(max_size=32),
)
"""One piece of what a solution writes: a frame of some kind, or raw bytes."""

scripts = st.lists(chunks, max_size=6).map(b"".join)
"""Everything a solution writes to its pipe in one scenario."""
