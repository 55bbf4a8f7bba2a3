"""Whether the Word converter (LibreOffice) is starting, for the pages that wait on it, which say so (read only;
docs/architecture/views.md)."""

from __future__ import annotations

from datetime import timedelta

from flask import Flask

from bulksign.batches.dashboard import Progress
from bulksign.documents import libreoffice
from bulksign.models import Batch, utcnow


def init_app(app: Flask) -> None:
    @app.template_global()
    def word_converter_cold() -> bool:
        """This web process has no warm LibreOffice: its next Word preview starts one first."""
        return not libreoffice.converter().warm

    @app.template_global()
    def word_converter_starting(batch: Batch, progress: Progress) -> bool:
        """A Word batch with no document prepared yet, within a cold start's time of its creation.

        The render worker's LibreOffice lives in that process, out of the web page's sight; what the page sees
        is that none of the batch's documents is ready yet, which for a Word batch this young is the start.
        """
        if progress.rendering == 0 or progress.rendered > 0:
            return False
        young = utcnow() - (batch.started_at or batch.created_at) < timedelta(seconds=libreoffice.START_SECONDS)
        # The pages load the batch with its version's kind (``batches.dashboard``): no query here.
        return young and batch.template_version.kind == "docx"
