"""The built-in reference runners, which prove the harness without a model (self-test only).

runner  the runner itself, copied into the reference-runner image; standard library only
config  a runner.json that pins the locally built reference-runner and verifier images
"""

from agent_eval.reference.runner import PREFIX as REFERENCE_RUNNER_PREFIX

__all__ = ["REFERENCE_RUNNER_PREFIX", "self_test_reasons"]


def self_test_reasons(runner_names: list[str], network: str) -> list[str]:
    """Why a batch with these runner identities and this network proves no agent.

    One rule for the batch (which records the receipt's ``selfTest``) and the
    checker (which decides it again from archives.json and the receipt): a
    reserved reference-runner identity, or a runner without a network, whose
    model could only be a scripted one inside its own container.
    """
    why = [
        f"the runner {name!r} is a built-in reference runner"
        for name in dict.fromkeys(runner_names)
        if name.startswith(REFERENCE_RUNNER_PREFIX)
    ]
    if network == "none":
        why.append("the runner had no network, so its model could only be a scripted one")
    return why
