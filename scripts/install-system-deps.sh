#!/usr/bin/env bash
# Install the Debian packages bulksign needs, only those missing (idempotent, root or sudo).
#   wkhtmltopdf + fonts: the PDF renderer and the fonts templates name; fonts-wqy-zenhei: Chinese, Japanese and
#     Korean letters in what the signed PDF stamps and certifies (TrueType: ReportLab cannot embed Noto CJK's CFF)
#   redis-server, postgresql: queues and the production database (tests use both)
#   poppler-utils: pdfsig, an independent PAdES validator used by the tests
#   libreoffice-writer-nogui + python3-uno: Word templates to PDF (driven through unoserver by the system Python)
#   bubblewrap: the sandbox the converters run in (no network, none of the stored documents)
#   chromium: the real browser the UI tests drive through Playwright
#   pgbouncer: the tests, bench and soak run the app through a private one in transaction pooling
#   redis-sentinel: the failover tests run a real Sentinel over a master and a replica
#   prometheus: promtool, which checks /metrics and the alert rules (with their unit tests)
#   faketime: the reminder tests run the real periodic tick days ahead of the machine's clock
set -euo pipefail
want=(wkhtmltopdf fonts-dejavu-core fonts-wqy-zenhei fonts-freefont-otf redis-server poppler-utils python3-venv
      libreoffice-writer-nogui python3-uno bubblewrap)
[ "${1:-}" = "--test" ] && want+=(postgresql pgbouncer chromium redis-sentinel prometheus faketime)
missing=()
for pkg in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "Installing Debian packages: ${missing[*]}"
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
