"""A batch's whole life: creation, the request and batch state machines (``status``, ``states``) with their counters
(``counts``) and roll-up (``progress``), bulk actions, resends, reminders, expiry, staff notices, exports, what the
dashboard and home page show, the reconciler and bounces.
"""
