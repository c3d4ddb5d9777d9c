"""The container images: the offline base, the verifier, the runner base and the runners.

build    the base (debootstrap + import), verifier, runner-base and reference-runner images
runners  an agent's runner image from ``images/runners/<agent>/``
"""
