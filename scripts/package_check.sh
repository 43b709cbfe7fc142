#!/usr/bin/env bash
# Checks the Debian package as an admin meets it: installs it with dpkg -i, checks that its
# files landed (programs, units, sysusers/tmpfiles snippets, config as a conffile, man pages,
# completions) and that the postinst made the groups and directories of the snippets; starts
# the installed ckprofd by hand as ckprofd.service would (its ExecStart, as root; a socket of
# its own under /run/ckprofd, GPU 0) and pings it with the installed ckprof; renders the man
# pages with man -l and loads the bash completion in a fresh interactive bash; then removes
# (dpkg -r) and purges (dpkg -P) the package and checks that nothing of it is left but the
# groups (Debian leaves system groups behind). Works without systemd running (CI).
#   usage: scripts/package_check.sh [DEB]
#   DEB  the package to check (default: build it with scripts/package.sh)
# As root only. When not in CI (CI=true: a throwaway machine), it refuses to run where a
# ckprof package is installed or /etc/ckprofd or /var/lib/ckprofd exists: the purge at its end
# would remove them.
set -euo pipefail
cd "$(dirname "$0")/.."

fail() {
  echo "package_check.sh: $*" >&2
  exit 1
}

if [ "$(id -u)" -ne 0 ]; then
  fail "must run as root: it installs, removes and purges the ckprof package (sudo $0)"
fi
package_state() { dpkg-query -W -f='${db:Status-Status}' ckprof 2>/dev/null || true; }
if [ "${CI:-}" != true ]; then
  state=$(package_state)
  if [ -n "$state" ] && [ "$state" != not-installed ]; then
    fail "a ckprof package is on this machine already ($state); this check would purge it." \
      "Purge it first (dpkg -P ckprof) or run the check on a throwaway machine (CI=true)."
  fi
  for dir in /etc/ckprofd /var/lib/ckprofd; do
    [ -e "$dir" ] && fail "$dir exists (another ckprofd installation?); the purge at the end" \
      "of this check would remove it. Move it away or run the check on a throwaway machine."
  done
fi
for tool in dpkg dpkg-query getent stat; do
  command -v "$tool" >/dev/null || fail "$tool is missing"
done

deb=${1:-}
if [ -z "$deb" ]; then
  deb=$(scripts/package.sh | tail -n 1)
fi
[ -f "$deb" ] || fail "no package at '$deb'"
deb=$(realpath "$deb")

work=$(mktemp -d /tmp/ckprof-package-check.XXXXXX)
daemon_pid=""
installed=0
cleanup() {
  local status=$?
  if [ -n "$daemon_pid" ] && kill -0 "$daemon_pid" 2>/dev/null; then
    kill -TERM "$daemon_pid" 2>/dev/null || true
    wait "$daemon_pid" 2>/dev/null || true
  fi
  if [ "$status" -ne 0 ]; then
    [ -s "$work/ckprofd.log" ] && { echo "--- the installed ckprofd's log"; cat "$work/ckprofd.log"; } >&2
    if ((installed)); then
      echo "package_check.sh: FAILED; purging the package" >&2
      dpkg -P ckprof >/dev/null 2>&1 || true
    fi
  fi
  rm -rf "$work"
  return "$status"
}
trap cleanup EXIT

step() { echo "--- $*"; }

# excluded PATH: whether dpkg keeps PATH off the disk (path-exclude, as minimal Debian images
# have for /usr/share/man and /usr/share/doc); dpkg applies its path-include/-exclude in order.
excluded() {
  local verdict=1 cfg key pattern
  for cfg in /etc/dpkg/dpkg.cfg /etc/dpkg/dpkg.cfg.d/*; do
    [ -f "$cfg" ] || continue
    while IFS=$' \t=' read -r key pattern; do
      # shellcheck disable=SC2053  # the pattern is a glob on purpose
      case $key in
        path-exclude) [[ $1 == $pattern ]] && verdict=0 ;;
        path-include) [[ $1 == $pattern ]] && verdict=1 ;;
      esac
    done <"$cfg"
  done
  return "$verdict"
}

step "dpkg -i $(basename "$deb")"
installed=1
DEBIAN_FRONTEND=noninteractive dpkg -i "$deb" >"$work/dpkg.log" 2>&1 ||
  { cat "$work/dpkg.log" >&2; fail "dpkg -i $deb failed"; }
[ "$(package_state)" = installed ] || fail "dpkg -i ended, but ckprof is '$(package_state)'"

step "the package's files"
dpkg -L ckprof >"$work/files"
expected=(
  /usr/bin/ckprof /usr/bin/ckprofd /usr/bin/ckprof-agent /usr/libexec/ckprof/ckprofd-exec
  /lib/systemd/system/ckprofd.service /lib/systemd/system/ckprofd.socket
  /usr/lib/sysusers.d/ckprofd.conf /usr/lib/tmpfiles.d/ckprofd.conf
  /etc/ckprofd/ckprofd.json
  /usr/share/man/man1/ckprof.1.gz /usr/share/man/man8/ckprofd.8.gz
  /usr/share/bash-completion/completions/ckprof /usr/share/zsh/vendor-completions/_ckprof
  /usr/share/doc/ckprof/README.md
)
for f in "${expected[@]}"; do
  if excluded "$f"; then
    echo "note: dpkg's path-exclude keeps $f off this machine"
    continue
  fi
  grep -qxF "$f" "$work/files" || fail "dpkg -L ckprof does not list $f"
  [ -e "$f" ] || fail "$f is listed by dpkg -L ckprof but not on disk"
done
dpkg-query -W -f='${Conffiles}\n' ckprof | grep -q '^ /etc/ckprofd/ckprofd.json ' ||
  fail "/etc/ckprofd/ckprofd.json is not a conffile of the package"
/usr/bin/ckprof --version | grep -qx "ckprof [0-9.]*" || fail "/usr/bin/ckprof --version fails"
exec_start=$(sed -n 's/^ExecStart=//p' /lib/systemd/system/ckprofd.service)
case $exec_start in
  "/usr/bin/ckprofd --config /etc/ckprofd/ckprofd.json"*) ;;
  *) fail "ckprofd.service starts '$exec_start', not the installed /usr/bin/ckprofd and config" ;;
esac
echo "ok: ${#expected[@]} files; ExecStart=$exec_start"

step "the groups and directories of the sysusers.d and tmpfiles.d snippets"
while read -r type name _; do
  case $type in
    g) getent group "$name" >/dev/null || fail "the postinst made no group $name" ;;
    u) getent passwd "$name" >/dev/null || fail "the postinst made no user $name" ;;
  esac
  echo "ok: $type $name"
done < <(grep -E '^[gu][[:space:]]' /usr/lib/sysusers.d/ckprofd.conf)
state_dirs=()
while read -r _ path mode user group _; do
  [ -d "$path" ] || fail "the postinst made no directory $path"
  want="${mode#0} ${user} ${group}"
  have=$(stat -c '%a %U %G' "$path")
  [ "$have" = "$want" ] || fail "$path is '$have' (mode user group), the tmpfiles snippet says '$want'"
  state_dirs+=("$path")
  echo "ok: $path $have"
done < <(grep -E '^d[[:space:]]' /usr/lib/tmpfiles.d/ckprofd.conf)

step "the installed ckprofd, started as ckprofd.service starts it"
socket=/run/ckprofd/package-check-$$.sock
profiler=build/bin/ckprofiler-emu
[ -x "$profiler" ] || profiler=/usr/bin/true
profiler=$(realpath "$profiler")
read -r -a daemon_argv <<<"$exec_start"
"${daemon_argv[@]}" --gpus 0 --profiler-path "$profiler" --socket "$socket" \
  >"$work/ckprofd.log" 2>&1 </dev/null &
daemon_pid=$!
answered=0
for _ in $(seq 100); do  # up to 20 s for the daemon to answer
  kill -0 "$daemon_pid" 2>/dev/null || fail "the installed ckprofd exited at start"
  if /usr/bin/ckprof --socket "$socket" ping >"$work/ping" 2>&1; then
    answered=1
    break
  fi
  sleep 0.2
done
((answered)) || fail "the installed ckprofd did not answer a ping within 20 s: $(cat "$work/ping")"
cat "$work/ping"
grep -q "you are root" "$work/ping" || fail "ping did not say who we are"
have=$(stat -c '%a %G' "$socket")
[ "$have" = "660 ckprof" ] || fail "the socket is '$have' (mode group), the config says '660 ckprof'"
[ "$(/usr/bin/ckprof --socket "$socket" list --all --json | tr -d ' \n')" = "[]" ] ||
  fail "a fresh daemon lists jobs"
[ -f /var/lib/ckprofd/ckprofd.db ] || fail "the daemon wrote no /var/lib/ckprofd/ckprofd.db"
kill -TERM "$daemon_pid"
status=0
wait "$daemon_pid" || status=$?
daemon_pid=""
[ "$status" -eq 0 ] || fail "the installed ckprofd exited $status on SIGTERM (0 expected)"
[ ! -e "$socket" ] || rm -f "$socket"
echo "ok: ping answered, socket $have, stopped cleanly by SIGTERM"

step "the installed man pages"
if ! command -v man >/dev/null; then
  echo "skipped: man is not installed (scripts/setup.sh installs man-db)"
elif excluded /usr/share/man/man1/ckprof.1.gz; then
  echo "skipped: dpkg's path-exclude keeps the man pages off this machine"
else
  for page in /usr/share/man/man1/ckprof.1.gz /usr/share/man/man8/ckprofd.8.gz; do
    warnings=$(MANWIDTH=80 man -l --warnings "$page" 2>&1 >/dev/null) ||
      fail "man -l $page failed: $warnings"
    [ -z "$warnings" ] || fail "man -l --warnings $page: $warnings"
  done
  [ "$(man -w ckprof)" = /usr/share/man/man1/ckprof.1.gz ] || fail "man -w ckprof: $(man -w ckprof)"
  [ "$(man -w 8 ckprofd)" = /usr/share/man/man8/ckprofd.8.gz ] ||
    fail "man -w 8 ckprofd: $(man -w 8 ckprofd)"
  MANWIDTH=80 man -l /usr/share/man/man1/ckprof.1.gz | grep -q '^   submit$' ||
    fail "ckprof(1) has no subsection for submit"
  echo "ok: man -l renders both without warnings; man finds them"
fi

step "the bash completion, in a fresh interactive bash"
# bash-completion's loader finds the installed file by the command's name; without the
# package, the file is sourced as it is.
loader='source /usr/share/bash-completion/bash_completion && _completion_loader ckprof'
[ -f /usr/share/bash-completion/bash_completion ] ||
  loader='source /usr/share/bash-completion/completions/ckprof'
got=$(cd "$work" && HOME=$work bash --norc --noprofile -i -c "$loader
  complete -p ckprof
  COMP_WORDS=(ckprof su); COMP_CWORD=1; _ckprof ckprof su ckprof; echo \"\${COMPREPLY[*]}\"
  COMP_WORDS=(ckprof submit --rep); COMP_CWORD=2; _ckprof ckprof --rep submit
  echo \"\${COMPREPLY[*]}\"" 2>/dev/null)
expected_completion=$'complete -F _ckprof ckprof\nsubmit\n--repeat'
[ "$got" = "$expected_completion" ] ||
  fail "the installed bash completion: expected '$expected_completion', got '$got'"
echo "ok: $loader: ckprof su -> submit, ckprof submit --rep -> --repeat"
if command -v zsh >/dev/null; then
  got=$(HOME=$work zsh -f -c 'autoload -Uz compinit && compinit -u -D -d "$HOME/.zcompdump" 2>/dev/null
    print -r -- ${_comps[ckprof]}')
  [ "$got" = _ckprof ] || fail "zsh's compinit does not find _ckprof in its fpath (got '$got')"
  echo "ok: zsh's compinit finds _ckprof"
fi

step "dpkg -r ckprof"
dpkg -r ckprof >"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log" >&2; fail "dpkg -r ckprof failed"; }
[ "$(package_state)" = config-files ] || fail "after dpkg -r, ckprof is '$(package_state)'"
for f in /usr/bin/ckprof /usr/bin/ckprofd /lib/systemd/system/ckprofd.service; do
  [ ! -e "$f" ] || fail "dpkg -r left $f"
done
[ -f /etc/ckprofd/ckprofd.json ] || fail "dpkg -r removed the conffile (only a purge may)"
echo "ok: the programs are gone, the config stays until a purge"

step "dpkg -P ckprof"
dpkg -P ckprof >"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log" >&2; fail "dpkg -P ckprof failed"; }
installed=0
state=$(package_state)
[ -z "$state" ] || [ "$state" = not-installed ] || fail "after dpkg -P, ckprof is '$state'"
left=()
while read -r f; do
  [ -e "$f" ] && [ ! -d "$f" ] && left+=("$f")
done <"$work/files"
for d in /etc/ckprofd "${state_dirs[@]}"; do
  [ -e "$d" ] && left+=("$d")
done
((${#left[@]} == 0)) || fail "the purge left: ${left[*]}"
echo "ok: nothing of the package is left (the groups stay, as Debian leaves system groups)"
