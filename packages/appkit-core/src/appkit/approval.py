"""Approval gates: a side effect runs only with a matching, live, granted approval.

An :class:`ApprovalRequest` names an action and its JSON arguments; its
``digest`` is the SHA-256 of their canonical JSON. An :class:`ApprovalGate`
issues :class:`Approval` objects bound to that digest (:meth:`ApprovalGate.approve`,
:meth:`ApprovalGate.deny`) and :meth:`ApprovalGate.run` calls the effect only
when the approval was issued by the same gate, is granted, matches the exact
request, has not expired and has not been used before. Otherwise it raises an
:class:`ApprovalError` subclass and the effect never runs.
"""

from __future__ import annotations

import hashlib
import json
import math
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, TypeVar

from appkit.errors import (
    ApprovalDeniedError,
    ApprovalError,
    ApprovalExpiredError,
    ApprovalMismatchError,
    ApprovalUsedError,
)
from appkit.storage import canonical_json

__all__ = [
    "Approval",
    "ApprovalDeniedError",
    "ApprovalError",
    "ApprovalExpiredError",
    "ApprovalGate",
    "ApprovalMismatchError",
    "ApprovalRequest",
    "ApprovalUsedError",
]

T = TypeVar("T")


@dataclass(frozen=True)
class ApprovalRequest:
    """A side effect awaiting approval: an ``action`` name and its JSON ``arguments``.

    The arguments are copied on creation, so later changes to the caller's dict
    do not alter the request. ``digest`` binds an approval to this exact pair.
    """

    action: str
    arguments: Mapping[str, Any]

    def __post_init__(self) -> None:
        """Check the action name and take a private copy of the arguments."""
        if not isinstance(self.action, str) or not self.action:
            raise ValueError("an approval request needs a non-empty action name")
        if not isinstance(self.arguments, Mapping):
            raise TypeError("approval request arguments must be a mapping")
        copied = json.loads(canonical_json(self.arguments))
        object.__setattr__(self, "arguments", MappingProxyType(copied))

    @property
    def digest(self) -> str:
        """Lowercase hex SHA-256 of canonical JSON ``{"action": ..., "arguments": ...}``."""
        return _bind(self)[0]


@dataclass(frozen=True)
class Approval:
    """A decision about one request, issued by an :class:`ApprovalGate`.

    ``granted`` is False for a denial. ``expires_at`` is in the gate clock's
    units (seconds). Approvals are single-use and only valid at the gate that
    issued them; constructing one directly does not make it acceptable.
    """

    id: str
    request_digest: str
    granted: bool
    approver: str
    issued_at: float
    expires_at: float
    reason: str = ""


class ApprovalGate:
    """Issues approvals and runs side effects only under a valid approval."""

    def __init__(self, *, clock: Callable[[], float] | None = None, ttl: float = 300.0) -> None:
        """Create a gate; ``clock()`` gives seconds (default ``time.time``), ``ttl`` a lifetime."""
        self._clock: Callable[[], float] = clock if clock is not None else time.time
        self._ttl = _require_ttl(ttl)
        self._issued: dict[str, Approval] = {}
        self._used: set[str] = set()
        self._lock = threading.Lock()

    def approve(
        self, request: ApprovalRequest, *, approver: str, ttl: float | None = None
    ) -> Approval:
        """Grant ``request`` for ``ttl`` seconds from now (default: the gate's ``ttl``)."""
        lifetime = self._ttl if ttl is None else _require_ttl(ttl)
        return self._issue(request, approver, granted=True, lifetime=lifetime, reason="")

    def deny(self, request: ApprovalRequest, *, approver: str, reason: str = "") -> Approval:
        """Record a denial of ``request``; running with it raises :class:`ApprovalDeniedError`."""
        return self._issue(request, approver, granted=False, lifetime=self._ttl, reason=reason)

    def check(self, request: ApprovalRequest, approval: Approval | None) -> None:
        """Raise the :class:`ApprovalError` that :meth:`run` would raise, without using it up."""
        with self._lock:
            self._verify(request, approval)

    def run(
        self,
        request: ApprovalRequest,
        approval: Approval | None,
        effect: Callable[[dict[str, Any]], T],
    ) -> T:
        """Return ``effect(arguments)``, calling it only if ``approval`` is valid for ``request``.

        Raises :class:`ApprovalDeniedError` (denied or missing),
        :class:`ApprovalMismatchError` (other request, or not issued by this
        gate), :class:`ApprovalExpiredError` or :class:`ApprovalUsedError`; the
        effect is not called in those cases. The approval is used up before the
        effect runs, even if the effect then raises. ``effect`` receives a fresh
        copy of exactly the approved arguments.
        """
        with self._lock:
            arguments = self._verify(request, approval)
            assert approval is not None
            self._used.add(approval.id)
        return effect(arguments)

    def _issue(
        self,
        request: ApprovalRequest,
        approver: str,
        *,
        granted: bool,
        lifetime: float,
        reason: str,
    ) -> Approval:
        if not isinstance(request, ApprovalRequest):
            raise TypeError("expected an ApprovalRequest")
        if not isinstance(approver, str) or not approver:
            raise ValueError("an approval needs a non-empty approver")
        now = self._clock()
        approval = Approval(
            id=secrets.token_hex(16),
            request_digest=request.digest,
            granted=granted,
            approver=approver,
            issued_at=now,
            expires_at=now + lifetime,
            reason=reason,
        )
        with self._lock:
            self._issued[approval.id] = approval
        return approval

    def _verify(self, request: ApprovalRequest, approval: Approval | None) -> dict[str, Any]:
        if approval is None:
            raise ApprovalDeniedError("no approval was given")
        if not isinstance(approval, Approval) or self._issued.get(approval.id) != approval:
            raise ApprovalMismatchError("the approval was not issued by this gate")
        if approval.id in self._used:
            raise ApprovalUsedError("the approval has already been used")
        if not approval.granted:
            raise ApprovalDeniedError(f"denied by {approval.approver}")
        if not isinstance(request, ApprovalRequest):
            raise ApprovalMismatchError("expected an ApprovalRequest")
        digest, arguments = _bind(request)
        if digest != approval.request_digest:
            raise ApprovalMismatchError("the approval is for a different request")
        if self._clock() >= approval.expires_at:
            raise ApprovalExpiredError("the approval has expired")
        return arguments


def _bind(request: ApprovalRequest) -> tuple[str, dict[str, Any]]:
    data = canonical_json({"action": request.action, "arguments": request.arguments})
    arguments: dict[str, Any] = json.loads(data)["arguments"]
    return hashlib.sha256(data).hexdigest(), arguments


def _require_ttl(ttl: float) -> float:
    if isinstance(ttl, bool) or not isinstance(ttl, int | float):
        raise TypeError("ttl must be a number of seconds")
    if not math.isfinite(ttl) or ttl <= 0:
        raise ValueError("ttl must be a positive, finite number of seconds")
    return float(ttl)
