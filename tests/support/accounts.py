"""The accounts the ``users`` fixture makes, and the team it puts them in."""

ADMIN = ("admin@example.com", "admin-password")
STAFF = ("staff@example.com", "staff-password")
#: The team the ``users`` fixture puts both users in; test data without a team named goes there.
DEFAULT_TEAM = "Default"
