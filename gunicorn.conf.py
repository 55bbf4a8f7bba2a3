# gunicorn settings shared by `make run` and the container (command-line flags override these).
from bulksign.core import settings

# Web requests (a template's PDF preview, checking a recipients file) give up well before this; see config.py.
timeout = settings.value("WEB_TIMEOUT_SECONDS")
logger_class = "bulksign.core.gunicorn_logging.RedactingLogger"
accesslog = "-"
access_log_format = '%(h)s "%(r)s" %(s)s %(b)s %(M)sms "%(a)s" rid=%({x-request-id}o)s'
# SIGTERM: requests in flight get this long to finish, so the web process is gone within 10 s
# (a supervisor's stop timeout, or docker's stop_grace_period, must be longer). Requests are short.
graceful_timeout = 8
