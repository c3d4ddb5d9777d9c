"""appkit_forms: declarative HTML forms with escaped rendering and typed parsing.

Build a :class:`Form` from fields, :meth:`Form.parse` submitted strings into an
``appkit.ValidationResult``, and :meth:`Form.render` it (with values and errors)
to HTML. Everything public is importable from this package.
"""

from appkit_forms.fields import (
    CheckboxField,
    EmailField,
    FormField,
    IntegerField,
    SelectField,
    TextField,
)
from appkit_forms.form import Form

__version__ = "0.1.0"

__all__ = [
    "CheckboxField",
    "EmailField",
    "Form",
    "FormField",
    "IntegerField",
    "SelectField",
    "TextField",
    "__version__",
]
