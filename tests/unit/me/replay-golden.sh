#!/usr/bin/env bash
# Golden test of omsd-me-replay: replay <base>.jsonl with --dump-book, compare stdout with
# <base>.expected and stderr with <base>.stderr (empty when that file does not exist).
set -euo pipefail
tool=$1
base=$2
out=$(mktemp)
err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT
"$tool" --dump-book < "$base.jsonl" > "$out" 2> "$err"
status=0
if ! diff -u "$base.expected" "$out"; then
	echo "replay-golden: stdout of $base.jsonl differs from $base.expected" >&2
	status=1
fi
if [ -f "$base.stderr" ]; then
	diff -u "$base.stderr" "$err" || status=1
elif [ -s "$err" ]; then
	echo "replay-golden: unexpected stderr:" >&2
	cat "$err" >&2
	status=1
fi
exit $status
