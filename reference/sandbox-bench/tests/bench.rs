//! The benchmark command runs end to end and prints every row, so it cannot rot. Its numbers are
//! not checked here (CI machines are too noisy for that): `--quick` runs each row twice.

use std::process::Command;

const BENCH: &str = env!("CARGO_BIN_EXE_sandbox-bench");

/// Every row of the table, as the README's Speed section names them.
const ROWS: [&str; 18] = [
    "unconfined",
    "trampoline",
    "landlock-run",
    "landlock-run unguarded",
    "landlock-run pid-ns",
    "landlock-run prevent",
    "bwrap plain",
    "bwrap hardened",
    "bwrap guarded",
    "bwrap unguarded",
    "library landlock",
    "library bwrap",
    "sandboxctl landlock cold",
    "sandboxctl landlock warm",
    "sandboxctl bwrap cold",
    "sandboxctl bwrap warm",
    "codex sandbox",
    "srt",
];

#[test]
fn the_benchmark_runs_end_to_end_and_prints_every_row() {
    let out = Command::new(BENCH)
        // Two certifications, so the median's line and its spread are read too.
        .args(["--quick", "--certify-runs", "2"])
        .output()
        .expect("run sandbox-bench");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(!stdout.contains("FAILED"), "{stdout}");
    for row in ROWS {
        let line = stdout
            .lines()
            .find(|l| l.starts_with(&format!("| {row} |")))
            .unwrap_or_else(|| panic!("no row {row:?}:\n{stdout}"));
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        if row == "codex sandbox" || row == "srt" {
            // A peer is measured when installed and runnable, else skipped with the reason.
            assert!(
                cells[3].parse::<f64>().is_ok()
                    || line.contains("skipped: not installed")
                    || line.contains("skipped: installed but does not run here"),
                "{line}"
            );
        } else {
            // The reference rows are always measured here (this host has cc, bwrap, Landlock).
            let mean: f64 = cells[3]
                .parse()
                .unwrap_or_else(|e| panic!("{row}: no mean ({e}): {line}"));
            assert!(mean > 0.0, "{line}");
            assert!(cells[6].contains('±') || row == "unconfined", "{line}");
            // Its ratio to the unconfined spawn of the same run.
            assert!(cells[11].contains('±'), "{line}");
        }
    }
    for level in [1, 4, 16, 64] {
        let line = stdout
            .lines()
            .find(|l| l.starts_with(&format!("| {level} |")))
            .unwrap_or_else(|| panic!("no concurrency level {level}:\n{stdout}"));
        assert_eq!(
            line.matches('(').count(),
            2,
            "both backends measured: {line}"
        );
    }
    // What a case of the suite costs, measured in the same run.
    let suite = stdout
        .lines()
        .find(|l| l.starts_with("certify ("))
        .unwrap_or_else(|| panic!("no certify line:\n{stdout}"));
    let per_case: f64 = suite
        .split(": ")
        .last()
        .and_then(|tail| tail.split(" ms").next())
        .and_then(|ms| ms.parse().ok())
        .unwrap_or_else(|| panic!("no CPU per case: {suite}"));
    assert!(per_case > 0.0 && suite.contains(" cases, "), "{suite}");
    // The median of the two runs, with the cheapest and the dearest beside it.
    let spread: Vec<f64> = suite
        .split("(runs ")
        .nth(1)
        .and_then(|tail| tail.split(" ms;").next())
        .map(|range| range.split(" to ").filter_map(|n| n.parse().ok()).collect())
        .unwrap_or_default();
    assert!(
        suite.contains("median of 2 runs: ")
            && spread.len() == 2
            && spread[0] <= per_case
            && per_case <= spread[1],
        "{suite}"
    );
    // How many processes a case starts: every confined call starts at least the runner and
    // its payload, so a count below two a case is a broken count, not a cheap suite.
    let started: f64 = stdout
        .lines()
        .find_map(|l| {
            l.trim_start()
                .split_once(" processes and threads started a case")
        })
        .and_then(|(n, _)| n.parse().ok())
        .unwrap_or_else(|| panic!("no processes-a-case line:\n{stdout}"));
    assert!(started >= 2.0, "{started} processes a case:\n{stdout}");
    // Beside it, what one process start costs this host, with and without the C library.
    let start = stdout
        .lines()
        .find(|l| l.trim_start().starts_with("one process start here: "))
        .unwrap_or_else(|| panic!("no process start line:\n{stdout}"));
    let costs: Vec<f64> = start
        .split(" ms")
        .filter_map(|part| part.rsplit([' ', '(']).next()?.parse().ok())
        .collect();
    assert!(
        costs.len() == 3 && costs[0] > costs[1] && costs[1] > 0.0,
        "with the C library, without it, the difference: {start}"
    );
    assert!(
        stdout.contains("every target met") || stdout.contains("target missed: "),
        "{stdout}"
    );
}
