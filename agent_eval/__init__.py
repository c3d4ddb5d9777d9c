"""Measure whether coding agents can use this repository's library correctly."""
