"""What a grader can observe going wrong, and what is the grader's own fault.

Exception
├── GraderError       the grader is wrong (undeclared id, id recorded twice, non-JSON
│                     argument...); always an infrastructure failure, never the agent's
├── SolutionRaised    the solution raised an exception: an observation to judge
└── SolutionFailed    the solution cannot answer any more (timeout, crash, import
                      failure, non-JSON return, protocol violation); ends the scenario
"""

from __future__ import annotations

from typing import Any

from agent_eval.grading.results import Category

__all__ = ["GraderError", "SolutionFailed", "SolutionRaised", "VerifierBroken"]


class GraderError(Exception):
    """The grader itself is wrong; grading stops and reports an infrastructure failure."""


class VerifierBroken(Exception):
    """The verifier could not start, isolate or stop the solution; never the agent's failure."""


class SolutionRaised(Exception):
    """The solution's function raised; carries what crossed the boundary, never the object.

    Attributes:
        function: The exported name that was called.
        type: The exception's class name, e.g. ``"ValidationError"``.
        mro: Qualified names (``module.QualName``) of every class in its MRO.
        message: Its ``str()``, bounded.
        attributes: JSON-safe copies of a few attributes (``code``, ``field``,
            ``path``, ``errors``...) that the exception had.
    """

    def __init__(
        self,
        function: str,
        type: str,
        mro: list[str],
        message: str,
        attributes: dict[str, Any],
    ) -> None:
        super().__init__(f"{function} raised {type}: {message}")
        self.function = function
        self.type = type
        self.mro = tuple(mro)
        self.message = message
        self.attributes = attributes

    def is_a(self, name: str) -> bool:
        """Whether the exception is an instance of *name*.

        A dotted *name* (``"appkit.errors.ValidationError"``) must equal a
        qualified MRO entry; a bare one (``"ValueError"``) matches the last
        component of any entry, which a solution could imitate with its own
        class of that name, so prefer the qualified form for safety checks.
        """
        if "." in name:
            return name in self.mro
        return any(entry.rsplit(".", 1)[-1] == name for entry in self.mro)

    @property
    def code(self) -> Any:
        """The exception's ``code`` attribute, or None."""
        return self.attributes.get("code")


class SolutionFailed(Exception):
    """The solution can no longer answer in this scenario.

    Attributes:
        category: ``timeout`` (a deadline or the CPU limit), ``syntax`` or
            ``missing-dependency`` (the module did not import), or ``behaviour``
            (it crashed, returned a non-JSON value, broke the protocol, or
            raised where the grader expected a value).
        message: What happened, bounded.
    """

    def __init__(self, category: Category, message: str, *, whole_solution: bool = False) -> None:
        super().__init__(message)
        self.category: Category = category
        self.message = message
        self.whole_solution = whole_solution
        """Not specific to one scenario (the module does not import): reported once."""
