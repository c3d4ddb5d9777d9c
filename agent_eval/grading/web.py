"""The web part of the kit: a small DOM of rendered HTML, for observing pages and forms.

Optional: ``agent_eval.grading`` does not import it, so a task whose
solution is plain functions needs none of it; a grader of rendered HTML
imports it as ``from agent_eval.grading.web import parse_html, ...``. Built
with ``html.parser`` (standard library only: it is staged with the kit).

Graders never match markup with regular expressions: they parse it, then ask
structural questions (which element has this id, which label names this
control, what value would this form submit). Entities are decoded by the
parser, so an escaped ``&lt;script&gt;`` is text, never an element.

    doc = parse_html(html)
    email = doc.control_for_label("Email")
    assert email is not None and control_value(email) == "a@example.org"
    assert doc.find_all("script") == []
"""

from __future__ import annotations

import html
from collections.abc import Iterator
from html.parser import HTMLParser

__all__ = [
    "Document",
    "Element",
    "control_value",
    "form_data",
    "is_checked",
    "normalise_space",
    "parse_html",
]

VOID_TAGS = frozenset(
    {
        *("area", "base", "br", "col", "embed", "hr", "img", "input"),
        *("link", "meta", "param", "source", "track", "wbr"),
    }
)
_CLOSES_P = frozenset(
    {
        *("address", "article", "aside", "blockquote", "div", "dl", "fieldset", "footer"),
        *("form", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hr", "main", "nav", "ol"),
        *("p", "pre", "section", "table", "ul"),
    }
)
# Start tags that implicitly end an open element of the listed kinds.
_IMPLIED_END = {
    "li": frozenset({"li"}),
    "option": frozenset({"option"}),
    "optgroup": frozenset({"option", "optgroup"}),
    "dt": frozenset({"dt", "dd"}),
    "dd": frozenset({"dt", "dd"}),
    "tr": frozenset({"tr", "td", "th"}),
    "td": frozenset({"td", "th"}),
    "th": frozenset({"td", "th"}),
}
_ESCAPABLE_RAW_TEXT = frozenset({"textarea", "title"})
CONTROL_TAGS = frozenset({"input", "select", "textarea", "button"})
_NOT_SUBMITTED = frozenset({"submit", "button", "reset", "image", "file"})


def normalise_space(text: str) -> str:
    """*text* with runs of whitespace collapsed to one space and the ends trimmed."""
    return " ".join(text.split())


class Element:
    """One element: tag (lower case), attributes, children (elements and text strings)."""

    def __init__(self, tag: str, attrs: dict[str, str], parent: Element | None) -> None:
        self.tag = tag
        self.attrs = attrs
        """Attribute values, entity-decoded; a bare attribute (``required``) maps to ``""``."""
        self.children: list[Element | str] = []
        self.parent = parent

    def __repr__(self) -> str:
        ident = f" id={self.id!r}" if self.id else ""
        return f"<Element {self.tag}{ident}>"

    def get(self, name: str, default: str | None = None) -> str | None:
        """The value of attribute *name*, or *default*."""
        return self.attrs.get(name, default)

    def has(self, name: str) -> bool:
        """Whether attribute *name* is present (boolean attributes included)."""
        return name in self.attrs

    @property
    def id(self) -> str | None:
        """The ``id`` attribute."""
        return self.attrs.get("id")

    @property
    def classes(self) -> tuple[str, ...]:
        """The class names in the ``class`` attribute."""
        return tuple(self.attrs.get("class", "").split())

    @property
    def raw_text(self) -> str:
        """Concatenated text of every descendant text node, as written."""
        parts: list[str] = []
        stack: list[Element | str] = [self]
        while stack:
            node = stack.pop()
            if isinstance(node, str):
                parts.append(node)
            else:
                stack.extend(reversed(node.children))
        return "".join(parts)

    @property
    def text(self) -> str:
        """Text content with whitespace normalised."""
        return normalise_space(self.raw_text)

    def iter(self) -> Iterator[Element]:
        """Every descendant element in document order (not the element itself)."""
        stack = [c for c in reversed(self.children) if isinstance(c, Element)]
        while stack:
            element = stack.pop()
            yield element
            stack.extend(c for c in reversed(element.children) if isinstance(c, Element))

    def find_all(
        self, tag: str | None = None, *, class_: str | None = None, **attrs: str | bool
    ) -> list[Element]:
        """Descendants matching *tag*, a class name, and attributes.

        Attribute names use ``_`` for ``-`` (``aria_invalid="true"``); a value
        of True matches presence, False absence.
        """
        wanted = {name.replace("_", "-"): value for name, value in attrs.items()}
        found = []
        for element in self.iter():
            if tag is not None and element.tag != tag.lower():
                continue
            if class_ is not None and class_ not in element.classes:
                continue
            if all(_attr_matches(element, n, v) for n, v in wanted.items()):
                found.append(element)
        return found

    def find(
        self, tag: str | None = None, *, class_: str | None = None, **attrs: str | bool
    ) -> Element | None:
        """The first match of :meth:`find_all`, or None."""
        matches = self.find_all(tag, class_=class_, **attrs)
        return matches[0] if matches else None

    def closest(self, tag: str) -> Element | None:
        """The nearest ancestor (or the element itself) with *tag*."""
        node: Element | None = self
        while node is not None:
            if node.tag == tag:
                return node
            node = node.parent
        return None


def _attr_matches(element: Element, name: str, value: str | bool) -> bool:
    if value is True:
        return name in element.attrs
    if value is False:
        return name not in element.attrs
    return element.attrs.get(name) == value


class Document(Element):
    """The root of a parsed page, with lookups that need the whole tree."""

    def __init__(self) -> None:
        super().__init__("#document", {}, None)

    def by_id(self, element_id: str) -> Element | None:
        """The first element with ``id == element_id``."""
        return self.find(id=element_id)

    def ids(self) -> list[str]:
        """Every id in document order (duplicates included, so they can be detected)."""
        return [e.attrs["id"] for e in self.iter() if "id" in e.attrs]

    def label_for(self, control: Element) -> Element | None:
        """The label naming *control*: ``<label for=its id>``, else an enclosing label."""
        if control.id:
            for label in self.find_all("label"):
                if label.get("for") == control.id:
                    return label
        node = control.parent
        while node is not None:
            if node.tag == "label" and "for" not in node.attrs:
                return node
            node = node.parent
        return None

    def label_text(self, control: Element) -> str | None:
        """The normalised text of :meth:`label_for`, or None when unlabelled."""
        label = self.label_for(control)
        return None if label is None else label.text

    def control_for_label(self, text: str) -> Element | None:
        """The control whose label text equals *text* (whitespace-normalised)."""
        wanted = normalise_space(text)
        for label in self.find_all("label"):
            if label.text != wanted:
                continue
            target = label.get("for")
            if target is not None:
                control = self.by_id(target)
                if control is not None and control.tag in CONTROL_TAGS:
                    return control
                continue
            for element in label.iter():
                if element.tag in CONTROL_TAGS:
                    return element
        return None

    def controls(self, name: str) -> list[Element]:
        """Every form control with ``name``."""
        return [e for e in self.iter() if e.tag in CONTROL_TAGS and e.get("name") == name]

    def described_by(self, control: Element) -> list[Element]:
        """The elements that ``aria-describedby`` of *control* refers to, in order."""
        refs = control.get("aria-describedby", "") or ""
        return [e for e in (self.by_id(ref) for ref in refs.split()) if e is not None]


def is_checked(control: Element) -> bool:
    """Whether a checkbox/radio is checked, or an option is selected."""
    return control.has("selected") if control.tag == "option" else control.has("checked")


def control_value(control: Element) -> str | None:
    """The value the control currently holds, as a browser would submit it.

    Text-like inputs: the ``value`` attribute (``""`` when absent). Checkboxes
    and radios: their value (``"on"`` by default) when checked, else None.
    Textareas: their text. Selects: the selected option's value (the first
    option when none is selected), None when it has no options.
    """
    if control.tag == "textarea":
        text = control.raw_text
        return text[1:] if text.startswith("\n") else text
    if control.tag == "select":
        options = control.find_all("option")
        chosen = next((o for o in options if o.has("selected")), options[0] if options else None)
        if chosen is None:
            return None
        value = chosen.get("value")
        return normalise_space(chosen.raw_text) if value is None else value
    if control.tag == "input":
        kind = (control.get("type") or "text").lower()
        if kind in {"checkbox", "radio"}:
            return (control.get("value") or "on") if control.has("checked") else None
        return control.get("value") or ""
    return control.get("value")


def form_data(form: Element) -> list[tuple[str, str]]:
    """The (name, value) pairs *form* would submit as it is rendered, in order.

    Skips unnamed and disabled controls, buttons, and unchecked boxes.
    """
    pairs: list[tuple[str, str]] = []
    for control in form.iter():
        if control.tag not in {"input", "select", "textarea"}:
            continue
        name = control.get("name")
        if not name or control.has("disabled"):
            continue
        if control.tag == "input" and (control.get("type") or "text").lower() in _NOT_SUBMITTED:
            continue
        value = control_value(control)
        if value is not None:
            pairs.append((name, value))
    return pairs


class _TreeBuilder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.document = Document()
        self._open: list[Element] = [self.document]

    def _attrs(self, attrs: list[tuple[str, str | None]]) -> dict[str, str]:
        out: dict[str, str] = {}
        for name, value in attrs:
            out.setdefault(name.lower(), value if value is not None else "")
        return out

    def _close_implied(self, tag: str) -> None:
        current = self._open[-1].tag
        if current in _IMPLIED_END.get(tag, frozenset()) or (tag in _CLOSES_P and current == "p"):
            self._open.pop()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        tag = tag.lower()
        self._close_implied(tag)
        parent = self._open[-1]
        element = Element(tag, self._attrs(attrs), parent)
        parent.children.append(element)
        if tag not in VOID_TAGS:
            self._open.append(element)
        if tag in _ESCAPABLE_RAW_TEXT:
            # As in a browser, their content is text even where it looks like
            # markup (html.parser does this itself for script and style only).
            self.set_cdata_mode(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        tag = tag.lower()
        self._close_implied(tag)
        parent = self._open[-1]
        parent.children.append(Element(tag, self._attrs(attrs), parent))

    def handle_endtag(self, tag: str) -> None:
        tag = tag.lower()
        for depth in range(len(self._open) - 1, 0, -1):
            if self._open[depth].tag == tag:
                del self._open[depth:]
                return
        # A stray end tag closes nothing, as in a browser.

    def handle_data(self, data: str) -> None:
        if self._open[-1].tag in _ESCAPABLE_RAW_TEXT:
            data = html.unescape(data)
        children = self._open[-1].children
        if children and isinstance(children[-1], str):
            children[-1] += data
        else:
            children.append(data)


def parse_html(markup: str) -> Document:
    """Parse *markup* leniently (like a browser: stray end tags ignored, void tags closed)."""
    if not isinstance(markup, str):
        raise TypeError(f"parse_html needs a str, not {type(markup).__name__}")
    builder = _TreeBuilder()
    builder.feed(markup)
    builder.close()
    return builder.document
