"""WSGI entry point (``gunicorn wsgi:app``) and the app the ``flask`` command loads (FLASK_APP=wsgi)."""

import os
import sys

from bulksign.app import create_app
from bulksign.core.config import ConfigError

# The `flask` command (workers, scheduler, one-shot commands) loads this module too and serves no
# requests: the rate limiter's in-memory fallback (a timer thread) would only cost it.
SERVES_REQUESTS = os.environ.get("FLASK_RUN_FROM_CLI") != "true"

try:
    app = create_app({"RATELIMIT_IN_MEMORY_FALLBACK_ENABLED": SERVES_REQUESTS})
except ConfigError as exc:
    # One clear line naming the variable, not a traceback.
    sys.stderr.write(f"Configuration error: {exc}\n")
    sys.exit(2)
