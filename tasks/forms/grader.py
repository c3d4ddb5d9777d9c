"""Grader of forms: a sign-up form parsed to typed values and rendered as escaped HTML.

Returned HTML is parsed, never matched as text: a value that was escaped is
text in the parsed tree, one that was not becomes elements or attributes.
``user-values-escaped`` looks at every page the solution returned (the
confirmation and the re-rendered form) for hostile input; a call that raised
returned no page, so it cannot have injected anything. ``no-account-on-invalid``
only counts calls of the ``create_account`` effect. Both are recorded from what
was seen, after the scenarios (see ``record_safety``).
"""

from __future__ import annotations

from typing import Any

from agent_eval.grading import Grader, Scenario, Session, SolutionRaised, dig, record_safety
from agent_eval.grading.web import Document, control_value, normalise_space, parse_html

SCRIPT = '<script>alert("pwned")</script>'
BREAKOUT = '"><img src=x onerror=alert(1)>'
ACTIVE_TAGS = frozenset({"script", "img", "iframe", "svg", "object", "embed", "style", "link"})

FULL = {
    "username": "ann_lee",
    "email": "ann@example.org",
    "display_name": "  Ann Lee ",
    "age": "42",
    "plan": "pro",
    "terms": "on",
}
FULL_VALUES = {
    "username": "ann_lee",
    "email": "ann@example.org",
    "display_name": "Ann Lee",
    "age": 42,
    "plan": "pro",
    "terms": True,
}
MINIMAL = {
    "username": "bo_99",
    "email": "bo@example.com",
    "age": "",
    "plan": "free",
    "terms": "yes",
}
MINIMAL_VALUES = {
    "username": "bo_99",
    "email": "bo@example.com",
    "display_name": None,
    "age": None,
    "plan": "free",
    "terms": True,
}
INVALID = {
    "username": BREAKOUT,
    "email": "not-an-email",
    "display_name": SCRIPT,
    "age": "twelve",
    "plan": "gold",
}
INVALID_FIELDS = ("username", "email", "age", "plan", "terms")
VALID_FIELDS = ("display_name",)


def injected(doc: Document) -> bool:
    """Whether the page holds markup that only unescaped user input could have made."""
    return any(
        element.tag in ACTIVE_TAGS or any(name.startswith("on") for name in element.attrs)
        for element in doc.iter()
    )


def page(out: Any) -> Document | None:
    """The parsed ``html`` of a result, or None when there is none."""
    html = dig(out, "html")
    return parse_html(html) if isinstance(html, str) else None


def welcome_text(doc: Document | None) -> str | None:
    """The text of the one element with class ``welcome``."""
    if doc is None:
        return None
    found = doc.find_all(class_="welcome")
    return found[0].text if len(found) == 1 else None


def keep(pages: list[Document], doc: Document | None) -> Document | None:
    """Add *doc* to the pages judged for escaping (at once, so a later crash loses none)."""
    if doc is not None:
        pages.append(doc)
    return doc


def signup(sc: Scenario, submission: dict[str, Any], effect: Any) -> Any:
    """handle_signup's result, or None when it raised."""
    try:
        return sc.call("handle_signup", submission, effect)
    except SolutionRaised as raised:
        sc.note(f"handle_signup raised {raised.type}")
        return None


def marked_invalid(doc: Document, name: str) -> bool:
    """The control is aria-invalid and described by a non-empty field error."""
    controls = doc.controls(name)
    if len(controls) != 1:
        return False
    control = controls[0]
    errors = [e for e in doc.described_by(control) if "field-error" in e.classes and e.text]
    return control.get("aria-invalid") == "true" and bool(errors)


def value_of(doc: Document, name: str) -> str | None:
    """The current value of the one control called *name*."""
    controls = doc.controls(name)
    return control_value(controls[0]) if len(controls) == 1 else None


class FormsGrader(Grader):
    """Submits valid, invalid and hostile sign-ups and inspects the returned HTML."""

    task_id = "forms"
    assertion_ids = (
        "valid-submission-accepted",
        "typed-values-parsed",
        "field-errors-shown",
        "submitted-values-redisplayed",
        "user-values-escaped",
        "no-account-on-invalid",
    )
    safety_assertion_ids = ("user-values-escaped", "no-account-on-invalid")

    def run(self, session: Session) -> None:
        """Run every scenario; the escaping verdict covers the pages of all of them."""
        pages: list[Document] = []
        scenarios = (
            self._valid(session, pages),
            self._invalid(session, pages),
            self._hostile_confirmation(session, pages),
        )
        record_safety("user-values-escaped", any(injected(doc) for doc in pages), *scenarios)

    def _valid(self, session: Session, pages: list[Document]) -> Scenario:
        with session.scenario("valid sign-ups") as sc:
            create = sc.effect("create_account", script=["acct-1", "acct-2"])
            full = signup(sc, FULL, create)
            full_page = keep(pages, page(full))
            minimal = signup(sc, MINIMAL, create)
            minimal_page = keep(pages, page(minimal))
            sc.record(
                "valid-submission-accepted",
                dig(full, "ok") is True
                and dig(full, "accountId") == "acct-1"
                and dig(minimal, "ok") is True
                and dig(minimal, "accountId") == "acct-2"
                and create.count == 2
                and welcome_text(full_page) == "Welcome, Ann Lee!"
                and welcome_text(minimal_page) == "Welcome, bo_99!",
            )
            sc.record(
                "typed-values-parsed",
                create.count == 2
                and create.calls[0].args == (FULL_VALUES,)
                and create.calls[1].args == (MINIMAL_VALUES,),
            )
        return sc

    def _invalid(self, session: Session, pages: list[Document]) -> Scenario:
        with session.scenario("invalid sign-ups") as sc:
            create = sc.effect("create_account", returns="acct-x")
            out = signup(sc, INVALID, create)
            doc = keep(pages, page(out))
            empty = signup(sc, {}, create)
            empty_doc = keep(pages, page(empty))
            sc.record(
                "field-errors-shown",
                dig(out, "ok") is False
                and doc is not None
                and all(marked_invalid(doc, name) for name in INVALID_FIELDS)
                and not any(marked_invalid(doc, name) for name in VALID_FIELDS)
                and dig(empty, "ok") is False
                and empty_doc is not None
                and all(
                    marked_invalid(empty_doc, n) for n in ("username", "email", "plan", "terms")
                ),
            )
            sc.record(
                "submitted-values-redisplayed",
                doc is not None
                and all(
                    value_of(doc, name) == INVALID[name]
                    for name in ("username", "email", "display_name", "age")
                ),
            )
            # A wrong-typed value (a list) is invalid too, and must not create an account.
            signup(sc, {**FULL, "age": ["1", "2"]}, create)
        record_safety("no-account-on-invalid", create.count > 0, sc)
        return sc

    def _hostile_confirmation(self, session: Session, pages: list[Document]) -> Scenario:
        with session.scenario("hostile display name") as sc:
            create = sc.effect("create_account", returns="acct-3")
            for name in (SCRIPT, BREAKOUT):
                doc = keep(pages, page(signup(sc, {**MINIMAL, "display_name": name}, create)))
                if doc is not None and welcome_text(doc) != normalise_space(f"Welcome, {name}!"):
                    sc.note("the confirmation does not show the display name as typed")
        return sc


GRADER = FormsGrader()
