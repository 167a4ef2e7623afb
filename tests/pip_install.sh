#!/usr/bin/env bash
# `pip install` of the Python module from the source tree (bindings/python/pyproject.toml), as a user runs it:
# offline (--no-deps --no-build-isolation: the system's setuptools builds it) into a scratch folder
# (--target), from a copy of bindings/python/ so that setuptools' build/ and egg-info stay out of the source
# tree. Then the installed copy alone: it imports from there, finds the library through
# $LLAMA_CANCEL_LIBRARY, and passes the module's ABI tests. Without pip or setuptools: exit 77
# (skipped) with the reason, and in CI (CI=true) a failure.
# usage: pip_install.sh SRC [PYTHON]   (env: LLAMA_CANCEL_LIBRARY, LLAMA_CANCEL_HEADER)
set -euo pipefail
src=$1
python=${2:-python3}
. "$(dirname "$0")/skip_or_fail.sh"
if ! missing=$("$python" -c 'import pip, setuptools, pytest' 2>&1); then
    skip_or_fail "pip, setuptools or pytest missing (python3-pip, python3-setuptools, python3-pytest): $missing"
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "$src/bindings/python" "$work/src"
rm -rf "$work/src/build" "$work/src"/*.egg-info
"$python" -m pip install --quiet --no-deps --no-build-isolation --no-warn-script-location --root-user-action=ignore \
    --target "$work/site" "$work/src"
echo "installed:" $(cd "$work/site" && find . -name '*.py' -o -name METADATA | sort)

export PYTHONPATH="$work/site${PYTHONPATH:+:$PYTHONPATH}" PYTHONDONTWRITEBYTECODE=1 # the installed copy first
"$python" -c '
import os, sys, llama_cancel
assert llama_cancel.__file__.startswith(sys.argv[1]), llama_cancel.__file__
lc = llama_cancel.load()
print("pip-installed module %s loads %s, version %d.%d.%d" % ((llama_cancel.__version__, lc.path) + lc.version()))
' "$work/site"
"$python" -m pytest -q "$src/bindings/python/tests/test_abi.py"
