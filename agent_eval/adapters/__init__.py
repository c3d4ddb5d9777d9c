"""Runner adapters: the runner executable inside an agent's image.

An adapter reads one runner request on stdin, lays out the agent's working
directory, builds the agent's prompt (the task text and, on a repair, the
bounded feedback), runs the agent's CLI non-interactively within the time
budget (killing its whole process group at the limit), decides ``completed``
or ``failed`` from the CLI's own outcome and prints exactly one response on
stdout. Everything the CLI prints goes to bounded stderr.

Standard library only: adapters run in runner images, next to the agent.
"""
