//! A backend's verdict: certified only with a usable backend, no bad case, no `must` case
//! skipped, and the committed capabilities and skip baseline held.

use std::collections::BTreeMap;

use super::{BackendReport, CaseResult, FORGED_SIGNATURE_SCENARIO, Status};
use crate::backends::Backend;
use crate::expectations::ExpectationFile;
use crate::scenario::Level;

/// A backend's verdict, with its guard: a usable backend, no bad case, no `must` case skipped,
/// the committed capabilities and skip baseline held.
pub(super) fn verdict(
    backend: &Backend,
    expected: Option<&ExpectationFile>,
    cases: &[CaseResult],
    levels: &BTreeMap<String, Level>,
    partial: bool,
) -> BackendReport {
    let mine: Vec<&CaseResult> = cases.iter().filter(|c| c.backend == backend.name).collect();
    let mut counts: BTreeMap<Status, usize> = BTreeMap::new();
    for c in &mine {
        *counts.entry(c.status).or_default() += 1;
    }
    let mut problems: Vec<String> = mine
        .iter()
        .filter(|c| c.family == "expectations")
        .filter_map(|c| c.message.as_ref().map(|m| format!("expectation file: {m}")))
        .collect();
    if let Some(reason) = &backend.unusable
        && backend.provider.is_none()
        && backend.external().is_none()
    {
        problems.push(format!("not usable on this host: {reason}"));
    }
    let must_defects = mine
        .iter()
        .filter(|c| c.status == Status::Xfail && c.level == Some(Level::Must))
        .count();
    if must_defects > 0 {
        problems.push(format!(
            "{must_defects} must case(s) fail as known defects (its expectation file's known_defects)"
        ));
    }
    let must_skipped = mine
        .iter()
        .filter(|c| c.status == Status::Skip && levels.get(&c.scenario) == Some(&Level::Must))
        .count();
    if must_skipped > 0 {
        problems.push(format!("{must_skipped} must case(s) skipped"));
    }
    // A run that left families out may hold none of a backend's cases (it is PARTIAL anyway).
    if !partial
        && mine
            .iter()
            .all(|c| c.status != Status::Pass && c.status != Status::Xfail)
    {
        problems.push("no case ran".into());
    }
    if let Some(file) = expected {
        if let Some(committed) = &file.capabilities {
            let mut committed = committed.clone();
            committed.sort();
            let actual: Vec<_> = backend.capabilities.iter().copied().collect();
            committed.retain(|c| !c.is_derived());
            if committed != actual {
                problems.push(format!(
                    "capabilities on this host {actual:?} differ from the committed {committed:?}"
                ));
            }
        }
        let skipped = counts.get(&Status::Skip).copied().unwrap_or(0);
        if let Some(max) = file.max_skipped
            && skipped > max
        {
            problems.push(format!(
                "{skipped} cases skipped, more than the committed {max}"
            ));
        }
    }
    let bad = mine.iter().any(|c| c.status.is_bad());
    BackendReport {
        name: backend.name.clone(),
        version: backend.version.clone(),
        enforcement: backend.enforcement,
        classes: backend
            .facts()
            .map(sandbox_local::probe::ProbeFacts::capabilities),
        usable: backend.provider.is_some() || backend.unusable.is_none(),
        unusable_reason: backend.unusable.clone(),
        certified: !bad && problems.is_empty(),
        counts,
        problems,
        fooled_by_forged_runner_failure: mine
            .iter()
            .filter(|c| c.scenario == FORGED_SIGNATURE_SCENARIO)
            .filter(|c| matches!(c.status, Status::Pass | Status::Fail | Status::Xfail))
            .map(|c| c.status != Status::Pass)
            .reduce(|a, b| a || b),
        protocol: backend.external().map(|e| e.protocol),
        declared: backend
            .external()
            .map(|e| e.differences.clone())
            .filter(|d| !d.is_empty()),
    }
}
