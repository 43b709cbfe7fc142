#!/usr/bin/env bash
# Installs ckprof's build dependencies (Debian 12 packages) and builds Release into build/.
# Idempotent: quiet when everything is already installed and the build is current.
#   CKPROF_BUILD_DIR   build directory (default: build)
#   CKPROF_SANITIZE    e.g. address,undefined (default: none)
#   CKPROF_WERROR      ON to make warnings errors (default: ON when CI=true)
#   CKPROF_BUILD_TYPE  CMake build type (default: Release)
#   CKPROF_OPT_FLAGS   replaces that build type's optimization and debug flags (e.g. "-O1 -g1
#                      -DNDEBUG" for the sanitizer builds: half the compile time of -O2 -g)
#   CKPROF_BUILD_TARGETS  build only these targets, space-separated (default: all)
#   CKPROF_PCH         ON to precompile the library headers (for builds without ccache)
#   CKPROF_UNITY       ON to compile each target's files in batches of 8 (for builds without
#                      ccache: a third of the compile time; one changed file rebuilds its batch)
set -euo pipefail
cd "$(dirname "$0")/.."

# man-db, bash-completion and zsh: the tests of the man pages and shell completions
# (tests/packaging/); build-essential brings dpkg-dev (dpkg-shlibdeps) for scripts/package.sh.
packages=(build-essential cmake ninja-build pkg-config libasio-dev nlohmann-json3-dev
          libspdlog-dev libgtest-dev libsqlite3-dev zlib1g-dev sqlite3 python3
          man-db bash-completion zsh)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

build_dir=${CKPROF_BUILD_DIR:-build}
werror=${CKPROF_WERROR:-$([ "${CI:-}" = true ] && echo ON || echo OFF)}
build_type=${CKPROF_BUILD_TYPE:-Release}
opt_flags=()
if [ -n "${CKPROF_OPT_FLAGS:-}" ]; then
  opt_flags=(-DCMAKE_CXX_FLAGS_"$(echo "$build_type" | tr '[:lower:]' '[:upper:]')"="$CKPROF_OPT_FLAGS")
fi
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE="$build_type" "${opt_flags[@]}" \
  -DCKPROF_WERROR="$werror" -DCKPROF_SANITIZE="${CKPROF_SANITIZE:-}" \
  -DCKPROF_PCH="${CKPROF_PCH:-OFF}" -DCKPROF_UNITY="${CKPROF_UNITY:-OFF}" >/dev/null
# Show what the compiler says, not the progress lines; fail when the build fails.
set +e
targets=()
# shellcheck disable=SC2206  # a space-separated list, split on purpose
[ -n "${CKPROF_BUILD_TARGETS:-}" ] && targets=(--target ${CKPROF_BUILD_TARGETS})
cmake --build "$build_dir" "${targets[@]}" -- -j"$(nproc)" 2>&1 |
  grep -vE '^\[[0-9]+/[0-9]+\] (Building|Linking)'
status=${PIPESTATUS[0]}
set -e
if [ "$status" -ne 0 ]; then
  echo "setup: the build in $build_dir failed (see the errors above)" >&2
  exit 1
fi
