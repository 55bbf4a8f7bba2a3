"""The URL builders Werkzeug compiles for every rule, made once per suite process instead of once per app.

Each test builds its own app (``make_app``), and Werkzeug turns each of its ~700 URL rules into two Python
functions through ``ast`` and ``compile``: 80% of ``create_app``, a fifth of a second per test on the CI machine.
A builder's code depends only on the rule's text, its parsed parts and whether it appends unknown arguments; it
reads the rule's converters from the rule it is bound to when called, so one compiled function serves every app.
Rules with a default for one of their variables resolve it through their converter when compiled: those are
compiled as before.
"""

from __future__ import annotations

from werkzeug.routing.rules import Rule

_compile = Rule._compile_builder
_made: dict[tuple, object] = {}


def _compile_once(self: Rule, append_unknown: bool = True):
    defaults = self.defaults or {}
    if defaults and any(is_dynamic and data in defaults for is_dynamic, data in self._trace):
        return _compile(self, append_unknown)
    key = (self.rule, tuple(self._trace), tuple(defaults), append_unknown)
    if key not in _made:
        _made[key] = _compile(self, append_unknown)
    return _made[key]


def install() -> None:
    Rule._compile_builder = _compile_once
