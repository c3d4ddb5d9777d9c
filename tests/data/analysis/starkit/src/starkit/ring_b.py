from starkit.ring_a import *  # noqa: F403


def b() -> None: ...
