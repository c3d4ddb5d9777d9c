"""Static analysis of submitted solutions; standard library only, never executes the solution.

Run inside the verifier as ``python3 -m agent_eval.verification.analysis`` (see ``__main__``)
or call :func:`analyse_solution`; the result is the ``analysis.json`` dict that
the host validates with ``agent_eval.models.analysis.Analysis``.
"""

from agent_eval.suite.contract import ContractError
from agent_eval.verification.analysis.rules import (
    AnalysisInputError,
    allows_import,
    analyse_solution,
    seeded_references,
)
from agent_eval.verification.analysis.typecheck import MypyError

__all__ = [
    "AnalysisInputError",
    "ContractError",
    "MypyError",
    "allows_import",
    "analyse_solution",
    "seeded_references",
]
