"""A grader whose calls carry dates, decimals, durations and a record, not JSON.

The solution is given ``date`` and ``Decimal`` arguments and must return a
``timedelta``, a ``date`` and a ``Window`` (the contract's dataclass, which
the solution defines), and call an effect with a ``date`` that answers a
``Decimal``: the grader declares these types in ``value_types`` and compares
what comes back as those types.
"""

from dataclasses import dataclass
from datetime import date, timedelta
from decimal import Decimal

from agent_eval.grading import Grader, Session

DUE = date(2026, 12, 3)


@dataclass(frozen=True)
class Window:
    start: date
    length: timedelta


class ValueTypesGrader(Grader):
    task_id = "value-types"
    assertion_ids = (
        "grace-for-small-balance",
        "grace-capped",
        "pay-by-date",
        "window-record",
        "reminder-sent",
    )
    value_types = (date, timedelta, Decimal, Window)

    def run(self, session: Session) -> None:
        with session.scenario("grace") as sc:
            sc.record(
                "grace-for-small-balance",
                sc.call("grace_period", DUE, Decimal("250.00")) == timedelta(days=16),
            )
            sc.record(
                "grace-capped",
                sc.call("grace_period", DUE, Decimal("99999.99")) == timedelta(days=30),
            )
        with session.scenario("pay by") as sc:
            out = sc.call("pay_by", DUE, timedelta(days=16))
            sc.record("pay-by-date", type(out) is date and out == date(2026, 12, 19))
        with session.scenario("window") as sc:
            out = sc.call("window", DUE, Decimal("0.50"))
            sc.record("window-record", out == Window(DUE, timedelta(days=14)))
        with session.scenario("reminder") as sc:
            send = sc.effect("send", returns=Decimal("1.25"))
            out = sc.call("remind", DUE, send)
            sent = send.called_with(date(2026, 12, 2))
            sc.record("reminder-sent", sent and type(out) is Decimal and out == Decimal("1.25"))


GRADER = ValueTypesGrader()
