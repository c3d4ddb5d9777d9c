from starkit.ring_b import *  # noqa: F403


def a() -> None: ...
