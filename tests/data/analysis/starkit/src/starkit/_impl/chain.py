from starkit._impl.conv import *  # noqa: F403
