"""Outgoing webhooks: events become signed JSON deliveries to a real loopback HTTP server, retried with backoff."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from sqlalchemy import select

from bulksign.batches.states import transition
from bulksign.core.extensions import db
from bulksign.integrations import webhook_delivery, webhooks_out
from bulksign.jobs.webhooks import dispatch
from bulksign.models import SigningRequest, WebhookDelivery
from tests.support.batchdata import batch_in_states
from tests.support.clock import NOW
from tests.support.web import csrf_from


class Receiver:
    """A loopback HTTP server that records POSTs and answers with scripted status codes."""

    def __init__(self):
        self.received: list[tuple[dict, bytes]] = []
        self.codes: list[int] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.received.append((dict(self.headers), body))
                self.send_response(receiver.codes.pop(0) if receiver.codes else 200)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver(app):
    app.config["WEBHOOK_ALLOW_LOCAL"] = True  # the receiver listens on loopback, like an endpoint on a dev box
    with Receiver() as r:
        yield r


def test_a_signed_request_reaches_the_endpoint_as_signed_json(app, users, receiver, run_jobs):
    batch = batch_in_states(db.session, statuses=["opened", "opened"], now=NOW)
    endpoint = webhooks_out.create_endpoint(
        db.session, url=receiver.url, events=["request.signed"], user_id=users["admin"].id, now=NOW
    )
    db.session.commit()
    secret = endpoint.secret
    dispatch(now=NOW)  # first run sets the cursor: only what happens from now on is sent
    ids = db.session.scalars(
        select(SigningRequest.id).where(SigningRequest.batch_id == batch.id).order_by(SigningRequest.id)
    ).all()
    transition(db.session, ids[0], frm="opened", to="signed", now=NOW + timedelta(seconds=1))
    transition(db.session, ids[1], frm="opened", to="declined", now=NOW + timedelta(seconds=1))
    db.session.commit()
    assert dispatch(now=NOW + timedelta(seconds=2)) == 1
    run_jobs("webhooks")
    assert len(receiver.received) == 1
    headers, body = receiver.received[0]
    expected = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    assert headers["X-Bulksign-Signature"] == expected
    payload = json.loads(body)
    assert payload["event"] == "request.signed" and payload["data"]["request"]["id"] == ids[0]
    assert "token" not in body.decode()
    delivery = db.session.scalar(select(WebhookDelivery))
    assert delivery.status == "delivered" and delivery.response_code == 200


def test_a_failing_endpoint_is_retried_with_growing_waits_then_given_up(app, users, receiver):
    batch_in_states(db.session, statuses=["sent"], now=NOW)
    webhooks_out.create_endpoint(db.session, url=receiver.url, events=["batch.completed"], user_id=None, now=NOW)
    ids = webhooks_out.emit(
        db.session, event="batch.completed", payload={"batch": {"id": 1}}, team_id=None, now=NOW
    ).delivery_ids
    db.session.commit()
    receiver.codes = [500] * 20
    at, waits = NOW, []
    for _ in range(webhook_delivery.MAX_ATTEMPTS):
        result = webhook_delivery.deliver(db.session, delivery_id=ids[0], now=at, allow_local=True)
        db.session.commit()
        delivery = db.session.get(WebhookDelivery, ids[0])
        if delivery.next_attempt_at:
            waits.append(delivery.next_attempt_at - at)
            # Too early: a duplicate job does nothing.
            assert (
                webhook_delivery.deliver(db.session, delivery_id=ids[0], now=at, allow_local=True).status == "waiting"
            )
            at = delivery.next_attempt_at
    assert result.status == "failed" and len(receiver.received) == webhook_delivery.MAX_ATTEMPTS
    assert waits == sorted(waits) and waits[0] == timedelta(seconds=30) and waits[1] == timedelta(seconds=60)
    assert "HTTP 500" in delivery.error


def test_an_unreachable_endpoint_is_a_recorded_failure_not_a_crash(app, users):
    from tests.support.services import free_port

    webhooks_out.create_endpoint(
        db.session, url=f"http://127.0.0.1:{free_port()}/x", events=["batch.completed"], user_id=None, now=NOW
    )
    ids = webhooks_out.emit(db.session, event="batch.completed", payload={}, team_id=None, now=NOW).delivery_ids
    result = webhook_delivery.deliver(db.session, delivery_id=ids[0], now=NOW, timeout=2, allow_local=True)
    assert result.status == "pending" and "Could not reach" in result.error


def test_deliveries_never_reach_this_host_unless_allowed_nor_link_local_addresses(app, users, receiver):
    app.config["WEBHOOK_ALLOW_LOCAL"] = False  # the default
    webhooks_out.create_endpoint(
        db.session,
        url=receiver.url.replace("127.0.0.1", "localhost"),
        events=["batch.completed"],
        user_id=None,
        now=NOW,
    )
    ids = webhooks_out.emit(db.session, event="batch.completed", payload={}, team_id=None, now=NOW).delivery_ids
    result = webhook_delivery.deliver(db.session, delivery_id=ids[0], now=NOW, timeout=2)
    assert result.status == "pending" and "this host" in result.error and "WEBHOOK_ALLOW_LOCAL" in result.error
    assert receiver.received == []
    # Cloud metadata services sit on link-local addresses: refused whatever the setting.
    for address in ("169.254.169.254", "fe80::1", "::ffff:169.254.169.254"):
        assert "link-local" in webhook_delivery.forbidden_reason(address, allow_local=True)
    assert webhook_delivery.forbidden_reason("::ffff:127.0.0.1", allow_local=False)
    assert webhook_delivery.forbidden_reason("10.1.2.3", allow_local=False) is None


def test_cloud_metadata_services_outside_link_local_are_refused_even_when_local_is_allowed(app):
    # AWS's IPv6 metadata service sits in fd00::/8 and Alibaba Cloud's in 100.64/10: neither is link-local.
    for address in ("fd00:ec2::254", "100.100.100.200", "::ffff:100.100.100.200"):
        assert "cloud metadata" in webhook_delivery.forbidden_reason(address, allow_local=True)
    # Their neighbours stay ordinary private networks, allowed as in-house systems.
    for address in ("fd00:ec2::253", "100.100.100.201", "fd12:3456::1"):
        assert webhook_delivery.forbidden_reason(address, allow_local=False) is None


def test_a_batch_emits_batch_completed_when_sending_ends_and_batch_all_signed_when_everyone_signed(
    app, users, receiver, run_jobs
):
    """``batch.completed`` keeps its name and moment (every invitation dispatched); the end has events of its own."""
    from bulksign.batches.progress import refresh_batch_statuses

    batch_in_states(db.session, statuses=["signed", "sent"], now=NOW)
    events = ["batch.completed", "batch.all_signed", "batch.closed"]
    webhooks_out.create_endpoint(db.session, url=receiver.url, events=events, user_id=None, now=NOW)
    db.session.commit()
    dispatch(now=NOW)
    assert refresh_batch_statuses(db.session, now=NOW + timedelta(seconds=5)) == 1
    db.session.commit()
    assert dispatch(now=NOW + timedelta(seconds=10)) == 1
    request = db.session.scalars(db.select(SigningRequest).where(SigningRequest.status == "sent")).one()
    transition(db.session, request.id, frm="sent", to="opened", now=NOW + timedelta(seconds=20))
    transition(db.session, request.id, frm="opened", to="signed", now=NOW + timedelta(seconds=20))
    db.session.commit()
    assert refresh_batch_statuses(db.session, now=NOW + timedelta(seconds=25)) == 1
    db.session.commit()
    assert dispatch(now=NOW + timedelta(seconds=30)) == 2  # due: the first, not yet delivered, and the new one
    run_jobs("webhooks")
    told = sorted((json.loads(body) for _, body in receiver.received), key=lambda t: t["id"])
    assert [(t["event"], t["data"]["batch"]["status"]) for t in told] == [
        ("batch.completed", "awaiting_signatures"),
        ("batch.all_signed", "all_signed"),
    ]


def test_endpoint_registration_is_checked(app):
    with pytest.raises(webhooks_out.WebhookError, match="full address"):
        webhooks_out.create_endpoint(db.session, url="ftp://x", events=["request.sent"], user_id=None, now=NOW)
    with pytest.raises(webhooks_out.WebhookError, match="Unknown events"):
        webhooks_out.create_endpoint(db.session, url="https://x.example", events=["nope"], user_id=None, now=NOW)


def test_admin_registers_an_endpoint_and_sees_the_delivery_log(client, auth, receiver):
    auth.login_admin()
    page = client.get("/admin/webhooks")
    shown = client.post(
        "/admin/webhooks",
        data={"url": receiver.url, "events": ["request.signed", "batch.completed"], "csrf_token": csrf_from(page)},
    )
    assert 'id="secret"' in shown.get_data(as_text=True)
    webhooks_out.emit(db.session, event="batch.completed", payload={}, team_id=None, now=NOW)
    db.session.commit()
    log = client.get("/admin/webhooks").get_data(as_text=True)
    assert receiver.url in log and "batch.completed" in log and "pending" in log
    auth.logout()
    auth.login()
    assert client.get("/admin/webhooks").status_code == 403
