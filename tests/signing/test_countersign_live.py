"""The countersigner's open page is told when its documents change: a poll answered 304 while the batch stands,
then how many documents wait and how many are finished, with a link to see them."""

from __future__ import annotations

import re

from tests.signing.test_countersign import _ready, _recipient_signs


def test_the_open_page_learns_that_another_document_became_ready(app, users, client, smtp, run_jobs):
    ids, token = _ready(users, client, smtp, run_jobs, signed=1)
    page = client.get(f"/countersign/{token}")
    html = page.get_data(as_text=True)
    assert "connect-src 'self'" in page.headers["Content-Security-Policy"]
    live_url = re.search(r'hx-get="(/countersign/[^"]+/live\?since=\d+)"', html).group(1).replace("&amp;", "&")
    first = client.get(live_url)
    assert first.status_code == 200 and 'id="cs-changed"' not in first.get_data(as_text=True)
    tag = first.headers["ETag"]
    assert client.get(live_url, headers={"If-None-Match": tag}).status_code == 304

    _recipient_signs(client, smtp, ids[1])
    run_jobs("pdf", "mail")  # the employer's step starts: their second document is ready
    changed = client.get(live_url, headers={"If-None-Match": tag})
    text = " ".join(changed.get_data(as_text=True).split())
    assert changed.status_code == 200
    assert "The documents changed since you opened this page: 2 wait for your signature, 0 finished." in text
    # Another link's token, or none at all: the "not valid" page, never this batch's state.
    assert client.get(f"/countersign/{token[:-2]}xx/live").status_code == 404
