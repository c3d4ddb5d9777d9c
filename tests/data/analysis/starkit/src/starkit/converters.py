"""Converters: a chain of star imports across private modules."""

from ._impl.chain import *  # noqa: F403
