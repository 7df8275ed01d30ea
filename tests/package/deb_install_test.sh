#!/usr/bin/env bash
# The Debian packages, end to end, without touching the host's /usr or /etc (ctest
# package.deb, wired in tests/package_deb.cmake):
#   1. CPack builds sluiced, sluice-tools and libsluice-dev from this build tree;
#   2. dpkg-deb: their control fields (versions, computed dependencies, conffile, maintainer
#      scripts) and contents (files, modes, stripped binaries, gzip -9n man pages);
#   3. lintian: any error or warning not overridden in the packages fails;
#   4. dpkg --root installs them into a throwaway root (admin dir inside it, maintainer scripts
#      run chrootless with DPKG_ROOT): the user sluice, the config's group, the unit enabled;
#   5. sluiced runs from the unit's ExecStart (paths mapped into the root, --listen on a free
#      port, as the user sluice without capabilities when we are root) with the shipped
#      config: an exact /v1/check answer, a reload as ExecReload does it, a clean stop;
#   6. every commented example of the config, uncommented, passes --check-config; the
#      forward-auth one also serves exact /v1/auth answers, from the edited conffile;
#   7. the README's five-line example builds with `pkg-config --cflags --libs sluice`;
#   8. reinstalling keeps the edited conffile, removing keeps it, purging deletes it;
#   9. systemd-analyze verify and security --offline on the unit, where systemd is installed.
#
#   deb_install_test.sh --source DIR --build DIR --work DIR --cpack CPACK --version X.Y.Z
#                       --cxx COMPILER
set -euo pipefail

while [ $# -gt 0 ]; do
  case "$1" in
    --source) source_dir="$2"; shift 2 ;;
    --build) build_dir="$2"; shift 2 ;;
    --work) work="$2"; shift 2 ;;
    --cpack) cpack="$2"; shift 2 ;;
    --version) project_version="$2"; shift 2 ;;
    --cxx) cxx="$2"; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done

start=$SECONDS
step() { printf '\n== [%3d s] %s\n' "$((SECONDS - start))" "$*"; }
fail() { printf 'FAIL: %s\n' "$*" >&2; exit 1; }
expect_eq() {  # what, expected, actual
  [ "$2" = "$3" ] || fail "$1: expected '$2', got '$3'"
  echo "ok: $1"
}

for tool in dpkg dpkg-deb lintian curl pkg-config gzip; do
  command -v "$tool" >/dev/null || fail "$tool is not installed (scripts/bootstrap installs it)"
done

rm -rf "$work"
mkdir -p "$work"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
}
trap cleanup EXIT

# ---------------------------------------------------------------------------------------------
step "1. cpack"
"$cpack" --config "$build_dir/CPackConfig.cmake" -B "$work/debs" >"$work/cpack.log" 2>&1 ||
  { cat "$work/cpack.log"; fail "cpack"; }
revision=$(sed -n 's/^set(CPACK_DEBIAN_PACKAGE_RELEASE "\(.*\)")$/\1/p' "$build_dir/CPackConfig.cmake")
version="$project_version-$revision"
arch=$(dpkg --print-architecture)
declare -A deb
for p in sluiced sluice-tools libsluice-dev; do
  deb[$p]="$work/debs/${p}_${version}_${arch}.deb"
  [ -f "${deb[$p]}" ] || fail "no ${deb[$p]} (cpack made: $(ls "$work/debs"))"
done
ls -l "$work"/debs/*.deb

# ---------------------------------------------------------------------------------------------
step "2. dpkg-deb -I / -c"
for p in sluiced sluice-tools libsluice-dev; do
  echo "--- dpkg-deb -I $(basename "${deb[$p]}")"
  dpkg-deb -I "${deb[$p]}"
  expect_eq "$p Package" "$p" "$(dpkg-deb -f "${deb[$p]}" Package)"
  expect_eq "$p Version" "$version" "$(dpkg-deb -f "${deb[$p]}" Version)"
  expect_eq "$p Architecture" "$arch" "$(dpkg-deb -f "${deb[$p]}" Architecture)"
done
# Computed by dpkg-shlibdeps (versioned, with the libraries the binaries link), plus the
# hand-written ones.
depends=$(dpkg-deb -f "${deb[sluiced]}" Depends)
for want in 'adduser' 'procps' 'libc6 (>= ' 'libstdc++6 (>= ' 'libhiredis0.14' 'libssl3' \
            'libyaml-cpp0.7' 'libspdlog1.10' 'libprometheus-cpp-core'; do
  [[ "$depends" == *"$want"* ]] || fail "sluiced Depends lacks '$want': $depends"
done
depends=$(dpkg-deb -f "${deb[sluice-tools]}" Depends)
for want in 'libc6 (>= ' 'libhiredis0.14' 'libssl3' 'libfmt9'; do
  [[ "$depends" == *"$want"* ]] || fail "sluice-tools Depends lacks '$want': $depends"
done
expect_eq "sluice-tools Conflicts" "sluice" "$(dpkg-deb -f "${deb[sluice-tools]}" Conflicts)"
depends=$(dpkg-deb -f "${deb[libsluice-dev]}" Depends)
for want in libboost-dev libhiredis-dev libfmt-dev libssl-dev pkg-config; do
  [[ "$depends" == *"$want"* ]] || fail "libsluice-dev Depends lacks '$want': $depends"
done
echo "ok: Depends"

dpkg-deb -e "${deb[sluiced]}" "$work/control"
expect_eq "conffiles" "/etc/sluice/sluiced.yaml" "$(cat "$work/control/conffiles")"
for s in postinst prerm postrm; do
  [ -x "$work/control/$s" ] || fail "$s is not executable"
  sh -n "$work/control/$s" || fail "$s: syntax error"
done
echo "ok: maintainer scripts"

# Files (not directories) with their modes and owners.
files_of() {
  dpkg-deb -c "$1" | awk '$1 !~ /^d/ { print $1, $2, $6 }' | sed 's# \./# /#' | sort
}
expect_eq "sluiced files" "$(printf '%s\n' \
  '-rw-r--r-- root/root /etc/sluice/sluiced.yaml' \
  '-rw-r--r-- root/root /lib/systemd/system/sluiced.service' \
  '-rw-r--r-- root/root /usr/lib/sysusers.d/sluiced.conf' \
  '-rw-r--r-- root/root /usr/share/doc/sluiced/changelog.Debian.gz' \
  '-rw-r--r-- root/root /usr/share/doc/sluiced/copyright' \
  '-rw-r--r-- root/root /usr/share/lintian/overrides/sluiced' \
  '-rw-r--r-- root/root /usr/share/man/man8/sluiced.8.gz' \
  '-rw-r--r-- root/root /usr/share/sluice/sluice-alerts.yml' \
  '-rw-r--r-- root/root /usr/share/sluice/sluice-dashboard.json' \
  '-rw-r--r-- root/root /usr/share/sluice/sluiced.openapi.json' \
  '-rwxr-xr-x root/root /usr/bin/sluiced' | sort)" "$(files_of "${deb[sluiced]}")"
expect_eq "sluice-tools files" "$(printf '%s\n' \
  '-rw-r--r-- root/root /usr/share/doc/sluice-tools/changelog.Debian.gz' \
  '-rw-r--r-- root/root /usr/share/doc/sluice-tools/copyright' \
  '-rw-r--r-- root/root /usr/share/lintian/overrides/sluice-tools' \
  '-rw-r--r-- root/root /usr/share/man/man1/sluice.1.gz' \
  '-rwxr-xr-x root/root /usr/bin/sluice' | sort)" "$(files_of "${deb[sluice-tools]}")"
# libsluice-dev: every public header of the tree (and the generated version.hpp), nothing else
# under include/.
headers=$(cd "$source_dir/include" && { find sluice -name '*.hpp'; echo sluice/version.hpp; } |
          sed 's#^#-rw-r--r-- root/root /usr/include/#')
expect_eq "libsluice-dev files" "$(printf '%s\n' "$headers" \
  '-rw-r--r-- root/root /usr/lib/libsluice_core.a' \
  '-rw-r--r-- root/root /usr/lib/libsluice_redis.a' \
  '-rw-r--r-- root/root /usr/lib/libsluice_http.a' \
  '-rw-r--r-- root/root /usr/lib/cmake/sluice/sluiceConfig.cmake' \
  '-rw-r--r-- root/root /usr/lib/cmake/sluice/sluiceConfigVersion.cmake' \
  '-rw-r--r-- root/root /usr/lib/cmake/sluice/sluice-core-targets.cmake' \
  '-rw-r--r-- root/root /usr/lib/cmake/sluice/sluice-core-targets-release.cmake' \
  '-rw-r--r-- root/root /usr/lib/cmake/sluice/sluice-redis-targets.cmake' \
  '-rw-r--r-- root/root /usr/lib/cmake/sluice/sluice-redis-targets-release.cmake' \
  '-rw-r--r-- root/root /usr/lib/cmake/sluice/sluice-http-targets.cmake' \
  '-rw-r--r-- root/root /usr/lib/cmake/sluice/sluice-http-targets-release.cmake' \
  '-rw-r--r-- root/root /usr/lib/cmake/sluice/sluice-all-targets.cmake' \
  '-rw-r--r-- root/root /usr/lib/pkgconfig/sluice.pc' \
  '-rw-r--r-- root/root /usr/share/doc/libsluice-dev/changelog.Debian.gz' \
  '-rw-r--r-- root/root /usr/share/doc/libsluice-dev/copyright' \
  '-rw-r--r-- root/root /usr/share/lintian/overrides/libsluice-dev' | sort)" \
  "$(files_of "${deb[libsluice-dev]}")"

mkdir -p "$work/x"
for p in sluiced sluice-tools libsluice-dev; do dpkg-deb -x "${deb[$p]}" "$work/x"; done
for b in sluiced sluice; do
  readelf -S "$work/x/usr/bin/$b" | grep -q '\.symtab' && fail "/usr/bin/$b is not stripped"
done
echo "ok: binaries stripped"
# gzip -9n: no file name (FLG 0), no time stamp (MTIME 0), best compression (XFL 2).
for gz in usr/share/man/man1/sluice.1.gz usr/share/man/man8/sluiced.8.gz \
          usr/share/doc/sluiced/changelog.Debian.gz; do
  expect_eq "$gz header" "1f 8b 08 00 00 00 00 00 02" \
    "$(od -An -tx1 -N9 "$work/x/$gz" | xargs)"
done
# The man pages render without a groff warning (as lintian checks them).
for page in usr/share/man/man1/sluice.1.gz usr/share/man/man8/sluiced.8.gz; do
  warnings=$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -E UTF-8 -l "$work/x/$page" 2>&1 >/dev/null)
  [ -z "$warnings" ] || fail "$page: $warnings"
done
echo "ok: man pages"
grep -qx 'prefix=/usr' "$work/x/usr/lib/pkgconfig/sluice.pc" || fail "sluice.pc: prefix is not /usr"
expect_eq "sluiced --version" "sluiced $project_version" "$("$work/x/usr/bin/sluiced" --version)"
expect_eq "sluice --version" "sluice $project_version" "$("$work/x/usr/bin/sluice" --version)"

# ---------------------------------------------------------------------------------------------
step "3. lintian"
# Fails on an error or a warning; accepted warnings are overridden in the packages
# (packaging/debian/*.lintian-overrides), each with its reason, shown here as O: lines.
# With --show-overrides lintian exits 2 for overridden tags too, so the verdict is read from
# its output; any other non-zero status is lintian failing to run.
rc=0
lintian --fail-on error,warning --display-info --show-overrides "${deb[@]}" >"$work/lintian.txt" 2>&1 || rc=$?
cat "$work/lintian.txt"
[ "$rc" = 0 ] || [ "$rc" = 2 ] || fail "lintian failed (exit $rc)"
if grep -qE '^[EW]: ' "$work/lintian.txt"; then fail "lintian: errors or warnings"; fi
echo "ok: lintian: no error, no warning that is not overridden"

# ---------------------------------------------------------------------------------------------
step "4. install into a throwaway root (dpkg --root, scripts chrootless)"
root="$work/root"
mkdir -p "$root/var/lib/dpkg/info" "$root/var/lib/dpkg/updates" "$root/var/log"
touch "$root/var/lib/dpkg/status" "$root/var/lib/dpkg/available"
# dpkg's output, with its notes on the forced dependencies, goes to dpkg.out (shown on failure);
# what it did is shown.
dpkg_root() {
  local from
  from=$(wc -l <"$work/dpkg.out" 2>/dev/null || echo 0)
  dpkg --root="$root" --force-not-root --force-script-chrootless --force-depends \
    --log="$root/var/log/dpkg.log" "$@" >>"$work/dpkg.out" 2>&1 ||
    { tail -n +"$((from + 1))" "$work/dpkg.out"; fail "dpkg --root $*"; }
  tail -n +"$((from + 1))" "$work/dpkg.out" |
    grep -E '^(Unpacking|Setting up|Removing|Purging|Creating|dpkg: warning)' || true
}
# The root holds only these packages, so dependencies are forced there: they are checked on
# this host instead, where the programs below run with the host's libraries.
satisfied() {  # one Depends alternative: "name" or "name (op version)"
  local name op ver have
  read -r name op ver <<<"$(sed -E 's/^ *([^ (]+) *(\(([<>=]+) *([^)]+)\))?.*/\1 \3 \4/' <<<"$1")"
  have=$(dpkg-query -W -f='${db:Status-Abbrev} ${Version}\n' "$name" 2>/dev/null | awk '$1 == "ii" { print $2 }' | head -1)
  if [ -z "$have" ]; then
    # A virtual package (e.g. systemd-sysusers) provided by an installed one.
    dpkg-query -W -f='${db:Status-Abbrev} ${Provides}\n' 2>/dev/null |
      awk -v n="$name" '$1 == "ii" { for (i = 2; i <= NF; i++) { sub(/,$/, "", $i); if ($i == n) f = 1 } } END { exit !f }'
    return
  fi
  [ -z "$op" ] || dpkg --compare-versions "$have" "$op" "$ver"
}
for p in sluiced sluice-tools libsluice-dev; do
  IFS=',' read -ra groups <<<"$(dpkg-deb -f "${deb[$p]}" Depends)"
  for g in "${groups[@]}"; do
    ok=false
    IFS='|' read -ra alts <<<"$g"
    for a in "${alts[@]}"; do satisfied "$a" && ok=true && break; done
    $ok || fail "$p: dependency '$g' is not satisfied on this host"
  done
done
echo "ok: every dependency is satisfied on this host"

host_state() {
  {
    sha256sum /etc/passwd /etc/group
    ls -la /etc/systemd/system/multi-user.target.wants 2>/dev/null || true
    ls -la /etc/sluice /usr/bin/sluiced /usr/bin/sluice /lib/systemd/system/sluiced.service 2>&1 || true
  }
}
host_before=$(host_state)
dpkg_root -i "${deb[sluiced]}" "${deb[sluice-tools]}" "${deb[libsluice-dev]}"
expect_eq "dpkg status" "libsluice-dev ii 
sluice-tools ii 
sluiced ii " \
  "$(dpkg-query --admindir="$root/var/lib/dpkg" -W -f='${Package} ${db:Status-Abbrev}\n' | sort)"
passwd_line=$(grep '^sluice:' "$root/etc/passwd") || fail "postinst created no user sluice"
echo "user: $passwd_line"
IFS=: read -r _ _ uid gid _ home shell <<<"$passwd_line"
expect_eq "sluice home" /nonexistent "$home"
expect_eq "sluice shell" /usr/sbin/nologin "$shell"
[ "$uid" -lt 1000 ] || fail "sluice is not a system user (uid $uid)"
expect_eq "group sluice" "$gid" "$(sed -n 's/^sluice:[^:]*:\([0-9]*\):.*/\1/p' "$root/etc/group")"
conf="$root/etc/sluice/sluiced.yaml"
expect_eq "conffile mode and group" "640 0:$gid" "$(stat -c '%a %u:%g' "$conf")"
expect_eq "unit enabled" /lib/systemd/system/sluiced.service \
  "$(readlink "$root/etc/systemd/system/multi-user.target.wants/sluiced.service")"
expect_eq "host unchanged" "$host_before" "$(host_state)"

# ---------------------------------------------------------------------------------------------
step "5. sluiced from the unit's ExecStart, with the shipped config"
unit="$root/lib/systemd/system/sluiced.service"
# The unit's command lines with the package's paths mapped into the root.
unit_lines() {
  sed -n "s/^$1=//p" "$unit" | sed -E "s#(^|[[:space:]])(/usr/bin/sluiced|/etc/sluice/)#\1$root\2#g"
}
exec_start=$(unit_lines ExecStart)
exec_start_pre=$(unit_lines ExecStartPre)
mapfile -t exec_reload < <(unit_lines ExecReload)
echo "ExecStartPre: $exec_start_pre"
echo "ExecStart:    $exec_start"
printf 'ExecReload:   %s\n' "${exec_reload[@]}"
expect_eq "ExecReload count" 2 "${#exec_reload[@]}"
[[ "${exec_reload[1]}" == "/bin/kill -HUP \$MAINPID" ]] || fail "ExecReload: ${exec_reload[1]}"

# As the unit runs it: the user sluice (of the root), no capabilities, no new privileges.
as_service=()
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null &&
   setpriv --reuid="$uid" --regid="$gid" --clear-groups test -r "$conf"; then
  as_service=(setpriv --reuid="$uid" --regid="$gid" --clear-groups --no-new-privs
              --inh-caps=-all --bounding-set=-all --)
  echo "running as uid $uid gid $gid, no capabilities"
else
  echo "running as $(id -un) (not root, or setpriv missing)"
fi
# shellcheck disable=SC2086  # the unit's command line, split as systemd splits it (no quotes)
expect_eq "ExecStartPre" "$conf: valid" "$("${as_service[@]}" $exec_start_pre)"

# start_sluiced LOG [ARGS...]: the unit's ExecStart plus ARGS, in the background; sets
# sluiced_pid and port (from its log line "listening on 127.0.0.1:PORT").
start_sluiced() {
  local log="$1"
  shift
  # shellcheck disable=SC2086
  "${as_service[@]}" $exec_start "$@" 2>"$log" &
  sluiced_pid=$!
  pids+=("$sluiced_pid")
  port=""
  for _ in $(seq 100); do
    port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$log")
    [ -n "$port" ] && return 0
    kill -0 "$sluiced_pid" 2>/dev/null || { cat "$log"; fail "sluiced exited"; }
    sleep 0.1
  done
  cat "$log"
  fail "sluiced did not log its port"
}
stop_sluiced() {
  local rc=0
  kill -TERM "$sluiced_pid"
  wait "$sluiced_pid" || rc=$?
  expect_eq "sluiced exit status after SIGTERM" 0 "$rc"
}
start_sluiced "$work/sluiced.log" --listen 127.0.0.1:0
echo "sluiced pid $sluiced_pid on port $port"
check() {  # KEY POLICY [COST] -> "BODY HTTP_CODE"
  curl -sS -o - -w ' %{http_code}' -X POST -H 'Content-Type: application/json' \
    -d "{\"key\":\"$1\",\"policy\":\"$2\",\"cost\":${3:-1}}" "http://127.0.0.1:$port/v1/check" |
    tr -d '\n'
}
expect_eq "POST /v1/check" \
  '{"allowed":true,"degraded":false,"limit":100,"policy":"api","remaining":99,"reset_after_ms":100,"retry_after_ms":0} 200' \
  "$(check user:42 api)"
expect_eq "POST /v1/check (login, all of it)" \
  '{"allowed":true,"degraded":false,"limit":5,"policy":"login","remaining":0,"reset_after_ms":50000,"retry_after_ms":0} 200' \
  "$(check user:7 login 5)"
expect_eq "GET /readyz" '{"status":"ready","backend":"up"}' \
  "$(curl -sS "http://127.0.0.1:$port/readyz")"
# systemctl reload: the check, then the signal.
# shellcheck disable=SC2086
expect_eq "ExecReload check" "$conf: valid" "$("${as_service[@]}" ${exec_reload[0]})"
${exec_reload[1]/\$MAINPID/$sluiced_pid}
reloads=""
for _ in $(seq 50); do
  reloads=$(curl -sS "http://127.0.0.1:$port/metrics" |
            sed -n 's/^sluice_config_reloads_total{result="success"} //p')
  [ "$reloads" = 1 ] && break
  sleep 0.1
done
expect_eq "reloads after ExecReload" 1 "$reloads"
stop_sluiced

# ---------------------------------------------------------------------------------------------
step "6. the config's examples, uncommented"
# An example is the block between '## ==== Example "NAME"' and '## ==== end'. Uncommenting
# it is what the file's header says: remove one '#' from each of its lines and delete the
# active line of each top-level key it sets again.
example_names=$(sed -n 's/^## ==== Example "\([a-z-]*\)".*/\1/p' "$conf")
echo "examples: $(tr '\n' ' ' <<<"$example_names")"
for want in redis cluster forward-auth; do
  grep -qx "$want" <<<"$example_names" || fail "the config has no example '$want'"
done
# uncommented NAME [keep-active]: the config with example NAME uncommented in place, on
# stdout; with keep-active, the active lines of the keys it sets again are left in.
uncommented() {
  awk -v name="$1" -v keep="${2:-}" '
    function starts(line) { return line ~ ("^## ==== Example \"" name "\"") }
    FNR == NR {  # first pass: the top-level keys the example sets
      if (starts($0)) inside = 1
      if (inside && match($0, /^#[a-z_]+:/)) keys[substr($0, 2, RLENGTH - 2)] = 1
      if (inside && /^## ==== end/) inside = 0
      next
    }
    dropped && /^[ \t-]/ { bad = bad " " dropped }  # a dropped key had more lines
    { dropped = "" }
    starts($0) { inside = 1 }
    inside { line = $0; sub(/^#/, "", line); print line; if (/^## ==== end/) inside = 0; next }
    keep == "" && match($0, /^[a-z_]+:/) && (substr($0, 1, RLENGTH - 1) in keys) {
      dropped = substr($0, 1, RLENGTH - 1); next
    }
    { print }
    END { if (bad != "") { print "example " name " sets key(s) of more than one line:" bad > "/dev/stderr"; exit 1 } }
  ' "$conf" "$conf"
}
for name in $example_names; do
  uncommented "$name" >"$work/example-$name.yaml" || fail "example $name"
  out=$("$root/usr/bin/sluiced" --config "$work/example-$name.yaml" --check-config 2>&1) ||
    { cat -n "$work/example-$name.yaml"; fail "example $name: $out"; }
  expect_eq "example $name" "$work/example-$name.yaml: valid" "$out"
done
# The check is real: the Redis example without deleting `backend: memory` is refused.
uncommented redis keep-active >"$work/example-redis-duplicate.yaml"
rc=0
out=$("$root/usr/bin/sluiced" --config "$work/example-redis-duplicate.yaml" --check-config 2>&1) || rc=$?
expect_eq "a key given twice: exit status" 2 "$rc"
[[ "$out" == *"duplicate key"* ]] || fail "a key given twice: $out"

# Forward-auth, edited into the installed conffile: 5 POST /login per client, then 403.
cp "$work/example-forward-auth.yaml" "$conf"
start_sluiced "$work/sluiced-auth.log" --listen 127.0.0.1:0
codes=""
for _ in 1 2 3 4 5 6; do
  codes+="$(curl -sS -o /dev/null -w '%{http_code}' -X POST "http://127.0.0.1:$port/v1/auth/login") "
done
expect_eq "forward-auth: POST /v1/auth/login x6" "200 200 200 200 200 403 " "$codes"
expect_eq "forward-auth: GET /v1/auth/login (no rule)" 200 \
  "$(curl -sS -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/v1/auth/login")"
stop_sluiced

# ---------------------------------------------------------------------------------------------
step "7. libsluice-dev: the README's five-line example with pkg-config"
readme_example=$(awk '/^### The library in five lines/ { f = 1; next }
                      f && /^```cpp/ { g = 1; next } g && /^```/ { exit } g' "$source_dir/README.md")
[ -n "$readme_example" ] || fail "no five-line example in README.md"
{
  grep '^#include' <<<"$readme_example"
  echo 'int main() {'
  grep -v '^#include' <<<"$readme_example"
  echo '}'
} >"$work/five_lines.cpp"
pc_flags=$(PKG_CONFIG_PATH="$root/usr/lib/pkgconfig" pkg-config --cflags --libs sluice)
echo "pkg-config --cflags --libs sluice: $pc_flags"
# The root stands for /usr: its include and lib directories come first.
# shellcheck disable=SC2086
"$cxx" -std=c++20 -Wall -Wextra -Werror -I"$root/usr/include" "$work/five_lines.cpp" \
  -L"$root/usr/lib" $pc_flags -o "$work/five_lines"
echo "ok: built $work/five_lines"

# ---------------------------------------------------------------------------------------------
step "8. reinstall, remove, purge"
dpkg_root -i "${deb[sluiced]}"
grep -q '^rules:' "$conf" || fail "reinstalling replaced the edited conffile"
expect_eq "conffile mode and group after reinstall" "640 0:$gid" "$(stat -c '%a %u:%g' "$conf")"
echo "ok: reinstall kept the edited conffile"
dpkg_root -r sluiced
expect_eq "after remove: status" "rc " \
  "$(dpkg-query --admindir="$root/var/lib/dpkg" -W -f='${db:Status-Abbrev}' sluiced)"
grep -q '^rules:' "$conf" || fail "remove did not keep the edited conffile"
if [ -e "$root/usr/bin/sluiced" ] || [ -e "$unit" ]; then fail "remove left the program or unit"; fi
expect_eq "after remove: unit masked" /dev/null "$(readlink "$root/etc/systemd/system/sluiced.service")"
echo "ok: remove kept the edited conffile"
dpkg_root -P sluiced
[ ! -e "$root/etc/sluice" ] || fail "purge left $(ls -la "$root/etc/sluice")"
[ ! -e "$root/etc/systemd/system/sluiced.service" ] || fail "purge left the mask"
[ ! -e "$root/etc/systemd/system/multi-user.target.wants/sluiced.service" ] ||
  fail "purge left the enablement"
[ -z "$(dpkg-query --admindir="$root/var/lib/dpkg" -W -f='${db:Status-Abbrev}' sluiced 2>/dev/null | tr -d ' ')" ] ||
  [ "$(dpkg-query --admindir="$root/var/lib/dpkg" -W -f='${db:Status-Abbrev}' sluiced)" = "un " ] ||
  fail "purge left sluiced in dpkg's database"
echo "ok: purge deleted the conffile, /etc/sluice and the unit's links (the user sluice stays)"
dpkg_root -P sluice-tools libsluice-dev
# What stays: the user sluice (and the lock of the files that hold it).
left=$(find "$root/usr" "$root/lib" "$root/etc" \( -type f -o -type l \) 2>/dev/null |
       sed "s#^$root/##" | grep -vE '^etc/(passwd|group|shadow|gshadow|\.pwd\.lock)-?$' || true)
[ -z "$left" ] || fail "purging every package left: $left"
expect_eq "host unchanged" "$host_before" "$(host_state)"

# ---------------------------------------------------------------------------------------------
step "9. systemd-analyze"
if command -v systemd-analyze >/dev/null; then
  # The unit as installed, its programs mapped into the extracted packages.
  mkdir -p "$work/unit"
  sed -E "s#(^|[[:space:]=])(/usr/bin/sluiced|/etc/sluice/)#\1$work/x\2#g" \
    "$work/x/lib/systemd/system/sluiced.service" >"$work/unit/sluiced.service"
  MANPATH="$work/x/usr/share/man" systemd-analyze verify "$work/unit/sluiced.service"
  echo "ok: systemd-analyze verify"
  # The exposure score may not grow past 1.1 (of 10), what this unit reached.
  (cd "$work/unit" && systemd-analyze security --offline=yes --threshold=11 ./sluiced.service) |
    tee "$work/security.txt" | grep -E '✗|Overall'
  echo "ok: systemd-analyze security"
else
  echo "skipped: systemd-analyze is not installed"
fi

step "passed"
