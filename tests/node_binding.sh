#!/usr/bin/env bash
# Packs the Node binding (npm pack: what a host installs) and runs its tests with node's test runner
# on the packed copy, koffi resolving from bindings/node/node_modules (npm ci from the lockfile;
# scripts/dev.sh does it). Without koffi: exit 77 (skipped) with the reason, and in CI (CI=true),
# where the README says koffi is installed, a failure with the reason; the same without npm.
# usage: node_binding.sh NODE BINDING_DIR [TEST_FILE...]
# TEST_FILEs (relative to BINDING_DIR; default test/*.test.js): tests/tts.cmake runs test/mtmd/'s.
set -euo pipefail
node=$1
dir=$(cd "$2" && pwd)
shift 2
tests=("$@")
. "$(dirname "$0")/skip_or_fail.sh"
missing=""
if [ ! -f "$dir/node_modules/koffi/package.json" ]; then
    missing="koffi is not installed in $dir/node_modules (npm ci failed or did not run: npm ci --prefix $dir)"
elif ! command -v npm >/dev/null; then
    missing="npm is not installed (it packs the binding)"
fi
if [ -n "$missing" ]; then
    skip_or_fail "$missing"
fi

# The package as `npm pack` makes it: its file list, then the tests against the unpacked copy.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$dir" && npm pack --silent --pack-destination "$work" >/dev/null)
tarball=$(ls "$work"/llama-cancel-*.tgz)
listing=$(tar -tzf "$tarball" | sort)
echo "packed $(basename "$tarball"):" $listing
for f in package/index.js package/layouts.js package/package.json package/README.md; do
    grep -qx "$f" <<<"$listing" || { echo "FAIL: $f is not in the package"; exit 1; }
done
if grep -q -E '^package/(test|node_modules)/' <<<"$listing"; then
    echo "FAIL: tests or node_modules in the package"
    exit 1
fi
mkdir -p "$work/node_modules/llama-cancel"
tar -xzf "$tarball" -C "$work/node_modules/llama-cancel" --strip-components=1
for dep in "$dir"/node_modules/*; do # koffi and its platform package, as npm would install them
    ln -s "$dep" "$work/node_modules/$(basename "$dep")"
done

timeout_opt=()
if "$node" --help | grep -q -- --test-timeout; then
    timeout_opt=(--test-timeout=180000) # per test; every wait inside is bounded more tightly
fi
cd "$dir"
if [ ${#tests[@]} -eq 0 ]; then
    tests=(test/*.test.js)
fi
LLAMA_CANCEL_NODE_MODULE="$work/node_modules/llama-cancel" \
    "$node" --test --test-reporter=spec "${timeout_opt[@]}" "${tests[@]}"
