# gunicorn settings shared by `make run` and the container (command-line flags override these).
import os

# Web requests (a template's PDF preview, checking a recipients file) give up well before this; see config.py.
timeout = int(os.environ.get("WEB_TIMEOUT_SECONDS", "30"))
logger_class = "bulksign.gunicorn_logging.RedactingLogger"
accesslog = "-"
access_log_format = '%(h)s "%(r)s" %(s)s %(b)s %(M)sms "%(a)s" rid=%({x-request-id}o)s'
