"""No value, typed or stored, gives a mail a header field of its own making: the one header builder folds
text onto one line and refuses an address with a line break; names are refused with one where they are typed."""

from __future__ import annotations

import email
import email.policy

import pytest
from flask_mail import Message
from sqlalchemy import select, update

from bulksign.batches.notices import queued_completion_notices
from bulksign.batches.progress import refresh_batch_statuses
from bulksign.batches.states import transition
from bulksign.core.extensions import db
from bulksign.doc_templates.errors import TemplateError
from bulksign.doc_templates.versions import create_template
from bulksign.mail.mail_headers import HeaderError, header, outgoing
from bulksign.models import Batch, OutgoingMail, Team, TemplateVersion, utcnow
from bulksign.people.teams import TeamError, create_team
from bulksign.people.users import create_api_key
from bulksign.signing.recipient_actions import decline
from bulksign.work.pipeline import enqueue_renders, enqueue_sends
from tests.support.batches import make_batch, request_ids, requests_of
from tests.support.clock import NOW
from tests.support.web import csrf_from

INJECTED = "Q3\r\nReply-To: attacker@example.com\r\nX-Injected: yes"


def fields_of(data: bytes) -> list[str]:
    """The names of a message's top-level header fields, as a receiving mail program reads them."""
    return email.message_from_bytes(data, policy=email.policy.default).keys()


# --- the builder itself -----------------------------------------------------------------------------


@pytest.mark.parametrize("breaking", ["\r\n", "\n", "\r", "\x00", "\x0b", "\x1b", "\x7f", "\x85", "\u2028", "\t"])
def test_a_subject_with_a_line_break_or_control_character_is_folded_onto_one_line(breaking):
    made = header(name="Subject", value=f"Q3{breaking}X-Injected: yes")
    assert made.fold(policy=email.policy.SMTP) == "Subject: Q3 X-Injected: yes\r\n"


def test_a_long_subject_is_folded_as_the_policy_folds_and_unfolds_to_the_one_line_given():
    text = 'Batch "' + "quarterly contracts " * 8 + '" is done'
    folded = header(name="Subject", value=text.replace(" ", "\r\n", 3)).fold(policy=email.policy.SMTP)
    assert folded.count("\r\n") > 1 and all(line.startswith(" ") for line in folded.split("\r\n")[1:-1])
    assert email.message_from_string(folded, policy=email.policy.default)["Subject"] == " ".join(text.split())


def test_a_long_subject_in_another_script_keeps_every_space_when_folded():
    """The SMTP policy folded on a space between two encoded words, which readers drop ("Трудовойдоговор")."""
    text = "Напоминание: «Трудовой договор» ждёт вашей подписи до 5 декабря, ссылка в письме личная"
    folded = header(name="Subject", value=text).fold(policy=email.policy.SMTP)
    assert folded.count("\r\n") > 1 and all(len(line) <= 78 for line in folded.split("\r\n"))
    assert email.message_from_string(folded, policy=email.policy.default)["Subject"] == text


@pytest.mark.parametrize(
    "value",
    [
        "hr@example.com\r\nX-Injected: yes",
        "HR <hr@example.com>\nBcc: attacker@example.com",
        ("HR", "hr@example.com\r\nX-Injected: yes"),
        ("HR", "hr@example.com\x00"),
    ],
)
def test_an_address_with_a_line_break_or_control_character_is_refused_saying_which_field(value):
    with pytest.raises(HeaderError) as refused:
        header(name="Reply-To", value=value)
    reason = str(refused.value)
    assert reason.startswith("Reply-To: ") and "line break or another control character" in reason
    assert "\n" not in reason  # the value is shown escaped, so the reason is one line in logs and on the page


@pytest.mark.parametrize(
    "value, words",
    [
        ("not an address", "is not one e-mail address"),
        ("a@example.com, b@example.com", "is not one e-mail address"),
        (("A", "nobody"), "is not an e-mail address"),
        (("A", "анна@example.com"), "local part that is not ASCII"),
    ],
)
def test_what_is_not_one_sendable_address_is_refused(value, words):
    with pytest.raises(HeaderError, match=words):
        header(name="To", value=value)


def test_a_display_name_with_line_breaks_is_folded_and_the_address_kept():
    made = header(name="To", value=[("Anna\r\nX-Injected: yes", "anna@example.com"), "Bulksign <no-reply@example.com>"])
    assert [(a.display_name, a.addr_spec) for a in made.addresses] == [
        ("Anna X-Injected: yes", "anna@example.com"),
        ("Bulksign", "no-reply@example.com"),
    ]
    assert made.fold(policy=email.policy.SMTP).count("\r\n") == 1


def test_a_domain_in_its_own_script_goes_in_its_ascii_form():
    assert str(header(name="To", value="anna@münchen.de")) == "anna@xn--mnchen-3ya.de"


def test_an_address_field_made_again_is_made_alike_under_its_own_name_and_a_refused_one_is_refused_again():
    sender = ("Bulksign", "no-reply@example.com")
    first = header(name="From", value=sender)
    assert header(name="From", value=[sender]) is first  # made once: the sender comes back mail after mail
    assert header(name="from", value=sender).fold(policy=email.policy.SMTP).startswith("from: ")
    assert first.fold(policy=email.policy.SMTP) == "From: Bulksign <no-reply@example.com>\r\n"
    for _ in range(2):
        with pytest.raises(HeaderError, match="control character"):
            header(name="From", value=("Bulksign", "no-reply@example.com\n"))


def test_a_field_name_that_is_not_one_is_refused():
    with pytest.raises(HeaderError):
        header(name="X-Ok\r\nX-Injected", value="yes")


def test_every_field_flask_mail_wrote_from_a_value_is_made_again_by_the_builder(app):
    message = Message(
        subject=f'Batch "{INJECTED}" is done',
        recipients=[("Anna\r\nBcc: x@example.com", "anna@münchen.de")],
        body="Text",
        sender="Bulksign <no-reply@example.com>",
        reply_to="hr@example.com",
        bcc=["audit@example.com"],
        extra_headers={"X-Batch": "7\r\nX-Injected: yes"},
    )
    message.msgId = "<completion-notice-7@bulksign.local>"
    mail = outgoing(message=message)
    parsed = email.message_from_bytes(mail.data, policy=email.policy.default)
    assert sorted(parsed.keys()) == sorted(
        [
            "Content-Type",
            "MIME-Version",
            "Content-Transfer-Encoding",
            "Date",
            "From",
            "To",
            "Message-ID",
            "Reply-To",
            "Subject",
            "X-Batch",
        ]
    )
    assert parsed["Subject"] == 'Batch "Q3 Reply-To: attacker@example.com X-Injected: yes" is done'
    assert parsed["To"].addresses[0].display_name == "Anna Bcc: x@example.com"
    assert (parsed["From"], parsed["Reply-To"], parsed["X-Batch"]) == (
        "Bulksign <no-reply@example.com>",
        "hr@example.com",
        "7 X-Injected: yes",
    )
    assert parsed.get_content() == "Text"
    # Bcc is the envelope's alone: on the message it would tell every recipient.
    assert (mail.envelope_from, mail.envelope_to) == (
        "no-reply@example.com",
        ("anna@xn--mnchen-3ya.de", "audit@example.com"),
    )


def test_writing_a_mail_out_parses_each_content_type_field_once_at_most(app, monkeypatch):
    """The generator reads the Content-Type fields a dozen times (type, boundary, charset): parsing one on every read
    was half the CPU of writing an invitation. Once is when a boundary is set into it."""
    from email.headerregistry import ContentTypeHeader

    parsed = []
    original = ContentTypeHeader.value_parser
    monkeypatch.setattr(
        ContentTypeHeader, "value_parser", staticmethod(lambda value: parsed.append(value) or original(value))
    )
    message = Message(subject="Please sign", recipients=["anna@example.com"], body="Text", html="<p>Text</p>")
    message.sender, message.msgId = "Bulksign <no-reply@example.com>", "<invitation-1@bulksign.local>"
    written = email.message_from_bytes(outgoing(message=message).data, policy=email.policy.compat32)
    assert parsed and len(parsed) == len(set(parsed))
    assert [part.get_content_type() for part in written.walk()] == [
        "multipart/mixed",
        "multipart/alternative",
        "text/plain",
        "text/html",
    ]


# --- stored values with line breaks, through the real mail job to the SMTP server -----------------------


def test_a_stored_batch_name_with_line_breaks_makes_no_header_of_its_own_in_the_completion_notice(
    app, users, smtp, run_jobs
):
    batch_id = make_batch(user=users["staff"], now=NOW, recipients=1, notify_email="hr@example.com")
    # Written straight into the table, as a batch created before names were checked may be named.
    db.session.execute(update(Batch).where(Batch.id == batch_id).values(name=INJECTED))
    db.session.commit()
    enqueue_renders(request_ids(batch_id))
    run_jobs("pdf", "mail")
    # The one request is cancelled: nobody can sign any more, and the batch's owner is told it closed.
    transition(db.session, request_ids(batch_id), frm="sent", to="cancelled", now=NOW)
    refresh_batch_statuses(db.session, now=NOW, batch_ids=[batch_id])
    db.session.commit()
    enqueue_sends(queued_completion_notices(db.session, batch_ids=[batch_id]))
    run_jobs("mail")

    (notice,) = smtp.of_kind("completion-notice")
    assert notice.rcpt_tos == ["hr@example.com"]
    assert notice.message.get_all("Reply-To") is None and notice.message.get_all("X-Injected") is None
    assert notice.subject == 'Batch "Q3 Reply-To: attacker@example.com X-Injected: yes" is closed: 0 of 1 signed'
    assert "Reply-To" not in fields_of(notice.message.as_bytes())


def test_a_recipients_name_with_line_breaks_injects_nothing_into_the_invitation_or_the_decline_notice(
    app, users, smtp, run_jobs
):
    name = "Anna\r\nX-Injected: yes\r\nBcc: attacker@example.com"
    batch_id = make_batch(user=users["staff"], now=NOW, recipients=[("anna@example.com", name)])
    version_id = db.session.get(Batch, batch_id).template_version_id
    db.session.execute(
        update(TemplateVersion).where(TemplateVersion.id == version_id).values(email_subject="{{ name }}, please sign")
    )
    db.session.commit()
    enqueue_renders(request_ids(batch_id))
    run_jobs("pdf", "mail")
    (request,) = requests_of(batch_id)
    assert (
        decline(db.session, request_id=request.id, now=utcnow(), reason="No", ip=None, user_agent=None).status
        == "declined"
    )
    run_jobs("mail")

    (invitation,) = smtp.of_kind("invitation")
    (notice,) = smtp.of_kind("decline-notice")
    assert invitation.rcpt_tos == ["anna@example.com"] and notice.rcpt_tos == ["staff@example.com"]
    assert str(invitation.message["To"]) == "anna@example.com"
    assert invitation.subject == "Anna X-Injected: yes Bcc: attacker@example.com, please sign"
    # Compared word by word: Python's folder leaves a space at the end of the line it breaks before an encoded
    # word ("—" here), so the unfolded subject has two spaces there; the field is still one.
    assert (
        notice.subject.split()
        == ("Declined: Anna X-Injected: yes Bcc: attacker@example.com — Employment contract").split()
    )
    for mail in (invitation, notice):
        assert mail.message.get_all("X-Injected") is None and mail.message.get_all("Bcc") is None
    assert len(smtp.received) == 3  # and the completion notice: no copy went to the injected Bcc


def test_an_invitation_whose_reply_to_address_has_a_line_break_fails_with_the_reason_and_nothing_is_sent(
    app, users, smtp, run_jobs
):
    batch_id = make_batch(user=users["staff"], now=NOW, recipients=1, reply_to="hr@example.com\r\nX-Injected: yes")
    enqueue_renders(request_ids(batch_id))
    run_jobs("pdf", "mail")

    (request,) = requests_of(batch_id)
    mail = db.session.scalar(select(OutgoingMail).where(OutgoingMail.kind == "invitation"))
    assert request.status == "failed" and mail.status == "failed"
    assert request.error_message == (
        "The mail could not be built: Reply-To: 'hr@example.com\\r\\nX-Injected: yes' "
        "has a line break or another control character in it"
    )
    assert smtp.of_kind("invitation") == []


# --- names are refused where they are typed ---------------------------------------------------------------


def test_a_template_name_or_mail_subject_with_a_line_break_is_refused_with_a_translated_message(app, users):
    from flask_babel import force_locale

    with pytest.raises(TemplateError) as named:
        create_template(db.session, name="Contract\r\nX-Injected: yes", html="<p>x</p>", user=users["staff"], now=NOW)
    with pytest.raises(TemplateError) as subject:
        create_template(
            db.session,
            name="Contract",
            html="<p>x</p>",
            user=users["staff"],
            now=NOW,
            reminder_subject="Please sign\nX-Injected: yes",
        )
    db.session.rollback()
    assert named.value.message == "The template name may not contain line breaks or other control characters."
    assert subject.value.message == "The reminder subject may not contain line breaks or other control characters."
    with force_locale("ru"):
        assert str(named.value.message).startswith("Название шаблона не может содержать переводы строк")
        assert str(subject.value.message) == (
            "тема напоминания: переводы строк и другие управляющие символы недопустимы."
        )


def test_the_templates_api_refuses_a_name_or_subject_with_a_line_break(client, users):
    key = create_api_key(db.session, user=users["staff"], name="t", now=NOW).secret
    db.session.commit()
    headers = {"Authorization": f"Bearer {key}"}
    for fields in ({"name": "Contract\r\nX-Injected: yes"}, {"name": "Contract", "email_subject": "Sign\r\nX: y"}):
        refused = client.post("/api/v1/templates", json={"html": "<p>{{ name }}</p>", **fields}, headers=headers)
        assert refused.status_code == 422 and refused.json["error"]["code"] == "template_invalid"
        assert "may not contain line breaks" in refused.json["error"]["message"]
    assert db.session.scalar(select(TemplateVersion)) is None


def test_a_team_name_with_a_line_break_is_refused_on_the_command_line_and_the_admin_page(app, client, auth):
    with pytest.raises(TeamError, match="may not contain line breaks"):
        create_team(db.session, name="Sales\x00", now=NOW)
    result = app.test_cli_runner().invoke(args=["teams", "create", "Sales\r\nX-Injected: yes"])
    assert result.exit_code == 1 and "The team name may not contain line breaks" in result.output
    auth.login_admin()
    token = csrf_from(client.get("/admin/teams"))
    refused = client.post(
        "/admin/teams", data={"csrf_token": token, "name": "Sales\nX-Injected: yes"}, follow_redirects=True
    )
    assert "The team name may not contain line breaks" in refused.get_data(as_text=True)
    assert db.session.scalar(select(Team).where(Team.name.like("Sales%"))) is None
