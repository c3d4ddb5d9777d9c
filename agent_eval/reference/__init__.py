"""The built-in reference runners, which prove the harness without a model (self-test only).

runner  the runner itself, copied into the reference-runner image; standard library only
config  a runner.json that pins the locally built reference-runner and verifier images
"""

import unicodedata

from agent_eval.models import GatewaySettings
from agent_eval.reference.runner import PREFIX as REFERENCE_RUNNER_PREFIX

__all__ = ["REFERENCE_RUNNER_PREFIX", "is_reference_name", "self_test_reasons"]

# Letters that look like those of the reserved prefix (Cyrillic, Greek and others a
# reader cannot tell apart), and every dash, underscore or space between its words.
_LOOK_ALIKES = str.maketrans(
    {
        **dict.fromkeys("\u0430\u0251\u03b1", "a"),
        **dict.fromkeys("\u0435\u0454\u0451\u03b5\u04bd", "e"),
        **dict.fromkeys("\u0261\u0581", "g"),
        **dict.fromkeys("\u0578\u03b7", "n"),
        **dict.fromkeys("\u0442\u03c4", "t"),
        **dict.fromkeys("\u03bd\u0475", "v"),
        **dict.fromkeys("\u04cf\u0406\u0456\u217c\u03b9|1", "l"),
        **dict.fromkeys("\u043e\u03bf\u05850", "o"),
        **dict.fromkeys("\u0455", "s"),
        **dict.fromkeys(
            "_ .\u00ad\u2010\u2011\u2012\u2013\u2014\u2015\u2212\ufe58\ufe63\uff0d", "-"
        ),
    }
)


def is_reference_name(name: str) -> bool:
    """Whether *name* is a built-in reference runner's, however it is spelled: compared
    after Unicode folding (NFKC, case), look-alike letters mapped to the ones they pass
    for, every dash, underscore or space read as ``-``, and invisible characters dropped."""
    folded = unicodedata.normalize("NFKC", name).casefold()
    folded = "".join(
        ch for ch in folded if unicodedata.category(ch) not in ("Cf", "Mn", "Cc")
    ).translate(_LOOK_ALIKES)
    while "--" in folded:
        folded = folded.replace("--", "-")
    return folded.strip("- ").startswith(REFERENCE_RUNNER_PREFIX)


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
        if is_reference_name(name)
    ]
    if gateway is None:
        why.append("the runner reached no model gateway, so its model could only be a scripted one")
    elif gateway.privateUpstreams:
        why.append(
            "the gateway was allowed private upstreams (a test set-up: a fake provider there "
            "cannot be told from a real one)"
        )
    return why
