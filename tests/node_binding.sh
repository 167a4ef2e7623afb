#!/usr/bin/env bash
# Runs the Node binding's tests with node's test runner, from bindings/node so that koffi resolves
# from its node_modules (npm ci from the lockfile; scripts/dev.sh does it). Exit 77 (skipped) with
# the reason when koffi is not installed. usage: node_binding.sh NODE BINDING_DIR
set -euo pipefail
node=$1
dir=$2
if [ ! -f "$dir/node_modules/koffi/package.json" ]; then
    echo "SKIP: koffi is not installed in $dir/node_modules (run: npm ci --prefix $dir)"
    exit 77
fi
cd "$dir"
exec "$node" --test --test-reporter=spec test/*.test.js
