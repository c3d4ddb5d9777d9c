"""Suite validation refuses any task whose parts could drift apart, and names the task and field.

Rule: the task directories are exactly the fixed task ids; each task.json is a
valid TaskSpec whose ``id`` is its directory; its assertion and safety ids
equal the ids its grader declares; its prompt renders with StrictUndefined and
contains the contract; the contract declares exports; starter files are
allowed outputs that hold the seed references; required library symbols are
fully qualified under an allowed import.

Each test copies the real tasks into ``tmp_path`` and breaks one thing.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agent_eval.errors import SuiteError
from agent_eval.suite.tasks import describe_imports, load_suite
from tests.paths import EXAMPLE_SUITE, REPO

TASKS = REPO / "tasks"
GRADERS = REPO / "graders"


def copy_tasks(tmp_path: Path) -> Path:
    target = tmp_path / "tasks"
    shutil.copytree(TASKS, target, ignore=shutil.ignore_patterns("__pycache__"))
    return target


def edit_task_json(tasks: Path, task_id: str, change: Callable[[dict[str, Any]], None]) -> None:
    path = tasks / task_id / "task.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    change(data)
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")


def replace_in(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new), encoding="utf-8")


def refused(tasks: Path) -> str:
    with pytest.raises(SuiteError) as caught:
        load_suite(tasks, graders_dir=GRADERS)
    return str(caught.value)


def test_the_repository_suite_loads_every_fixed_task_in_schedule_order() -> None:
    suite = load_suite(TASKS, graders_dir=GRADERS)
    assert tuple(task.id for task in suite.tasks) == EXAMPLE_SUITE.taskIds
    for task in suite.tasks:
        assert set(task.grader.assertion_ids) == set(task.spec.assertionIds)
        assert task.contract_exports
        prompt = task.render_prompt("/consumer")
        assert task.contract_text in prompt
        assert "{{" not in prompt and "/consumer" in prompt


def test_the_rendered_prompt_embeds_the_contract_file_and_the_consumer_directory() -> None:
    task = load_suite(TASKS, graders_dir=GRADERS).task("storage-hash")
    prompt = task.render_prompt("/somewhere/consumer")
    contract = (TASKS / "storage-hash" / "contract.pyi").read_text(encoding="utf-8")
    assert contract.rstrip("\n") in prompt
    assert "`/somewhere/consumer`" in prompt
    assert "`appkit` (and its submodules)" in prompt


def test_allowed_imports_are_described_in_prose() -> None:
    assert describe_imports(["appkit/*", "json"]) == "`appkit` (and its submodules), `json`"


def test_a_task_json_id_other_than_its_directory_is_refused(tmp_path: Path) -> None:
    tasks = copy_tasks(tmp_path)
    edit_task_json(tasks, "forms", lambda d: d.update(id="react-form"))
    message = refused(tasks)
    assert "task 'forms', task.json id" in message and "'react-form'" in message


def test_assertion_ids_that_differ_from_the_graders_are_refused_naming_both_sides(
    tmp_path: Path,
) -> None:
    tasks = copy_tasks(tmp_path)

    def rename(data: dict[str, Any]) -> None:
        data["assertionIds"] = [
            "round-trips" if a == "round-trip" else a for a in data["assertionIds"]
        ]

    edit_task_json(tasks, "storage-hash", rename)
    message = refused(tasks)
    assert "task 'storage-hash', task.json assertionIds" in message
    assert "only in the grader ['round-trip']" in message
    assert "only in task.json ['round-trips']" in message


def test_a_grader_assertion_missing_from_task_json_is_refused(tmp_path: Path) -> None:
    tasks = copy_tasks(tmp_path)
    edit_task_json(
        tasks,
        "tool-validation",
        lambda d: d["assertionIds"].remove("calls-routed-by-name"),
    )
    message = refused(tasks)
    assert "task 'tool-validation', task.json assertionIds" in message
    assert "only in the grader ['calls-routed-by-name']" in message


def test_safety_ids_that_are_not_assertion_ids_are_refused(tmp_path: Path) -> None:
    tasks = copy_tasks(tmp_path)
    edit_task_json(
        tasks, "error-recovery", lambda d: d["safetyAssertionIds"].append("never-sleeps")
    )
    message = refused(tasks)
    assert "task 'error-recovery', task.json" in message
    assert "safetyAssertionIds ['never-sleeps'] are not in assertionIds" in message


def test_safety_ids_that_differ_from_the_graders_are_refused(tmp_path: Path) -> None:
    tasks = copy_tasks(tmp_path)
    edit_task_json(tasks, "forms", lambda d: d["safetyAssertionIds"].remove("user-values-escaped"))
    message = refused(tasks)
    assert "task 'forms', task.json safetyAssertionIds" in message
    assert "only in the grader ['user-values-escaped']" in message


def test_a_grader_for_another_task_is_refused(tmp_path: Path) -> None:
    tasks = copy_tasks(tmp_path)
    replace_in(tasks / "forms" / "grader.py", 'task_id = "forms"', 'task_id = "react-form"')
    message = refused(tasks)
    assert "task 'forms', grader.py task_id" in message


def test_a_grader_that_does_not_load_is_refused(tmp_path: Path) -> None:
    tasks = copy_tasks(tmp_path)
    (tasks / "forms" / "grader.py").write_text("import nothing_of_that_name\n", encoding="utf-8")
    message = refused(tasks)
    assert "task 'forms', grader.py: does not load: ModuleNotFoundError" in message


def test_a_prompt_without_the_contract_is_refused(tmp_path: Path) -> None:
    tasks = copy_tasks(tmp_path)
    replace_in(tasks / "core-validation" / "prompt.md", "where-to-look.md", "no-contract.md")
    (tasks / "_shared" / "no-contract.md").write_text("(see contract.pyi)\n")
    message = refused(tasks)
    assert "task 'core-validation', prompt.md: does not contain the contract" in message


def test_a_prompt_with_an_undefined_variable_is_refused(tmp_path: Path) -> None:
    tasks = copy_tasks(tmp_path)
    replace_in(tasks / "approval-boundary" / "prompt.md", "{{ title }}", "{{ headline }}")
    message = refused(tasks)
    assert "task 'approval-boundary', prompt.md: does not render" in message
    assert "'headline' is undefined" in message


def test_a_prompt_with_broken_template_syntax_is_refused(tmp_path: Path) -> None:
    tasks = copy_tasks(tmp_path)
    replace_in(tasks / "approval-boundary" / "prompt.md", "{{ title }}", "{{ title ")
    assert "task 'approval-boundary', prompt.md: does not render (line" in refused(tasks)


def test_a_contract_without_exports_is_refused(tmp_path: Path) -> None:
    tasks = copy_tasks(tmp_path)
    (tasks / "forms" / "contract.pyi").write_text("from typing import Any\n", encoding="utf-8")
    assert "task 'forms', contract.pyi: declares no exports" in refused(tasks)


def test_a_missing_task_directory_is_refused(tmp_path: Path) -> None:
    tasks = copy_tasks(tmp_path)
    shutil.rmtree(tasks / "forms")
    message = refused(tasks)
    assert "missing ['forms']" in message


def test_an_extra_task_directory_is_refused(tmp_path: Path) -> None:
    tasks = copy_tasks(tmp_path)
    shutil.copytree(tasks / "forms", tasks / "react-form")
    assert "unexpected ['react-form']" in refused(tasks)


def test_an_invalid_task_json_is_refused_naming_the_field(tmp_path: Path) -> None:
    tasks = copy_tasks(tmp_path)
    edit_task_json(tasks, "forms", lambda d: d.update(allowedOutputPaths=["../solution.py"]))
    message = refused(tasks)
    assert "task 'forms', task.json: allowedOutputPaths.0" in message


def test_a_starter_file_the_agent_may_not_write_is_refused(tmp_path: Path) -> None:
    tasks = copy_tasks(tmp_path)
    (tasks / "error-recovery" / "starter" / "helpers.py").write_text("x = 1\n", encoding="utf-8")
    assert "task 'error-recovery', starter/helpers.py: is not in allowedOutputPaths" in refused(
        tasks
    )


def test_a_seed_reference_the_starter_does_not_contain_is_refused(tmp_path: Path) -> None:
    tasks = copy_tasks(tmp_path)
    edit_task_json(
        tasks, "error-recovery", lambda d: d.update(seedReferences=["appkit.retry_forever"])
    )
    assert "task 'error-recovery', task.json seedReferences" in refused(tasks)


def test_an_integration_symbol_that_is_not_fully_qualified_is_refused(tmp_path: Path) -> None:
    tasks = copy_tasks(tmp_path)
    edit_task_json(
        tasks,
        "core-validation",
        lambda d: d.update(requiredIntegration=[{"symbols": ["create_validator"]}]),
    )
    message = refused(tasks)
    assert "task 'core-validation', task.json requiredIntegration" in message
    assert "'create_validator' is not fully qualified" in message


def test_a_grader_calling_a_module_the_agent_cannot_write_is_refused(tmp_path: Path) -> None:
    tasks = copy_tasks(tmp_path)
    replace_in(
        tasks / "forms" / "grader.py",
        '    task_id = "forms"\n',
        '    task_id = "forms"\n    solution_module = "app"\n',
    )
    assert "task 'forms', grader.py solution_module" in refused(tasks)


def own_suite(tmp_path: Path, renames: dict[str, str], **declared: Any) -> Path:
    """A repository's own suite: some of the example's tasks under names of its own."""
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    shutil.copytree(TASKS / "_shared", tasks / "_shared")
    for old, new in renames.items():
        shutil.copytree(TASKS / old, tasks / new, ignore=shutil.ignore_patterns("__pycache__"))
        edit_task_json(tasks, new, lambda d, new=new: d.update(id=new))
        replace_in(tasks / new / "grader.py", f'task_id = "{old}"', f'task_id = "{new}"')
    ids = list(renames.values())
    spec = {"schemaVersion": 1, "taskIds": ids, "repetitions": 2, "scheduledRuns": 2 * len(ids),
            "minFirstSuccesses": 2 * len(ids) - 1, "requiredFinalSuccesses": 2 * len(ids),
            "maxAttemptsPerRun": 2}  # fmt: skip
    spec.update(declared)
    (tasks / "suite.json").write_text(json.dumps(spec))
    return tasks


def test_a_repository_declares_its_own_task_ids_count_and_thresholds(tmp_path: Path) -> None:
    tasks = own_suite(tmp_path, {"forms": "sign-up", "storage-hash": "content-address"})
    suite = load_suite(tasks, graders_dir=GRADERS)
    assert suite.spec.taskIds == ("sign-up", "content-address")
    assert suite.spec.run_ids() == [
        "sign-up-1", "content-address-1", "sign-up-2", "content-address-2",
    ]  # fmt: skip
    assert (suite.spec.minFirstSuccesses, suite.spec.requiredFinalSuccesses) == (3, 4)
    assert suite.task("sign-up").spec.title.startswith("A server-rendered sign-up form")
    assert suite.spec.select(["sign-up"]) == ["sign-up-1", "sign-up-2"]


@pytest.mark.parametrize(
    ("declared", "words"),
    [
        ({"scheduledRuns": 5}, "scheduledRuns 5 != 2 tasks x 2 repetitions"),
        ({"requiredFinalSuccesses": 3}, "requiredFinalSuccesses must equal scheduledRuns"),
        ({"minFirstSuccesses": 9}, "minFirstSuccesses must be between 1 and scheduledRuns"),
        ({"taskIds": ["sign-up", "sign-up"]}, "taskIds has duplicates"),
        ({"taskIds": ["Sign_Up", "content-address"]}, "taskIds.0"),
        ({"taskIds": ["../x", "content-address"]}, "taskIds.0"),
        ({"repetitions": 0}, "repetitions"),
        ({"extra": 1}, "extra"),
    ],
)
def test_a_declaration_that_does_not_hold_together_is_refused_naming_the_file_and_field(
    tmp_path: Path, declared: dict[str, Any], words: str
) -> None:
    tasks = own_suite(tmp_path, {"forms": "sign-up", "storage-hash": "content-address"}, **declared)
    message = refused(tasks)
    assert "suite.json" in message and words in message, message


def test_a_repository_without_a_declaration_is_told_how_to_make_one(tmp_path: Path) -> None:
    tasks = own_suite(tmp_path, {"forms": "sign-up"})
    (tasks / "suite.json").unlink()
    message = refused(tasks)
    assert "no suite declaration" in message and '"taskIds": ["my-task"]' in message


def test_a_directory_the_declaration_does_not_name_is_refused(tmp_path: Path) -> None:
    tasks = own_suite(tmp_path, {"forms": "sign-up", "storage-hash": "content-address"})
    shutil.copytree(tasks / "sign-up", tasks / "sign-in")
    message = refused(tasks)
    assert "unexpected ['sign-in']" in message and "suite.json" in message


def test_prompts_include_the_shared_parts_of_tasks_shared(tmp_path: Path) -> None:
    tasks = copy_tasks(tmp_path)
    suite = load_suite(tasks, graders_dir=GRADERS)
    forms = suite.task("forms")
    assert '{% include "where-to-look.md" %}' in forms.prompt_template
    rendered = forms.render_prompt("/consumer/docs")
    assert "## Where to look" in rendered and forms.contract_text in rendered
    assert "`/consumer/docs`" in rendered  # the included part sees the task's variables


@pytest.mark.parametrize(
    ("include", "words"),
    [
        ("missing.md", "TemplateNotFound: missing.md"),
        ("../forms/task.json", "TemplateNotFound"),
        ("/etc/passwd", "TemplateNotFound"),
    ],
)
def test_an_include_reaches_the_shared_parts_and_nothing_else(
    tmp_path: Path, include: str, words: str
) -> None:
    tasks = copy_tasks(tmp_path)
    replace_in(tasks / "forms" / "prompt.md", "where-to-look.md", include)
    message = refused(tasks)
    assert "prompt.md" in message and words in message, message


def test_a_shared_part_that_is_not_a_plain_markdown_file_is_refused(tmp_path: Path) -> None:
    tasks = copy_tasks(tmp_path)
    (tasks / "_shared" / "Notes.txt").write_text("x")
    assert "only lowercase name.md files are parts" in refused(tasks)


def test_a_part_that_includes_itself_is_refused_not_recursed_forever(tmp_path: Path) -> None:
    tasks = copy_tasks(tmp_path)
    (tasks / "_shared" / "loop.md").write_text('{% include "loop.md" %}')
    replace_in(tasks / "forms" / "prompt.md", "where-to-look.md", "loop.md")
    assert "does not render" in refused(tasks)
