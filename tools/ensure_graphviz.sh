#!/bin/sh
# Makes sure Graphviz's `dot` (which renders the walkthrough's pictures) is
# on PATH: on Debian/Ubuntu it is installed with apt, as tools/dbg_venv.sh
# installs the debug interpreter.  Only `make docs` runs this.
set -eu
command -v "${DOT:-dot}" >/dev/null 2>&1 && exit 0
if ! command -v apt-get >/dev/null 2>&1; then
    echo "ensure_graphviz: dot missing and no apt-get: install Graphviz" \
         "(https://graphviz.org/download/) and run make docs again" >&2
    exit 1
fi
echo "ensure_graphviz: dot missing, installing Debian's graphviz" >&2
sudo=""
[ "$(id -u)" = 0 ] || sudo=sudo
$sudo apt-get update -q
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q graphviz
