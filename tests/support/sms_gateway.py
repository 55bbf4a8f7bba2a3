"""A loopback stand-in for an SMS provider: the generic HTTP gateway's JSON and Twilio's Messages API form, each
message recorded with its headers; it answers with an id per message, or refuses as told."""

from __future__ import annotations

import json
import threading
import urllib.parse
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.support.services import free_port


@dataclass(frozen=True)
class Texted:
    path: str
    headers: dict
    #: The JSON body, or Twilio's form fields.
    body: dict
    #: The id the stand-in answered with ("" for a refusal).
    id: str

    @property
    def to(self) -> str:
        return self.body.get("to") or self.body.get("To") or ""

    @property
    def text(self) -> str:
        return self.body.get("text") or self.body.get("Body") or ""


class SmsGateway:
    """Records every POST; ``refuse``: number → HTTP status to answer it with (e.g. 400 for a bad number)."""

    def __init__(self):
        self.received: list[Texted] = []
        self.refuse: dict[str, int] = {}
        self.status = 201
        gateway = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                raw = self.rfile.read(int(self.headers["Content-Length"])).decode()
                twilio = self.headers.get("Content-Type", "").startswith("application/x-www-form-urlencoded")
                body = dict(urllib.parse.parse_qsl(raw)) if twilio else json.loads(raw)
                to = body.get("To") or body.get("to") or ""
                status = gateway.refuse.get(to, gateway.status)
                sid = f"SM{len(gateway.received) + 1:032d}" if status < 300 else ""
                gateway.received.append(Texted(self.path, dict(self.headers), body, sid))
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                answer = (
                    ({"sid": sid, "status": "queued"} if twilio else {"id": sid}) if sid else {"message": "refused"}
                )
                self.wfile.write(json.dumps(answer).encode())

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.base = f"http://127.0.0.1:{self.server.server_port}"
        self.url = f"{self.base}/messages"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def to(self, phone: str) -> list[Texted]:
        return [t for t in self.received if t.to == phone]

    def close(self):
        self.server.shutdown()
        self.server.server_close()
