"""Which variables a template needs: the placeholders it uses, those every request has, which of them it prints
whatever the row holds (a row may not leave them empty), and sample values that show where each lands."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from jinja2 import TemplateSyntaxError, meta, nodes

from bulksign.doc_templates.errors import syntax_error
from bulksign.doc_templates.jinja_sandbox import refuse_other_templates, refuse_unknown_names, sandbox
from bulksign.documents.field_boxes import DEFAULT_TYPE, field_name, field_values
from bulksign.documents.signature_box import SIGNATURE_VARIABLE, mark_role, mark_values

#: Variables every request has whatever the template: a file may always have their columns (name and phone are
#: required only when printed, ``columns``; ``signature`` is never a column).
BUILTIN_VARIABLES = frozenset({"email", "name", "phone", SIGNATURE_VARIABLE})
#: Filters that put something in place of an empty value: what they are applied to may be empty.
_FALLBACK_FILTERS = frozenset({"default", "d"})


def parse(source: str) -> nodes.Template:
    """The template's syntax tree; TemplateError with the line on a syntax error, an unknown filter or test, or a tag
    that would load another template."""
    try:
        ast = sandbox.parse(source)
    except TemplateSyntaxError as exc:
        raise syntax_error(exc, source) from None
    refuse_unknown_names(ast, source=source)
    refuse_other_templates(ast, source=source)
    return ast


def extract_variables(source: str) -> list[str]:
    """The placeholders a template uses, sorted; raises TemplateError with the line on a syntax error or an unknown
    filter or test (listing the variables compiles the template, which fails on those)."""
    return sorted(meta.find_undeclared_variables(parse(source)))


def printed_variables(ast: nodes.Template) -> frozenset[str]:
    """The variables ``ast`` surely prints whatever the row holds, so each row must give them a value; read
    conservatively from the syntax tree (what counts as printed: docs/architecture/doc_templates.md)."""
    return frozenset(_printed(ast.body, {}, sure=True)) & meta.find_undeclared_variables(ast)


def _printed(statements: Iterable[nodes.Node], scope: dict[str, frozenset[str]], *, sure: bool) -> set[str]:
    """The row's variables ``statements`` surely print (none when ``sure`` is False: they run only on some rows).

    ``scope``: names ``{% set %}`` gave a value → the row's variables that value surely prints; updated as the
    statements assign (a name set where it is not sure carries nothing)."""
    found: set[str] = set()
    for node in statements:
        if isinstance(node, nodes.Output):
            if sure:
                for child in node.nodes:
                    found |= _shown(child, scope)
        elif isinstance(node, nodes.Assign):
            # ``{% set a, b = … %}`` and ``{% set ns.x = … %}``: which value lands where is not read; nothing.
            value = _shown(node.node, scope) if sure and isinstance(node.target, nodes.Name) else frozenset()
            for name in _names(node.target):
                scope[name] = value
        elif isinstance(node, nodes.AssignBlock):
            body = _printed(node.body, dict(scope), sure=sure)
            fallback = node.filter is not None and _has_fallback(node.filter)
            assert isinstance(node.target, (nodes.Name, nodes.NSRef))  # what Jinja parses a block's target to
            scope[node.target.name] = frozenset() if fallback else frozenset(body)
        elif isinstance(node, nodes.If):
            # The test only chooses a branch; each branch (elif, else) runs for some rows only.
            for branch in (node.body, *(e.body for e in node.elif_), node.else_):
                _printed(branch, scope, sure=False)
        elif isinstance(node, nodes.For):
            inner = dict(scope)
            for name in _names(node.target):
                inner[name] = frozenset()
            _printed(node.body, inner, sure=False)
            _printed(node.else_, dict(scope), sure=False)
        elif isinstance(node, nodes.With):
            inner = dict(scope)
            for target, expr in zip(node.targets, node.values, strict=False):
                for name in _names(target):
                    inner[name] = _shown(expr, scope) if sure and isinstance(target, nodes.Name) else frozenset()
            found |= _printed(node.body, inner, sure=sure)
        elif isinstance(node, nodes.FilterBlock):
            found |= _printed(node.body, dict(scope), sure=sure and not _has_fallback(node.filter))
        elif isinstance(node, (nodes.Block, nodes.Scope, nodes.ScopedEvalContextModifier)):
            found |= _printed(node.body, scope, sure=sure)
        elif isinstance(node, (nodes.Macro, nodes.CallBlock)):
            # A macro runs where it is called, maybe under a condition, with arguments of its own: nothing here.
            if isinstance(node, nodes.Macro):
                scope[node.name] = frozenset()
        # Anything else prints nothing of the row ({% include %} and the like fail at save: ``versions``).
    return found


def _names(target: nodes.Node) -> list[str]:
    """The names an assignment's target sets (``a``, ``a, b``; ``ns.x`` sets none)."""
    if isinstance(target, nodes.Name):
        return [target.name]
    return [n.name for n in target.find_all(nodes.Name)] if isinstance(target, nodes.Tuple) else []


def _has_fallback(node: nodes.Filter) -> bool:
    """Whether a chain of filters has ``default`` in it: an empty value is replaced."""
    return any(f.name in _FALLBACK_FILTERS for f in node.find_all(nodes.Filter)) or node.name in _FALLBACK_FILTERS


def _shown(expr: nodes.Node, scope: dict[str, frozenset[str]]) -> frozenset[str]:
    """The row's variables whose value printing ``expr`` surely shows (an empty one as a gap)."""
    if isinstance(expr, nodes.Name):
        return scope.get(expr.name, frozenset({expr.name}))
    if isinstance(expr, nodes.Filter):
        # ``x|upper``, ``x|trim``, ``x|int`` print the value made over (an empty one as nothing or a bare 0).
        if expr.name in _FALLBACK_FILTERS or expr.node is None:
            return frozenset()
        return _shown(expr.node, scope)
    if isinstance(expr, nodes.Concat):
        return frozenset().union(*(_shown(n, scope) for n in expr.nodes))
    if isinstance(expr, (nodes.And, nodes.Or)):
        return frozenset()  # ``x or ''`` prints the other side when x is empty; ``x and y`` prints y only if x
    if isinstance(expr, nodes.BinExpr):
        return _shown(expr.left, scope) | _shown(expr.right, scope)
    if isinstance(expr, (nodes.Neg, nodes.Pos)):
        return _shown(expr.node, scope)
    if isinstance(expr, nodes.CondExpr):
        return _shown(expr.expr1, scope) & _shown(expr.expr2, scope) if expr.expr2 is not None else frozenset()
    if isinstance(expr, (nodes.Getattr, nodes.Getitem)):
        return _shown(expr.node, scope)
    if isinstance(expr, nodes.Call) and isinstance(expr.node, nodes.Getattr):
        return _shown(expr.node.node, scope)  # a method of the value: ``x.strip()``, ``x.title()``
    if isinstance(expr, (nodes.MarkSafe, nodes.MarkSafeIfAutoescape)):
        return _shown(expr.expr, scope)
    # Constants, tests and comparisons (True/False), macro and function calls, literals, slices: nothing.
    return frozenset()


def sample_row(variables: list[str], fields: Mapping[str, str] | None = None) -> dict[str, str]:
    """Values that show where each variable lands, for the preview; ``fields``: the version's field marks and their
    types (``field_boxes.stored_marks``), which size their boxes; default: each ``field_<name>`` among
    ``variables``, as text."""
    known = {
        "name": "Jane Example",
        "email": "jane@example.com",
        "phone": "+1 555 0100",
        **mark_values(v for v in variables if mark_role(v)),
        **field_values({v: DEFAULT_TYPE for v in variables if field_name(v)} if fields is None else fields),
    }
    return {var: known.get(var, f"[{var}]") for var in variables}
