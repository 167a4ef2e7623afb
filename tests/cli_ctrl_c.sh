#!/usr/bin/env bash
# Ctrl-C during a long prefill, typed into a terminal as a person would (tmux send-keys), read
# back from the screen (capture-pane): the decode in flight stops, the CLI reports the stop and
# its latency, and exits 130. The key is sent once the CLI printed "[decoding]" (its first graph
# is computing), never after a guessed delay; every wait is a bounded poll of the screen.
# usage: cli_ctrl_c.sh LLAMA_CANCEL MODEL
set -u
exe=$1
model=$2
server="llama-cancel-test-$$"
t() { tmux -L "$server" "$@"; }
screen() { t capture-pane -p -t cli -S -200 2>/dev/null; }
wait_for() { # PATTERN SECONDS
    for _ in $(seq 1 $(( $2 * 20 ))); do
        screen | grep -q -- "$1" && return 0
        sleep 0.05
    done
    return 1
}
trap 't kill-server 2>/dev/null' EXIT

t new-session -d -s cli -x 200 -y 50 "bash --norc --noprofile"
t set-option -t cli remain-on-exit on >/dev/null
t send-keys -t cli "$exe generate --model $model --prompt-tokens 3000 -n 8; echo EXIT=\$?" Enter
wait_for "prefill:" 60 || { echo "FAIL: the CLI never started its prefill"; screen; exit 1; }
# Printed from the first graph's first node: the 3000-token prefill (seconds) is in flight.
wait_for "\[decoding\]" 60 || { echo "FAIL: the prefill's first graph never started"; screen; exit 1; }
t send-keys -t cli C-c
wait_for "EXIT=[0-9]" 30 || { echo "FAIL: no exit after Ctrl-C"; screen; exit 1; }
out=$(screen)
echo "$out"
fail=0
grep -q "cancelled by Ctrl-C: the in-flight decode or encode stopped" <<<"$out" || { echo "FAIL: no stop report"; fail=1; }
grep -q "stop: cancelled" <<<"$out" || { echo "FAIL: not reported as cancelled"; fail=1; }
grep -Eq "prompt [0-9]+/3000 tokens in memory" <<<"$out" || { echo "FAIL: no memory report"; fail=1; }
grep -Eq "prompt 3000/3000 tokens" <<<"$out" && { echo "FAIL: the whole prompt went in despite the stop"; fail=1; }
grep -Eq "[1-9][0-9]* tokens generated" <<<"$out" && { echo "FAIL: tokens generated after the stop"; fail=1; }
grep -q "EXIT=130" <<<"$out" || { echo "FAIL: exit status is not 130"; fail=1; }
ms=$(grep -o "stopped [0-9.]* ms after" <<<"$out" | grep -o "[0-9.]*")
echo "Ctrl-C to stop: ${ms:-?} ms"
exit $fail
