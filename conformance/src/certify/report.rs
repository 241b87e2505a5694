//! The reports of a run: the Markdown matrix a person reads in a pull request, the JUnit XML a CI
//! shows, and writing all three (with `report.json`) into place in one step.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use std::time::Duration;

use super::{BackendReport, CaseResult, FORGED_SIGNATURE_SCENARIO, Report, Status};

/// One matrix cell: the non-zero counts.
pub(crate) fn cell(counts: &BTreeMap<Status, usize>) -> String {
    let parts: Vec<String> = Status::ALL
        .iter()
        .filter_map(|s| {
            counts
                .get(s)
                .filter(|n| **n > 0)
                .map(|n| format!("{n} {}", s.word()))
        })
        .collect();
    if parts.is_empty() {
        "-".into()
    } else {
        parts.join(", ")
    }
}

/// The family x backend matrix, as Markdown.
pub fn markdown(report: &Report) -> String {
    let mut families: Vec<&str> = report.cases.iter().map(|c| c.family.as_str()).collect();
    families.sort_unstable();
    families.dedup();
    let mut out = String::from("# Certification report\n\n");
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
    out.push_str("| family |");
    for b in &report.backends {
        out.push_str(&format!(" {} |", b.name));
    }
    out.push_str("\n|---|");
    out.push_str(&"---|".repeat(report.backends.len()));
    out.push('\n');
    for family in families.iter().filter(|f| !f.is_empty()) {
        out.push_str(&format!("| {family} |"));
        for b in &report.backends {
            let mut counts = BTreeMap::new();
            for c in report
                .cases
                .iter()
                .filter(|c| c.family == *family && c.backend == b.name)
            {
                *counts.entry(c.status).or_default() += 1;
            }
            out.push_str(&format!(" {} |", cell(&counts)));
        }
        out.push('\n');
    }
    out.push_str("| **enforcement** |");
    for b in &report.backends {
        out.push_str(&format!(
            " {} |",
            b.enforcement.map(|e| e.as_str()).unwrap_or("-")
        ));
    }
    for class in sandbox::EnforcementClass::ALL {
        out.push_str(&format!("\n| **{}** |", class.as_str()));
        for b in &report.backends {
            // `-`: no request of this run restricted the class (or the backend reports none).
            let word = b.classes.as_ref().and_then(|c| {
                c.iter()
                    .find(|(reported, _)| *reported == class)
                    .map(|(_, r)| r.enforcement.as_str())
            });
            out.push_str(&format!(" {} |", word.unwrap_or("-")));
        }
    }
    out.push_str("\n| **certified** |");
    for b in &report.backends {
        out.push_str(if b.certified { " yes |" } else { " **no** |" });
    }
    out.push_str("\n\n");
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
                    extra
                        .reason
                        .as_deref()
                        .map(|r| format!(" ({r})"))
                        .unwrap_or_default()
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
                    protected
                        .reason
                        .as_deref()
                        .map(|r| format!(" ({r})"))
                        .unwrap_or_default()
                ));
            }
        }
        out.push('\n');
    }
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
        .suite_problems
        .iter()
        .map(|p| format!("- suite: {p}"))
        .chain(
            report
                .backends
                .iter()
                .flat_map(|b| b.problems.iter().map(move |p| format!("- {}: {p}", b.name))),
        )
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
                "- `{}` {}:\n\n  ```text\n",
                c.trial,
                c.status.code()
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
    out
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

/// The run as JUnit XML: one test suite per backend.
pub fn junit(report: &Report) -> Result<String, String> {
    use quick_junit::{NonSuccessKind, TestCase, TestCaseStatus, TestSuite};
    let mut junit = quick_junit::Report::new("certify");
    let mut names: Vec<&str> = report.cases.iter().map(|c| c.backend.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    for name in names {
        let mut suite = TestSuite::new(name);
        for c in report.cases.iter().filter(|c| c.backend == name) {
            let mut status = match c.status {
                Status::Pass | Status::Xfail => TestCaseStatus::success(),
                Status::Skip => TestCaseStatus::skipped(),
                Status::Fail | Status::Xpass => {
                    TestCaseStatus::non_success(NonSuccessKind::Failure)
                }
                Status::Error | Status::Timeout | Status::Inconsistent => {
                    TestCaseStatus::non_success(NonSuccessKind::Error)
                }
            };
            if let Some(m) = &c.message {
                status.set_message(format!("{}: {m}", c.status.code()));
            }
            let mut case = TestCase::new(c.trial.as_str(), status);
            case.set_classname(c.family.as_str());
            case.set_time(Duration::from_secs_f64(c.duration_ms / 1e3));
            if c.status == Status::Xfail {
                case.set_system_out(format!("XFAIL: {}", c.message.as_deref().unwrap_or("")));
            }
            suite.add_test_case(case);
        }
        junit.add_test_suite(suite);
    }
    junit.to_string().map_err(|e| e.to_string())
}

/// The families of the scenario root `root`: its folders that hold at least one scenario file
/// (`.yaml` or `.yml`), sorted. A `--family` filter must name one of them.
pub fn families(root: &Path) -> Vec<String> {
    let Ok(dir) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    let mut families: Vec<String> = dir
        .filter_map(Result::ok)
        .filter(|entry| entry.path().is_dir())
        .filter(|entry| {
            std::fs::read_dir(entry.path()).is_ok_and(|files| {
                files.filter_map(Result::ok).any(|f| {
                    f.path()
                        .extension()
                        .is_some_and(|e| e == "yaml" || e == "yml")
                })
            })
        })
        .filter_map(|entry| entry.file_name().into_string().ok())
        .collect();
    families.sort();
    families
}

/// Writes `report.json`, `junit.xml` and `matrix.md` into `dir`, all or nothing: they are written
/// into a new sibling directory first, which then takes `dir`'s place in one step (an exchange
/// where the kernel has one), so a run that fails to write, or is stopped while writing, leaves
/// the previous report as it was.
pub fn write(report: &Report, dir: &Path) -> std::io::Result<()> {
    let name = dir
        .file_name()
        .ok_or_else(|| std::io::Error::other(format!("{} names no directory", dir.display())))?;
    let parent = match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&parent)?;
    let mut staging_name = std::ffi::OsString::from(".");
    staging_name.push(name);
    staging_name.push(format!(".writing-{}", std::process::id()));
    let staging = parent.join(staging_name);
    let _ = std::fs::remove_dir_all(&staging);
    let fill = |into: &Path| -> std::io::Result<()> {
        let json = serde_json::to_string_pretty(report).map_err(std::io::Error::other)?;
        std::fs::write(into.join("report.json"), json)?;
        std::fs::write(
            into.join("junit.xml"),
            junit(report).map_err(std::io::Error::other)?,
        )?;
        std::fs::write(into.join("matrix.md"), markdown(report))
    };
    if let Err(e) = std::fs::create_dir(&staging) {
        if e.kind() != std::io::ErrorKind::PermissionDenied {
            return Err(e);
        }
        // A directory we may write in a parent we may not (a CI user's report directory):
        // stage inside it, then rename each file into place (each file whole, never torn).
        std::fs::create_dir_all(dir)?;
        let inside = dir.join(format!(".writing-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&inside);
        std::fs::create_dir(&inside)?;
        let written = fill(&inside).and_then(|()| {
            ["report.json", "junit.xml", "matrix.md"]
                .iter()
                .try_for_each(|f| std::fs::rename(inside.join(f), dir.join(f)))
        });
        let _ = std::fs::remove_dir_all(&inside);
        return written;
    }
    let written = fill(&staging).and_then(|()| replace_dir(&staging, dir));
    let _ = std::fs::remove_dir_all(&staging);
    written
}

/// Puts the directory `new` at `dir`; what was at `dir` ends up at `new` (removed by the caller).
fn replace_dir(new: &Path, dir: &Path) -> std::io::Result<()> {
    if std::fs::symlink_metadata(dir).is_err() {
        return std::fs::rename(new, dir);
    }
    #[cfg(target_os = "linux")]
    {
        use nix::fcntl::{AT_FDCWD, RenameFlags, renameat2};
        renameat2(AT_FDCWD, new, AT_FDCWD, dir, RenameFlags::RENAME_EXCHANGE)
            .map_err(std::io::Error::from)
    }
    #[cfg(not(target_os = "linux"))]
    {
        // No exchange: move the old report aside, then the new one in (a crash in between
        // leaves the old one beside it, never a half-written one at `dir`).
        let mut aside = new.as_os_str().to_owned();
        aside.push(".old");
        let aside = PathBuf::from(aside);
        std::fs::rename(dir, &aside)?;
        std::fs::rename(new, dir)?;
        let _ = std::fs::remove_dir_all(&aside);
        Ok(())
    }
}
