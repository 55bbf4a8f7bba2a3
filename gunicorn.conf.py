# gunicorn settings shared by `make run` and the container (command-line flags override these).
logger_class = "bulksign.gunicorn_logging.RedactingLogger"
accesslog = "-"
access_log_format = '%(h)s "%(r)s" %(s)s %(b)s %(M)sms "%(a)s" rid=%({x-request-id}o)s'
