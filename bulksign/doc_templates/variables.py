"""Which variables a template needs: the placeholders it uses (``extract_variables``), those every request has
whatever the file's columns (``BUILTIN_VARIABLES``), and values that show where each lands (``sample_row``).
"""

from __future__ import annotations

from jinja2 import TemplateSyntaxError, meta

from bulksign.doc_templates.errors import syntax_error
from bulksign.doc_templates.jinja_sandbox import refuse_unknown_names, sandbox
from bulksign.documents.signature_box import SIGNATURE_VARIABLE, html_mark

#: Variables every request has whatever the file's columns; not required as columns.
BUILTIN_VARIABLES = frozenset({"email", "name", "phone", SIGNATURE_VARIABLE})


def extract_variables(source: str) -> list[str]:
    """The placeholders a template uses, sorted; raises TemplateError with the line on a syntax error or an unknown
    filter or test (listing the variables compiles the template, which fails on those)."""
    try:
        ast = sandbox.parse(source)
    except TemplateSyntaxError as exc:
        raise syntax_error(exc, source) from None
    refuse_unknown_names(ast, source=source)
    return sorted(meta.find_undeclared_variables(ast))


def sample_row(variables: list[str]) -> dict[str, str]:
    """Values that show where each variable lands, for the preview."""
    known = {
        "name": "Jane Example",
        "email": "jane@example.com",
        "phone": "+1 555 0100",
        SIGNATURE_VARIABLE: html_mark(),
    }
    return {var: known.get(var, f"[{var}]") for var in variables}
