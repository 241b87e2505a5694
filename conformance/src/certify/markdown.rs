//! The Markdown report a person reads in a pull request: the run's facts, the family x backend
//! matrix, then each section a run may need (backends left out, external backends' declarations,
//! a forgeable runner-failure signature, problems, failed cases, expected failures, slow
//! families).

use std::collections::BTreeMap;

use super::matrix::{certified, class_word, family_rows, header, row};
use super::{BackendReport, CaseResult, FORGED_SIGNATURE_SCENARIO, Report, Status};

/// The family x backend matrix, as Markdown.
pub fn markdown(report: &Report) -> String {
    let mut out = String::from("# Certification report\n\n");
    summary(&mut out, report);
    table(&mut out, report);
    sections(&mut out, report);
    failures(&mut out, report);
    out
}

/// The run's facts: suite, host, verdict, seed, where worlds lie and what was not planned.
fn summary(out: &mut String, report: &Report) {
    out.push_str(&format!(
        "Suite {} ({}, commit {}) on {} {} (Landlock ABI {}, {}), {:.1} s wall.\n\n",
        report.suite_version,
        report
            .suite_hash
            .as_deref()
            .unwrap_or("scenario set unknown"),
        report.commit.as_deref().unwrap_or("unknown"),
        report.host.os,
        report.host.kernel.as_deref().unwrap_or("?"),
        report
            .host
            .landlock_abi
            .map(|a| a.to_string())
            .unwrap_or_else(|| "none".into()),
        report.host.bwrap_version.as_deref().unwrap_or("no bwrap"),
        report.wall_seconds
    ));
    out.push_str(&format!(
        "**{}**. Seed {} (`certify --seed {}` replays this run); worlds drawn under {}.\n\n",
        report.verdict,
        report.seed,
        report.seed,
        report
            .world_places
            .bases
            .iter()
            .map(|p| format!("`{}`", p.display()))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    if !report.left_out_families.is_empty() {
        out.push_str(&format!(
            "PARTIAL: this run left out the families {}; it is no certificate.\n\n",
            report.left_out_families.join(", ")
        ));
    }
    if !report.not_planned.is_empty() {
        out.push_str("## Planned by what this host has\n\n");
        for (trial, why) in &report.not_planned {
            out.push_str(&format!("- `{trial}` not planned: {why}\n"));
        }
        out.push('\n');
    }
    for (path, why) in &report.world_places.left_out {
        out.push_str(&format!("No worlds under `{}`: {why}.\n\n", path.display()));
    }
}

/// The family x backend matrix, then each backend's enforcement, per-class enforcement and
/// verdict.
fn table(out: &mut String, report: &Report) {
    let mut families: Vec<&str> = report.cases.iter().map(|c| c.family.as_str()).collect();
    families.sort_unstable();
    families.dedup();
    out.push_str(&header(report.backends.iter().map(|b| &b.name)));
    out.push_str(&family_rows(
        families.iter().copied().filter(|f| !f.is_empty()),
        &report.backends,
        |b, family| {
            report
                .cases
                .iter()
                .filter(|c| c.family == family && c.backend == b.name)
                .map(|c| c.status)
                .collect()
        },
    ));
    out.push_str(&row(
        "**enforcement**",
        report
            .backends
            .iter()
            .map(|b| b.enforcement.map(|e| e.as_str()).unwrap_or("-")),
    ));
    for class in sandbox::EnforcementClass::ALL {
        // `-`: no request of this run restricted the class (or the backend reports none); a
        // `partial` names what it leaves ungoverned.
        let words = report.backends.iter().map(|b| class_word(b, class));
        out.push('\n');
        out.push_str(&row(&format!("**{}**", class.as_str()), words));
    }
    out.push('\n');
    out.push_str(&row(
        "**certified**",
        report.backends.iter().map(|b| certified(b.certified)),
    ));
    out.push_str("\n\n");
    out.push_str(PARTIAL_LEGEND);
}

/// What the enforcement rows' words mean, under every matrix.
pub(crate) const PARTIAL_LEGEND: &str = "**enforcement** is `partial` when any class is short of \
    `full`; each class row says `full`, `partial (what it leaves ungoverned)` or `not-governed` \
    (nothing of the class is governed), and `-` where no request of the run restricted it.\n\n";

/// The backends left out of this run and what external backends declared.
fn sections(out: &mut String, report: &Report) {
    if !report.excluded_backends.is_empty() {
        out.push_str("## Not certified on this host\n\n");
        for (name, reason) in &report.excluded_backends {
            out.push_str(&format!("- {name}: {reason}\n"));
        }
        out.push('\n');
    }
    let external: Vec<&BackendReport> = report
        .backends
        .iter()
        .filter(|b| b.protocol.is_some())
        .collect();
    if !external.is_empty() {
        out.push_str(
            "## External backends: protocol and declared differences

",
        );
        for b in external {
            out.push_str(&format!(
                "- {}: protocol {}\n",
                b.name,
                b.protocol.unwrap_or_default()
            ));
            let Some(declared) = &b.declared else {
                out.push_str("  - writable set: the reference one (nothing declared)\n");
                continue;
            };
            for extra in &declared.extra_writable {
                let modes: Vec<&str> = extra.modes.iter().map(|m| m.as_str()).collect();
                out.push_str(&format!(
                    "  - **widening**: {} is writable under {}{}\n",
                    extra.path.display(),
                    modes.join(", "),
                    because(&extra.reason)
                ));
            }
            for private in &declared.private {
                let modes: Vec<&str> = private.modes.iter().map(|m| m.as_str()).collect();
                out.push_str(&format!(
                    "  - private to the sandbox under {} (verified by the `declared` scenarios): {}{}\n",
                    modes.join(", "),
                    private.path.display(),
                    because(&private.reason)
                ));
            }
            for state in &declared.state {
                out.push_str(&format!(
                    "  - its own state in a shared place (what is there is no leftover, while only its owner can write it): {}{}\n",
                    state.path.display(),
                    because(&state.reason)
                ));
            }
            for protected in &declared.protected {
                out.push_str(&format!(
                    "  - protected under workspace-write ({}, verified by the `declared` scenarios): {}{}\n",
                    match protected.kind {
                        crate::protocol::ProtectedKind::File => "file",
                        crate::protocol::ProtectedKind::Directory => "directory",
                    },
                    protected.path.display(),
                    because(&protected.reason)
                ));
            }
        }
        out.push('\n');
    }
}

/// ` (why)` after a declared difference, when the backend said why.
fn because(reason: &Option<String>) -> String {
    reason
        .as_deref()
        .map(|r| format!(" ({r})"))
        .unwrap_or_default()
}

/// Whether a forged signature fools a backend, the problems, the failed cases, the expected
/// failures and the slowest families.
fn failures(out: &mut String, report: &Report) {
    let fooled: Vec<&CaseResult> = report
        .cases
        .iter()
        .filter(|c| c.scenario == FORGED_SIGNATURE_SCENARIO)
        .filter(|c| matches!(c.status, Status::Fail | Status::Xfail))
        .collect();
    if !fooled.is_empty() {
        out.push_str(
            "## Can be fooled by a forged runner-failure signature

",
        );
        out.push_str(
            "A payload that ran, printed the backend's own runner-failure wording and exited \
             with its code is reported as a broken sandbox (no status channel decides):\n\n",
        );
        for c in fooled {
            out.push_str(&format!(
                "- {}: {}\n",
                c.backend,
                c.message.as_deref().unwrap_or("").replace('\n', " ")
            ));
        }
        out.push('\n');
    }
    let problems: Vec<String> = report
        .run_problems()
        .iter()
        .map(|p| format!("- {p}"))
        .collect();
    if !problems.is_empty() {
        out.push_str("## Problems\n\n");
        out.push_str(&problems.join("\n"));
        out.push_str("\n\n");
    }
    let bad: Vec<&CaseResult> = report.cases.iter().filter(|c| c.status.is_bad()).collect();
    if !bad.is_empty() {
        out.push_str(&format!("## Failed cases ({})\n\n", bad.len()));
        for c in bad.iter().take(100) {
            out.push_str(&format!(
                "- `{}` {} (scenario {}, {}{}):\n\n  ```text\n",
                c.trial,
                c.status.code(),
                if c.scenario.is_empty() {
                    "-"
                } else {
                    &c.scenario
                },
                c.level.map_or("no level", |l| l.as_str()),
                c.title
                    .as_deref()
                    .map(|t| format!(": {t}"))
                    .unwrap_or_default()
            ));
            for line in wrap(c.message.as_deref().unwrap_or(""), 100) {
                out.push_str(&format!("  {line}\n"));
            }
            out.push_str("  ```\n\n");
        }
        if bad.len() > 100 {
            out.push_str(&format!(
                "- ... and {} more (see report.json)\n",
                bad.len() - 100
            ));
        }
        out.push('\n');
    }
    let xfails: BTreeMap<(&str, &str), usize> = report
        .cases
        .iter()
        .filter(|c| c.status == Status::Xfail)
        .fold(BTreeMap::new(), |mut acc, c| {
            // Grouped by reason; each case's own observation stays in report.json and JUnit.
            let message = c.message.as_deref().unwrap_or("");
            let reason = message.split(" -- observed: ").next().unwrap_or(message);
            *acc.entry((c.backend.as_str(), reason)).or_default() += 1;
            acc
        });
    if !xfails.is_empty() {
        out.push_str("## Expected failures\n\n");
        for ((backend, reason), n) in xfails {
            out.push_str(&format!("- {backend}: {n} case(s): {reason}\n"));
        }
        out.push('\n');
    }
    out.push_str("## Slowest families (summed case time)\n\n");
    for (family, secs) in report.family_seconds.iter().take(5) {
        out.push_str(&format!("- {family}: {secs:.1} s\n"));
    }
}

/// `text` in lines of at most `width` characters, broken at spaces where it can be (a longer
/// word is cut), its own line breaks kept. Nothing is dropped.
pub fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    for source in text.lines() {
        let mut line = String::new();
        for word in source.split(' ') {
            let mut word: Vec<char> = word.chars().collect();
            let used = line.chars().count();
            if used > 0 && used + 1 + word.len() > width {
                lines.push(std::mem::take(&mut line));
            }
            while word.len() > width {
                if !line.is_empty() {
                    lines.push(std::mem::take(&mut line));
                }
                lines.push(word.drain(..width).collect());
            }
            if !line.is_empty() {
                line.push(' ');
            }
            line.extend(word);
        }
        lines.push(line);
    }
    lines
}
