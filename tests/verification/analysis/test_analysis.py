"""Static analysis of a submission: every finding lands in its own category, nothing is executed.

Rule: a file that does not parse is ``syntax``; mypy's complaints about calls
are ``wrong-arguments`` and the rest ``type-error``; an import outside
``allowedImports`` is ``missing-dependency``; a library name, module or member
that the catalog lacks is ``unsupported-api`` (counted once per distinct
symbol), and ``hallucinated`` unless it is a declared seed reference left
exactly as the starter had it; a required symbol counts only when used as a
value (call, construction, argument, decorator, kept to be called), never when
merely imported, annotated or used under ``TYPE_CHECKING``; each contract
export must exist with a compatible signature. The result validates as
``Analysis``.

Each scenario below is one analysis (one mypy run) checked from several sides.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agent_eval.digests import solution_digest, solution_files
from agent_eval.models.analysis import Analysis
from agent_eval.models.task import TaskSpec
from agent_eval.verification.analysis import AnalysisInputError, analyse_solution, seeded_references
from tests.paths import DATA, REPO

SAMPLE_SRC = DATA / "analysis" / "samplekit" / "src"
PACKAGES = REPO / "packages"

CONTRACT = """\
from typing import Any
from samplekit import ValidationResult

def check_order(data: dict[str, Any], *, strict: bool = False) -> ValidationResult: ...

class OrderBook:
    owner: str
    def __init__(self, owner: str) -> None: ...
    def add(self, order: dict[str, Any]) -> int: ...
    @property
    def count(self) -> int: ...

LIMIT: int
"""

CLEAN = """\
from typing import Any

from samplekit import RetryError, ValidationResult, create_validator
from samplekit.retry import traced
from samplekit.validation import Validator

from helpers import LIMIT

_validator = create_validator({"id": int})
_check = _validator.validate


def check_order(data: dict[str, Any], *, strict: bool = False) -> ValidationResult:
    return _check(data)


@traced
def label(order: dict[str, Any]) -> str:
    return str(order.get("id"))


class OrderBook:
    def __init__(self, owner: str) -> None:
        self.owner = owner
        self.make_empty = Validator.empty
        self._orders: list[dict[str, Any]] = []

    def add(self, order: dict[str, Any]) -> int:
        if not check_order(order).ok:
            raise RetryError(1)
        self._orders.append(order)
        return len(self._orders)

    @property
    def count(self) -> int:
        return len(self._orders)


def describe_all(rules: list[dict[str, type]]) -> list[str]:
    return list(map(Validator.describe, rules))
"""


HELPERS = """\
LIMIT = 5
"""


def make_task(**overrides: Any) -> dict[str, Any]:
    task: dict[str, Any] = {
        "schemaVersion": 1,
        "id": "core-validation",
        "title": "Validate orders",
        "allowedOutputPaths": ["solution.py"],
        "allowedImports": ["samplekit/*"],
        "requiredPeers": [],
        "assertionIds": ["orders.valid"],
        "safetyAssertionIds": [],
        "seedReferences": [],
        "requiredIntegration": [],
    }
    task.update(overrides)
    TaskSpec.model_validate(task)  # every task used here is a valid task.json
    return task


def write_files(root: Path, files: dict[str, str]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return root


def generate_catalog(
    work: Path, name: str, version: str, package: str, src: Path
) -> dict[str, Any]:
    """Catalogue *src* as if installed: a dist-info beside it, the generator in a subprocess."""
    info = work / "site" / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (info / "top_level.txt").write_text(f"{package}\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(map(str, [REPO, info.parent, src])))
    command = [sys.executable, "-m", "agent_eval.consumer.catalog", "--distribution", name]
    command += ["--output-dir", str(work / "out")]
    subprocess.run(command, check=True, capture_output=True, env=env, timeout=120)
    catalog: dict[str, Any] = json.loads((work / "out" / "api-catalog.json").read_text("utf-8"))
    return catalog


@pytest.fixture(scope="module")
def sample_catalog(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    work = tmp_path_factory.mktemp("catalog")
    return generate_catalog(work, "samplekit", "1.2.3", "samplekit", SAMPLE_SRC)


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Shared so that mypy's cache of the standard library is built once per module.
    return tmp_path_factory.mktemp("scratch")


def analyse(
    tmp_path: Path,
    catalog: dict[str, Any],
    scratch: Path,
    files: dict[str, str],
    *,
    task: dict[str, Any] | None = None,
    contract: str | None = None,
    starter: dict[str, str] | None = None,
) -> dict[str, Any]:
    solution = write_files(tmp_path / "solution", files)
    contract_path = None
    if contract is not None:
        contract_path = tmp_path / "contract.pyi"
        contract_path.write_text(contract, encoding="utf-8")
    starter_dir = write_files(tmp_path / "starter", starter) if starter is not None else None
    result = analyse_solution(
        task or make_task(),
        solution,
        catalog,
        scratch_dir=scratch,
        contract_path=contract_path,
        starter_dir=starter_dir,
        search_path=[SAMPLE_SRC],
    )
    Analysis.model_validate(result)
    return result


def categories(result: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {}
    for diagnostic in result["diagnostics"]:
        found.setdefault(diagnostic["category"], []).append(diagnostic)
    return found


# --------------------------------------------------------------------------- a clean solution


@pytest.fixture(scope="module")
def clean(
    tmp_path_factory: pytest.TempPathFactory, sample_catalog: dict[str, Any], scratch: Path
) -> dict[str, Any]:
    task = make_task(
        allowedOutputPaths=["solution.py", "helpers.py"],
        requiredIntegration=[
            {"symbols": ["create_validator"]},
            {"symbols": ["Validator.validate"]},
            {"symbols": ["samplekit.retry.traced"]},
            {"symbols": ["Validator.describe"]},
            {"symbols": ["samplekit.validation.Validator.empty"]},
            {"symbols": ["RetryError", "Validator"]},
        ],
    )
    return analyse(
        tmp_path_factory.mktemp("clean"),
        sample_catalog,
        scratch,
        {"solution.py": CLEAN, "helpers.py": HELPERS},
        task=task,
        contract=CONTRACT,
    )


def test_a_clean_solution_passes_every_check_with_no_diagnostic(clean: dict[str, Any]) -> None:
    # Its LIMIT comes from its own second module: a local import, re-exported.
    assert clean["diagnostics"] == []
    assert Analysis.model_validate(clean).passed
    assert clean["unsupportedApiCount"] == clean["hallucinatedApiCount"] == 0
    assert clean["mypyVersion"]


def test_calls_aliases_decorators_arguments_and_kept_callables_are_value_uses(
    clean: dict[str, Any],
) -> None:
    assert [item["satisfied"] for item in clean["integration"]] == [True] * 6
    assert clean["integrationOk"]


def test_the_solution_digest_is_that_of_its_files(clean: dict[str, Any], tmp_path: Path) -> None:
    solution = write_files(tmp_path, {"solution.py": CLEAN, "helpers.py": HELPERS})
    assert clean["solutionDigest"] == solution_digest(solution_files(solution))


# --------------------------------------------------------------------------- syntax


def test_a_syntax_error_is_reported_with_its_line_and_nothing_is_type_checked(
    tmp_path: Path, sample_catalog: dict[str, Any], scratch: Path
) -> None:
    task = make_task(allowedOutputPaths=["solution.py", "helpers.py"])
    result = analyse(
        tmp_path,
        sample_catalog,
        scratch,
        {
            "solution.py": "def f(:\n    pass\n",
            "helpers.py": "x = 1\nreturn x\n",
        },
        task=task,
    )
    found = categories(result)
    assert set(found) == {"syntax"}
    assert {(d["path"], d["line"]) for d in found["syntax"]} == {
        ("solution.py", 1),
        ("helpers.py", 2),
    }
    assert not result["syntaxOk"]
    assert not result["typeCheckOk"]


# --------------------------------------------------------------------------- one file, many faults

FAULTY = """\
import requests
import yaml
import samplekit.nothing
from samplekit import nope
from samplekit._engine import Engine
from samplekit import Validator, create_validator
import samplekit.validation


def go() -> None:
    v = Validator({"a": int})
    v.valdiate({})
    samplekit.validation.missing_fn()
    samplekit.validation.missing_fn()
    create_validator({"a": int}, strictly=True)
    create_validator()
    count: int = "three"  # type: ignore
    print(Engine, nope, requests, yaml, count)


open(__file__ + ".ran", "w").close()


def loop(validators: list[Validator]) -> None:
    for each in validators:
        each.nope()
"""


@pytest.fixture(scope="module")
def faulty_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("faulty")


@pytest.fixture(scope="module")
def faulty(faulty_dir: Path, sample_catalog: dict[str, Any], scratch: Path) -> dict[str, Any]:
    return analyse(faulty_dir, sample_catalog, scratch, {"solution.py": FAULTY})


def test_the_solution_is_never_executed(
    faulty: dict[str, Any], faulty_dir: Path, scratch: Path
) -> None:
    assert faulty["typeCheckOk"] is False  # mypy did run on it
    assert not list(faulty_dir.rglob("*.ran"))
    assert not list(scratch.rglob("*.ran"))


def test_wrong_arguments_are_their_own_category(faulty: dict[str, Any]) -> None:
    lines = {d["line"] for d in categories(faulty)["wrong-arguments"]}
    assert lines == {15, 16}


def test_other_type_errors_are_type_errors_and_type_ignore_does_not_hide_them(
    faulty: dict[str, Any],
) -> None:
    assert [d["line"] for d in categories(faulty)["type-error"]] == [17]
    assert not faulty["typeCheckOk"]


def test_imports_outside_allowed_imports_are_missing_dependencies(faulty: dict[str, Any]) -> None:
    assert faulty["missingDependencies"] == ["requests", "yaml"]
    assert {d["line"] for d in categories(faulty)["missing-dependency"]} == {1, 2}


def test_unsupported_modules_names_and_members_are_counted_once_each(
    faulty: dict[str, Any],
) -> None:
    assert faulty["unsupportedApi"] == [
        "samplekit._engine",
        "samplekit.nope",
        "samplekit.nothing",
        "samplekit.validation.Validator.nope",
        "samplekit.validation.Validator.valdiate",
        "samplekit.validation.missing_fn",
    ]
    assert faulty["unsupportedApiCount"] == 6
    assert faulty["hallucinatedApi"] == faulty["unsupportedApi"]
    # Every line that references one is shown (uses of a bad import included).
    lines = sorted(d["line"] for d in categories(faulty)["unsupported-api"])
    assert lines == [3, 4, 5, 12, 13, 14, 18, 18, 26]


def test_members_only_the_type_checker_resolves_count_as_unsupported(
    faulty: dict[str, Any],
) -> None:
    (found,) = [d for d in categories(faulty)["unsupported-api"] if d["line"] == 26]
    assert '"Validator" has no attribute "nope"' in found["message"]


def test_categories_stay_separate(faulty: dict[str, Any]) -> None:
    assert set(categories(faulty)) == {
        "type-error",
        "wrong-arguments",
        "missing-dependency",
        "unsupported-api",
    }
    assert faulty["syntaxOk"] and faulty["contractOk"] and faulty["integrationOk"]


# --------------------------------------------------------------------------- seed references

STARTER = """\
from samplekit import fetch_all
from samplekit.validation import strict_validator as sv
import samplekit.legacy


def run() -> None:
    raise NotImplementedError
"""

SEEDED = """\
from samplekit import fetch_all
from samplekit.validation import strict_validator as strict
import samplekit.legacy


def run() -> None:
    samplekit.legacy.go()
    samplekit.validation.also_missing()
"""


@pytest.fixture(scope="module")
def seeded(
    tmp_path_factory: pytest.TempPathFactory, sample_catalog: dict[str, Any], scratch: Path
) -> dict[str, Any]:
    task = make_task(
        seedReferences=[
            "samplekit.fetch_all",
            "samplekit.validation.strict_validator",
            "samplekit.legacy",
        ]
    )
    return analyse(
        tmp_path_factory.mktemp("seeded"),
        sample_catalog,
        scratch,
        {"solution.py": SEEDED},
        task=task,
        starter={"solution.py": STARTER},
    )


def test_the_starters_references_are_listed_as_the_seed_references_must_be_spelled(
    tmp_path: Path, sample_catalog: dict[str, Any]
) -> None:
    starter = write_files(tmp_path, {"solution.py": STARTER})
    assert seeded_references(sample_catalog, starter, ["solution.py"]) == [
        "samplekit.fetch_all",
        "samplekit.legacy",
        "samplekit.validation.strict_validator",
    ]


def test_every_unsupported_reference_counts_seeded_or_not(seeded: dict[str, Any]) -> None:
    assert seeded["unsupportedApi"] == [
        "samplekit.fetch_all",
        "samplekit.legacy",
        "samplekit.validation.also_missing",
        "samplekit.validation.strict_validator",
    ]


def test_a_seed_reference_left_as_seeded_is_not_hallucinated(seeded: dict[str, Any]) -> None:
    assert "samplekit.fetch_all" not in seeded["hallucinatedApi"]


def test_a_seed_reference_with_an_edited_alias_is_hallucinated(seeded: dict[str, Any]) -> None:
    assert "samplekit.validation.strict_validator" in seeded["hallucinatedApi"]


def test_a_new_use_of_a_seed_reference_is_hallucinated(seeded: dict[str, Any]) -> None:
    assert "samplekit.legacy" in seeded["hallucinatedApi"]
    assert "samplekit.validation.also_missing" in seeded["hallucinatedApi"]
    assert seeded["hallucinatedApiCount"] == 3


# --------------------------------------------------------------------------- required integration

NOT_INTEGRATED = """\
from typing import TYPE_CHECKING

from samplekit import create_validator
from samplekit.validation import Validator

if TYPE_CHECKING:
    from samplekit import RetryError
    from samplekit.retry import retry

    retry(3)

_unused = create_validator
create_validator


def f(v: Validator, e: "RetryError") -> "Validator | None":
    return None
"""


@pytest.fixture(scope="module")
def not_integrated(
    tmp_path_factory: pytest.TempPathFactory, sample_catalog: dict[str, Any], scratch: Path
) -> dict[str, Any]:
    task = make_task(
        allowedOutputPaths=["solution.py", "helpers.py"],
        requiredIntegration=[
            {"symbols": ["create_validator"]},
            {"symbols": ["Validator"]},
            {"symbols": ["RetryError"]},
            {"symbols": ["retry"]},
            {"symbols": ["Validator.validate"]},
        ],
    )
    return analyse(
        tmp_path_factory.mktemp("integration"),
        sample_catalog,
        scratch,
        {"solution.py": NOT_INTEGRATED},
        task=task,
    )


def test_imports_annotations_and_type_checking_uses_do_not_satisfy_integration(
    not_integrated: dict[str, Any],
) -> None:
    assert [item["satisfied"] for item in not_integrated["integration"]] == [False] * 5
    assert not not_integrated["integrationOk"]
    messages = {
        d["message"].split("`")[1]: d["message"] for d in categories(not_integrated)["integration"]
    }
    assert len(messages) == 5
    assert "imported at solution.py:3" in messages["create_validator"]
    assert "bound to a name that is never called" in messages["create_validator"]
    assert "referenced without being called" in messages["create_validator"]
    assert "used only in an annotation" in messages["Validator"]
    assert "used only in an annotation at solution.py:16" in messages["RetryError"]
    assert "used only under TYPE_CHECKING" in messages["retry"]
    assert "never referenced" in messages["Validator.validate"]


def test_missing_integration_is_its_own_category(not_integrated: dict[str, Any]) -> None:
    assert set(categories(not_integrated)) == {"integration"}
    assert not_integrated["typeCheckOk"]


# --------------------------------------------------------------------------- contract

MISMATCHED = """\
from typing import Any

from samplekit import ValidationResult, create_validator


def check_order(data: list[Any]) -> ValidationResult:
    return create_validator({}).validate({})


class OrderBook:
    def __init__(self, owner: int) -> None:
        self.owner = str(owner)

    def add(self, order: dict[str, Any]) -> str:
        return "added"
"""


@pytest.fixture(scope="module")
def mismatched(
    tmp_path_factory: pytest.TempPathFactory, sample_catalog: dict[str, Any], scratch: Path
) -> dict[str, Any]:
    return analyse(
        tmp_path_factory.mktemp("contract"),
        sample_catalog,
        scratch,
        {"solution.py": MISMATCHED},
        contract=CONTRACT,
    )


def contract_messages(result: dict[str, Any], export: str) -> list[str]:
    return [
        d["message"]
        for d in categories(result).get("contract-mismatch", [])
        if f"`{export}`" in d["message"]
    ]


def test_a_missing_export_is_a_contract_mismatch(mismatched: dict[str, Any]) -> None:
    (message,) = contract_messages(mismatched, "LIMIT")
    assert "not defined at module level of solution.py" in message


def test_an_incompatible_function_signature_is_a_contract_mismatch(
    mismatched: dict[str, Any],
) -> None:
    (message,) = contract_messages(mismatched, "check_order")
    assert "contract signature of check_order" in message
    assert "_agent_eval" not in message


def test_an_incompatible_class_is_a_contract_mismatch_for_constructor_and_members(
    mismatched: dict[str, Any],
) -> None:
    text = "\n".join(contract_messages(mismatched, "OrderBook"))
    assert "contract constructor of OrderBook" in text
    assert "def add(self, order: dict[str, Any]) -> int" in text
    assert "count" in text


def test_contract_findings_are_only_contract_mismatches(mismatched: dict[str, Any]) -> None:
    assert set(categories(mismatched)) == {"contract-mismatch"}
    assert not mismatched["contractOk"]
    assert not mismatched["typeCheckOk"]
    assert all(d["path"] == "solution.py" for d in mismatched["diagnostics"])


def test_a_missing_solution_file_fails_the_contract_without_type_checking(
    tmp_path: Path, sample_catalog: dict[str, Any], scratch: Path
) -> None:
    result = analyse(tmp_path, sample_catalog, scratch, {}, contract=CONTRACT)
    assert not result["contractOk"]
    assert not result["typeCheckOk"]
    assert "was not submitted" in result["diagnostics"][0]["message"]


# --------------------------------------------------------------------------- inputs and CLI


def test_an_invalid_task_is_an_input_error(
    tmp_path: Path, sample_catalog: dict[str, Any], scratch: Path
) -> None:
    with pytest.raises(AnalysisInputError, match="allowedOutputPaths"):
        analyse_solution(
            {"id": "x", "allowedOutputPaths": ["../x.py"]},
            write_files(tmp_path / "s", {}),
            sample_catalog,
            scratch_dir=scratch,
        )


def test_the_command_line_writes_analysis_json_and_refuses_bad_input(
    tmp_path: Path, sample_catalog: dict[str, Any]
) -> None:
    (tmp_path / "task.json").write_text(json.dumps(make_task()), encoding="utf-8")
    (tmp_path / "catalog.json").write_text(json.dumps(sample_catalog), encoding="utf-8")
    write_files(tmp_path / "solution", {"solution.py": "def broken(:\n"})
    command = [
        sys.executable,
        "-m",
        "agent_eval.verification.analysis",
        "--task",
        str(tmp_path / "task.json"),
        "--solution",
        str(tmp_path / "solution"),
        "--catalog",
        str(tmp_path / "catalog.json"),
        "--scratch",
        str(tmp_path / "scratch"),
        "--output",
        str(tmp_path / "analysis.json"),
    ]
    env = dict(os.environ, PYTHONPATH=str(REPO))
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    written = Analysis.model_validate_json((tmp_path / "analysis.json").read_text("utf-8"))
    assert not written.syntaxOk
    command[command.index("--catalog") + 1] = str(tmp_path / "missing.json")
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 2
    assert "cannot read the API catalog" in done.stderr


# --------------------------------------------------------------------------- the real library

REAL_SOLUTION = """\
from appkit import Field, ValidationError, create_validator

_validator = create_validator({"name": Field(str, min_length=1), "qty": Field(int, minimum=1)})


def check(data: object) -> dict[str, object]:
    result = _validator.validate(data)
    if not result.ok:
        raise ValidationError(result.errors)
    value: dict[str, object] = result.value
    return value


def broken(data: object) -> None:
    _validator.valdiate(data)
"""


@pytest.mark.skipif(
    not (PACKAGES / "appkit-core" / "src" / "appkit" / "__init__.py").is_file(),
    reason="the library under evaluation is not in packages/ yet",
)
def test_the_real_library_is_checked_through_its_catalog_and_types(
    tmp_path: Path, scratch: Path
) -> None:
    src = PACKAGES / "appkit-core" / "src"
    catalog = generate_catalog(tmp_path, "appkit-core", "0.0", "appkit", src)
    solution = write_files(tmp_path / "solution", {"solution.py": REAL_SOLUTION})
    task = make_task(
        allowedImports=["appkit/*"],
        requiredIntegration=[
            {"symbols": ["create_validator"]},
            {"symbols": ["Validator.validate"]},
        ],
    )
    result = analyse_solution(task, solution, catalog, scratch_dir=scratch, search_path=[src])
    Analysis.model_validate(result)
    assert result["unsupportedApi"] == ["appkit.validation.Validator.valdiate"]
    assert result["integrationOk"]
    assert set(categories(result)) == {"unsupported-api"}
