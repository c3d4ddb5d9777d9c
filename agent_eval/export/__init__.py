"""A batch in the formats other tools read (ATIF trajectories)."""
