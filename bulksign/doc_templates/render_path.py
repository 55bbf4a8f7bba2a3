"""How a template version's documents are printed: many in one run of the renderer, or one by one and why.
More in docs/architecture/doc_templates.md."""

from __future__ import annotations

from dataclasses import dataclass

from bulksign.core.errors import Message
from bulksign.core.messages import N_
from bulksign.doc_templates import docx_alone
from bulksign.doc_templates.errors import TemplateError
from bulksign.doc_templates.kinds import HTML, source
from bulksign.documents import together
from bulksign.models import TemplateVersion

SWITCHED_OFF = N_("rendering together is switched off on this server (RENDER_TOGETHER)")
WORD = "docx"
OTHER_KIND = N_("PDF form templates are filled one document at a time")


@dataclass(frozen=True)
class RenderPath:
    together: bool
    #: Why not, and what to change, for staff; None when its documents render together.
    reason: Message | None = None


def render_path(version: TemplateVersion, *, enabled: bool) -> RenderPath:
    """How ``version``'s documents are printed; ``enabled``: the server's ``RENDER_TOGETHER``."""
    if not enabled:
        return RenderPath(False, SWITCHED_OFF)
    if version.kind not in (HTML, WORD):
        return RenderPath(False, OTHER_KIND)
    if version.render_alone:
        return RenderPath(False, N_(version.render_alone["msgid"], **(version.render_alone.get("values") or {})))
    if version.kind == WORD:
        try:
            reason = docx_alone.why_alone(source(version.source_key))
        except TemplateError as exc:  # the file itself is refused: the preview says why
            return RenderPath(False, exc.message)
        return RenderPath(reason is None, reason)
    problem = together.template_problem(version.html)
    if problem is not None:
        return RenderPath(False, problem.message)
    return RenderPath(True)
