# One image for every process: `web` (default), `worker`, `scheduler`.
FROM python:3.11-slim-bookworm

RUN apt-get update \
 && apt-get install -y --no-install-recommends wkhtmltopdf fonts-dejavu-core fonts-wqy-zenhei fonts-freefont-otf poppler-utils redis-sentinel \
    libreoffice-writer-nogui python3-uno bubblewrap \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /app
COPY requirements.txt .
RUN pip install --no-cache-dir -r requirements.txt

COPY . .
RUN useradd --system --home /app bulksign && mkdir -p /app/var && chown bulksign /app/var
USER bulksign

ENV FLASK_APP=wsgi PYTHONUNBUFFERED=1
EXPOSE 8000
ENTRYPOINT ["scripts/docker-entrypoint.sh"]
CMD ["web"]
