#!/usr/bin/env bash
# No library file over 700 lines (issue 32): a file that long holds several jobs. Counts each
# .rs file under reference/*/src and conformance/src up to its first `#[cfg(test)]` (a unit-test
# module at the end is the file's tests, not its job); files named tests.rs are tests. Functions
# are held to 150 lines by clippy's too_many_lines (clippy.toml), which CI denies.
set -euo pipefail
cd "$(dirname "$0")/.."
limit=700
over=0
while IFS= read -r -d '' file; do
    lines=$(awk '/^#\[cfg\(test\)\]/ { exit } { n++ } END { print n + 0 }' "$file")
    if [ "$lines" -gt "$limit" ]; then
        echo "check-size: $file has $lines lines before its tests (at most $limit): split it along its seams" >&2
        over=1
    fi
done < <(find reference/*/src conformance/src -name '*.rs' ! -name tests.rs -print0)
exit "$over"
