"""The container engine: its interface, the hardening policy, and the implementations.

    api            ContainerRuntime, ImageStore and ContainerEngine (both), the specs and
                   results, run/list/remove over any runtime
    policy         Hardening (the one place of every container flag), mount, socket and pin checks
    docker_engine  DockerEngine over the Docker SDK: the only module that imports ``docker``
    fake           FakeRuntime, FakeImageStore and FakeEngine (both), in memory, and
                   FakeThreadClocks, scripted, for unit tests
    run_queue      how long a container's own threads waited for a CPU (ThreadClocks, the
                   port; RunQueueMeter, pure)
    pressure       the host's CPU pressure, and the rule that calls a runner's timeout starved

This face re-exports the interface and the policy, never the Docker
implementation: connecting to an engine is the composition root's decision
(``agent_eval.engine.docker_engine.connect_local_engine``).
"""

from agent_eval.engine.api import (
    BoundedOutput,
    ContainerEngine,
    ContainerRun,
    ContainerRuntime,
    ContainerSpec,
    ContainerSummary,
    ImageDetails,
    ImageIdentity,
    ImageStore,
    WaitResult,
    container_labels,
    list_leftovers,
    remove_leftovers,
    run_container,
)
from agent_eval.engine.policy import (
    DEFAULT_SOCKET,
    LABEL_BATCH,
    LABEL_LEASE,
    LABEL_ROLE,
    LABEL_RUN,
    RUNNER_USER,
    VERIFIER_CAPABILITIES,
    Hardening,
    Mount,
    Network,
    ResourceLimits,
    Role,
    check_mounts,
    local_socket_path,
    match_pinned_image,
)

__all__ = [
    "DEFAULT_SOCKET",
    "LABEL_BATCH",
    "LABEL_LEASE",
    "LABEL_ROLE",
    "LABEL_RUN",
    "RUNNER_USER",
    "VERIFIER_CAPABILITIES",
    "BoundedOutput",
    "ContainerEngine",
    "ContainerRun",
    "ContainerRuntime",
    "ContainerSpec",
    "ContainerSummary",
    "Hardening",
    "ImageDetails",
    "ImageIdentity",
    "ImageStore",
    "Mount",
    "Network",
    "ResourceLimits",
    "Role",
    "WaitResult",
    "check_mounts",
    "container_labels",
    "list_leftovers",
    "local_socket_path",
    "match_pinned_image",
    "remove_leftovers",
    "run_container",
]
