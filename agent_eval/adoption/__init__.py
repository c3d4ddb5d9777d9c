"""Adopting the harness in a library's repository: ``agent-eval init`` (:mod:`.init`)."""
