"""This repository's own helpers for its task graders.

The generic grading kit (``Grader``, ``Session``, effects, the DOM, ``dig``)
ships with the harness as :mod:`agent_eval.grading`; what lives here is
specific to this library's results and shared by several of its tasks'
graders. It is staged into the verifier container beside the kit (root-only,
like the graders themselves) and counted in the suite digest. Standard
library and the kit only.
"""
