"""How a batch's documents are cut into render jobs: whole chunks while much is left, smaller ones at the end, so
the render workers finish a batch about together instead of one rendering a last whole chunk alone."""

from __future__ import annotations

from sqlalchemy import update

from bulksign.core.extensions import db
from bulksign.models import SigningRequest, utcnow
from bulksign.work.pipeline import RENDER, top_up
from bulksign.work.queues import get_queue
from tests.support.batches import make_batch


def _claim_next() -> list[int]:
    """What a render worker does first with the job at the head of the line: take it off the queue and claim its
    requests (``generating``); the requests it names."""
    queue = get_queue("pdf")
    job = queue.fetch_job(queue.job_ids[0])
    assert job is not None
    queue.remove(job)
    ids = list(job.args[0])
    db.session.execute(update(SigningRequest).where(SigningRequest.id.in_(ids)).values(status="generating"))
    db.session.commit()
    return ids


def test_a_batchs_last_documents_go_in_smaller_chunks_each_rendered_once(make_app, users):
    app = make_app(RENDER_CHUNK_SIZE=20, CHUNKS_QUEUED_PER_BATCH=2)
    with app.app_context():
        batch_id = make_batch(now=utcnow(), user=users["staff"], recipients=100)
        top_up(RENDER, [batch_id])
        claimed: list[list[int]] = []
        while get_queue("pdf").job_ids:
            claimed.append(_claim_next())
            top_up(RENDER, [batch_id])  # as a worker does once it holds its chunk
            assert len(claimed) < 20, "the line never ends"

        # Whole chunks while two or more are left behind the line; then the rest halved, down to a quarter chunk.
        assert [len(chunk) for chunk in claimed] == [20, 20, 20, 20, 10, 5, 5]
        everyone = [i for chunk in claimed for i in chunk]
        assert len(everyone) == len(set(everyone)) == 100
