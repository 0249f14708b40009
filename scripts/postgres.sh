#!/usr/bin/env bash
# Start a throwaway PostgreSQL for the write canary on a free 127.0.0.1 port.
#   scripts/postgres.sh start DIR   -> prints the port; DIR holds data, socket, log
#   scripts/postgres.sh stop DIR
# Databases: `handover` (writable) and `handover_ro` (default_transaction_read_only=on,
# a stand-in for a replica that refuses writes). Role `handover`, password in DIR/password.
# TLS is on (not required): DIR/tls/ca.pem is the CA that signed the server's
# certificate for `localhost` and 127.0.0.1; DIR/tls/other-ca.pem is a CA that
# did not (for the refusal tests). Plain connections keep working.
set -euo pipefail
cmd=${1:?start|stop}; dir=${2:?directory}
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
[ -x "$bin/postgres" ] || { echo "PostgreSQL server not installed (apt-get install postgresql)" >&2; exit 1; }
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
case "$cmd" in
  start)
    mkdir -p "$dir"
    [ "$(id -u)" = 0 ] && chown postgres "$dir"
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    head -c 18 /dev/urandom | base64 | tr -d '/+=' > "$dir/password"
    as_pg "$bin/initdb" -D "$dir/data" -U postgres --auth=trust >"$dir/initdb.log" 2>&1
    tls="$dir/tls"; mkdir -p "$tls"
    {
      for ca in ca other-ca; do
        openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=Handover test $ca" \
          -keyout "$tls/$ca.key" -out "$tls/$ca.pem"
      done
      openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" -keyout "$tls/server.key" -out "$tls/server.csr"
      printf 'subjectAltName=DNS:localhost,IP:127.0.0.1,DNS:*.aaaaaaaaaa.ap-northeast-1.rds.amazonaws.com\n' > "$tls/san.ext"
      openssl x509 -req -in "$tls/server.csr" -CA "$tls/ca.pem" -CAkey "$tls/ca.key" -CAcreateserial \
        -days 2 -extfile "$tls/san.ext" -out "$tls/server.crt"
    } >"$dir/tls.log" 2>&1
    chmod 600 "$tls/server.key"
    [ "$(id -u)" = 0 ] && chown -R postgres "$tls"
    as_pg "$bin/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -w \
      -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=off -c ssl=on -c ssl_cert_file=$tls/server.crt -c ssl_key_file=$tls/server.key" start >/dev/null
    pw=$(cat "$dir/password")
    as_pg "$bin/psql" -h "$dir" -p "$port" -U postgres -q -v ON_ERROR_STOP=1 -d postgres <<SQL >/dev/null
CREATE ROLE handover LOGIN PASSWORD '$pw';
CREATE DATABASE handover OWNER handover;
CREATE DATABASE handover_ro OWNER handover;
ALTER DATABASE handover_ro SET default_transaction_read_only = on;
SQL
    echo "$port" > "$dir/port"
    echo "$port"
    ;;
  stop)
    [ -d "$dir/data" ] && as_pg "$bin/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true
    ;;
  *) echo "usage: $0 start|stop DIR" >&2; exit 2 ;;
esac
