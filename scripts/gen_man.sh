#!/usr/bin/env bash
# Writes the man pages ckprof(1) and ckprofd(8) from the programs' own help texts, so that
# the pages say what --help says: `ckprof --help` (synopsis, description, global options, the
# list of commands), `ckprof COMMAND --help` for each command it lists (a subsection of
# COMMANDS each) and `ckprofd --help`. FILES, ENVIRONMENT and SEE ALSO are written here.
#   usage: scripts/gen_man.sh BIN_DIR OUT_DIR
#   BIN_DIR  the directory holding the built ckprof and ckprofd (they are run)
#   OUT_DIR  where ckprof.1, ckprofd.8 and their gzipped copies ckprof.1.gz, ckprofd.8.gz (the
#            ones installed, as Debian packages ship man pages) are written
# SOURCE_DATE_EPOCH, when set, is the pages' date (reproducible builds); else today.
# Needs bash, awk (mawk will do) and gzip; no network, no Python.
set -euo pipefail

if [ $# -ne 2 ]; then
  echo "usage: $0 BIN_DIR OUT_DIR (the built ckprof and ckprofd; where the pages go)" >&2
  exit 2
fi
bin_dir=$1
out_dir=$2
for prog in ckprof ckprofd; do
  if [ ! -x "$bin_dir/$prog" ]; then
    echo "gen_man.sh: $bin_dir/$prog is not an executable: build ckprof and ckprofd first" >&2
    exit 1
  fi
done
mkdir -p "$out_dir"

# help_of PROGRAM ARGS...: prints what the program prints for ARGS, or stops with a clear error.
help_of() {
  local text status=0
  text=$("$@" 2>&1) || status=$?
  if [ "$status" -ne 0 ]; then
    echo "gen_man.sh: '$*' failed (exit status $status):" >&2
    echo "$text" >&2
    exit 1
  fi
  if [ -z "$text" ]; then
    echo "gen_man.sh: '$*' printed nothing" >&2
    exit 1
  fi
  printf '%s\n' "$text"
}

# The converter from the help format (client/args.cpp's ArgParser::Help and the top-level and
# daemon helps, which look the same) to man(7) macros. A help text is blocks split by blank
# lines: "usage: ..."; prose (lines at column 0); a heading ("options:", "example:", any
# line at column 0 ending with ':' that opens a block) over indented lines, which are items
# ("  --name N    what it does", continued by deeper-indented lines) or, under an example
# heading, verbatim lines. `part` picks what is written:
#   synopsis     the usage line
#   name         the first sentence of the first prose block, without the program's name
#   description  prose, and headed blocks that are no options or examples
#   options      the blocks headed "...options..."
#   examples     the blocks headed "example:" / "examples:"
#   body         everything but the blocks whose heading matches `skip` (a command's help)
# shellcheck disable=SC2016  # awk's $0 and $1, not the shell's
render_awk='
function esc(s) {
  gsub(/\\/, "\\e", s)
  gsub(/-/, "\\-", s)
  return s
}
# A text line: a leading . or '"'"' would be a request; \& makes it text.
function emit(s) {
  if (s ~ /^[.'"'"']/) s = "\\&" s
  print s
}
function trim(s) {
  sub(/^[ \t]+/, "", s)
  sub(/[ \t]+$/, "", s)
  return s
}
# Options bold, metavariables (INPUT, LIST, A) italic, the rest as it is.
function markup(w,   out, piece) {
  out = ""
  while (w != "") {
    if (match(w, /^-[-A-Za-z0-9]*/)) {
      out = out "\\fB" esc(substr(w, 1, RLENGTH)) "\\fR"
    } else if (match(w, /^[A-Z][A-Z0-9_]*/)) {
      out = out "\\fI" esc(substr(w, 1, RLENGTH)) "\\fR"
    } else if (match(w, /^[a-z0-9_]+/)) {
      out = out esc(substr(w, 1, RLENGTH))
    } else {
      RLENGTH = 1
      out = out esc(substr(w, 1, 1))
    }
    w = substr(w, RLENGTH + 1)
  }
  return out
}
# "ckprof submit INPUT [options]": the program and command bold, the rest marked up.
function usage_line(s,   n, words, i, out, leading) {
  n = split(s, words, " ")
  out = ""
  leading = 1
  for (i = 1; i <= n; i++) {
    if (leading && words[i] ~ /^[a-z][a-z0-9_-]*$/) {
      out = out (i > 1 ? " " : "") "\\fB" esc(words[i]) "\\fR"
    } else {
      leading = 0
      out = out (i > 1 ? " " : "") markup(words[i])
    }
  }
  return out
}
# An item tag: options and bare metavariables marked up, commands bold, other names (a
# format) plain.
function tag_line(s) {
  if (s ~ /^-/ || s ~ /^[A-Z][A-Z0-9_.]*$/) return markup(s)
  if (heading == "commands") return "\\fB" esc(s) "\\fR"
  return esc(s)
}
function wanted(kind, heading) {
  if (part == "body") return skip == "" || heading !~ skip
  if (part == "synopsis") return kind == "usage"
  if (part == "options") return kind == "list" && heading ~ /options/
  if (part == "examples") return kind == "list" && heading ~ /^[Ee]xamples?$/
  if (part == "description") {
    if (kind == "prose") return 1
    return kind == "list" && heading !~ /options/ && heading !~ /^[Ee]xamples?$/
  }
  return 0
}
# A new paragraph, but none at the start of a section (the section title begins one).
function para() {
  if (printed) print ".PP"
  printed = 1
}
function close_verbatim() {
  if (in_verbatim) { print ".fi"; print ".RE"; in_verbatim = 0 }
}
BEGIN { block_start = 1 }
/^[ \t]*$/ {
  close_verbatim()
  block_start = 1
  next
}
{
  line = $0
  indented = line ~ /^[ \t]/
  if (block_start) {
    block_start = 0
    heading = ""
    base_indent = -1
    prev_prose = ""
    if (!indented && line ~ /^usage: /) {
      kind = "usage"
      if (part == "name") next
      if (!wanted(kind, heading)) next
      s = line
      sub(/^usage: /, "", s)
      if (part == "body") para()
      printed = 1
      print usage_line(trim(s))
      next
    }
    if (!indented && line ~ /:$/) {
      kind = "list"
      heading = line
      sub(/:$/, "", heading)
      verbatim = heading ~ /^[Ee]xamples?$/
      if (!wanted(kind, heading)) next
      # An example heading is the section title where examples have a section of their own.
      if (part == "examples") next
      para()
      print "\\fB" esc(toupper(substr(heading, 1, 1)) substr(heading, 2)) ":\\fR"
      next
    }
    kind = indented ? "list" : "prose"
    verbatim = 0
    if (part == "name") {
      if (kind == "prose" && !named) { named = 1; naming = 1 }
    } else if (wanted(kind, heading)) {
      para()
    }
  }
  if (part == "name") {
    if (naming) {
      name_text = name_text (name_text == "" ? "" : " ") trim(line)
      if (line ~ /\.$/ || line ~ /\. /) naming = 0
    }
    next
  }
  if (!wanted(kind, heading)) next
  if (kind == "usage") {  # a usage wrapped onto more lines
    print usage_line(trim(line))
    next
  }
  if (!indented) {  # prose, or a column-0 line inside a list: text
    close_verbatim()
    # A sentence that begins with an option (--layout auto is ...) begins a line of its own.
    if (line ~ /^-/ && prev_prose ~ /\.$/) print ".br"
    prev_prose = line
    emit(esc(trim(line)))
    next
  }
  if (verbatim) {
    if (!in_verbatim) { print ".RS 4"; print ".nf"; in_verbatim = 1; printed = 1 }
    s = line
    sub(/^  /, "", s)
    emit(esc(s))
    next
  }
  match(line, /^[ \t]*/)
  indent = RLENGTH
  if (base_indent < 0) base_indent = indent
  if (indent > base_indent) {  # an item continued
    emit(esc(trim(line)))
    next
  }
  s = trim(line)
  tag = s
  desc = ""
  if (match(s, /[ \t][ \t]+/)) {
    tag = substr(s, 1, RSTART - 1)
    desc = trim(substr(s, RSTART + RLENGTH))
  }
  print (heading == "commands" ? ".TP 12" : ".TP")
  emit(tag_line(tag))
  if (desc != "") emit(esc(desc))
}
END {
  close_verbatim()
  if (part == "name") {
    s = name_text
    sub(/\. .*$/, "", s)
    sub(/\.$/, "", s)
    sub("^" prog " ", "", s)
    sub(/^is /, "", s)
    print esc(s)
  }
}
'
render() {  # render PART PROG [SKIP] < HELP_TEXT
  awk -v part="$1" -v prog="$2" -v skip="${3:-}" "$render_awk"
}

version=$(help_of "$bin_dir/ckprof" --version)
version=${version#ckprof }
if [ -n "${SOURCE_DATE_EPOCH:-}" ]; then
  date=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%d)
else
  date=$(date -u +%Y-%m-%d)
fi

top_help=$(help_of "$bin_dir/ckprof" --help)
daemon_help=$(help_of "$bin_dir/ckprofd" --help)
# The commands: the names in ckprof --help's "commands:" block.
commands=$(printf '%s\n' "$top_help" |
  awk '/^commands:$/ { f = 1; next } f && /^[ \t]*$/ { exit } f && /^  [a-z]/ { print $1 }')
if [ -z "$commands" ]; then
  echo "gen_man.sh: found no 'commands:' list in '$bin_dir/ckprof --help'" >&2
  exit 1
fi

# The variables the programs read (client/ and daemon/ getenv calls), with what they do.
environment_entry() {  # NAME TEXT
  printf '.TP\n.B %s\n%s\n' "$(printf '%s' "$1" | sed 's/-/\\-/g')" "$2"
}

{
  cat <<EOF
.\\" Generated by scripts/gen_man.sh from 'ckprof --help' and 'ckprof COMMAND --help'.
.\\" Do not edit: change the help texts in client/ and rebuild.
.TH CKPROF 1 "$date" "ckprof $version" "User Commands"
.nh
.ad l
.SH NAME
ckprof \\- $(printf '%s\n' "$top_help" | render name ckprof)
.SH SYNOPSIS
EOF
  printf '%s\n' "$top_help" | render synopsis ckprof
  echo ".SH DESCRIPTION"
  printf '%s\n' "$top_help" | render description ckprof
  echo ".SH COMMANDS"
  for c in $commands; do
    echo ".SS $c"
    command_help=$(help_of "$bin_dir/ckprof" "$c" --help)
    if [ "$command_help" = "$top_help" ]; then
      # A command whose help is ckprof's own (help): its line of the commands list.
      printf '%s\n' "$top_help" |
        awk -v c="$c" '/^commands:$/ { f = 1; next } f && /^[ \t]*$/ { exit }
                       f && $1 == c { sub(/^  [^ ]+ +/, ""); print }' | render body ckprof
    else
      printf '%s\n' "$command_help" | render body ckprof '^global options'
    fi
  done
  echo ".SH OPTIONS"
  printf '%s\n' "$top_help" | render options ckprof
  echo ".SH ENVIRONMENT"
  environment_entry CKPROF_SOCKET \
    "The daemon's socket when no \\fB\\-\\-socket\\fR is given (default: /run/ckprofd/ckprofd.sock)."
  environment_entry CKPROF_DAEMON \
    "The ckprofd that \\fBrun \\-\\-local\\fR starts (default: the one beside ckprof, else ckprofd on PATH)."
  environment_entry COLUMNS \
    "The width of tables written to a pipe (a terminal's own width is used on a terminal)."
  environment_entry TMPDIR \
    "Where \\fBrun \\-\\-local\\fR puts its private daemon's socket and state (default: /tmp)."
  environment_entry NO_COLOR \
    "When set and not empty, job and task states are not coloured (they are coloured only on a terminal whose TERM is not dumb; https://no\\-color.org)."
  cat <<'EOF'
.SH FILES
.TP
.I /run/ckprofd/ckprofd.sock
The system daemon's socket; its group (ckprof) may submit.
.SH SEE ALSO
.BR ckprofd (8)
.PP
/usr/share/doc/ckprof/README.md
EOF
} >"$out_dir/ckprof.1"

{
  cat <<EOF
.\\" Generated by scripts/gen_man.sh from 'ckprofd --help'.
.\\" Do not edit: change the help text in daemon/ and rebuild.
.TH CKPROFD 8 "$date" "ckprof $version" "System Administration"
.nh
.ad l
.SH NAME
ckprofd \\- $(printf '%s\n' "$daemon_help" | render name ckprofd)
.SH SYNOPSIS
EOF
  printf '%s\n' "$daemon_help" | render synopsis ckprofd
  echo ".SH DESCRIPTION"
  printf '%s\n' "$daemon_help" | render description ckprofd
  echo ".SH OPTIONS"
  printf '%s\n' "$daemon_help" | render options ckprofd
  echo ".SH ENVIRONMENT"
  environment_entry SPDLOG_LEVEL "The log level when neither \\fB\\-\\-log\\-level\\fR nor the config file sets one."
  environment_entry "LISTEN_FDS, LISTEN_PID" \
    "Set by systemd socket activation (ckprofd.socket): the socket is taken from systemd and \\fB\\-\\-socket\\fR is ignored."
  environment_entry "NOTIFY_SOCKET, WATCHDOG_USEC" \
    "Set by systemd for the Type=notify service: ckprofd reports ready, reloading and stopping, and pings the watchdog."
  cat <<'EOF'
.SH FILES
.TP
.I /etc/ckprofd/ckprofd.json
The configuration file of the system daemon (\fB\-\-config\fR in ckprofd.service); it documents
every key. SIGHUP (\fBsystemctl reload ckprofd\fR) reads it again.
.TP
.I /run/ckprofd/ckprofd.sock
The socket clients connect to, mode 0660, group ckprof (ckprofd.socket).
.TP
.I /var/lib/ckprofd
The state directory: ckprofd.db (SQLite: every job, task, attempt and result) and its lock.
.TP
.I /run/lock/ckprofd
The per\-GPU lock files every ckprofd of the host shares.
.TP
.I /lib/systemd/system/ckprofd.service, /lib/systemd/system/ckprofd.socket
The systemd units; the groups and directories are made by ckprofd's sysusers.d and tmpfiles.d
snippets.
EOF
  if printf '%s\n' "$daemon_help" | grep -qE '^[Ee]xamples?:$'; then
    echo ".SH EXAMPLES"
    printf '%s\n' "$daemon_help" | render examples ckprofd
  fi
  cat <<'EOF'
.SH SEE ALSO
.BR ckprof (1),
.BR systemd.socket (5),
.BR systemd\-sysusers (8),
.BR systemd\-tmpfiles (8)
.PP
/usr/share/doc/ckprof/README.md
EOF
} >"$out_dir/ckprofd.8"

for page in "$out_dir/ckprof.1" "$out_dir/ckprofd.8"; do
  gzip -9 -n -c "$page" >"$page.gz"
done
