"""Trying an agent offline: a whole batch of a real CLI against a scripted model.

``agent-eval try-agent`` puts a scripted model (:mod:`agent_eval.trial.oracle_model`)
on an internal network of its own, points the batch's gateway at it as the
agent's upstream and runs an ordinary batch: the real CLI in its pinned image,
no network, its model reached through the gateway, which holds the (made-up)
credential and records every request. The upstream is on a private address,
so the batch is self-test by construction and can never qualify; it shows the
whole product working with nothing to install and no key to hold.
"""

from agent_eval.trial.run import TRIAL_AGENTS, Trial, TrialOutcome, try_agent

__all__ = ["TRIAL_AGENTS", "Trial", "TrialOutcome", "try_agent"]
