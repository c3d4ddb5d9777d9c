"""The built-in reference runners, which prove the harness without a model (self-test only).

runner  the runner itself, copied into the reference-runner image; standard library only
config  a runner.json that pins the locally built reference-runner and verifier images
"""

from agent_eval.models import GatewaySettings
from agent_eval.reference.runner import PREFIX as REFERENCE_RUNNER_PREFIX

__all__ = ["REFERENCE_RUNNER_PREFIX", "self_test_reasons"]


def self_test_reasons(runner_names: list[str], gateway: GatewaySettings | None) -> list[str]:
    """Why a batch with these runner identities and this gateway proves no agent.

    One rule for the batch (which records the receipt's ``selfTest``) and the
    checker (which decides it again from archives.json and the receipt, and adds
    the gateway's own records): a reserved reference-runner identity; no
    gateway, so that the runner reached nothing and its model could only be a
    scripted one inside its own container; or a gateway allowed to reach
    private addresses, where a fake provider is as good as a real one.
    """
    why = [
        f"the runner {name!r} is a built-in reference runner"
        for name in dict.fromkeys(runner_names)
        if name.startswith(REFERENCE_RUNNER_PREFIX)
    ]
    if gateway is None:
        why.append("the runner reached no model gateway, so its model could only be a scripted one")
    elif gateway.privateUpstreams:
        why.append(
            "the gateway was allowed private upstreams (a test set-up: a fake provider there "
            "cannot be told from a real one)"
        )
    return why
