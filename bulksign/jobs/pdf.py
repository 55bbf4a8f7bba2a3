"""Queue ``pdf``: render a chunk of requests' documents, store them, record them, hand them to the mail step
(``batches.rendering.render_chunk``)."""

from __future__ import annotations

from bulksign.batches.rendering import render_chunk
from bulksign.jobs._app import this_app
from bulksign.work.pipeline import RENDER, beating, release
from bulksign.work.queues import RENDER_MANY, job


@job(RENDER_MANY)
def render_many(request_ids: list[int]) -> str:
    """Render the pending requests among ``request_ids``; returns what happened, for the job result."""
    with beating(RENDER, request_ids):
        outcome = render_chunk(request_ids, app=this_app())
    release(RENDER, request_ids)
    return outcome
