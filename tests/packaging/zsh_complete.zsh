#!/usr/bin/env zsh
# Completes command lines the way a user at zsh does: types each LINE and a TAB into an
# interactive zsh (through zsh/zpty) that has compinit and completions/_ckprof, and prints
# one line per LINE: the matches zsh offered, sorted, space-separated (empty: none). The
# matches are taken from compadd itself, whatever zsh then shows or inserts. A line whose
# completion does not end within 20 s prints what it had.
#   usage: zsh -f zsh_complete.zsh COMPLETIONS_DIR LINE...
# Called by completion_test.sh, under `timeout` (a zsh that never answers would hang here).
emulate -L zsh
zmodload zsh/zpty || { print -u2 "zsh_complete.zsh: zsh has no zsh/zpty"; exit 3 }
local dir=$1
shift
local hits=$(mktemp)
local out

zpty ckz zsh -f -i
# compadd records what it adds (not its -O/-A/-D calls, which only filter), then adds it.
zpty -w ckz "PS1='> '; PS2=''; unsetopt AUTO_LIST AUTO_MENU LIST_BEEP BEEP; LISTMAX=100000
fpath=(${(q)dir} \$fpath); autoload -Uz compinit; compinit -u -D
compadd() {
  if [[ \${@[1,(i)(-|--)]} == *-(O|A|D)\\ * ]]; then builtin compadd \"\$@\"; return; fi
  local -a __hits
  builtin compadd -A __hits \"\$@\"
  (( \$#__hits )) && print -rl -- \$__hits >>${(q)hits}
  builtin compadd \"\$@\"
}
# TAB completes, then marks the end of the completion in the file.
complete-and-mark() { zle complete-word; print -r -- __end__ >>${(q)hits} }
zle -N complete-and-mark
bindkey '^I' complete-and-mark
print \$((1 + 1))ready"
zpty -r ckz out '*2ready*'
local -i n=0
local line
for line in "$@"; do
  (( n++ ))
  : >$hits
  zpty -w -n ckz "$line"$'\t'
  # No key more until the completion ended: a key typed ahead may cut a completion short.
  local -i tries=0
  until grep -qx __end__ $hits || (( ++tries > 400 )); do sleep 0.05; done
  # ^U drops the line; the marker's arithmetic shows only once the shell ran it.
  zpty -w ckz $'\C-u'"print \$(( $n * 1000 + 7 ))done"
  zpty -r ckz out "*$(( n * 1000 + 7 ))done*"
  print -r -- ${(j: :)${(ou)${(f)"$(grep -vx __end__ $hits)"}}}
done
zpty -d ckz
rm -f $hits
