//! A backend's expectation file: the failures it is known and allowed to have, each with a reason.
//! An expected failure that passes is an XPASS and fails the run; an entry naming an unknown
//! scenario is an error; a `must` scenario can never be expected to fail.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use crate::scenario::load::{ExpandedCase, LoadError, Scenario};
use crate::scenario::{Level, OneOrMany};

/// `fixtures/expectations/<backend>.yaml`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpectationFile {
    /// The backend the file is for (must match the file name).
    pub backend: String,
    /// The capabilities the backend must report on a certifying host: a backend that silently
    /// loses one (and so is no longer planned for its scenarios) fails its guard.
    #[serde(default)]
    pub capabilities: Option<Vec<crate::scenario::Capability>>,
    /// The most skipped cases a certifying run may have (the committed baseline).
    #[serde(default)]
    pub max_skipped: Option<usize>,
    /// Known failures.
    #[serde(default)]
    pub expected_failures: Vec<ExpectedFailure>,
    /// Known defects of a backend that cannot be certified (a third-party peer): like expected
    /// failures, but allowed on `must` scenarios. A `must` case failing as a known defect is
    /// XFAIL in the report, so a run shows exactly where the backend drifted (a new failure is
    /// FAIL, a fixed one XPASS), and the backend is never certified while one remains.
    #[serde(default)]
    pub known_defects: Vec<ExpectedFailure>,
}

/// One known failure: the cases of a scenario whose variables match `when`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpectedFailure {
    /// The scenario id.
    pub scenario: String,
    /// Variable (matrix or derived) to accepted value(s); empty matches every case.
    #[serde(default)]
    pub when: BTreeMap<String, OneOrMany>,
    /// Only the cases whose name starts with this (for cases no variable tells apart).
    #[serde(default)]
    pub case: Option<String>,
    /// Why the backend cannot keep this promise.
    pub reason: String,
    /// What the failure must show for it to be this known failure: a piece of the case's own
    /// failure message (for example `host Some(Effected)`: the effect landed). A case that fails
    /// any other way (the sandbox did not run the command, the sentinel changed) is a real
    /// failure, never excused.
    pub observed: String,
    /// The class whose honestly reported gap this failure is (`protected`, ...): allowed on a
    /// `must` scenario that `governs` that class, and only for the cases its rules cover; it
    /// excuses a failure only when the backend reported the class short of `full` in the run.
    #[serde(default)]
    pub gap: Option<sandbox::EnforcementClass>,
    /// With `gap`: the entry holds only when one of the names the backend reports ungoverned for
    /// that class contains this (a backend whose class is `partial` everywhere but `not-governed`
    /// on some hosts names the host's gap, so elsewhere the case is held to its own level).
    /// Alternatives are separated by ` | `: the entry holds when any of them is reported.
    #[serde(default)]
    pub gap_names: Option<String>,
}

/// A known failure a planned case carries: why, and what its failure must show.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expected {
    /// Why the backend cannot keep this promise.
    pub reason: String,
    /// What the failure message must contain.
    pub observed: String,
    /// The class whose reported gap it is, for a `gap:` entry: it applies only when the backend
    /// reported that class short of `full` (see [`Expected::applies`]).
    pub gap: Option<sandbox::EnforcementClass>,
    /// What one of the class's ungoverned names must contain for a `gap:` entry to apply.
    pub gap_names: Option<String>,
}

/// How a failure that rests on a class names the gap it went through (`metadata`, `truncate`,
/// `tcp`): the words `(through the gap: NAME)` in its message. A `gap:` entry excuses such a
/// failure only where the backend reported that very gap in the run.
pub const THROUGH_GAP: &str = "(through the gap: ";

/// The gaps a failure message names with [`THROUGH_GAP`] (comma-separated), if it names any.
pub fn gap_routes(message: &str) -> Vec<&str> {
    let Some(at) = message.find(THROUGH_GAP) else {
        return Vec::new();
    };
    let rest = &message[at + THROUGH_GAP.len()..];
    rest.split(')')
        .next()
        .unwrap_or("")
        .split(", ")
        .filter(|r| !r.is_empty())
        .collect()
}

impl Expected {
    /// Whether this expectation applies to a backend whose weakest report for a class in this
    /// run is `reported(class)`, for a case that ended with `failure` (its message, when it
    /// failed): always, unless it is a `gap:` entry and the backend governed that class in full,
    /// or did not name the gap `gap_names` asks for, or the failure went through a gap
    /// ([`gap_routes`]) the backend did not report (a TCP escape is no `named-unix-sockets` gap).
    /// The class reported `not-governed` leaves every route open. Otherwise the case is held to
    /// its own level.
    pub fn applies(
        &self,
        reported: impl Fn(sandbox::EnforcementClass) -> Option<sandbox::ClassReport>,
        failure: Option<&str>,
    ) -> bool {
        let Some(class) = self.gap else { return true };
        reported(class).is_some_and(|r| {
            let names = |n: &str| r.ungoverned.iter().any(|u| u.contains(n));
            let route_reported = r.enforcement == sandbox::ClassEnforcement::NotGoverned
                || failure
                    .map(gap_routes)
                    .unwrap_or_default()
                    .into_iter()
                    .all(names);
            r.enforcement != sandbox::ClassEnforcement::Full
                && self
                    .gap_names
                    .as_deref()
                    .is_none_or(|alternatives| alternatives.split(" | ").any(names))
                && route_reported
        })
    }
}

/// An entry of an expectation file that cannot hold (names no scenario, excuses a `must`,
/// lacks its reason or its observation): the file is then invalid as a whole.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BadEntry(pub String);

/// How one case ended, judged against its expectation: the one rule the harness and `certify`
/// share.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Judgement {
    /// It passed and nothing was expected to fail.
    Pass,
    /// It failed and nothing excused it; the real message.
    Fail(String),
    /// It failed exactly as expected; the reason and the real message.
    Xfail {
        /// Why it is expected.
        reason: String,
        /// The case's own failure message.
        message: String,
    },
    /// It was expected to fail but passed: the expectation is stale.
    Xpass(String),
}

impl Judgement {
    /// Judges a case's result against its expectation (its failure as the case's message shows
    /// it: whatever error type the caller holds, the pin reads the text).
    pub fn of<E: std::fmt::Display>(
        result: Result<(), E>,
        expected: Option<&Expected>,
    ) -> Judgement {
        match (result.map_err(|e| e.to_string()), expected) {
            (Ok(()), None) => Judgement::Pass,
            (Err(message), None) => Judgement::Fail(message),
            (Ok(()), Some(e)) => Judgement::Xpass(format!(
                "expected to fail ({}) but passed; remove the expectation",
                e.reason
            )),
            (Err(message), Some(e)) if message.contains(&e.observed) => Judgement::Xfail {
                reason: e.reason.clone(),
                message,
            },
            (Err(message), Some(e)) => Judgement::Fail(format!(
                "expected to fail showing {:?} ({}), but it failed otherwise: {message}",
                e.observed, e.reason
            )),
        }
    }
}

impl ExpectationFile {
    /// How `case` of `scenario` is expected to fail, if it is.
    pub fn expected_for(&self, scenario: &Scenario, case: &ExpandedCase) -> Option<Expected> {
        self.expected_failures
            .iter()
            .chain(&self.known_defects)
            .find(|e| {
                e.scenario == scenario.id
                    && e.gap
                        .is_none_or(|class| scenario.gap_classes(case).contains(&class))
                    && e.case
                        .as_ref()
                        .is_none_or(|c| case.name.starts_with(c.as_str()))
                    && e.when
                        .iter()
                        .all(|(k, v)| case.vars.get(k).is_some_and(|val| v.accepts(val)))
            })
            .map(|e| Expected {
                reason: e.reason.clone(),
                observed: e.observed.clone(),
                gap: e.gap,
                gap_names: e.gap_names.clone(),
            })
    }

    /// Checks every entry names a known, non-`must` scenario.
    pub fn check(&self, scenarios: &[Scenario]) -> Result<(), BadEntry> {
        let defects = self.known_defects.iter().map(|e| (e, true));
        for (e, defect) in self
            .expected_failures
            .iter()
            .map(|e| (e, false))
            .chain(defects)
        {
            match scenarios.iter().find(|s| s.id == e.scenario) {
                None => {
                    return Err(BadEntry(format!(
                        "expected failure names scenario {:?}, which does not exist",
                        e.scenario
                    )));
                }
                Some(s)
                    if e.gap
                        .is_some_and(|class| !s.governs.iter().any(|g| g.class == class)) =>
                {
                    return Err(BadEntry(format!(
                        "expected failure of {} names the gap {}, but the scenario does not rest on that class (no `governs: {}` rule)",
                        e.scenario,
                        e.gap.map_or("", |c| c.as_str()),
                        e.gap.map_or("", |c| c.as_str()),
                    )));
                }
                Some(_) if e.gap_names.is_some() && e.gap.is_none() => {
                    return Err(BadEntry(format!(
                        "expected failure of {} has gap_names but no gap: name the class",
                        e.scenario
                    )));
                }
                Some(s) if s.level == Level::Must && !defect && e.gap.is_none() => {
                    return Err(BadEntry(format!(
                        "scenario {} is a must: it can never be expected to fail (unless it is an honestly reported gap of a class the scenario governs: `gap:`)",
                        e.scenario
                    )));
                }
                Some(_) if e.reason.trim().is_empty() => {
                    return Err(BadEntry(format!(
                        "expected failure of {} needs a reason",
                        e.scenario
                    )));
                }
                Some(_) if e.observed.trim().is_empty() => {
                    return Err(BadEntry(format!(
                        "expected failure of {} needs the observation it pins (observed:)",
                        e.scenario
                    )));
                }
                Some(_) => {}
            }
        }
        Ok(())
    }
}

/// Loads `<dir>/<backend>.yaml` if it exists.
pub fn load(dir: &Path, backend: &str) -> Result<Option<ExpectationFile>, LoadError> {
    let path = dir.join(format!("{backend}.yaml"));
    let shown = path
        .strip_prefix(dir.parent().and_then(Path::parent).unwrap_or(dir))
        .unwrap_or(&path)
        .to_path_buf();
    load_path(&path, shown, backend)
}

/// Loads the expectation file at `path` for `backend`; a missing file is `None`.
pub fn load_path(
    path: &Path,
    shown: std::path::PathBuf,
    backend: &str,
) -> Result<Option<ExpectationFile>, LoadError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(LoadError {
                file: shown,
                line: 0,
                column: 0,
                message: format!("cannot read: {e}"),
                snippet: None,
            });
        }
    };
    let file: ExpectationFile = crate::scenario::load::read_yaml(&text).map_err(|e| {
        let (line, column) = e
            .location()
            .map(|l| (l.line(), l.column()))
            .unwrap_or((0, 0));
        LoadError {
            file: shown.clone(),
            line,
            column,
            message: e.without_snippet().to_string(),
            snippet: None,
        }
    })?;
    if file.backend != backend {
        return Err(LoadError {
            file: shown,
            line: 1,
            column: 1,
            message: format!(
                "the file is for backend {:?}, not {backend:?}",
                file.backend
            ),
            snippet: None,
        });
    }
    Ok(Some(file))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expected(observed: &str) -> Expected {
        Expected {
            reason: "why".into(),
            observed: observed.into(),
            gap: None,
            gap_names: None,
        }
    }

    #[test]
    fn a_gap_entry_applies_only_where_the_backend_reported_the_gap() {
        use sandbox::{ClassReport, EnforcementClass::Protected};
        let gap = Expected {
            gap: Some(Protected),
            ..expected("x")
        };
        let none = ClassReport::not_governed;
        assert!(gap.applies(|c| (c == Protected).then(none), None));
        assert!(!gap.applies(|_| Some(ClassReport::full()), None));
        assert!(!gap.applies(|_| None, None));
        assert!(expected("x").applies(|_| None, None));
        let named = Expected {
            gap_names: Some("mount namespace".into()),
            ..gap
        };
        assert!(!named.applies(
            |_| Some(ClassReport::with_gaps(["reverted after the call"])),
            None
        ));
        assert!(named.applies(
            |_| Some(ClassReport::with_gaps(["no private mount namespace"])),
            None
        ));
    }

    #[test]
    fn a_gap_entry_excuses_only_a_failure_through_a_gap_the_backend_reported() {
        use sandbox::{ClassReport, EnforcementClass::Network};
        let gap = Expected {
            gap: Some(Network),
            ..expected("reached")
        };
        let unix_only = || Some(ClassReport::with_gaps(["named-unix-sockets"]));
        // A TCP escape is not excused by a reported named-unix-sockets gap.
        let tcp = "the listener was reached (through the gap: tcp)";
        assert_eq!(gap_routes(tcp), vec!["tcp"]);
        let both = "reached (through the gap: named-unix-sockets, tcp)";
        assert!(!gap.applies(|_| unix_only(), Some(both)));
        assert!(!gap.applies(|_| unix_only(), Some(tcp)));
        let unix = "the listener was reached (through the gap: named-unix-sockets)";
        assert!(gap.applies(|_| unix_only(), Some(unix)));
        // Not governed at all: every route is the gap.
        assert!(gap.applies(|_| Some(ClassReport::not_governed()), Some(tcp)));
        // A failure that names no route is judged by the class alone, as before.
        assert!(gap.applies(|_| unix_only(), Some("reached")));
    }

    #[test]
    fn a_known_failure_is_excused_only_when_it_shows_its_observation() {
        let landed: Result<(), &str> = Err("expected Denied; got ... host Some(Effected) ...");
        assert_eq!(
            Judgement::of(landed, Some(&expected("host Some(Effected)"))),
            Judgement::Xfail {
                reason: "why".into(),
                message: "expected Denied; got ... host Some(Effected) ...".into()
            }
        );
        let broke: Result<(), &str> = Err("the sandbox did not run the command: ...");
        assert!(matches!(
            Judgement::of(broke, Some(&expected("host Some(Effected)"))),
            Judgement::Fail(m) if m.contains("failed otherwise") && m.contains("did not run")
        ));
        assert!(matches!(
            Judgement::of(Ok::<(), &str>(()), Some(&expected("x"))),
            Judgement::Xpass(_)
        ));
        assert_eq!(Judgement::of(Ok::<(), &str>(()), None), Judgement::Pass);
        assert_eq!(
            Judgement::of(Err::<(), _>("m"), None),
            Judgement::Fail("m".into())
        );
    }
}
