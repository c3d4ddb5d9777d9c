"""The verifier runtime: a trusted parent that grades, and a child that runs submitted code.

Standard library only, and importable as a plain top-level package
(``python3 -m agent_eval.verification.runtime``) without the rest of ``agent_eval``: the
verifier container has Python, the library under evaluation and nothing
else. Modules here import each other relatively, never from ``agent_eval``.

    __main__   entry point: validate the job, run the parent, write the result
    job        the job file format
    parent     loads the grader, one fresh child per scenario, deadlines, kill, result
    child      isolates itself, imports the solution, answers calls and proxies effects
    isolation  OOM score, resource limits, privilege drop (in the child)
    framing    length-prefixed JSON frames with size caps and read deadlines
    codec      values and exceptions of submitted code as JSON
"""
