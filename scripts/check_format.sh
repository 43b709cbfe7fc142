#!/usr/bin/env bash
# Checks that every C++ file git tracks is formatted as .clang-format says (clang-format 14,
# Debian's clang-format package, installed when missing). Lists the files that differ and
# exits 1; `scripts/check_format.sh --fix` formats them in place instead.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v clang-format >/dev/null; then
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends clang-format >/dev/null
fi
mapfile -t files < <(git ls-files '*.cpp' '*.h')
if [ "${1:-}" = --fix ]; then
  clang-format -i "${files[@]}"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if ((${#bad[@]})); then
  echo "check_format: ${#bad[@]} file(s) differ from .clang-format ($(clang-format --version)):" >&2
  printf '  %s\n' "${bad[@]}" >&2
  echo "run scripts/check_format.sh --fix to format them" >&2
  exit 1
fi
echo "check_format: ${#files[@]} files formatted as .clang-format says"
