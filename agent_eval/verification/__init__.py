"""Verification: what a saved solution is worth, from static analysis and behavioural grading.

    protocol       the Verifier protocol every verifier implements, and a Verification
    failure        why a verified solution failed: the ranking the batch and the checker share
    analysis/      static analysis (ast + mypy) of a solution; standard library only
    runtime/       the verifier container's trusted parent and the child that runs submitted code
    container/     the container verifier: staging, one container per attempt, mypy cache warm-up
    local          the local verifier: analysis in-process, grading in a subprocess (fixtures only)
    local_grading  the grading subprocess behind the local verifier
    in_process     grading a solution in this process, for unit tests of graders
    fixture_check  ``tasks verify``: every fixture case gets the verdict it declares

Nothing here imports ``agent_eval.batch``: the batch knows verification only
through :class:`agent_eval.verification.protocol.Verifier`. This face imports
nothing, because the runtime below it is staged into the verifier image,
which has the standard library alone.
"""
