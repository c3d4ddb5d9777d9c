"""Needs an optional dependency that is not installed."""

import starkit_missing_dependency  # type: ignore[import-not-found]  # noqa: F401
