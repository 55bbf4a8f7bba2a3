"""Queue ``mail``: send outgoing mails through the global throttle and one reused SMTP connection.

A job sends a chunk of mails (``batches.sending.send_chunk``: the claim, the send and the settling of each mail;
docs/architecture/mail.md); the connection (``mail.smtp_link``) is this process's.
"""

from __future__ import annotations

from bulksign.batches.sending import send_chunk
from bulksign.jobs._app import session_registry, this_app
from bulksign.mail.smtp_link import SmtpLink
from bulksign.work.pipeline import SEND, beating, release
from bulksign.work.queues import SEND_MANY, job

#: Per worker process: the connection outlives jobs (AppWorker does not fork).
smtp_link = SmtpLink()


@job(SEND_MANY)
def send_many(mail_ids: list[int]) -> str:
    """Send the queued mails among ``mail_ids``; returns what happened. Raises TransientFailure to retry the rest."""
    session = session_registry()()
    # Each mail's outcome is committed on its own (a crash re-sends at most the mail in flight);
    # the chunk's rows stay loaded across those commits instead of being re-read one by one.
    session.expire_on_commit = False
    try:
        with beating(SEND, mail_ids):
            outcome = send_chunk(mail_ids, app=this_app(), link=smtp_link)
    finally:
        session.expire_on_commit = True
    release(SEND, mail_ids)
    return outcome
