"""An SMTP sink for the soak: accepts mail on loopback, answers 451 to a share of messages, logs each.

``python -m bench.smtp_sink --port P --log FILE --fail-share 0.05``. Each accepted message is one
JSON line: {"t": unix time, "message_id", "to": [...], "subject", "links": [signing and countersigning links found]}.
"""

from __future__ import annotations

import argparse
import email
import email.policy
import json
import random
import re
import time

from aiosmtpd.controller import Controller

LINK = re.compile(r"https?://[^\s\"'<>]+/(?:countersign|sign)/[A-Za-z0-9_-]+")


class SinkHandler:
    def __init__(self, log_path: str, fail_share: float, seed: int):
        self.log = open(log_path, "a", buffering=1, encoding="utf-8")
        self.fail_share = fail_share
        self.random = random.Random(seed)

    async def handle_DATA(self, server, session, envelope):
        if self.random.random() < self.fail_share:
            return "451 4.3.0 Temporary failure, try again later"
        message = email.message_from_bytes(envelope.original_content or envelope.content, policy=email.policy.default)
        body = message.get_body(preferencelist=("plain", "html"))
        text = body.get_content() if body else ""
        self.log.write(
            json.dumps(
                {
                    "t": time.time(),
                    "message_id": str(message["Message-ID"]),
                    "to": list(envelope.rcpt_tos),
                    "subject": str(message["Subject"]),
                    "links": sorted(set(LINK.findall(text))),
                }
            )
            + "\n"
        )
        return "250 Message accepted"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--fail-share", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    controller = Controller(SinkHandler(args.log, args.fail_share, args.seed), hostname="127.0.0.1", port=args.port)
    controller.start()
    try:
        while True:
            time.sleep(3600)
    finally:
        controller.stop()


if __name__ == "__main__":
    main()
