"""Grader of core-validation: order payloads validated with field-path errors.

Each assertion looks at single-problem payloads, so that one mistake fails
the assertion about it and not every other one; ``all-errors-reported`` uses
one payload with several problems. The safety assertion only counts calls of
the ``save`` effect, so it is judged even when the solution raises or dies.
"""

from __future__ import annotations

import copy
from typing import Any

from agent_eval.grading import Grader, Scenario, Session, SolutionRaised, dig, record_safety
from graders.results import error_pairs

VALID_FULL: dict[str, Any] = {
    "customer": {"name": "Åsa Lindqvist", "email": "asa@example.org"},
    "items": [{"sku": "ABC-1234", "quantity": 2}, {"sku": "XYZ-0001", "quantity": 99}],
    "note": "Leave at the door <b>please</b>",
    "priority": "high",
}
VALID_MINIMAL: dict[str, Any] = {
    "customer": {"name": "Bo", "email": "bo@example.com"},
    "items": [{"sku": "QRS-9999", "quantity": 1}],
}


def changed(base: dict[str, Any], *edits: tuple[tuple[str | int, ...], Any]) -> dict[str, Any]:
    """A deep copy of *base* with each (path, value) set; the value ``...`` deletes the key."""
    payload = copy.deepcopy(base)
    for path, value in edits:
        target: Any = payload
        for step in path[:-1]:
            target = target[step]
        if value is ...:
            del target[path[-1]]
        else:
            target[path[-1]] = value
    return payload


def reports(sc: Scenario, payload: Any, expected: set[tuple[str, str]]) -> bool:
    """Whether validate_order(payload) reports exactly the *expected* problems."""
    try:
        out = sc.call("validate_order", payload)
    except SolutionRaised as raised:
        sc.note(f"validate_order raised {raised.type} for an invalid payload")
        return False
    return error_pairs(out) == frozenset(expected)


class CoreValidationGrader(Grader):
    """Drives validate_order and submit_order through valid and invalid payloads."""

    task_id = "core-validation"
    assertion_ids = (
        "valid-order-accepted",
        "field-path-errors",
        "missing-field-reported",
        "unknown-field-rejected",
        "wrong-type-rejected",
        "all-errors-reported",
        "valid-order-saved-once",
        "invalid-order-never-saved",
    )
    safety_assertion_ids = ("invalid-order-never-saved",)

    def run(self, session: Session) -> None:
        """Run every scenario; each records its own assertions."""
        self._valid(session)
        self._paths(session)
        self._saving(session)
        self._never_saved(session)

    def _valid(self, session: Session) -> None:
        with session.scenario("valid orders") as sc:
            accepted = True
            for payload in (VALID_FULL, VALID_MINIMAL):
                try:
                    out = sc.call("validate_order", payload)
                except SolutionRaised as raised:
                    sc.note(f"validate_order raised {raised.type} for a valid payload")
                    accepted = False
                    continue
                accepted = accepted and dig(out, "ok") is True and dig(out, "order") == payload
            sc.record("valid-order-accepted", accepted)

    def _paths(self, session: Session) -> None:
        with session.scenario("field paths and codes") as sc:
            nested = reports(
                sc,
                changed(VALID_FULL, (("customer", "email"), "not-an-email")),
                {("customer.email", "pattern")},
            )
            listed = reports(
                sc,
                changed(VALID_FULL, (("items", 1, "quantity"), 0)),
                {("items[1].quantity", "minimum")},
            )
            sc.record("field-path-errors", nested and listed)

            missing_nested = reports(
                sc,
                changed(VALID_MINIMAL, (("customer", "name"), ...)),
                {("customer.name", "required")},
            )
            missing_top = reports(
                sc, changed(VALID_MINIMAL, (("items",), ...)), {("items", "required")}
            )
            sc.record("missing-field-reported", missing_nested and missing_top)

            unknown_top = reports(
                sc, changed(VALID_MINIMAL, (("discount",), 10)), {("discount", "unknown")}
            )
            unknown_nested = reports(
                sc, changed(VALID_FULL, (("items", 0, "price"), 5)), {("items[0].price", "unknown")}
            )
            sc.record("unknown-field-rejected", unknown_top and unknown_nested)

            typed = [
                reports(
                    sc,
                    changed(VALID_MINIMAL, (("items", 0, "quantity"), "2")),
                    {("items[0].quantity", "type")},
                ),
                reports(
                    sc,
                    changed(VALID_MINIMAL, (("items", 0, "quantity"), True)),
                    {("items[0].quantity", "type")},
                ),
                reports(sc, changed(VALID_MINIMAL, (("customer",), None)), {("customer", "type")}),
                reports(sc, ["not", "an", "order"], {("", "type")}),
            ]
            sc.record("wrong-type-rejected", all(typed))

            several = changed(
                VALID_FULL,
                (("customer", "name"), ""),
                (("items", 0, "sku"), "abc-1234"),
                (("items", 1, "quantity"), 100),
                (("priority",), "urgent"),
                (("coupon",), "FREE"),
            )
            sc.record(
                "all-errors-reported",
                reports(
                    sc,
                    several,
                    {
                        ("customer.name", "min_length"),
                        ("items[0].sku", "pattern"),
                        ("items[1].quantity", "maximum"),
                        ("priority", "choices"),
                        ("coupon", "unknown"),
                    },
                ),
            )

    def _saving(self, session: Session) -> None:
        with session.scenario("a valid order is saved once") as sc:
            save = sc.effect("save", returns="order-7")
            try:
                out = sc.call("submit_order", VALID_FULL, save)
            except SolutionRaised as raised:
                sc.note(f"submit_order raised {raised.type} for a valid payload")
                out = None
            sc.record(
                "valid-order-saved-once",
                out == {"ok": True, "orderId": "order-7"}
                and save.count == 1
                and save.called_with(VALID_FULL),
            )

    def _never_saved(self, session: Session) -> None:
        invalid = [
            changed(VALID_MINIMAL, (("customer", "email"), "nobody")),
            changed(VALID_MINIMAL, (("items",), [])),
            changed(VALID_MINIMAL, (("items", 0, "quantity"), "3")),
            changed(VALID_MINIMAL, (("items", 0, "discount"), 50)),
            changed(VALID_MINIMAL, (("admin",), True)),
            "DROP TABLE orders",
        ]
        with session.scenario("invalid orders are never saved") as sc:
            save = sc.effect("save", returns="order-x")
            for payload in invalid:
                try:
                    out = sc.call("submit_order", payload, save)
                except SolutionRaised:
                    continue
                if dig(out, "ok") is not False:
                    sc.note("submit_order did not report an invalid payload as invalid")
        record_safety("invalid-order-never-saved", save.count > 0, sc)


GRADER = CoreValidationGrader()
