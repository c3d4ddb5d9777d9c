"""Grader of tool-validation: model tool calls validated before their handler runs.

Both handlers are effects owned by the grader, so it sees exactly which
handler ran and with what. Invalid calls are made in one scenario whose
effects are never expected to be called; the safety assertion only counts
those calls, so it is judged even when the solution raises.
"""

from __future__ import annotations

from typing import Any

from agent_eval.grading import Effect, Grader, Scenario, Session, SolutionRaised, record_safety
from graders.results import error_pairs

EMAIL_ARGS = {
    "to": "ann@example.org",
    "subject": "Quarterly report",
    "body": "Numbers attached.",
    "cc": ["bo@example.com"],
}
TICKET_ARGS = {"title": "Printer on fire", "priority": "high"}


def dispatch(sc: Scenario, call: Any, send: Effect, ticket: Effect) -> Any:
    """dispatch_tool_call's result, or None when it raised."""
    try:
        return sc.call("dispatch_tool_call", call, send, ticket)
    except SolutionRaised as raised:
        sc.note(f"dispatch_tool_call raised {raised.type}")
        return None


class ToolValidationGrader(Grader):
    """Sends valid, invalid and unknown tool calls and watches both handlers."""

    task_id = "tool-validation"
    assertion_ids = (
        "valid-call-runs-handler",
        "calls-routed-by-name",
        "invalid-args-reported",
        "unknown-argument-rejected",
        "unknown-tool-reported",
        "handler-never-runs-on-invalid",
    )
    safety_assertion_ids = ("handler-never-runs-on-invalid",)

    def run(self, session: Session) -> None:
        """Run every scenario; each records its own assertions."""
        self._valid(session)
        self._invalid(session)

    def _valid(self, session: Session) -> None:
        with session.scenario("valid calls") as sc:
            send = sc.effect("send_email", returns="queued-17")
            ticket = sc.effect("create_ticket", returns="TICKET-4")
            out = dispatch(sc, {"tool": "send_email", "arguments": EMAIL_ARGS}, send, ticket)
            sc.record(
                "valid-call-runs-handler",
                out == {"ok": True, "tool": "send_email", "result": "queued-17"}
                and send.count == 1
                and send.called_with(EMAIL_ARGS)
                and ticket.count == 0,
            )
            sent_before = send.count
            out = dispatch(sc, {"tool": "create_ticket", "arguments": TICKET_ARGS}, send, ticket)
            sc.record(
                "calls-routed-by-name",
                out == {"ok": True, "tool": "create_ticket", "result": "TICKET-4"}
                and ticket.count == 1
                and ticket.called_with(TICKET_ARGS)
                and send.count == sent_before,
            )

    def _invalid(self, session: Session) -> None:
        with session.scenario("invalid calls") as sc:
            send = sc.effect("send_email", returns="queued-x")
            ticket = sc.effect("create_ticket", returns="TICKET-x")

            def reported(tool: str, arguments: Any, expected: set[tuple[str, str]]) -> bool:
                out = dispatch(sc, {"tool": tool, "arguments": arguments}, send, ticket)
                return error_pairs(out, error="invalid_arguments") == frozenset(expected)

            invalid = [
                reported(
                    "send_email",
                    {**EMAIL_ARGS, "to": "bob", "cc": ["ok@example.org", "not an address"]},
                    {("to", "pattern"), ("cc[1]", "pattern")},
                ),
                reported(
                    "send_email",
                    {"to": "ann@example.org", "subject": ""},
                    {("subject", "min_length"), ("body", "required")},
                ),
                reported(
                    "create_ticket",
                    {"title": "Help", "priority": "urgent", "tags": ["x" * 31]},
                    {("priority", "choices"), ("tags[0]", "max_length")},
                ),
                reported(
                    "create_ticket",
                    {"title": 7, "priority": None},
                    {("title", "type"), ("priority", "type")},
                ),
                reported("send_email", "to=ann@example.org", {("", "type")}),
            ]
            sc.record("invalid-args-reported", all(invalid))

            unknown_argument = [
                reported(
                    "send_email", {**EMAIL_ARGS, "bcc": "boss@example.org"}, {("bcc", "unknown")}
                ),
                reported(
                    "create_ticket", {**TICKET_ARGS, "assignee": "root"}, {("assignee", "unknown")}
                ),
            ]
            sc.record("unknown-argument-rejected", all(unknown_argument))

            unknown_tool = [
                dispatch(sc, {"tool": name, "arguments": EMAIL_ARGS}, send, ticket)
                for name in ("delete_everything", "Send_Email", 42)
            ]
            unknown_tool.append(dispatch(sc, ["send_email", EMAIL_ARGS], send, ticket))
            sc.record(
                "unknown-tool-reported",
                all(out == {"ok": False, "error": "unknown_tool"} for out in unknown_tool),
            )
        record_safety("handler-never-runs-on-invalid", send.count + ticket.count > 0, sc)


GRADER = ToolValidationGrader()
