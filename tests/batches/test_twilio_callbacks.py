"""Twilio's status callbacks and replies are taken on its ``X-Twilio-Signature`` alone, so no secret travels in the
callback URL: a request signed as Twilio signs it changes the text, a forged or unsigned one is refused with
nothing changed. On real workers, Twilio's API a loopback stand-in."""

from __future__ import annotations

import pytest
from flask import g
from sqlalchemy import select

from bulksign.core.extensions import db
from bulksign.mail.sms import twilio_signature
from bulksign.models import OutgoingMail, PhoneSuppression
from tests.support.texting import create_batch

TOKEN = "twilio-auth-token-45b"


@pytest.fixture
def twilio(app, gateway):
    app.config.update(
        TWILIO_ACCOUNT_SID="AC45B",
        TWILIO_AUTH_TOKEN=TOKEN,
        TWILIO_FROM="+15005550006",
        TWILIO_API_URL=gateway.base,
        SMS_WEBHOOK_SECRET="shared-secret-45b",
    )


def _callback_url(app, query: str = "") -> str:
    return f"{app.config['APP_URL'].rstrip('/')}/webhooks/sms{query}"


def _post(client, fields: dict, *, signature: str | None, query: str = "", headers: dict | None = None):
    g.pop("_login_user", None)  # the test's app context is shared with the client: the workers ended its session
    signed = {"X-Twilio-Signature": signature} if signature is not None else {}
    return client.post(f"/webhooks/sms{query}", data=fields, headers={**signed, **(headers or {})})


def _state() -> tuple[str, str | None]:
    db.session.expire_all()
    text = db.session.scalars(select(OutgoingMail).where(OutgoingMail.channel == "text")).one()
    return text.status, text.error


def _texted(app, client, users, gateway, run_jobs) -> str:
    create_batch(client, users, "email,name,phone\n,Ivan,+79991234567\n", channel="text_without_address")
    run_jobs("pdf", "mail")
    [sent] = gateway.received
    return sent.id


def test_twilio_is_asked_to_call_back_without_a_secret_and_its_signed_report_is_taken(
    app, users, client, gateway, twilio, run_jobs
):
    sid = _texted(app, client, users, gateway, run_jobs)
    [sent] = gateway.received
    assert sent.body["StatusCallback"] == _callback_url(app)
    fields = {"MessageSid": sid, "MessageStatus": "delivered", "AccountSid": "AC45B", "To": "+79991234567"}
    signature = twilio_signature(url=_callback_url(app), params=fields.items(), auth_token=TOKEN)
    answer = _post(client, fields, signature=signature)
    assert (answer.status_code, answer.json) == (200, {"matched": 1, "mailed": 0, "opted_out": False})
    assert _state() == ("delivered", None)


def test_forged_or_unsigned_callbacks_are_refused_and_change_nothing(app, users, client, gateway, twilio, run_jobs):
    sid = _texted(app, client, users, gateway, run_jobs)
    fields = {"MessageSid": sid, "MessageStatus": "undelivered", "ErrorCode": "30003"}
    url = _callback_url(app)
    good = twilio_signature(url=url, params=fields.items(), auth_token=TOKEN)
    forged = [
        # No signature, an empty one, the shared secret instead (header, query string, basic auth).
        (fields, None, "", {}),
        (fields, "", "", {}),
        (fields, None, "?token=shared-secret-45b", {}),
        (fields, None, "", {"X-Sms-Secret": "shared-secret-45b"}),
        # Signed with another token, for another URL, or for other fields.
        (fields, twilio_signature(url=url, params=fields.items(), auth_token="guessed"), "", {}),
        (fields, twilio_signature(url=url + "?x=1", params=fields.items(), auth_token=TOKEN), "", {}),
        (fields, good, "?x=1", {}),
        ({**fields, "MessageStatus": "failed"}, good, "", {}),
        ({**fields, "ErrorMessage": "added"}, good, "", {}),
        # Garbage in the header.
        (fields, good[:-2], "", {}),
        (fields, "A" * 5000, "", {}),
    ]
    for body, signature, query, headers in forged:
        answer = _post(client, body, signature=signature, query=query, headers=headers)
        assert (answer.status_code, answer.json) == (403, {"error": "wrong or missing signature or secret"})
    assert _state() == ("sent", None)
    assert db.session.scalar(select(PhoneSuppression.id)) is None


def test_a_signed_stop_reply_bars_the_number_and_a_forged_one_does_not(app, users, client, gateway, twilio, run_jobs):
    reply = {"From": "+79991234567", "Body": "STOP", "OptOutType": "STOP", "MessageSid": "SM1"}
    forged = twilio_signature(url=_callback_url(app), params=reply.items(), auth_token="wrong")
    assert _post(client, reply, signature=forged).status_code == 403
    assert db.session.scalar(select(PhoneSuppression.id)) is None
    signed = twilio_signature(url=_callback_url(app), params=reply.items(), auth_token=TOKEN)
    assert _post(client, reply, signature=signed).json == {"matched": 1, "mailed": 0, "opted_out": True}
    assert db.session.scalar(select(PhoneSuppression.phone)) == "+79991234567"


def test_without_an_auth_token_twilios_callbacks_have_no_endpoint(app, client, twilio):
    app.config["TWILIO_AUTH_TOKEN"] = ""
    assert _post(client, {"MessageSid": "SM1", "MessageStatus": "delivered"}, signature="x").status_code == 404
