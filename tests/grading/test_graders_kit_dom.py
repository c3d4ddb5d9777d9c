"""Rendered HTML is observed through a parsed DOM, never by matching markup text.

Escaped markup stays text, labels are associated the way a browser does
(``for`` first, then an enclosing label), and form values are read the way a
browser would submit them.
"""

from __future__ import annotations

from agent_eval.grading.web import control_value, form_data, is_checked, parse_html

FORM = """
<!doctype html>
<form method="post" action="/signup">
  <ul class="form-errors" role="alert"><li>Please fix 1 error</li></ul>
  <div class="field has-error">
    <label for="f-email">Email &amp; login</label>
    <input type="email" id="f-email" name="email" value="a&lt;b@example.org"
           required aria-invalid="true" aria-describedby="f-email-help f-email-error-1">
    <p class="field-help" id="f-email-help">We never share it.</p>
    <p class="field-error" id="f-email-error-1">Enter a valid address</p>
  </div>
  <label>Age <input type="number" name="age" value="41"></label>
  <label for="f-news">News</label><input type="checkbox" id="f-news" name="news" checked>
  <input type="checkbox" name="terms" value="yes">
  <select id="f-plan" name="plan"><option value="">Pick</option>
    <option value="pro" selected>Pro plan<option value="free">Free</select>
  <textarea name="bio">
Hello <b>world</b> &amp; more</textarea>
  <input type="text" name="ghost" value="x" disabled>
  <button type="submit">Sign up</button>
</form>
"""


def test_labels_associate_by_for_and_by_nesting() -> None:
    doc = parse_html(FORM)
    email = doc.control_for_label("Email & login")
    assert email is not None and email.id == "f-email"
    assert doc.label_text(email) == "Email & login"
    age = doc.control_for_label("Age")
    assert age is not None and age.get("name") == "age"
    news = doc.by_id("f-news")
    assert news is not None and doc.label_text(news) == "News"
    assert doc.control_for_label("Nobody") is None


def test_attribute_values_and_text_are_entity_decoded_and_whitespace_normalised() -> None:
    doc = parse_html(FORM)
    email = doc.by_id("f-email")
    assert email is not None
    assert control_value(email) == "a<b@example.org"
    assert email.has("required") and email.get("required") == ""
    assert [e.text for e in doc.described_by(email)] == [
        "We never share it.",
        "Enter a valid address",
    ]
    assert doc.find_all("input", aria_invalid="true") == [email]


def test_escaped_markup_is_text_and_never_an_element() -> None:
    doc = parse_html(
        '<p class="x">&lt;script&gt;alert(1)&lt;/script&gt;</p><title>a &lt; b</title>'
    )
    assert [t.text for t in doc.find_all("title")] == ["a < b"]
    assert doc.find_all("script") == []
    paragraph = doc.find("p", class_="x")
    assert paragraph is not None and paragraph.text == "<script>alert(1)</script>"
    assert parse_html("<p><script>alert(1)</script></p>").find_all("script") != []
    breakout = parse_html("<textarea></textarea><script>x()</script></textarea>")
    assert len(breakout.find_all("script")) == 1


def test_form_data_is_what_a_browser_would_submit() -> None:
    form = parse_html(FORM).find("form")
    assert form is not None
    assert form_data(form) == [
        ("email", "a<b@example.org"),
        ("age", "41"),
        ("news", "on"),
        ("plan", "pro"),
        ("bio", "Hello <b>world</b> & more"),
    ]


def test_select_values_fall_back_to_the_first_option_and_option_text() -> None:
    doc = parse_html("<select name=s><option>  One </option><option>Two</option></select>")
    select = doc.find("select")
    assert select is not None and control_value(select) == "One"
    options = doc.find_all("option")
    assert len(options) == 2 and not any(is_checked(o) for o in options)


def test_implied_end_tags_and_stray_end_tags_parse_like_a_browser() -> None:
    doc = parse_html("<ul><li>one<li>two</ul></span><p>a<div>b</div>")
    assert [li.text for li in doc.find_all("li")] == ["one", "two"]
    paragraph, block = doc.find("p"), doc.find("div")
    assert paragraph is not None and block is not None
    assert block.parent is doc and paragraph.text == "a"


def test_ids_are_listed_with_duplicates_so_a_grader_can_detect_them() -> None:
    doc = parse_html('<input id="a"><span id="a"></span><b id="c"></b>')
    assert doc.ids() == ["a", "a", "c"]
    assert doc.find(id="c") is not None and doc.find(class_="nope") is None
    span = doc.find("span")
    assert span is not None and span.closest("span") is span and span.closest("form") is None
