#!/usr/bin/env bash
# Builds the Debian package of ckprof: configures a Release build without tests in build-deb/
# (prefix /usr: /usr/bin, /etc/ckprofd, /lib/systemd/system), builds ckprof, ckprofd and the
# man pages, runs `cpack -G DEB`, and prints the path of the .deb: the one line on stdout (what
# the build says goes to stderr).
#   usage: scripts/package.sh
#   CKPROF_DEB_BUILD_DIR  the build directory (default: build-deb)
#   SOURCE_DATE_EPOCH     the man pages' date (default: the last commit's)
# Needs the build dependencies (scripts/setup.sh installs them) and dpkg-dev (dpkg-shlibdeps,
# which computes the package's dependencies; part of build-essential).
set -euo pipefail
cd "$(dirname "$0")/.."

build_dir=${CKPROF_DEB_BUILD_DIR:-build-deb}
# The man pages' date: the last commit's, so that a package of one commit is the same each time.
SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}
export SOURCE_DATE_EPOCH
for tool in cmake ninja cpack dpkg-shlibdeps; do
  if ! command -v "$tool" >/dev/null; then
    echo "package.sh: $tool is missing: run scripts/setup.sh (build-essential has dpkg-shlibdeps)" >&2
    exit 1
  fi
done

cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr \
  -DCKPROF_BUILD_TESTS=OFF -DCKPROF_WERROR="$([ "${CI:-}" = true ] && echo ON || echo OFF)" \
  -DCKPROF_SANITIZE= -DCMAKE_SKIP_INSTALL_ALL_DEPENDENCY=ON >/dev/null
# Only what the package holds (cpack builds nothing more: CMAKE_SKIP_INSTALL_ALL_DEPENDENCY).
# Show what the compiler says, not the progress lines; fail when the build fails.
set +e
cmake --build "$build_dir" --target ckprof ckprofd ckprofd-exec ckprof-agent ckprof_man -- -j"$(nproc)" 2>&1 |
  grep -vE '^\[[0-9]+/[0-9]+\] (Building|Linking)' >&2
status=${PIPESTATUS[0]}
set -e
if [ "$status" -ne 0 ]; then
  echo "package.sh: the build in $build_dir failed (see the errors above)" >&2
  exit 1
fi

rm -f "$build_dir"/ckprof_*.deb
log="$build_dir/cpack.log"
if ! (cd "$build_dir" && cpack -G DEB) >"$log" 2>&1; then
  cat "$log" >&2
  echo "package.sh: cpack failed (its output is above and in $log)" >&2
  exit 1
fi
debs=("$build_dir"/ckprof_*.deb)
if [ ! -f "${debs[0]}" ] || [ "${#debs[@]}" -ne 1 ]; then
  cat "$log" >&2
  echo "package.sh: expected one ckprof_*.deb in $build_dir, found: ${debs[*]}" >&2
  exit 1
fi
realpath "${debs[0]}"
