"""A Sentry stand-in on loopback: accepts the SDK's envelopes over plain HTTP and keeps the events they carry."""

from __future__ import annotations

import gzip
import json
import threading
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.support.services import free_port


class SentryServer:
    """``dsn`` for ``SENTRY_DSN``; ``events`` are the error events received, ``raw`` every body as sent."""

    def __init__(self):
        self.port = free_port()
        self.raw: list[bytes] = []
        self.events: list[dict] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                encoding = self.headers.get("Content-Encoding", "")
                if encoding == "gzip":
                    body = gzip.decompress(body)
                elif encoding == "deflate":
                    body = zlib.decompress(body)
                server._keep(body)
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *args):
                pass

        self._http = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)

    @property
    def dsn(self) -> str:
        return f"http://publickey@127.0.0.1:{self.port}/1"

    def _keep(self, body: bytes) -> None:
        # An envelope: a header line, then (item header line, payload line) pairs.
        lines = body.split(b"\n")
        with self._lock:
            self.raw.append(body)
            for header, payload in zip(lines[1::2], lines[2::2]):
                if header.strip() and json.loads(header).get("type") == "event":
                    self.events.append(json.loads(payload))

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._http.shutdown()
        self._http.server_close()
        self._thread.join(timeout=10)
