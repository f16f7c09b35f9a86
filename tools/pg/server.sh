#!/usr/bin/env bash
# A throwaway PostgreSQL server for the tests and benchmarks: `start DIR` installs Debian's
# postgresql when no server is on the machine (apt-get, so as root), makes a cluster in DIR
# (initdb, as the unprivileged user `postgres` when run as root), starts it listening on
# loopback and on a socket in DIR only, and prints a URL for its database `sessiondb`, whose
# owner is the superuser `sessiondb` (trust authentication, loopback only; fsync off, so it is
# for tests, never for data worth keeping). It offers TLS with a certificate for localhost and
# 127.0.0.1 signed by a root made for it, DIR/root.crt (for `sslrootcert`). `stop DIR` stops it.
# Usage: tools/pg/server.sh start DIR [PORT] | tools/pg/server.sh stop DIR
set -euo pipefail

bin_dir() {
    local initdb
    initdb="$(ls -d /usr/lib/postgresql/*/bin/initdb 2>/dev/null | sort -V | tail -n 1 || true)"
    if [ -z "$initdb" ]; then
        initdb="$(command -v initdb || true)"
    fi
    [ -n "$initdb" ] && dirname "$initdb"
}

as_owner() {
    if [ "$(id -u)" = 0 ]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

cmd="${1:?usage: server.sh start DIR [PORT] | stop DIR}"
dir="${2:?usage: server.sh start DIR [PORT] | stop DIR}"
case "$cmd" in
start)
    port="${3:-55432}"
    bin="$(bin_dir || true)"
    if [ -z "$bin" ]; then
        apt-get update >&2
        DEBIAN_FRONTEND=noninteractive apt-get install -y postgresql >&2
        bin="$(bin_dir)"
    fi
    mkdir -p "$dir"
    if [ "$(id -u)" = 0 ]; then
        chown postgres: "$dir"
    fi
    chmod 700 "$dir"
    if [ ! -f "$dir/data/PG_VERSION" ]; then
        as_owner "$bin/initdb" -D "$dir/data" -U sessiondb --auth=trust --encoding=UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 \
            || { cat "$dir/initdb.log" >&2; exit 1; }
    fi
    if ! command -v openssl >/dev/null 2>&1; then
        DEBIAN_FRONTEND=noninteractive apt-get install -y openssl >&2
    fi
    if [ ! -f "$dir/server.key" ]; then
        # A root, and the server's certificate signed by it, as a real deployment has them.
        openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=sessiondb test root" \
            -keyout "$dir/root.key" -out "$dir/root.crt" 2>/dev/null
        openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" -keyout "$dir/server.key" -out "$dir/server.csr" 2>/dev/null
        openssl x509 -req -in "$dir/server.csr" -CA "$dir/root.crt" -CAkey "$dir/root.key" -CAcreateserial -days 3650 \
            -extfile <(printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n') -out "$dir/server.crt" 2>/dev/null
        chmod 600 "$dir/server.key" "$dir/root.key"
        chmod 644 "$dir/root.crt"
        if [ "$(id -u)" = 0 ]; then
            chown postgres: "$dir/server.key" "$dir/server.crt"
        fi
        chmod 644 "$dir/server.crt"
    fi
    as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
        -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c max_connections=200 -c fsync=off -c full_page_writes=off -c ssl=on -c ssl_cert_file=$dir/server.crt -c ssl_key_file=$dir/server.key" start >&2 \
        || { cat "$dir/server.log" >&2; exit 1; }
    if ! "$bin/psql" -h 127.0.0.1 -p "$port" -U sessiondb -d postgres -Atqc "SELECT 1 FROM pg_database WHERE datname = 'sessiondb'" | grep -q 1; then
        "$bin/createdb" -h 127.0.0.1 -p "$port" -U sessiondb sessiondb
    fi
    echo "postgres://sessiondb@127.0.0.1:$port/sessiondb"
    ;;
stop)
    bin="$(bin_dir)"
    if [ -f "$dir/data/postmaster.pid" ]; then
        as_owner "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >&2
    fi
    ;;
*)
    echo "usage: server.sh start DIR [PORT] | stop DIR" >&2
    exit 2
    ;;
esac
