//! The one rule for levels, proved over the scenario files: when a backend reports a class
//! `partial` or `not-governed`, no family fails it at `must` for exactly that gap. Every `must`
//! case whose promise rests on a class a backend may honestly leave ungoverned either accepts the
//! honest report itself (`files_or_reported`) or declares the class (`governs`), which judges it
//! at the level of the class's own family for that gap; and that family has the `should` case the
//! gap fails at.

use std::path::{Path, PathBuf};

use conformance::scenario::load::{ExpandedCase, Scenario, load_suite};
use conformance::scenario::{Level, PersonTool, Step};
use sandbox::{DEFAULT_PROTECTED_PATHS, EnforcementClass};

fn scenarios() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios")
}

/// The family that tests `class` itself.
fn own_family(class: EnforcementClass) -> &'static str {
    match class {
        EnforcementClass::Files => "containment",
        other => other.as_str(),
    }
}

/// True when `step` runs a payload through the backend (not the write tool's fence, not a
/// classification of canned output) and names a protected path of the default set.
fn backend_step_touches_protected(step: &Step) -> bool {
    let runs_through_backend = match step {
        Step::Tool(t) => t.name == "bash",
        Step::Attack(_) | Step::Effect(_) | Step::Walk(_) | Step::Writable(_) | Step::Mounts(_) => {
            true
        }
        _ => false,
    };
    // An attack followed by the harness's own git outside rests on git's code surface, whatever
    // folder the route plants in (the one `core.hooksPath` names is protected per call), unless
    // it expects the payload's own git to succeed (exit 0): that case (PR-002) proves protection
    // does not get in the way, which holds on a backend that governs nothing.
    // The person's git while the call runs (`during: { tools: [git] }`) rests on it alike.
    let host_git = matches!(step, Step::Attack(a)
        if (a.host_git.is_some()
            || a.during.as_ref().is_some_and(|d| d.tools.contains(&PersonTool::Git)))
            && a.expect.exit != Some(0));
    runs_through_backend && (host_git || names_protected(&format!("{step:?}")))
}

/// True when `text` names a path of the protected set: one of the default protected paths, or
/// any other file of git's code surface (a linked worktree's `commondir`, a submodule's config).
fn names_protected(text: &str) -> bool {
    // `git config KEY VALUE` writes the repository's `.git/config`.
    if text.contains("git config core.") {
        return true;
    }
    let path_char = |c: char| c.is_ascii_alphanumeric() || "_.%/-".contains(c);
    text.split(|c: char| !path_char(c)).any(|token| {
        // `%WS%/.git/hooks` -> `.git/hooks`; a relative `.git/config` as it is.
        let relative = token
            .rsplit('%')
            .next()
            .unwrap_or(token)
            .trim_start_matches('/');
        let path = Path::new(relative);
        relative.contains('/')
            && (sandbox::is_git_surface(path)
                || DEFAULT_PROTECTED_PATHS.iter().any(|p| path.starts_with(p)))
    })
}

/// True when every attack step of the case that touches a protected path accepts an honest
/// report of the class (`files_or_reported: protected`), and it has no other such step.
fn accepts_honest_report(case: &ExpandedCase) -> bool {
    case.case
        .steps
        .iter()
        .filter(|s| backend_step_touches_protected(s))
        .all(|s| {
            matches!(s, Step::Attack(a)
                if a.expect.files_or_reported == Some(EnforcementClass::Protected))
        })
}

fn must_cases_resting_on_protected(scenarios: &[Scenario]) -> Vec<(&Scenario, &ExpandedCase)> {
    scenarios
        .iter()
        .filter(|s| s.level == Level::Must)
        .flat_map(|s| s.cases.iter().map(move |c| (s, c)))
        .filter(|(_, c)| c.case.steps.iter().any(backend_step_touches_protected))
        .collect()
}

#[test]
fn no_must_case_fails_an_honestly_reported_protected_gap() {
    let suite = load_suite(&scenarios());
    assert!(suite.errors.is_empty(), "{:#?}", suite.errors);
    let resting = must_cases_resting_on_protected(&suite.scenarios);
    // The rule is only proved if it has cases to hold over (PAR-004's hooks rows, PR-004, PR-006).
    assert!(resting.len() >= 10, "{} cases", resting.len());
    let breaking: Vec<String> = resting
        .iter()
        .filter(|(s, c)| {
            !s.gap_classes(c).contains(&EnforcementClass::Protected) && !accepts_honest_report(c)
        })
        .map(|(s, c)| format!("{} {} ({})", s.id, c.name, s.file.display()))
        .collect();
    assert!(
        breaking.is_empty(),
        "these must cases write a protected path through the backend but neither accept an \
         honest report (files_or_reported: protected) nor declare `governs: protected`: {breaking:#?}"
    );
}

#[test]
fn a_governs_rule_covers_only_cases_that_rest_on_its_class() {
    // A rule wider than its cases would let a `gap:` entry excuse failures that are not the gap.
    let suite = load_suite(&scenarios());
    for s in &suite.scenarios {
        for c in &s.cases {
            if s.gap_classes(c).contains(&EnforcementClass::Protected) {
                assert!(
                    c.case.steps.iter().any(backend_step_touches_protected),
                    "{} {}: governs protected, but no step of it writes a protected path",
                    s.id,
                    c.name
                );
            }
        }
    }
}

#[test]
fn every_governed_class_fails_its_gap_at_should_in_its_own_family() {
    let suite = load_suite(&scenarios());
    let mut governed: Vec<EnforcementClass> = suite
        .scenarios
        .iter()
        .flat_map(|s| s.governs.iter().map(|g| g.class))
        .collect();
    governed.sort();
    governed.dedup();
    assert!(governed.contains(&EnforcementClass::Protected));
    for class in governed {
        let family = own_family(class);
        let shoulds: Vec<&str> = suite
            .scenarios
            .iter()
            .filter(|s| s.family == family && s.level == Level::Should)
            .map(|s| s.id.as_str())
            .collect();
        assert!(
            !shoulds.is_empty(),
            "class {} is governed by must cases, but its family {family} has no should case for the gap to fail at",
            class.as_str()
        );
    }
}
