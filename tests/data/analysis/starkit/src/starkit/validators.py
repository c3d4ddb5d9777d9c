"""Validators, spelled as the documentation spells them."""

from starkit._impl.validators import *  # noqa: F403
