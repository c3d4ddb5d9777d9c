"""A built-in reference runner's name is reserved however it is spelled: case, Unicode
compatibility forms, look-alike letters, any dash, underscore or space between its
words, invisible characters. The registry never reviews such a runner, and the checker
treats its batch as self-test; other names are not touched."""

from __future__ import annotations

import tomllib

import pytest
import tomli_w
from hypothesis import given
from hypothesis import strategies as st

from agent_eval.errors import EvidenceError
from agent_eval.reference import is_reference_name, self_test_reasons
from agent_eval.verdict.registry import parse_registry
from tests.evidence_builders import REGISTRY

SPELLINGS = [
    "agent-eval-oracle",
    "Agent-Eval-Oracle",
    "AGENT-EVAL-MUTANT",
    "agent\u2010eval\u2010oracle",  # Unicode hyphens
    "agent\u2212eval\u2212null",  # minus signs
    "\u0430gent-eval-oracle",  # a Cyrillic a
    "ag\u0435nt-\u0435val-oracle",  # Cyrillic e
    "agent_eval_oracle",
    "agent eval oracle",
    "agent--eval--oracle",
    "a\u200bgent-eval-oracle",  # a zero-width space
    "\uff41gent-eval-oracle",  # a fullwidth a (NFKC)
    " agent-eval-oracle",
]


@pytest.mark.parametrize("name", SPELLINGS)
def test_every_spelling_of_a_reserved_name_is_reserved_and_self_test(name: str) -> None:
    assert is_reference_name(name)
    assert self_test_reasons([name], None)[0].startswith(f"the runner {name!r}")


@pytest.mark.parametrize("name", ["claude-code", "codex", "agent-evaluator", "eval-agent", "aider"])
def test_other_names_are_not_reserved(name: str) -> None:
    assert not is_reference_name(name)


@given(st.text(alphabet=st.characters(codec="ascii", categories=["L", "N"]), max_size=20))
def test_a_name_without_the_prefix_is_never_reserved(name: str) -> None:
    if not name.lower().startswith("agenteval"):
        assert not is_reference_name(name)


@pytest.mark.parametrize("name", SPELLINGS)
def test_the_registry_never_reviews_a_reserved_name_however_spelled(name: str) -> None:
    data = tomllib.loads(REGISTRY.decode())
    data["runner"][0]["runner"]["name"] = name
    with pytest.raises(EvidenceError, match="is reserved"):
        parse_registry(tomli_w.dumps(data).encode(), "reviewed-runners.toml")
