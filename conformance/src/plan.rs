//! One trial per (backend, scenario case), with skips decided while listing.

use crate::backends::Backend;
use crate::expectations::ExpectationFile;
use crate::scenario::load::{ExpandedCase, LoadError, Suite};
use crate::scenario::{Capability, Level};

/// A planned trial.
#[derive(Debug)]
pub struct Trial {
    /// `family::backend::scenario::case`, or `family::load-error::file` for a broken file.
    pub name: String,
    /// Its family (`expectations` for a broken expectation file, `suite` for an empty suite),
    /// kept as a field so nothing parses it back out of the name.
    pub family: String,
    /// The backend's name, or `-` for a trial of the suite itself.
    pub backend: String,
    /// What it does.
    pub kind: TrialKind,
    /// Why it cannot run on this host, decided now; such a trial is listed as ignored.
    pub skip: Option<String>,
}

/// What a trial does when run.
#[derive(Debug)]
pub enum TrialKind {
    /// Run a scenario case against a backend.
    Case {
        /// Index into the run's backends.
        backend: usize,
        /// The scenario's stable id.
        scenario_id: String,
        /// Its level.
        level: Level,
        /// The expanded case.
        case: ExpandedCase,
        /// Why the backend's expectation file says this case fails, when it does.
        expected_failure: Option<crate::expectations::Expected>,
    },
    /// A scenario file that failed to load: always fails with the error.
    LoadError(LoadError),
    /// The scenario root held no scenario at all: always fails.
    NoScenarios(String),
    /// A backend's expectation file is broken: always fails.
    BadExpectations(String),
    /// A host-dependent case this host does not call for (see [`crate::scenario::Case::when_host`]):
    /// never run, listed in the report with the reason.
    NotPlanned(String),
}

/// Plans the trials for `suite` against `backends`, each with its expectation file (if any, or
/// why it could not be read).
pub fn plan<E: std::fmt::Display>(
    suite: &Suite,
    backends: &[Backend],
    expectations: &[Result<Option<ExpectationFile>, E>],
    root_shown: &str,
) -> Vec<Trial> {
    let mut trials = Vec::new();
    let mut valid: Vec<Option<&ExpectationFile>> = Vec::with_capacity(backends.len());
    for (backend, expected) in backends.iter().zip(expectations) {
        let problem = match expected {
            Err(e) => Some(e.to_string()),
            Ok(Some(file)) => file.check(&suite.scenarios).err().map(|e| e.to_string()),
            Ok(None) => None,
        };
        // A broken expectation file excuses nothing: its entries are not applied at all.
        valid.push(match (expected, &problem) {
            (Ok(Some(file)), None) => Some(file),
            _ => None,
        });
        if let Some(problem) = problem {
            trials.push(Trial {
                name: format!("expectations::{}::invalid", backend.name),
                family: "expectations".to_owned(),
                backend: backend.name.clone(),
                kind: TrialKind::BadExpectations(problem),
                skip: None,
            });
        }
    }
    for error in &suite.errors {
        let family = error
            .file
            .components()
            .rev()
            .nth(1)
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .unwrap_or_else(|| "suite".to_owned());
        let stem = error
            .file
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        trials.push(Trial {
            name: format!("{family}::load-error::{stem}"),
            family,
            backend: "-".to_owned(),
            kind: TrialKind::LoadError(error.clone()),
            skip: None,
        });
    }
    if suite.scenarios.is_empty() && suite.errors.is_empty() {
        trials.push(Trial {
            name: "suite::no_scenarios_found".to_owned(),
            family: "suite".to_owned(),
            backend: "-".to_owned(),
            kind: TrialKind::NoScenarios(root_shown.to_owned()),
            skip: None,
        });
    }
    for scenario in &suite.scenarios {
        for (index, backend) in backends.iter().enumerate() {
            if scenario
                .backends
                .as_ref()
                .is_some_and(|only| !only.contains(&backend.name))
                || !crate::seatbelt_model::plans(&backend.name, &scenario.family)
            {
                continue;
            }
            for case in &scenario.cases {
                let mut needs: Vec<Capability> = scenario.requires.clone();
                for step in &case.case.steps {
                    needs.extend_from_slice(step.needs());
                }
                needs.sort();
                needs.dedup();
                if !backend.applies(&needs) {
                    continue;
                }
                let name = format!(
                    "{}::{}::{}::{}",
                    scenario.family, backend.name, scenario.slug, case.name
                );
                let not_here = match case.case.when_host.map(crate::backends::host_has) {
                    Some(Err(why)) => Some(why.0),
                    _ => crate::steps::unavailable_here(&case.case.steps).map(|e| e.to_string()),
                };
                if let Some(why) = not_here {
                    trials.push(Trial {
                        name,
                        family: scenario.family.clone(),
                        backend: backend.name.clone(),
                        kind: TrialKind::NotPlanned(why),
                        skip: None,
                    });
                    continue;
                }
                let expected_failure = valid
                    .get(index)
                    .copied()
                    .flatten()
                    .and_then(|file| file.expected_for(scenario, case));
                trials.push(Trial {
                    name,
                    family: scenario.family.clone(),
                    backend: backend.name.clone(),
                    kind: TrialKind::Case {
                        backend: index,
                        scenario_id: scenario.id.clone(),
                        level: scenario.level,
                        case: case.clone(),
                        expected_failure,
                    },
                    skip: backend.cannot_run(&needs),
                });
            }
        }
    }
    trials
}
