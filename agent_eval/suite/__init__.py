"""The task suite: the fixed tasks, their contracts and prompts, and their fixture cases.

    tasks     load and validate the six tasks, render their prompts
    contract  a task's ``contract.pyi``: the exports a solution owes (standard library only)
    fixtures  developer-written fixture cases and the verdict each must get

This face imports nothing: ``contract`` is staged into the verifier image,
which has the standard library alone.
"""
