#!/usr/bin/env bash
# Tests the shell completions (completions/ckprof.bash, completions/_ckprof) against the built
# ckprof: in bash alone and with the bash-completion package's helpers loaded, and in zsh
# (through zsh/zpty) where zsh is installed. Without --daemon: commands (`ckprof su` ->
# submit), each command's options as its --help lists them (`ckprof submit --re` -> --repeat),
# option values, file names for the file arguments, and nothing, at once, where no daemon
# answers. With --daemon: a private ckprofd with two jobs on GPUs 0 and 1, whose job ids and
# GPUs are completed (also through --socket and --socket=); cancel and edit complete only our
# jobs that have not ended, retry only ours (a cancelled one too), not user nobody's; and one
# that is stopped (SIGSTOP) completes nothing within the 2-second bound.
#   usage: completion_test.sh BIN_DIR SOURCE_DIR [--daemon]
#   BIN_DIR     the built ckprof (and ckprofd, ckprofiler-emu for --daemon)
#   SOURCE_DIR  the source tree (completions/, examples/)
set -euo pipefail

if [ $# -lt 2 ] || [ $# -gt 3 ] || { [ $# -eq 3 ] && [ "$3" != --daemon ]; }; then
  echo "usage: $0 BIN_DIR SOURCE_DIR [--daemon]" >&2
  exit 2
fi
bin_dir=$(realpath "$1")
source_dir=$(realpath "$2")
with_daemon=$([ "${3:-}" = --daemon ] && echo 1 || echo 0)
completions=$source_dir/completions
here=$(dirname "$(realpath "$0")")
for f in "$bin_dir/ckprof" "$completions/ckprof.bash" "$completions/_ckprof"; do
  [ -e "$f" ] || { echo "FAIL: $f is missing" >&2; exit 1; }
done

work=$(mktemp -d)
daemon_pid=""
cleanup() {
  if [ -n "$daemon_pid" ]; then
    kill -CONT "$daemon_pid" 2>/dev/null || true
    kill -TERM "$daemon_pid" 2>/dev/null || true
    wait "$daemon_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
failures=0
fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}

export PATH="$bin_dir:$PATH" LC_ALL=C
export HOME=$work  # no ~/.bash_completion, no ~/.zshrc
unset CKPROF_SOCKET
export CKPROF_SOCKET=$work/nobody.sock  # no daemon, unless a case says otherwise
mkdir -p "$work/cwd/sub dir"
: >"$work/cwd/input-configs.json"
: >"$work/cwd/results-a.json"
cd "$work/cwd"

modes=(bash)
if [ -f /usr/share/bash-completion/bash_completion ]; then
  modes+=(bash-completion)
else
  echo "note: bash-completion is not installed (scripts/setup.sh installs it): bash alone only"
fi

# complete_bash MODE WORD...: COMPREPLY, sorted and space-separated, for the words (the last
# is the one being completed: "" after a space).
complete_bash() {
  local mode=$1
  shift
  bash --norc --noprofile -c '
    mode=$1 completion=$2
    shift 2
    if [ "$mode" = bash-completion ]; then
      source /usr/share/bash-completion/bash_completion
      declare -F _filedir >/dev/null || { echo "bash-completion did not load"; exit 0; }
    fi
    source "$completion"
    COMP_WORDS=("$@")
    COMP_CWORD=$(($# - 1))
    COMP_LINE="$*"
    COMP_POINT=${#COMP_LINE}
    _ckprof ckprof "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}"
    printf "%s\n" "${COMPREPLY[@]}" | sed "/^$/d" | sort | tr "\n" " " | sed "s/ $//"
  ' _ "$mode" "$completions/ckprof.bash" "$@"
}

# expect WANT WORD...: the completion of the words is WANT in every bash mode.
expect() {
  local want=$1 mode got
  shift
  for mode in "${modes[@]}"; do
    got=$(complete_bash "$mode" "$@")
    [ "$got" = "$want" ] || fail "$mode: '$*<TAB>' gave '$got', expected '$want'"
  done
}

commands=$(ckprof --help | sed -n '/^commands:$/,/^$/s/^  \([a-z][a-z0-9-]*\) .*/\1/p' | sort)
[ -n "$commands" ] || fail "'ckprof --help' lists no commands"
long_options_of() {  # the options a command's --help lists, sorted
  ckprof "$1" --help | grep -oE '^  (-[a-z], )?--[a-z][a-z0-9-]*' | sed 's/^ *//; s/, /\n/' | sort -u
}

if ((with_daemon == 0)); then
  # Commands and options, from the help texts.
  expect "submit" ckprof su
  expect "$(tr '\n' ' ' <<<"$commands" | sed 's/ $//')" ckprof ""
  expect "$(grep '^r' <<<"$commands" | tr '\n' ' ' | sed 's/ $//')" ckprof r
  expect "--help --socket --version" ckprof --
  expect "--repeat" ckprof submit --rep
  expect "--repeat" ckprof --socket /x.sock submit --rep
  expect "--repeat" ckprof submit --name x --rep
  for c in $commands; do
    expect "$(long_options_of "$c" | grep -- '^--' | tr '\n' ' ' | sed 's/ $//')" ckprof "$c" --
  done
  # Option values; each listed value is one the option's help names.
  expect "csv json table" ckprof results --format ""
  expect "json" ckprof results --format j
  expect "json" ckprof results --format = j
  expect "csv json table" ckprof results --format =
  expect "auto bf16 fp16 fp32" ckprof submit --data-type ""
  expect "auto nchw nhwc" ckprof convert --layout ""
  expect "longest-first rank" ckprof submit --order ""
  expect "auto never" ckprof submit --reuse ""
  expect "never" ckprof submit --reuse n
  expect "bwd_data bwd_weight fwd" ckprof best --op ""
  expect "bwd_data bwd_weight" ckprof best --op = bwd
  expect "csv json table" ckprof best --format ""
  expect "html json md" ckprof report --format ""
  expect "html json md" ckprof report 12 -o r.html --format ""
  expect "rank trace" ckprof results --sort ""
  expect "cancelled cancelling finished held queued running waiting" ckprof list --state ""
  expect "" ckprof best --gpu-model ""
  # An option whose help lists its values as a|b|c completes exactly those.
  for c in $commands; do
    while read -r option values; do
      expect "$(tr '|' '\n' <<<"$values" | sort | tr '\n' ' ' | sed 's/ $//')" ckprof "$c" "$option" ""
    done < <(ckprof "$c" --help |
      sed -nE 's/^  (-[a-z], )?(--[a-z][a-z0-9-]*) [A-Z]+ +([a-z0-9_-]+(\|[a-z0-9_-]+)+).*/\2 \3/p')
  done
  for c in $commands; do
    for option in --format --data-type --layout --order --state --reuse --op --sort; do
      line=$(ckprof "$c" --help | awk -v o="$option" 'f && !/^   / { f = 0 } $1 == o { f = 1 } f' |
        tr '\n' ' ')
      [ -n "$line" ] || continue
      for value in $(complete_bash bash ckprof "$c" "$option" ""); do
        [[ $line == *"$value"* ]] ||
          fail "'ckprof $c $option' completes '$value', which its --help does not name: $line"
      done
    done
  done
  expect "" ckprof submit --name ""
  expect "" ckprof submit --after ""
  expect "" ckprof boost 1 ""
  if grep -qx help <<<"$commands"; then  # `ckprof help COMMAND`
    expect "submit" ckprof help su
  fi
  # File names where the argument is a file.
  expect "input-configs.json" ckprof submit inp
  expect "input-configs.json" ckprof convert inp
  expect "input-configs.json" ckprof run inp
  expect "input-configs.json" ckprof compare inp
  expect "results-a.json" ckprof results --output res
  expect "input-configs.json" ckprof --socket inp
  expect "sub dir" ckprof submit sub
  expect "input-configs.json" ckprof submit --name "job 1" -- inp
  expect "" ckprof status inp
  # No daemon: nothing, at once.
  start=$(date +%s%N)
  expect "" ckprof status ""
  expect "" ckprof cancel ""
  expect "" ckprof drain ""
  expect "input-configs.json results-a.json sub dir" ckprof compare ""
  expect "" ckprof compare a b ""
  elapsed_ms=$((($(date +%s%N) - start) / 1000000))
  ((elapsed_ms < 4000)) || fail "completing without a daemon took $elapsed_ms ms"
else
  # A private daemon with two jobs that wait (--not-before) and so never run a profiler.
  profiler=$bin_dir/ckprofiler-emu
  [ -x "$profiler" ] || profiler=/bin/true
  socket=$work/d/ckprofd.sock
  mkdir -p "$work/d"
  chmod 711 "$work" "$work/d"  # another user submits too (below)
  ckprofd --socket "$socket" --socket-mode 0666 --state-dir "$work/d/state" --lock-dir "" \
    --gpus 0,1 --profiler-path "$profiler" >"$work/d/log" 2>&1 </dev/null &
  daemon_pid=$!
  up=0
  for _ in $(seq 200); do  # the daemon answers (at most 20 s)
    kill -0 "$daemon_pid" 2>/dev/null || break
    if ckprof --socket "$socket" ping >/dev/null 2>&1; then up=1 && break; fi
    sleep 0.1
  done
  if ((up == 0)); then
    cat "$work/d/log" >&2
    echo "FAIL: the private ckprofd did not answer" >&2
    exit 1
  fi
  job1=$(ckprof --socket "$socket" submit "$source_dir/examples/conv_repros_ir.json" --name one \
    --max-ops 1 --not-before +1h 2>/dev/null)
  job2=$(ckprof --socket "$socket" submit "$source_dir/examples/conv_repros_ir.json" --name "t:2" \
    --max-ops 1 --not-before +1h 2>/dev/null)
  ids=$(printf '%s\n' "$job1" "$job2" | sort | tr '\n' ' ' | sed 's/ $//')
  [[ $ids =~ ^[0-9]+\ [0-9]+$ ]] || fail "the two submits printed '$job1' and '$job2', not job ids"

  export CKPROF_SOCKET=$socket
  expect "$ids" ckprof status ""
  expect "$ids" ckprof watch ""
  expect "$ids" ckprof wait "$job1" ""
  expect "$ids" ckprof results ""
  expect "$ids" ckprof cancel "$job1" ""
  expect "$ids" ckprof retry ""
  expect "" ckprof retry "$job1" ""
  expect "$ids" ckprof boost ""
  expect "" ckprof boost "$job1" ""
  expect "$ids" ckprof results --format json ""
  expect "$ids" ckprof submit x.json --after ""
  expect "$(printf '%s\n' "$job1,$job1" "$job1,$job2" | sort | tr '\n' ' ' | sed 's/ $//')" \
    ckprof submit --after-ok "$job1,"
  expect "$job1" ckprof status "$job1"
  if ckprof log --help 2>/dev/null | grep -q '^  -n, --lines N'; then  # -n takes a value too
    expect "$ids" ckprof log -n 5 ""
    expect "" ckprof log "$job1" ""
  fi
  expect "0 1" ckprof drain ""
  expect "0 1" ckprof resume ""
  expect "$ids input-configs.json results-a.json sub dir" ckprof compare ""
  # The daemon named on the command line wins over $CKPROF_SOCKET.
  export CKPROF_SOCKET=$work/nobody.sock
  expect "" ckprof status ""
  expect "$ids" ckprof --socket "$socket" status ""
  expect "$ids" ckprof status --socket "$socket" ""
  expect "$ids" ckprof --socket = "$socket" status ""
  # cancel and edit offer your jobs that have not ended; retry your jobs however they ended;
  # the others every job, another user's too (where we are root and there is a user nobody).
  export CKPROF_SOCKET=$socket
  job3=$(ckprof submit "$source_dir/examples/conv_repros_ir.json" --name three --max-ops 1 \
    --not-before +1h 2>/dev/null)
  other_job=""
  if [ "$(id -u)" = 0 ] && id nobody >/dev/null 2>&1 && command -v runuser >/dev/null; then
    # A copy in $work: the build directory may be in a place that nobody cannot enter (a clone
    # in a 0700 home directory).
    install -m 755 "$bin_dir/ckprof" "$work/ckprof-nobody"
    other_job=$(runuser -u nobody -- "$work/ckprof-nobody" --socket "$socket" submit - --name other \
      --max-ops 1 --not-before +1h <"$source_dir/examples/conv_repros_ir.json" 2>"$work/err") ||
      fail "user nobody could not submit: $(cat "$work/err")"
  else
    echo "note: not root or no user nobody: no other user's job"
  fi
  ckprof cancel "$job3" >/dev/null || fail "'ckprof cancel $job3' failed"
  for _ in $(seq 200); do  # it has ended (at most 20 s)
    ckprof list --state cancelled --json | grep -qE "\"id\": *$job3\b" && break
    sleep 0.1
  done
  all_ids=$(printf '%s\n' "$job1" "$job2" "$job3" | sort | tr '\n' ' ' | sed 's/ $//')
  every_id=$(printf '%s\n' "$job1" "$job2" "$job3" ${other_job:+"$other_job"} | sort | tr '\n' ' ' | sed 's/ $//')
  expect "$ids" ckprof cancel ""
  expect "$ids" ckprof edit ""
  expect "$all_ids" ckprof retry ""
  expect "$every_id" ckprof status ""
  expect "$every_id" ckprof results ""
  # A daemon that accepts but never answers: nothing, within the 2-second bound.
  export CKPROF_SOCKET=$socket
  kill -STOP "$daemon_pid"
  start=$(date +%s%N)
  got=$(complete_bash bash ckprof status "")
  elapsed_ms=$((($(date +%s%N) - start) / 1000000))
  kill -CONT "$daemon_pid"
  [ -z "$got" ] || fail "a stopped daemon completed '$got'"
  ((elapsed_ms < 3500)) || fail "completing against a stopped daemon took $elapsed_ms ms"
  echo "ok: a stopped daemon completes nothing in $elapsed_ms ms"
fi

# zsh: the same cases at a real zsh prompt.
if command -v zsh >/dev/null; then
  zsh -n "$completions/_ckprof" || fail "zsh -n $completions/_ckprof"
  if ((with_daemon == 0)); then
    lines=("ckprof su" "ckprof submit --rep" "ckprof results --format " "ckprof submit inp"
           "ckprof status " "ckprof " "ckprof best --op " "ckprof report --format="
           "ckprof submit --reuse " "ckprof list --state " "ckprof submit --data-type ")
    want=("submit" "--repeat" "csv json table" "input-configs.json" ""
          "$(tr '\n' ' ' <<<"$commands" | sed 's/ $//')" "bwd_data bwd_weight fwd"
          "html json md" "auto never" "cancelled cancelling finished held queued running waiting"
          "auto bf16 fp16 fp32")
  else
    lines=("ckprof status " "ckprof boost $job1 " "ckprof drain " "ckprof --socket $socket wait "
           "ckprof cancel " "ckprof edit " "ckprof retry ")
    want=("$every_id" "" "0 1" "$every_id" "$ids" "$ids" "$all_ids")
  fi
  if got=$(timeout 60 zsh -f "$here/zsh_complete.zsh" "$completions" "${lines[@]}"); then
    mapfile -t got_lines <<<"$got"
    for i in "${!lines[@]}"; do
      [ "${got_lines[i]:-}" = "${want[i]}" ] ||
        fail "zsh: '${lines[i]}<TAB>' gave '${got_lines[i]:-}', expected '${want[i]}'"
    done
  else
    fail "zsh_complete.zsh failed or hung: $got"
  fi
else
  echo "note: zsh is not installed (scripts/setup.sh installs it): no zsh cases"
fi

if ((failures)); then
  echo "$failures check(s) failed" >&2
  exit 1
fi
echo "ok: completions in ${modes[*]}$(command -v zsh >/dev/null && echo " and zsh")" \
  "$([ "$with_daemon" = 1 ] && echo "with a live daemon (jobs $ids)")"
