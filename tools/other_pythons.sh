#!/usr/bin/env bash
# pytest (`make pytest`) on every supported CPython this machine has besides the main one.
#
#   tools/other_pythons.sh MAIN_PY
#
# For each version in SUPPORTED other than MAIN_PY's, the newest pyenv
# install ($(pyenv root)/versions/3.X.Y, no -debug/-dev builds) or a working
# python3.X on PATH is used; a version with neither is skipped with a message.
# Each gets its own venv (.venv-3.X, made by the Makefile), and runs pytest
# without the torch oracle (no torch wheel for it here;
# EMBER_NO_TORCH=1 makes the torch tests skip cleanly).  The pytest run
# includes docs/ (the walkthrough's examples must pass on every version).
# PYTEST_ARGS passes through to pytest; PYTEST_PATHS chooses what it runs
# (`make test-pythons PYTEST_PATHS=docs`: the walkthrough only).  Prints
# the time each version took (install + build + test) and fails if any
# version failed, after trying them all.  JOBS=2 runs two versions at once.
set -euo pipefail
cd "$(dirname "$0")/.."

SUPPORTED=${SUPPORTED:-"3.11 3.12 3.13"}
main_py=${1:?usage: $0 MAIN_PY}
main_version=$("$main_py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')

# The interpreter for version $1 (3.X), or nothing.
find_python() {
    local version=$1 root candidate
    root=$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")
    # newest patch release first; "3.12.1-debug" and the like are not matched
    for candidate in $(ls -d "$root"/versions/"$version".[0-9]* 2>/dev/null \
                       | grep -E "/$version\.[0-9]+$" | sort -rV); do
        if "$candidate/bin/python$version" -c '' 2>/dev/null; then
            echo "$candidate/bin/python$version"
            return
        fi
    done
    # (a pyenv shim on PATH exists but fails when the version is not selected)
    if command -v "python$version" > /dev/null && "python$version" -c '' 2>/dev/null; then
        command -v "python$version"
    fi
}

# One version: install + build + pytest, without the torch oracle.  The C
# unit tests (make ctest) are left to the main version: they link no Python,
# so every version would build and run the same binary.
test_version() {
    local version=$1 python=$2
    EMBER_NO_TORCH=1 make --no-print-directory pytest PYTHON="$python" VENV=".venv-$version" \
        PYTEST_ARGS="${PYTEST_ARGS:-}" ${PYTEST_PATHS:+PYTEST_PATHS="$PYTEST_PATHS"}
}

# JOBS=N runs up to N versions at once (each is one single-threaded pytest, so
# on two cores JOBS=2 halves the wall time); their output goes to
# build/other-pythons/3.X.log and is printed when each finishes.
JOBS=${JOBS:-1}
log_dir=build/other-pythons
mkdir -p "$log_dir"

failed=() summary=() running=()
declare -A started

# Wait for the oldest running version; record and print its result.
reap_one() {
    local version=${running[0]} result
    running=("${running[@]:1}")
    if wait "${started[$version]%%:*}"; then result=passed; else result=FAILED; failed+=("$version"); fi
    echo "== CPython $version output:"; cat "$log_dir/$version.log"
    summary+=("$version: $result in $((SECONDS - ${started[$version]#*:}))s (install + build + test)")
}

for version in $SUPPORTED; do
    [ "$version" = "$main_version" ] && continue
    python=$(find_python "$version")
    if [ -z "$python" ]; then
        echo "== CPython $version: not found (pyenv or python$version on PATH), skipped"
        summary+=("$version: skipped (not installed)")
        continue
    fi
    echo "== CPython $version: $python, venv .venv-$version"
    [ ${#running[@]} -ge "$JOBS" ] && reap_one
    start=$SECONDS
    test_version "$version" "$python" > "$log_dir/$version.log" 2>&1 &
    started[$version]="$!:$start"
    running+=("$version")
done
while [ ${#running[@]} -gt 0 ]; do reap_one; done

echo "== other CPythons:"
for line in "${summary[@]}"; do echo "  $line"; done
[ ${#failed[@]} = 0 ] || { echo "failed on: ${failed[*]}"; exit 1; }
