"""The SMS providers against a loopback stand-in: Twilio's Messages API request shape (path, basic auth, form
fields), the generic gateway's JSON, refusals in words (for good or for now), and a timeout on every call."""

from __future__ import annotations

import base64
import socket
import time

import pytest

from bulksign.mail.sms import HttpSmsProvider, SmsError, TwilioSmsProvider, provider
from tests.support.sms_gateway import SmsGateway


@pytest.fixture
def stand_in():
    server = SmsGateway()
    yield server
    server.close()


def twilio(stand_in, *, timeout: float = 5) -> TwilioSmsProvider:
    return TwilioSmsProvider(
        account_sid="AC0123456789abcdef",
        auth_token="secret-token",
        sender="+15005550006",
        api_url=stand_in.base,
        timeout=timeout,
    )


def test_twilio_gets_the_documented_request_and_its_sid_names_the_message(stand_in):
    sid = twilio(stand_in).send(
        to="+79991234567", text="Иван, подпишите: https://x/s/abc", status_url="https://app/webhooks/sms?token=t"
    )
    [sent] = stand_in.received
    assert sent.path == "/2010-04-01/Accounts/AC0123456789abcdef/Messages.json"
    assert sent.headers["Authorization"] == "Basic " + base64.b64encode(b"AC0123456789abcdef:secret-token").decode()
    assert sent.headers["Content-Type"] == "application/x-www-form-urlencoded"
    assert sent.body == {
        "To": "+79991234567",
        "From": "+15005550006",
        "Body": "Иван, подпишите: https://x/s/abc",
        "StatusCallback": "https://app/webhooks/sms?token=t",
    }
    assert sid == sent.id and sid.startswith("SM")


@pytest.mark.parametrize(("status", "permanent"), [(400, True), (429, False), (503, False)])
def test_a_refusal_says_whether_trying_again_can_help(stand_in, status, permanent):
    stand_in.refuse["+79991234567"] = status
    for sender in (twilio(stand_in), HttpSmsProvider(url=stand_in.url, token="", timeout=5)):
        with pytest.raises(SmsError, match=f"answered {status}") as refused:
            sender.send(to="+79991234567", text="hello")
        assert refused.value.permanent is permanent


def test_every_call_has_a_timeout():
    # A server that accepts the connection and never answers.
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(1)
    try:
        port = silent.getsockname()[1]
        sender = TwilioSmsProvider(
            account_sid="AC1", auth_token="t", sender="+1", api_url=f"http://127.0.0.1:{port}", timeout=0.5
        )
        started = time.monotonic()
        with pytest.raises(SmsError, match="could not be reached") as failed:
            sender.send(to="+79991234567", text="hello")
        assert time.monotonic() - started < 3 and (failed.value.permanent, failed.value.unreachable) == (False, True)
    finally:
        silent.close()


def test_the_configured_provider_is_twilio_then_the_http_gateway_then_the_development_one(tmp_path):
    config = {
        "TWILIO_ACCOUNT_SID": "AC1",
        "TWILIO_AUTH_TOKEN": "t",
        "TWILIO_FROM": "+1",
        "TWILIO_API_URL": "https://api.twilio.com",
        "SMS_HTTP_URL": "https://gw.example/send",
        "SMS_HTTP_TOKEN": "",
        "SMS_TIMEOUT_SECONDS": 10,
        "VAR_DIR": str(tmp_path),
    }
    assert isinstance(provider(config), TwilioSmsProvider)
    assert isinstance(provider({**config, "TWILIO_ACCOUNT_SID": ""}), HttpSmsProvider)
    assert type(provider({**config, "TWILIO_ACCOUNT_SID": "", "SMS_HTTP_URL": ""})).__name__ == "DevSmsProvider"
