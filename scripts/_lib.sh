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

# Create .venv if missing; reinstall -e '.[origin,test]' only when pyproject.toml changed.
ensure_venv() {
    if [ ! -x "$PY" ]; then
        local base
        base="$(find_python)"
        log "creating .venv with $base"
        "$base" -m venv "$VENV"
    fi
    local want have stamp="$VENV/.aidememo-pyproject.sha256"
    want="$(sha_of pyproject.toml)"
    have="$(cat "$stamp" 2>/dev/null || true)"
    if [ "$want" != "$have" ] || ! "$PY" -I -c 'import aidememo' >/dev/null 2>&1; then
        log "installing -e '.[origin,test]' into .venv"
        "$PY" -m pip install --quiet --disable-pip-version-check --upgrade pip
        "$PY" -m pip install --quiet --disable-pip-version-check -e '.[origin,test]'
        printf '%s\n' "$want" >"$stamp"
    else
        log ".venv is up to date with pyproject.toml"
    fi
    export PATH="$VENV/bin:$PATH"
    export VIRTUAL_ENV="$VENV"
}

# Install the root node_modules (pyodide, wrangler, better-sqlite3) when package files changed.
ensure_node_modules() {
    [ -f package.json ] || return 0
    if ! command -v npm >/dev/null 2>&1; then
        log "npm not found; the pyodide and wrangler tiers will fail"
        return 1
    fi
    local want have stamp="node_modules/.aidememo-package.sha256"
    want="$(sha_of package.json package-lock.json)"
    have="$(cat "$stamp" 2>/dev/null || true)"
    if [ "$want" != "$have" ]; then
        if [ -f package-lock.json ]; then
            log "npm ci"
            npm ci --no-audit --no-fund --loglevel=error
        else
            log "npm install (no package-lock.json)"
            npm install --no-audit --no-fund --loglevel=error
            want="$(sha_of package.json package-lock.json)"
        fi
        printf '%s\n' "$want" >"$stamp"
    else
        log "node_modules is up to date with package.json/package-lock.json"
    fi
}
