"""Running it: the figures processes count (``telemetry``), ``/metrics`` for Prometheus, readiness, and whether the
database and Redis answer (``services``).
"""
