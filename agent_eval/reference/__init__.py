"""The built-in reference runners, which prove the harness without a model (self-test only).

runner  the runner itself, copied into the reference-runner image; standard library only
config  a runner.json that pins the locally built reference-runner and verifier images
"""

from agent_eval.reference.runner import PREFIX as REFERENCE_RUNNER_PREFIX

__all__ = ["REFERENCE_RUNNER_PREFIX"]
