#!/usr/bin/env bash
# Start a throwaway PostgreSQL for the write canary on a free 127.0.0.1 port.
#   scripts/postgres.sh start DIR   -> prints the port; DIR holds data, socket, log
#   scripts/postgres.sh standby DIR LINK_PORT PRIMARY_DIR [PORT]
#       -> a streaming replica of the server in PRIMARY_DIR, reached through
#          127.0.0.1:LINK_PORT (the harness's replication link, which a
#          partition cuts), with its own replication slot; prints the port
#       PG_TLS_CA=DIR/tls of another server signs its certificate with that
#       server's CA (a Region's CA signs every instance there, as RDS's does)
#   scripts/postgres.sh move DIR PORT
#       -> restart the server in DIR on PORT (a renamed RDS instance's
#          endpoint changes; every session ends)
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
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# The server's TLS material under DIR/tls (see the header).
make_tls() {
    local dir=$1 tls=$1/tls; mkdir -p "$tls"
    {
      local own=(ca other-ca)
      if [ -n "${PG_TLS_CA:-}" ]; then
        cp "$PG_TLS_CA/ca.pem" "$PG_TLS_CA/ca.key" "$tls/"; own=(other-ca)
      fi
      for ca in "${own[@]}"; do
        openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=Handover test $ca" \
          -keyout "$tls/$ca.key" -out "$tls/$ca.pem"
      done
      openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" -keyout "$tls/server.key" -out "$tls/server.csr"
      # The RDS endpoint names the certificate carries, as RDS's own name
      # only their instance: S's Region by default, P's for P's database.
      printf 'subjectAltName=DNS:localhost,IP:127.0.0.1,DNS:%s\n' \
        "${PG_TLS_NAME:-*.aaaaaaaaaa.ap-northeast-1.rds.amazonaws.com}" > "$tls/san.ext"
      openssl x509 -req -in "$tls/server.csr" -CA "$tls/ca.pem" -CAkey "$tls/ca.key" -CAcreateserial \
        -days 2 -extfile "$tls/san.ext" -out "$tls/server.crt"
    } >"$dir/tls.log" 2>&1
    chmod 600 "$tls/server.key"
    if [ "$(id -u)" = 0 ]; then chown -R postgres "$tls"; fi
}
server_options() {
  echo "-p $2 -k $1 -c listen_addresses=127.0.0.1 -c fsync=off -c ssl=on -c ssl_cert_file=$1/tls/server.crt -c ssl_key_file=$1/tls/server.key"
}
case "$cmd" in
  start)
    mkdir -p "$dir"
    [ "$(id -u)" = 0 ] && chown postgres "$dir"
    port=$(free_port)
    head -c 18 /dev/urandom | base64 | tr -d '/+=' > "$dir/password"
    as_pg "$bin/initdb" -D "$dir/data" -U postgres --auth=trust >"$dir/initdb.log" 2>&1
    make_tls "$dir"
    as_pg "$bin/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -w \
      -o "$(server_options "$dir" "$port")" start >/dev/null
    pw=$(cat "$dir/password")
    as_pg "$bin/psql" -h "$dir" -p "$port" -U postgres -q -v ON_ERROR_STOP=1 -d postgres <<SQL >/dev/null
CREATE ROLE handover LOGIN PASSWORD '$pw';
-- The canary's user reads the WAL receiver's positions on a replica (a
-- planned switchover's catch-up): on RDS, its master user grants this.
GRANT pg_read_all_stats TO handover;
CREATE DATABASE handover OWNER handover;
CREATE DATABASE handover_ro OWNER handover;
ALTER DATABASE handover_ro SET default_transaction_read_only = on;
SQL
    echo "$port" > "$dir/port"
    echo "$port"
    ;;
  standby)
    link=${3:?link port}; primary=${4:?primary directory}; port=${5:-$(free_port)}
    slot=standby_$(basename "$dir" | tr -c 'a-z0-9\n' '_')
    [ -d "$dir/data" ] && as_pg "$bin/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true
    # A rebuilt replica keeps its endpoint and its certificate (clients hold its CA).
    rm -rf "$dir/data"; mkdir -p "$dir"
    [ "$(id -u)" = 0 ] && chown postgres "$dir"
    cp "$primary/password" "$dir/password"
    # A rebuilt replica gets a fresh slot (the old one holds WAL for a replica that is gone).
    as_pg "$bin/psql" -h "$primary" -p "$(cat "$primary/port")" -U postgres -d postgres -qAt \
      -c "SELECT pg_drop_replication_slot('$slot') FROM pg_replication_slots WHERE slot_name = '$slot'" >/dev/null
    as_pg "$bin/pg_basebackup" -h 127.0.0.1 -p "$link" -U postgres -D "$dir/data" -R -X stream -C -S "$slot" --checkpoint=fast \
      >"$dir/basebackup.log" 2>&1
    [ -f "$dir/tls/server.crt" ] || make_tls "$dir"
    # PG_WAL_RECEIVER_TIMEOUT_MS: the world's pace for how long a silent
    # stream lasts (S asks P for a message at half of it).
    opts="$(server_options "$dir" "$port")${PG_WAL_RECEIVER_TIMEOUT_MS:+ -c wal_receiver_timeout=$PG_WAL_RECEIVER_TIMEOUT_MS}"
    as_pg "$bin/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -w \
      -o "$opts" start >/dev/null
    echo "$port" > "$dir/port"
    echo "$port"
    ;;
  move)
    port=${3:?port}
    # Immediate, as the engine of a renamed instance goes away: a fast
    # shutdown would wait for every walsender's standby to confirm.
    as_pg "$bin/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -w -m immediate \
      -o "$(server_options "$dir" "$port")" restart >/dev/null
    echo "$port" > "$dir/port"
    echo "$port"
    ;;
  stop)
    [ -d "$dir/data" ] && as_pg "$bin/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true
    ;;
  *) echo "usage: $0 start|standby|move|stop DIR ..." >&2; exit 2 ;;
esac
