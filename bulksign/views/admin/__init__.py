"""Admin pages: users, teams, webhooks and caught mail (``pages``), the suppression list, rq-dashboard, ``/metrics``."""
