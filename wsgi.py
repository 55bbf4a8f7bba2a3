"""WSGI entry point (``gunicorn wsgi:app``) and the app the ``flask`` command loads (FLASK_APP=wsgi)."""
import sys

from bulksign import create_app
from bulksign.config import ConfigError

try:
    app = create_app()
except ConfigError as exc:
    # One clear line naming the variable, not a traceback.
    sys.stderr.write(f"Configuration error: {exc}\n")
    sys.exit(2)
