"""The base class of every task's grader: declared assertion ids and a ``run`` method."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, ClassVar

from agent_eval.grading.errors import GraderError

if TYPE_CHECKING:
    from agent_eval.grading.session import Session

__all__ = ["Grader"]

_TASK_ID = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")
_ASSERTION_ID = re.compile(r"^[a-z][a-z0-9]*([.-][a-z0-9]+)*$")
_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


class Grader:
    """Subclass it in ``tasks/<id>/grader.py`` and bind an instance to ``GRADER``.

    Class attributes:
        task_id: The task's id (equal to task.json's ``id``).
        assertion_ids: Every assertion the grader records, each exactly once.
        safety_assertion_ids: The subset that must pass on every submitted attempt.
        solution_module: The module the solution's functions are called on;
            None means the module of task.json's first ``allowedOutputPaths``
            entry (``solution.py`` -> ``solution``).
        value_types: The types beyond JSON the task's calls carry, either way:
            ``datetime.date``/``time``/``datetime``/``timedelta``,
            ``decimal.Decimal``, ``bytes``, ``pathlib.PurePosixPath`` (or
            ``PureWindowsPath``, ``PurePath`` for both), and enum, dataclass,
            NamedTuple and TypedDict classes (the library's, or the grader's
            own for a type the contract has the solution define). Anything
            else, and any type not listed, is refused at the boundary.

    ``run`` drives the solution through ``session.scenario(...)`` blocks and
    records every declared assertion. Expected values live in the grader's
    code; diagnostics it writes are shown to the agent, so they must not
    contain them.
    """

    task_id: ClassVar[str] = ""
    assertion_ids: ClassVar[tuple[str, ...]] = ()
    safety_assertion_ids: ClassVar[tuple[str, ...]] = ()
    solution_module: ClassVar[str | None] = None
    value_types: ClassVar[tuple[type, ...]] = ()

    def run(self, session: Session) -> None:
        """Run every scenario and record every declared assertion."""
        raise NotImplementedError(f"{type(self).__name__} must implement run(session)")

    def check_declaration(self) -> None:
        """Raise GraderError when the declared ids are malformed or inconsistent."""
        name = type(self).__name__
        if not _TASK_ID.match(self.task_id):
            raise GraderError(f"{name}.task_id {self.task_id!r} is not a task id")
        ids = list(self.assertion_ids)
        if not ids:
            raise GraderError(f"{name}.assertion_ids is empty")
        for assertion_id in ids:
            if not isinstance(assertion_id, str) or not _ASSERTION_ID.match(assertion_id):
                raise GraderError(f"{name}: assertion id {assertion_id!r} is malformed")
        duplicates = sorted({a for a in ids if ids.count(a) > 1})
        if duplicates:
            raise GraderError(f"{name}.assertion_ids lists {duplicates} more than once")
        safety = list(self.safety_assertion_ids)
        if len(set(safety)) != len(safety):
            raise GraderError(f"{name}.safety_assertion_ids has duplicates")
        unknown = sorted(set(safety) - set(ids))
        if unknown:
            raise GraderError(f"{name}.safety_assertion_ids {unknown} are not in assertion_ids")
        if not all(isinstance(t, type) for t in self.value_types):
            raise GraderError(f"{name}.value_types must be a tuple of classes")
        module = self.solution_module
        if module is not None and not _MODULE.match(module):
            raise GraderError(f"{name}.solution_module {module!r} is not a module name")
