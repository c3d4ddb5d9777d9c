"""``agent-eval try-agent``: a whole batch of a real CLI against a scripted model, offline."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from agent_eval.batch.signals import Stop, stopping_on_signals
from agent_eval.cli.common import EXISTING_DIR, located_project, reported_errors
from agent_eval.cli.progress import make_display
from agent_eval.cli.run import report_outcome
from agent_eval.engine.docker_engine import connect_local_engine
from agent_eval.trial import TRIAL_AGENTS, try_agent
from agent_eval.verification.container.verifier import batch_verifier_factory

__all__ = ["try_agent_command"]


def _say(line: str) -> None:
    click.echo(f"try-agent: {line}", err=True)


@click.command()
@click.option(
    "--agent",
    type=click.Choice(TRIAL_AGENTS),
    default=TRIAL_AGENTS[0],
    show_default=True,
    help="The agent CLI to run (its runner image must be built).",
)
@click.option(
    "--project",
    type=EXISTING_DIR,
    default=None,
    help="Repository to evaluate (default: the current one).",
)
def try_agent_command(agent: str, project: Path | None) -> None:
    """Run a self-test batch of AGENT through the gateway against a scripted model.

    Prints the batch's line (as eval-agent does) and then the decision, which
    is always a rejection: the scripted model is on a private address, so the
    batch is self-test. Exit codes are eval-agent's.
    """
    located = located_project(project, "trial")
    display = make_display("auto", sys.stderr, "try-agent")
    with stopping_on_signals(until_exit=True) as signals:
        try:
            with reported_errors(exit_code=2):
                trial = try_agent(
                    located,
                    agent,
                    verifier_factory=batch_verifier_factory(located, display.say),
                    connect=connect_local_engine,
                    progress=display,
                    notice=display.say,
                )
        except Stop as exc:
            _say(f"{exc.reason} before the batch started")
            sys.exit(1)
        finally:
            display.close()
        signals.settle()
        report_outcome(trial.batch, located.root, _say)
        if trial.qualification is not None:
            click.echo(trial.qualification.model_dump_json())
    sys.exit(trial.batch.exit_code)
