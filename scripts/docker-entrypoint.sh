#!/bin/sh
# Container entry: `web` migrates then serves; `worker [QUEUE...]`; `scheduler`; anything else runs as given.
set -e
case "$1" in
  web)
    flask db upgrade
    exec gunicorn --bind 0.0.0.0:8000 --workers "${WEB_WORKERS:-4}" --threads 4 wsgi:app ;;
  worker) shift; exec flask jobs worker "$@" ;;
  scheduler) exec flask jobs scheduler ;;
  *) exec "$@" ;;
esac
