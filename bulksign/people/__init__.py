"""Staff: users and API keys, teams and their members, who changed which membership (``access_audit``), login and
default-deny (``auth``), and the one answer to "may this user see it" (``access``).
"""
