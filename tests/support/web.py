"""Acting as a browser would in Flask's test client: logging in and out, and the CSRF token of a page's form."""

from __future__ import annotations

import re

from tests.support.accounts import ADMIN, STAFF


class AuthActions:
    def __init__(self, client):
        self._client = client

    def login(self, email=STAFF[0], password=STAFF[1]):
        page = self._client.get("/auth/login")
        return self._client.post(
            "/auth/login", data={"email": email, "password": password, "csrf_token": csrf_from(page)}
        )

    def login_admin(self):
        return self.login(*ADMIN)

    def logout(self):
        page = self._client.get("/")
        return self._client.post("/auth/logout", data={"csrf_token": csrf_from(page)})


def csrf_from(response) -> str:
    """The CSRF token of the form on a page, as a browser would submit it."""
    match = re.search(rb'name="csrf_token" value="([^"]+)"', response.data)
    assert match, "no CSRF token on the page"
    return match.group(1).decode()
