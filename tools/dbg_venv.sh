#!/usr/bin/env bash
# Debug-CPython environment for `make leak-refs`.
#
#   tools/dbg_venv.sh wheel MAIN_PY            build the debug NumPy wheel (cached)
#   tools/dbg_venv.sh venv  MAIN_PY DBG_VENV   make DBG_VENV, ready for pytest -R
#
# NumPy's release wheel was compiled without Py_REF_DEBUG, so under the debug
# interpreter its inline INCREF/DECREFs miss sys.gettotalrefcount() and the
# totals drift (false leaks).  We build NumPy from source with the debug
# interpreter once, for the exact version MAIN_PY's venv uses, and keep the wheel
# in $EMBER_CACHE/wheels (~6.5 min on 2 cores; then reused).  The build holds a
# lock, so a background build started early (.ci/run) and `make leak-refs` share it.
#
# PYDBG names the debug interpreter; everything version-specific (the wheel's
# ABI tag, Debian's packages) follows it.  It must be the version MAIN_PY is.
# Debian ships a debug build for its own python3 only (python3.11-dbg on
# bookworm, /usr/bin/python3.11d), installed here when missing; for another
# version build one (README, "The refcount gate on other versions"), e.g.
#   pyenv install --debug 3.12.1    ->  PYDBG=$(pyenv root)/versions/3.12.1-debug/bin/python3.12
set -euo pipefail
export PYTHONWARNINGS=ignore   # pip under the debug interpreter warns about unclosed files

mode=$1 main_py=$2
PYDBG=${PYDBG:-/usr/bin/python3.11d}
cache=${EMBER_CACHE:-$HOME/.cache/ember}
wheels=$cache/wheels
mkdir -p "$wheels"

main_version=$("$main_py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')

ensure_pydbg() {
    [ -x "$PYDBG" ] && return 0
    # Debian's debug interpreter is /usr/bin/python3.Xd, from python3.X-dbg.
    local debian_version
    debian_version=$(expr "$PYDBG" : '/usr/bin/python\(3\.[0-9]*\)d$' || true)
    if [ -z "$debian_version" ]; then
        echo "dbg_venv: $PYDBG missing; build a debug CPython $main_version and set PYDBG" \
             "(README, \"The refcount gate on other versions\")" >&2
        return 1
    fi
    echo "dbg_venv: $PYDBG missing, installing Debian's debug CPython $debian_version" >&2
    local sudo=""
    [ "$(id -u)" = 0 ] || sudo=sudo
    $sudo apt-get update -q
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q \
        "python$debian_version-dbg" "libpython$debian_version-dbg" \
        "python$debian_version-dev" "python$debian_version-venv"
}

ensure_pydbg
# The wheel's tags: cp312-cp312d for a 3.12 debug build.
read -r dbg_version wheel_tag < <("$PYDBG" -c 'import sys
v = "%d%d" % sys.version_info[:2]
print("%d.%d" % sys.version_info[:2], "cp%s-cp%s%s" % (v, v, sys.abiflags))')
if [ "$dbg_version" != "$main_version" ]; then
    echo "dbg_venv: PYDBG is CPython $dbg_version but $main_py is $main_version" \
         "(the gate builds ember for both with the same NumPy): pick a matching pair" >&2
    exit 1
fi
if ! "$PYDBG" -c 'import sys; sys.exit(not hasattr(sys, "gettotalrefcount"))'; then
    echo "dbg_venv: $PYDBG is not a debug build (no sys.gettotalrefcount)" >&2
    exit 1
fi

numpy_version=$("$main_py" -c 'import numpy; print(numpy.__version__)')
pattern="numpy-${numpy_version}-${wheel_tag}-*.whl"

have_wheel() { compgen -G "$wheels/$pattern" > /dev/null; }

build_wheel() {
    exec 9> "$cache/numpy-wheel.lock"
    flock 9                 # a concurrent build finishes first, then we reuse it
    if have_wheel; then return 0; fi
    echo "dbg_venv: building debug NumPy $numpy_version wheel into $wheels (several minutes)" >&2
    local tmp
    tmp=$(mktemp -d)
    "$PYDBG" -m venv "$tmp/venv"
    "$tmp/venv/bin/python" -m pip install -q --upgrade pip wheel
    local start=$SECONDS
    "$tmp/venv/bin/python" -m pip wheel --no-deps --no-binary numpy \
        "numpy==$numpy_version" -w "$tmp/out"
    mv "$tmp"/out/$pattern "$wheels/"
    rm -rf "$tmp"
    echo "dbg_venv: debug NumPy wheel built in $((SECONDS - start))s" >&2
    have_wheel
}

case $mode in
wheel)
    build_wheel
    ;;
venv)
    venv=$3
    build_wheel
    stamp="$venv/.ember-dbg-ready"
    reqs="pytest hypothesis tqdm"
    want="numpy=$numpy_version pydbg=$PYDBG reqs=$reqs"
    if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x "$venv/bin/python" ]; then
        exit 0
    fi
    rm -rf "$venv"
    "$PYDBG" -m venv "$venv"
    py=$venv/bin/python
    "$py" -m pip install -q --upgrade pip setuptools wheel
    "$py" -m pip install -q --no-index --find-links "$wheels" "numpy==$numpy_version"
    "$py" -m pip install -q $reqs
    "$py" -c 'import sys, numpy; assert hasattr(sys, "gettotalrefcount"); print("dbg_venv: ready,", sys.version.split()[0], "numpy", numpy.__version__, numpy.__file__)'
    echo "$want" > "$stamp"
    ;;
*)
    echo "usage: $0 wheel MAIN_PY | venv MAIN_PY DBG_VENV" >&2
    exit 2
    ;;
esac
