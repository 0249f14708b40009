#!/usr/bin/env bash
# Install the PostgreSQL server from Debian's packages if it is missing.
set -euo pipefail
if ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1; then exit 0; fi
if [ "$(id -u)" != 0 ]; then
  echo "PostgreSQL server missing: run 'sudo apt-get install postgresql' (needed for the SQL write canary)" >&2
  exit 1
fi
echo "==> installing PostgreSQL (apt-get install postgresql)"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql >/dev/null
