"""The container verifier: one hardened verifier container per attempt."""
