# Shared helpers for scripts/*. Source it; it sets SLUICE_ROOT and a few functions.
# Everything here is plain bash so a minimal Debian 12 (debootstrap minbase) can run it.

SLUICE_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
export SLUICE_ROOT

# Every message goes to stderr with the script's name, so stdout stays the program's output.
sluice_log() { printf '[%s] %s\n' "$(basename "$0")" "$*" >&2; }
sluice_die() { sluice_log "error: $*"; exit 1; }

# Runs a command as root: directly when we are root, else through sudo when it exists.
sluice_as_root() {
  if [ "$(id -u)" -eq 0 ]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1; then
    sudo "$@"
  else
    sluice_die "need root (or sudo) to run: $*"
  fi
}

# Parallel jobs: one per core (CI has 2), overridable with SLUICE_JOBS.
sluice_jobs() { echo "${SLUICE_JOBS:-$(nproc 2>/dev/null || echo 2)}"; }

# ccache keys on paths relative to the checkout, so a fresh clone elsewhere (CI) reuses
# what an earlier build of the same sources cached. Only when the user has not chosen.
if [ -z "${CCACHE_BASEDIR:-}" ]; then
  export CCACHE_BASEDIR="$SLUICE_ROOT"
fi
# Debug builds (the sanitizer presets) would otherwise also key on the build directory's
# absolute path (ccache's hash_dir, for DW_AT_comp_dir), so a clone elsewhere would rebuild
# everything. Debug info then names the first builder's directory; sanitizer reports are
# symbolized by function and relative file names either way.
if [ -z "${CCACHE_NOHASHDIR:-}" ]; then
  export CCACHE_NOHASHDIR=1
fi

# Prints how long a step took after running it: "[build] configure release: 12 s".
sluice_timed() {
  local what="$1"
  shift
  local start=$SECONDS rc=0
  "$@" || rc=$?
  sluice_log "$what: $((SECONDS - start)) s (exit $rc)"
  return $rc
}

# Runs scripts/bootstrap unless this script was started by one that already did.
sluice_bootstrap_once() {
  if [ "${SLUICE_BOOTSTRAPPED:-}" != 1 ]; then
    "$SLUICE_ROOT/scripts/bootstrap"
    export SLUICE_BOOTSTRAPPED=1
  fi
}

# The build tree of a preset (CMakePresets.json puts each under build/).
sluice_build_dir() { echo "$SLUICE_ROOT/build/$1"; }
