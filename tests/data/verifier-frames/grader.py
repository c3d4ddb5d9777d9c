"""A grader that gives the solution one scenario per hostile-frame case, then an echo.

Used by the verifier container's hostile-frame suite: in scenario ``frames
<n>`` the solution writes case *n*'s bytes to its child's pipe instead of
(or before) the child's own answer. Whatever it writes, the parent must end
that scenario as the solution's failure (or its answer) and write its result;
``echo`` in a last, fresh scenario shows it survived every case.
"""

from agent_eval.grading import Grader, Session

CASES = 48
"""How many cases the solution holds (the suite writes the same number)."""


class VerifierFrames(Grader):
    task_id = "verifier-frames"
    assertion_ids = ("echo-works",)
    safety_assertion_ids = ()

    def run(self, session: Session) -> None:
        for case in range(CASES):
            with session.scenario(f"frames {case}") as sc:
                sc.call("probe", case, sc.effect("send", returns="sent"))
        with session.scenario("echo") as sc:
            sc.record("echo-works", sc.call("echo", "hello") == "hello")


GRADER = VerifierFrames()
