"""The task suite: the repository's tasks, their contracts and prompts, their fixture cases.

    tasks          read the suite declaration, load and validate its tasks, render their prompts
    contract       a task's ``contract.pyi``: the exports a solution owes (standard library only)
    fixture_cases  developer-written fixture cases and the verdict each must get

This face imports nothing: ``contract`` is staged into the verifier image,
which has the standard library alone.
"""
