# bash completion for ckprof (installed as share/bash-completion/completions/ckprof; or
# `source completions/ckprof.bash`). Works with and without the bash-completion package.
#
# Everything comes from ckprof itself, so that it never falls behind: the commands from `ckprof
# --help`, each command's options and arguments from `ckprof COMMAND --help` (an option with a
# metavariable takes a value; the usage line gives the arguments' order and the "arguments:" block
# what each one is: a job id, a GPU index, a file; the values an option's description lists, as
# auto|fp16|bf16 or "fwd, bwd_data or bwd_weight"). Job ids come from the daemon (`ckprof list --all
# --json`; for cancel, edit and hold your jobs that have not ended, for release held jobs, for retry
# your jobs) and GPU indices from `ckprof gpus --json`, asked at most 2 seconds; a daemon that does
# not answer completes nothing. --socket on the command line is passed on.

# _ckprof_parse_help < HELP: one line per option ("o NAME TAKES_VALUE METAVAR VALUES") and
# per argument in usage order ("a NAME REPEATS KIND", KIND command, job, gpu, file, job-or-file
# or other). VALUES are the values the option's description lists (comma-separated; "-" for
# none): "auto|fp16|bf16", or a list of words at its start or after a first "...: ", asides in
# parentheses left out: "fwd, bwd_data or bwd_weight", "only jobs in these states: queued,
# waiting, ...".
_ckprof_parse_help() {
  awk '
    function list_at(d,   v) {
      if (match(d, /^[a-z][a-z0-9_-]*(\|[a-z][a-z0-9_-]*)+([ ,;.]|$)/)) {
        v = substr(d, 1, RLENGTH)
        sub(/[ ,;.]$/, "", v)
        gsub(/\|/, ",", v)
        return v
      }
      if (match(d, /^[a-z][a-z0-9_-]*((, | or |, or )[a-z][a-z0-9_-]*)+([;.,]|$)/)) {
        v = substr(d, 1, RLENGTH)
        sub(/[;.,]$/, "", v)
        gsub(/,? or /, ",", v)
        gsub(/, /, ",", v)
        return v
      }
      return ""
    }
    function values_of(desc,   d, v) {
      d = desc
      while (gsub(/\([^()]*\)/, "", d)) {}
      gsub(/[ \t]+/, " ", d)
      gsub(/ ,/, ",", d)  # "table (default), json": "table, json"
      gsub(/ ;/, ";", d)
      sub(/^ /, "", d)
      sub(/ $/, "", d)
      v = list_at(d)
      if (v == "" && sub(/^[^:;,]*: /, "", d)) v = list_at(d)
      return v != "" ? v : "-"
    }
    # Prints the option read last (its description may go on over deeper lines).
    function flush(   k, j, alts, parts, metavar, values) {
      if (tag == "") return
      k = split(tag, alts, ", ")
      split(alts[k], parts, " ")
      metavar = parts[2]  # "-n, --lines N": both take N
      values = metavar != "" ? values_of(desc) : "-"
      for (j = 1; j <= k; j++) {
        split(alts[j], parts, " ")
        print "o", parts[1], (metavar != "" ? 1 : 0), (metavar != "" ? metavar : "-"), values
      }
      tag = ""
    }
    function kind_of(name, desc) {
      if (name == "COMMAND") return "command"
      if (desc ~ /job id/ && desc ~ /file/) return "job-or-file"
      if (name == "JOB" || desc ~ /job id/) return "job"
      if (name == "GPU" || desc ~ /GPU index/) return "gpu"
      if (name ~ /FILE|INPUT|OUTPUT/ || desc ~ /file/) return "file"
      return "other"
    }
    NR == 1 && /^usage: / {
      gsub(/\[-[^]]*\]/, "")  # [--socket PATH]: an option, no argument
      n = 0
      for (i = 2; i <= NF; i++) {
        w = $i
        if (w ~ /^[a-z]/ && n == 0) continue  # the program and the command
        gsub(/[][]/, "", w)
        if (w == "options" || w ~ /^-/) continue
        rep = sub(/\.\.\.$/, "", w) ? 1 : 0
        order[++n] = w
        repeats[w] = rep
      }
      next
    }
    /^[^ ]/ { flush(); section = $0; next }
    section == "arguments:" && /^  [A-Za-z]/ {
      name = $1
      desc = $0
      sub(/^  [^ ]+ */, "", desc)
      descs[name] = desc
      last = name
      next
    }
    section == "arguments:" && /^    / && last != "" { descs[last] = descs[last] " " $0; next }
    /^  -/ {  # an option at the indent of items (a deeper line continues a description)
      flush()
      tag = $0
      sub(/^ +/, "", tag)
      desc = ""
      if (match(tag, /  +/)) {
        desc = substr(tag, RSTART + RLENGTH)
        tag = substr(tag, 1, RSTART - 1)
      }
      next
    }
    /^   / && tag != "" { desc = desc " " $0; next }
    { flush() }
    END {
      flush()
      for (i = 1; i <= n; i++) print "a", order[i], repeats[order[i]], kind_of(order[i], descs[order[i]])
    }'
}

# _ckprof_commands PROGRAM: the commands its --help lists.
_ckprof_commands() {
  "$1" --help 2>/dev/null |
    awk '/^commands:$/ { f = 1; next } f && /^[ \t]*$/ { exit } f && /^  [a-z]/ { print $1 }'
}

# _ckprof_ask PROGRAM SOCKET_ARGS... -- ARGS...: the program's output, or nothing after 2 s.
_ckprof_ask() {
  local prog=$1
  shift
  if command -v timeout >/dev/null 2>&1; then
    timeout -k 1 2 "$prog" "$@" 2>/dev/null
  else
    "$prog" "$@" 2>/dev/null
  fi
}

# Appends to COMPREPLY the words of $1 (newline-separated) that begin with $2.
_ckprof_add() {
  local word
  while IFS= read -r word; do
    [ -n "$word" ] && [[ $word == "$2"* ]] && COMPREPLY+=("$word")
  done <<<"$1"
}

_ckprof_files() {
  if declare -F _filedir >/dev/null; then
    local cur=$1
    _filedir
  else
    compopt -o filenames 2>/dev/null
    local file
    while IFS= read -r file; do
      [ -n "$file" ] && COMPREPLY+=("$file")
    done < <(compgen -f -- "$1")
  fi
}

_ckprof() {
  local prog=$1 cur=${COMP_WORDS[COMP_CWORD]} prev=""
  ((COMP_CWORD > 0)) && prev=${COMP_WORDS[COMP_CWORD - 1]}
  # COMP_WORDBREAKS splits --format=json into "--format" "=" "json".
  if [ "$cur" = "=" ]; then
    cur=""
  elif [ "$prev" = "=" ] && ((COMP_CWORD > 1)); then
    prev=${COMP_WORDS[COMP_CWORD - 2]}
  fi
  COMPREPLY=()
  command -v "$prog" >/dev/null 2>&1 || prog=ckprof

  # The command, and --socket wherever it stands.
  local i word command="" command_index=0 socket=()
  for ((i = 1; i < COMP_CWORD; i++)); do
    word=${COMP_WORDS[i]}
    case $word in
      --socket)
        [ "${COMP_WORDS[i + 1]}" = "=" ] && ((i++))
        ((i + 1 < COMP_CWORD)) && socket=(--socket "${COMP_WORDS[i + 1]}") && ((i++))
        ;;
      --socket=*) socket=("$word") ;;
      -*) ;;
      *) [ -z "$command" ] && command=$word && command_index=$i ;;
    esac
  done

  if [ "$prev" = --socket ]; then
    _ckprof_files "$cur"
    return 0
  fi
  if [ -z "$command" ]; then
    if [[ $cur == -* ]]; then
      _ckprof_add "$("$prog" --help 2>/dev/null | _ckprof_parse_help |
        awk '$1 == "o" { print $2 }')" "$cur"
    else
      _ckprof_add "$(_ckprof_commands "$prog")" "$cur"
    fi
    return 0
  fi

  local spec
  spec=$("$prog" "$command" --help 2>/dev/null | _ckprof_parse_help)
  [ -n "$spec" ] || return 0

  # The value of an option.
  # Its values as the help lists them; else those its help tells in prose.
  local type name takes metavar values
  if [[ $prev == -* ]]; then
    while read -r type name takes metavar values; do
      [[ $type == o && $name == "$prev" && $takes == 1 ]] || continue
      if [ "$values" != - ]; then
        _ckprof_add "${values//,/$'\n'}" "$cur"
        return 0
      fi
      case $name in
        --order) _ckprof_add $'rank\nlongest-first' "$cur" ;;
        --reuse) _ckprof_add $'auto\nnever' "$cur" ;;
        --after | --after-ok)  # any job, also after a comma: 7,<TAB>
          local done_ids="" id
          [[ $cur == *,* ]] && done_ids=${cur%,*},
          while IFS= read -r id; do
            [ -n "$id" ] && [[ $done_ids$id == "$cur"* ]] && COMPREPLY+=("$done_ids$id")
          done < <(_ckprof_ask "$prog" "${socket[@]}" list --all --json |
            grep -oE '"id": *[0-9]+' | grep -oE '[0-9]+$')
          ;;
        *)
          case $metavar in
            FILE | PATH | DIR | P) _ckprof_files "$cur" ;;
          esac
          ;;
      esac
      return 0
    done <<<"$spec"
  fi

  if [[ $cur == -* ]]; then
    _ckprof_add "$(awk '$1 == "o" { print $2 }' <<<"$spec")" "$cur"
    return 0
  fi

  # Which argument this is: the words after the command that are no options or their values.
  local position=0 only_arguments=0
  for ((i = command_index + 1; i < COMP_CWORD; i++)); do
    word=${COMP_WORDS[i]}
    if ((only_arguments == 0)) && [ "$word" = -- ]; then
      only_arguments=1
    elif ((only_arguments == 0)) && [[ $word == -* && $word != -[0-9]* ]]; then
      [[ $word == *=* ]] && continue
      if [ "${COMP_WORDS[i + 1]}" = "=" ]; then
        ((i += 2))
      elif awk -v n="$word" '$1 == "o" && $2 == n && $3 == 1 { found = 1 } END { exit !found }' \
        <<<"$spec"; then
        ((i++))
      fi
    else
      ((position++))
    fi
  done
  local kind
  kind=$(awk -v p="$position" '$1 == "a" { n++; if (n == p + 1) k = $4; if ($3 == 1) last = $4 }
                              END { print (k != "" ? k : last) }' <<<"$spec")
  case $kind in
    command) _ckprof_add "$(_ckprof_commands "$prog")" "$cur" ;;
    job | job-or-file)
      # The jobs the command may take: cancel, edit and hold, your jobs that have not ended;
      # release, held jobs; retry, your jobs; the others, every job.
      local pick=(--all)
      case $command in
        cancel | edit | hold) pick=(--mine) ;;
        release) pick=(--state held) ;;
        retry) pick=(--mine --all) ;;
      esac
      _ckprof_add "$(_ckprof_ask "$prog" "${socket[@]}" list "${pick[@]}" --json |
        grep -oE '"id": *[0-9]+' | grep -oE '[0-9]+$')" "$cur"
      ;;
    gpu)
      _ckprof_add "$(_ckprof_ask "$prog" "${socket[@]}" gpus --json |
        grep -oE '"index": *[0-9]+' | grep -oE '[0-9]+$')" "$cur"
      ;;
  esac
  case $kind in
    file | job-or-file) _ckprof_files "$cur" ;;
  esac
  return 0
}

complete -F _ckprof ckprof
