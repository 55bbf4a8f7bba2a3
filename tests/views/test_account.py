"""“Forgot password” by a mailed link, changing one's own password, and a display name that the
recipients' mails and the staff pages use."""

from __future__ import annotations

import re
from datetime import timedelta

from sqlalchemy import select, update

from bulksign.core.extensions import db
from bulksign.models import User, utcnow
from bulksign.models.people import PasswordReset
from bulksign.work.pipeline import enqueue_renders
from tests.support.accounts import ADMIN, STAFF
from tests.support.batches import make_batch, request_ids
from tests.support.clock import NOW
from tests.support.web import csrf_from

LINK = re.compile(r"http://[^\s]+/auth/reset/[A-Za-z0-9_-]+")


def _ask_for_link(client, email: str, run_jobs):
    page = client.get("/auth/forgot")
    answer = client.post("/auth/forgot", data={"email": email, "csrf_token": csrf_from(page)})
    run_jobs("mail")
    return answer


def _link_in(mail) -> str:
    (link,) = LINK.findall(mail.text())
    return link.removeprefix("http://127.0.0.1:5000")


def _set_password(client, path: str, password: str, repeat: str | None = None):
    page = client.get("/auth/forgot")  # the session's token; a dead link's page has no form
    return client.post(
        path,
        data={"password": password, "repeat": password if repeat is None else repeat, "csrf_token": csrf_from(page)},
    )


def test_the_login_page_links_to_forgot_password(client, users):
    page = client.get("/auth/login")
    assert b'href="/auth/forgot"' in page.data and b"Forgot password?" in page.data


def test_a_forgotten_password_is_reset_through_the_mailed_link_once(client, auth, users, smtp, run_jobs):
    answer = _ask_for_link(client, "  Staff@Example.com ", run_jobs)
    assert answer.status_code == 200
    assert b"a mail with a link to set a new password is on its way" in answer.data
    (mail,) = smtp.to(STAFF[0])
    assert mail.subject == "Set a new password"
    assert "Someone asked to set a new password for your account staff@example.com" in mail.text()
    assert "The link works once, for 60 minutes." in mail.text()
    path = _link_in(mail)
    # Only the token's hash is kept: the link is nowhere in the database or the mail log.
    token = path.rsplit("/", 1)[1]
    assert db.session.scalar(select(PasswordReset.token_hash)) != token

    form = client.get(path)
    assert form.status_code == 200 and b"Set a new password" in form.data and STAFF[0].encode() in form.data
    assert _set_password(client, path, "short").status_code == 422
    differ = _set_password(client, path, "a-new-password", repeat="another-password")
    assert differ.status_code == 422 and b"The two passwords differ" in differ.data
    done = _set_password(client, path, "a-new-password")
    assert done.status_code == 302 and done.headers["Location"] == "/auth/login"
    assert b"Your new password is set. Log in with it." in client.get("/auth/login").data

    assert auth.login(STAFF[0], STAFF[1]).status_code == 401
    assert auth.login(STAFF[0], "a-new-password").status_code == 302
    auth.logout()
    # The link worked once: opened again, it says so in a page of its own, with the way to a new one.
    again = client.get(path)
    assert again.status_code == 410
    assert b"This link was used already" in again.data and b'href="/auth/forgot"' in again.data
    assert _set_password(client, path, "third-password").status_code == 410
    assert auth.login(STAFF[0], "a-new-password").status_code == 302


def test_an_unknown_address_gets_the_same_answer_and_no_mail(client, users, smtp, run_jobs):
    known = _ask_for_link(client, STAFF[0], run_jobs)
    unknown = _ask_for_link(client, "nobody@example.com", run_jobs)
    malformed = _ask_for_link(client, "not an address", run_jobs)
    same = b"a mail with a link to set a new password is on its way"
    assert known.status_code == unknown.status_code == malformed.status_code == 200
    assert same in known.data and same in unknown.data and same in malformed.data
    assert [m.rcpt_tos for m in smtp.received] == [[STAFF[0]]]


def test_an_expired_link_is_a_friendly_page(client, users, smtp, run_jobs):
    _ask_for_link(client, STAFF[0], run_jobs)
    path = _link_in(smtp.to(STAFF[0])[0])
    # An hour and a minute later:
    db.session.execute(update(PasswordReset).values(expires_at=utcnow() - timedelta(minutes=1)))
    db.session.commit()
    page = client.get(path)
    assert page.status_code == 410
    assert b"This link has expired: a link works for 60 minutes." in page.data
    assert b"Ask for a new link" in page.data and b"Traceback" not in page.data
    assert _set_password(client, path, "a-new-password").status_code == 410


def test_a_later_request_ends_the_earlier_link_and_a_mangled_link_is_not_found(client, users, smtp, run_jobs):
    _ask_for_link(client, STAFF[0], run_jobs)
    first = _link_in(smtp.to(STAFF[0])[0])
    # A second ask within the minute sends nothing more (a mailbox is not flooded); after it, a new link.
    _ask_for_link(client, STAFF[0], run_jobs)
    assert len(smtp.to(STAFF[0])) == 1
    db.session.execute(update(PasswordReset).values(created_at=utcnow() - timedelta(minutes=2)))
    db.session.commit()
    _ask_for_link(client, STAFF[0], run_jobs)
    second = _link_in(smtp.to(STAFF[0])[1])
    assert second != first
    assert client.get(first).status_code == 410
    assert client.get(second).status_code == 200
    mangled = client.get(second[:-3])
    assert mangled.status_code == 404 and b"This link is not valid" in mangled.data


def test_a_password_changed_otherwise_ends_the_link(client, auth, users, smtp, run_jobs):
    _ask_for_link(client, STAFF[0], run_jobs)
    path = _link_in(smtp.to(STAFF[0])[0])
    auth.login()
    _change_password(client, STAFF[1], "changed-meanwhile")
    auth.logout()
    assert client.get(path).status_code == 410


def test_asking_for_links_is_rate_limited_like_the_login(make_app, users):
    app = make_app(LOGIN_RATE_LIMIT="2 per minute")
    client = app.test_client()
    token = csrf_from(client.get("/auth/forgot"))
    codes = [
        client.post("/auth/forgot", data={"email": "x@example.com", "csrf_token": token}).status_code for _ in range(3)
    ]
    assert codes == [200, 200, 429]


def _change_password(client, current: str, new: str, repeat: str | None = None):
    page = client.get("/account/")
    return client.post(
        "/account/password",
        data={
            "current": current,
            "password": new,
            "repeat": new if repeat is None else repeat,
            "csrf_token": csrf_from(page),
        },
    )


def test_a_user_changes_their_own_password_with_the_current_one(app, client, auth, users):
    auth.login()
    page = client.get("/")
    assert b'href="/account/"' in page.data
    account = client.get("/account/")
    assert b"Change password" in account.data and b"Current password" in account.data
    wrong = _change_password(client, "not-my-password", "a-new-password")
    assert wrong.status_code == 422 and b"Your current password is not this one" in wrong.data
    done = _change_password(client, STAFF[1], "a-new-password")
    assert done.status_code == 302
    # Still logged in here, with a word of what happened; the old password no longer works.
    after = client.get("/account/")
    assert after.status_code == 200 and b"Your password is changed." in after.data
    auth.logout()
    assert auth.login(STAFF[0], STAFF[1]).status_code == 401
    assert auth.login(STAFF[0], "a-new-password").status_code == 302


def test_a_display_name_is_set_on_the_account_page_and_shown_in_the_top_bar(client, auth, users):
    auth.login()
    page = client.get("/account/")
    saved = client.post("/account/name", data={"display_name": "  Anna   Schmidt ", "csrf_token": csrf_from(page)})
    assert saved.status_code == 302
    after = client.get("/account/")
    assert "Recipients now read “Anna Schmidt” in the mails of your batches.".encode() in after.data
    assert b'class="email" href="/account/"' in after.data and b">Anna Schmidt</a>" in after.data
    refused = client.post("/account/name", data={"display_name": "Anna\nBcc: x", "csrf_token": csrf_from(after)})
    assert refused.status_code == 422 and b"may not contain line breaks" in refused.data
    assert db.session.get(User, users["staff"].id).display_name == "Anna Schmidt"


def test_the_invitation_names_the_sender_by_display_name(app, client, auth, users, smtp, run_jobs):
    auth.login()
    page = client.get("/account/")
    client.post("/account/name", data={"display_name": "Anna Schmidt", "csrf_token": csrf_from(page)})
    batch = make_batch(user=db.session.get(User, users["staff"].id), now=NOW, recipients=1)
    enqueue_renders(request_ids(batch))
    run_jobs("pdf", "mail")
    (invitation,) = smtp.of_kind("invitation")
    assert 'Anna Schmidt asks you to sign "Employment contract".' in invitation.text()
    assert STAFF[0] not in invitation.text()


def test_admins_name_users_when_creating_them_and_later(client, auth, users):
    auth.login_admin()
    page = client.get("/admin/")
    created = client.post(
        "/admin/users",
        data={
            "email": "boris@example.com",
            "name": "Boris Iwanow",
            "password": "boris-password",
            "role": "staff",
            "csrf_token": csrf_from(page),
        },
    )
    assert created.status_code == 302
    boris = db.session.scalar(select(User).where(User.email == "boris@example.com"))
    assert boris.display_name == "Boris Iwanow"
    listed = client.get("/admin/")
    assert b"Boris Iwanow" in listed.data
    renamed = client.post(
        f"/admin/users/{boris.id}/name", data={"display_name": "Boris Ivanov", "csrf_token": csrf_from(listed)}
    )
    assert renamed.status_code == 302
    assert b"Boris Ivanov" in client.get("/admin/").data
    assert ADMIN[0].encode() in client.get("/admin/").data


def test_the_command_line_names_users(app, users):
    runner = app.test_cli_runner()
    made = runner.invoke(args=["users", "create", "c@example.com", "--password", "c-password", "--name", "Chen Li"])
    assert made.exit_code == 0, made.output
    changed = runner.invoke(args=["users", "update", "c@example.com", "--name", "Chen Wei"])
    assert changed.exit_code == 0 and "c@example.com is called Chen Wei." in changed.output
    bad = runner.invoke(args=["users", "update", "c@example.com", "--name", "x" * 101])
    assert bad.exit_code != 0 and "at most 100 characters" in bad.output
    db.session.expire_all()
    assert db.session.scalar(select(User.display_name).where(User.email == "c@example.com")) == "Chen Wei"


def test_a_russian_browser_gets_the_page_the_mail_and_the_reset_page_in_russian(client, users, smtp, run_jobs):
    russian = {"Accept-Language": "ru"}
    page = client.get("/auth/forgot", headers=russian)
    assert "Забыли пароль?" in page.get_data(as_text=True)
    answer = client.post("/auth/forgot", headers=russian, data={"email": STAFF[0], "csrf_token": csrf_from(page)})
    assert "на него уже отправлено письмо со ссылкой" in answer.get_data(as_text=True)
    run_jobs("mail")
    (mail,) = smtp.to(STAFF[0])
    assert mail.subject == "Задайте новый пароль"
    assert "Ссылка действует один раз, 60 минут." in mail.text() and "Someone" not in mail.text()
    form = client.get(_link_in(mail), headers=russian).get_data(as_text=True)
    assert "Новый пароль ещё раз" in form
