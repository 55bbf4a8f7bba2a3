"""Queue ``pdf``: render a chunk of requests' documents, store them, record them, hand them to the mail step.

The claim, the render and the settling of a chunk, and what a worker killed mid-chunk leaves behind, are
``documents.rendering.render_chunk``'s.
"""

from __future__ import annotations

from flask import current_app

from bulksign.documents.rendering import render_chunk
from bulksign.work.pipeline import RENDER, beating, release
from bulksign.work.queues import RENDER_MANY, job


@job(RENDER_MANY)
def render_many(request_ids: list[int]) -> str:
    """Render the pending requests among ``request_ids``; returns what happened, for the job result."""
    with beating(RENDER, request_ids):
        outcome = render_chunk(request_ids, app=current_app._get_current_object())
    release(RENDER, request_ids)
    return outcome
