"""The verdict on a saved batch: qualification, and reviewers' digest-bound decisions.

qualification  every rule of check-agent-eval, recomputed from the files on disk
review         review-agent-eval: a decision bound to the exact solution digest
"""
