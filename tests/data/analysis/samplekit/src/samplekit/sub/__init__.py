"""A subpackage, to check that the catalog walks into it."""
