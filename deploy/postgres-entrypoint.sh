#!/bin/sh
# Initialise the cluster on first start (superuser and password from POSTGRES_USER and
# POSTGRES_PASSWORD_FILE or POSTGRES_PASSWORD, database POSTGRES_DB), then run the server in the
# foreground as PID 1: SIGINT from the container runtime is PostgreSQL's fast shutdown.
set -eu
BIN=/usr/lib/postgresql/15/bin
: "${PGDATA:=/var/lib/postgresql/data}"
user="${POSTGRES_USER:-aidememo}"
db="${POSTGRES_DB:-$user}"
if [ -n "${POSTGRES_PASSWORD_FILE:-}" ]; then
    password="$(cat "$POSTGRES_PASSWORD_FILE")"
else
    password="${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD or POSTGRES_PASSWORD_FILE}"
fi
if [ ! -s "$PGDATA/PG_VERSION" ]; then
    pwfile="$(mktemp)"
    printf '%s\n' "$password" >"$pwfile"
    "$BIN/initdb" -D "$PGDATA" -U "$user" --pwfile="$pwfile" --auth-local=trust --auth-host=scram-sha-256 -E UTF8 \
        --locale=C.UTF-8 >/dev/null
    rm -f "$pwfile"
    printf "host all all 0.0.0.0/0 scram-sha-256\nhost all all ::/0 scram-sha-256\n" \
        >>"$PGDATA/pg_hba.conf"
    "$BIN/pg_ctl" -D "$PGDATA" -o "-c listen_addresses=''" -w start >/dev/null
    if [ "$db" != "postgres" ]; then
        "$BIN/createdb" -U "$user" "$db"
    fi
    "$BIN/pg_ctl" -D "$PGDATA" -m fast -w stop >/dev/null
fi
exec "$BIN/postgres" -D "$PGDATA" -c listen_addresses='*' -c max_connections=200 "$@"
