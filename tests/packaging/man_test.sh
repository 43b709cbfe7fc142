#!/usr/bin/env bash
# Tests the man pages that scripts/gen_man.sh writes (target ckprof_man): that man renders
# ckprof(1) and ckprofd(8) without a warning, that ckprof(1) has a subsection for every command
# `ckprof --help` lists, that every word of every help text is on its page, that the pages are
# those the binaries give now, and that the generator escapes what troff would take for
# requests or escapes (a help text made up for it, with leading dots and quotes, backslashes).
#   usage: man_test.sh BIN_DIR MAN_DIR SOURCE_DIR
#   BIN_DIR     the built ckprof and ckprofd
#   MAN_DIR     the built pages (BUILD/man)
#   SOURCE_DIR  the source tree (for scripts/gen_man.sh)
# Exits 77 (ctest: skipped) where man is not installed (scripts/setup.sh installs man-db).
set -euo pipefail

if [ $# -ne 3 ]; then
  echo "usage: $0 BIN_DIR MAN_DIR SOURCE_DIR" >&2
  exit 2
fi
bin_dir=$1 man_dir=$2 source_dir=$3
if ! command -v man >/dev/null; then
  echo "SKIP: man is not installed (scripts/setup.sh installs man-db)"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}

# render PAGE: the page as man shows it on an 80-column ASCII terminal; a warning fails.
render() {
  local warnings
  warnings=$(LC_ALL=C MANWIDTH=80 man -l --warnings=w "$1" 2>&1 >/dev/null) || true
  [ -z "$warnings" ] || fail "man -l --warnings=w $1 warns: $warnings"
  warnings=$(LC_ALL=C MANWIDTH=80 man -l --warnings "$1" 2>&1 >/dev/null) || true
  [ -z "$warnings" ] || fail "man -l --warnings $1 warns: $warnings"
  LC_ALL=C MANWIDTH=80 man -l "$1" 2>/dev/null
}

# words_missing HELP_FILE PAGE_TEXT_FILE: the words of HELP_FILE that PAGE_TEXT_FILE lacks
# (in any case, without a trailing colon: "options:" is the page's "Options:"; "usage:" is
# the SYNOPSIS, ckprofd's "example:" its EXAMPLES).
words_of() { tr -s ' \t' '\n' <"$1" | sed -e '/^$/d' -e 's/:$//' | tr '[:upper:]' '[:lower:]' | sort -u; }
words_missing() {
  words_of "$2" >"$work/page-words"
  words_of "$1" | grep -vxE 'usage|examples?' | comm -23 - "$work/page-words"
}

commands_of() {  # the commands that `ckprof --help` lists
  "$1/ckprof" --help | sed -n '/^commands:$/,/^$/s/^  \([a-z][a-z0-9-]*\) .*/\1/p'
}

# --- The built pages.
for page in ckprof.1 ckprof.1.gz ckprofd.8 ckprofd.8.gz; do
  [ -f "$man_dir/$page" ] || fail "$man_dir/$page is missing (the build target ckprof_man writes it)"
done
if ((failures)); then exit 1; fi
render "$man_dir/ckprof.1.gz" >"$work/ckprof.txt"
render "$man_dir/ckprofd.8.gz" >"$work/ckprofd.txt"
cmp -s <(gzip -dc "$man_dir/ckprof.1.gz") "$man_dir/ckprof.1" ||
  fail "ckprof.1.gz is not ckprof.1 gzipped"

commands=$(commands_of "$bin_dir")
[ -n "$commands" ] || fail "'ckprof --help' lists no commands"
for c in $commands; do
  grep -qx "   $c" "$work/ckprof.txt" || fail "ckprof(1) has no subsection for the command $c"
done
n_sections=$(grep -c '^\.SS ' "$man_dir/ckprof.1")
[ "$n_sections" -eq "$(wc -w <<<"$commands")" ] ||
  fail "ckprof(1) has $n_sections command subsections, 'ckprof --help' lists $(wc -w <<<"$commands")"
for section in NAME SYNOPSIS DESCRIPTION COMMANDS OPTIONS ENVIRONMENT FILES 'SEE ALSO'; do
  grep -qx "$section" "$work/ckprof.txt" || fail "ckprof(1) has no section $section"
done
for section in NAME SYNOPSIS DESCRIPTION OPTIONS ENVIRONMENT FILES 'SEE ALSO'; do
  grep -qx "$section" "$work/ckprofd.txt" || fail "ckprofd(8) has no section $section"
done
grep -q '^       ckprof - ' "$work/ckprof.txt" || fail "ckprof(1)'s NAME is not 'ckprof - ...'"
grep -q '^       ckprofd - ' "$work/ckprofd.txt" || fail "ckprofd(8)'s NAME is not 'ckprofd - ...'"
if command -v lexgrog >/dev/null; then  # what mandb and whatis read
  lexgrog "$man_dir/ckprof.1" >/dev/null || fail "lexgrog cannot read ckprof(1)'s NAME"
  lexgrog "$man_dir/ckprofd.8" >/dev/null || fail "lexgrog cannot read ckprofd(8)'s NAME"
fi
for f in /etc/ckprofd/ckprofd.json /run/ckprofd/ckprofd.sock /var/lib/ckprofd CKPROF_SOCKET; do
  grep -q "$f" "$work/ckprof.txt" "$work/ckprofd.txt" || fail "neither page names $f"
done

# Every hyphen of the text is \- (a minus: ASCII in every output, so options copy and paste).
for page in ckprof.1 ckprofd.8; do
  bare=$(grep -vE '^\.(\\"|TH )' "$man_dir/$page" | grep -nE '(^|[^\\])-' | head -n 3) || true
  [ -z "$bare" ] || fail "$page has a hyphen that is no \\-: $bare"
done
grep -qF '\fB\-\-repeat\fR' "$man_dir/ckprof.1" || fail "ckprof.1 does not write --repeat as \\-\\-repeat"

# Every word of the help texts is on the page.
{
  "$bin_dir/ckprof" --help
  for c in $commands; do "$bin_dir/ckprof" "$c" --help; done
} >"$work/ckprof-help.txt"
"$bin_dir/ckprofd" --help >"$work/ckprofd-help.txt"
for p in ckprof ckprofd; do
  missing=$(words_missing "$work/$p-help.txt" "$work/$p.txt")
  [ -z "$missing" ] || fail "words of '$p ... --help' missing from $p's page: $(head -n 10 <<<"$missing" | tr '\n' ' ')"
done

# The pages are what the generator makes of the binaries now (the date aside).
bash "$source_dir/scripts/gen_man.sh" "$bin_dir" "$work/again"
for page in ckprof.1 ckprofd.8; do
  diff <(grep -v '^\.TH ' "$man_dir/$page") <(grep -v '^\.TH ' "$work/again/$page") >/dev/null ||
    fail "$man_dir/$page is not what scripts/gen_man.sh writes for $bin_dir now"
done

# --- The generator's escaping, on help texts made up for it.
mkdir -p "$work/fake"
cat >"$work/fake/ckprof" <<'EOF'
#!/bin/sh
case "$1 $2" in
  "--help ")
    cat <<'HELP'
usage: ckprof [--socket PATH] COMMAND [ARGS...]

ckprof is a stand-in. Its help says odd things.

commands:
  alpha       the first
  beta-two    the second, with a hyphen

global options (before or after the command):
  --socket PATH  the socket
  -h, --help     show this help
HELP
    ;;
  "--version ") echo "ckprof 9.8.7" ;;
  "alpha --help")
    cat <<'HELP'
usage: ckprof alpha FILE [options]

Alpha reads FILE.
.TH a request that must stay text, and one more:
'br quoted at the start
A back\slash, \fB no bold \fR, \- and \\ and \e stay as they are.
-x at the start of a line, after a full stop.

arguments:
  FILE                    the input file

options:
  --an-option-too-long-for-its-column VALUE
                          told on the next line
  --x N                   .starts with a dot
                          'continued with a quote
  -h, --help              show this help and exit

example:
  ckprof alpha in.json \
    --x 3
  .not a request either
HELP
    ;;
  "beta-two --help")
    printf 'usage: ckprof beta-two [options]\n\nBeta two.\n'
    ;;
  *) exit 2 ;;
esac
EOF
cat >"$work/fake/ckprofd" <<'EOF'
#!/bin/sh
printf 'usage: ckprofd [options]\n\nckprofd is the stand-in daemon.\n\noptions:\n  --opt X   a\\b\n'
EOF
chmod +x "$work/fake/ckprof" "$work/fake/ckprofd"
if bash "$source_dir/scripts/gen_man.sh" "$work/fake" "$work/fake-man" >"$work/gen.log" 2>&1; then
  render "$work/fake-man/ckprof.1" >"$work/fake.txt"
  render "$work/fake-man/ckprofd.8" >"$work/faked.txt"
  flat=$(tr -s ' \n' '  ' <"$work/fake.txt")
  # shellcheck disable=SC1003  # a backslash at the end of a word, as the help has it
  for want in ".TH a request that must stay text" "'br quoted at the start" \
              'A back\slash, \fB no bold \fR, \- and \\ and \e stay as they are.' \
              "--an-option-too-long-for-its-column VALUE told on the next line" \
              ".starts with a dot 'continued with a quote" \
              'ckprof alpha in.json \' ".not a request either" "beta-two" \
              "ckprof - a stand-in" "-x at the start of a line"; do
    [[ $flat == *"$want"* ]] || fail "the made-up help's page lacks: $want"
  done
  grep -q '^       stand-in. Its help' "$work/fake.txt" &&
    fail "the NAME took more than the first sentence"
  grep -q '^              a\\b$' "$work/faked.txt" || fail "ckprofd(8) of the made-up help lacks 'a\\b'"
  missing=$(words_missing <({ "$work/fake/ckprof" --help; "$work/fake/ckprof" alpha --help; }) \
    "$work/fake.txt")
  [ -z "$missing" ] || fail "words missing from the made-up page: $(tr '\n' ' ' <<<"$missing")"
else
  fail "gen_man.sh failed on the made-up help: $(cat "$work/gen.log")"
fi
# A program whose help fails stops the generator with a message naming it.
# shellcheck disable=SC2016  # $2 and $@ are the stand-in's own
printf '#!/bin/sh\n[ "$2" = --help ] && exit 3\nexec %s "$@"\n' "$work/fake/ckprof" >"$work/fake/broken"
mkdir -p "$work/broken"
cp "$work/fake/ckprofd" "$work/broken/ckprofd"
cp "$work/fake/broken" "$work/broken/ckprof"
chmod +x "$work/broken/ckprof"
if bash "$source_dir/scripts/gen_man.sh" "$work/broken" "$work/broken-man" >"$work/gen.log" 2>&1; then
  fail "gen_man.sh succeeded although 'ckprof alpha --help' fails"
elif ! grep -q "alpha --help' failed (exit status 3)" "$work/gen.log"; then
  fail "gen_man.sh's error does not name the failing help: $(cat "$work/gen.log")"
fi

if ((failures)); then
  echo "$failures check(s) failed" >&2
  exit 1
fi
echo "ok: ckprof(1) with $(wc -w <<<"$commands") commands and ckprofd(8) render without warnings"
