#!/usr/bin/env bash
# Mutation testing of the crates whose logic is pure (sandbox, sandbox-policy), configured by
# .cargo/mutants.toml. Fails when a mutant survives that ci/mutants-baseline.txt does not list.
#
#   ci/mutants.sh                 the whole run (installs cargo-mutants if missing)
#   ci/mutants.sh -f FILE ...     a scoped run; extra arguments go to cargo mutants. Only mutants
#                                 that were tested are compared, so a scoped run fails only on its
#                                 own new survivors.
#
# Mutants are compared by their normalized description (file, mutation, function; line and column
# dropped), as a multiset, so an edit that moves code does not break the check, and a second
# survivor with the same description as a listed one still counts as new.
# Environment: MUTANTS_JOBS (default 1), MUTANTS_OUT (default target/mutants), MUTANTS_COMPARE_ONLY=1
# (compare the results already in MUTANTS_OUT with the baseline, without running anything).
set -euo pipefail
cd "$(dirname "$0")/.."

version=27.1.0
baseline=ci/mutants-baseline.txt
out=${MUTANTS_OUT:-target/mutants}

if [ "${MUTANTS_COMPARE_ONLY:-}" != 1 ] &&
    [ "$(cargo mutants --version 2>/dev/null)" != "cargo-mutants $version" ]; then
    echo "== installing cargo-mutants $version"
    cargo install cargo-mutants --locked --version "$version"
fi

# `path:line:col: description` -> `path: description`.
normalize() { sed -E 's/^([^:]+):[0-9]+:[0-9]+: /\1: /' | LC_ALL=C sort; }
# The baseline without comments, blank lines or the reason after a tab.
listed() { sed -E -e 's/\t.*$//' -e '/^[[:space:]]*(#|$)/d' "$baseline" | LC_ALL=C sort; }

start=$(date +%s)
status=0
if [ "${MUTANTS_COMPARE_ONLY:-}" != 1 ]; then
    cargo mutants --jobs "${MUTANTS_JOBS:-1}" --no-shuffle --output "$out" "$@" || status=$?
fi
elapsed=$(($(date +%s) - start))
# 0: every mutant caught; 2: some missed; 3: some timed out (a hang the tests noticed). Anything
# else (1: usage, 4: the unmutated tree fails its tests) is a broken run.
case $status in
0 | 2 | 3) ;;
*)
    echo "cargo mutants failed (exit $status); see $out/mutants.out/" >&2
    exit "$status"
    ;;
esac

results=$out/mutants.out
echo
echo "== mutants per crate (${elapsed}s, cargo-mutants $version)"
printf '| crate | caught | missed | timeout | unviable |\n|---|---|---|---|---|\n'
for crate in sandbox sandbox-policy; do
    row="| \`$crate\`"
    for outcome in caught missed timeout unviable; do
        row="$row | $(grep -c "^reference/$crate/" "$results/$outcome.txt" || true)"
    done
    echo "$row |"
done

tested=$(mktemp)
new=$(mktemp)
trap 'rm -f "$tested" "$new"' EXIT
cat "$results"/{caught,missed,timeout,unviable}.txt | normalize >"$tested"
# Survivors not in the baseline (multiset difference).
normalize <"$results/missed.txt" | LC_ALL=C comm -23 - <(listed) >"$new"
# Baseline entries that were tested and no longer survive: the list can shrink.
fixed=$(listed | LC_ALL=C comm -12 - "$tested" | LC_ALL=C comm -23 - <(normalize <"$results/missed.txt") || true)
if [ -n "$fixed" ]; then
    echo
    echo "== listed in $baseline but now caught (remove them):"
    echo "$fixed"
fi
if [ -s "$new" ]; then
    echo
    echo "== $(wc -l <"$new") missed mutant(s) not in $baseline:" >&2
    cat "$new" >&2
    echo "Add a test that catches each one, or, if it cannot change behaviour, list it in" >&2
    echo "$baseline with a tab and the reason." >&2
    exit 1
fi
echo
echo "== no new missed mutants ($(listed | wc -l) listed in $baseline)"
