//! The `libtest-mimic` entry point: `cargo test` and `cargo nextest` list and run one trial per
//! (backend, scenario case).
//!
//! Environment:
//! - `CONFORMANCE_SCENARIOS`: the scenario root (default: the workspace's `scenarios/`).
//! - `CONFORMANCE_REQUIRE`: comma-separated backends that must be usable here (`none`: no
//!   backend). A required backend that is not turns its would-be skips into failures, and its guard
//!   trial fails, so a silent all-skip cannot pass. Unset, the reference backends this platform
//!   always has are required ([`crate::backends::default_required`]): on Linux a broken bwrap or
//!   Landlock fails a plain `cargo nextest run`.

use std::path::PathBuf;
use std::sync::Arc;

use libtest_mimic::{Arguments, Failed};

use crate::backends::{Backend, reference_backends};
use crate::expectations::Judgement;
use crate::observed::ClassesSeen;
use crate::plan::{Trial, TrialKind, plan};
use crate::scenario::load::load_suite;
use crate::steps::{Blame, run_case};

/// The scenario root: `CONFORMANCE_SCENARIOS`, or the workspace's `scenarios/`.
pub fn scenario_root() -> PathBuf {
    std::env::var_os("CONFORMANCE_SCENARIOS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../scenarios")))
}

/// Where backends' expectation files live: `CONFORMANCE_EXPECTATIONS`, or the workspace's
/// `fixtures/expectations/`.
pub fn expectations_dir() -> PathBuf {
    std::env::var_os("CONFORMANCE_EXPECTATIONS")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../fixtures/expectations"
            ))
        })
}

/// The backends this run must certify: those named by `CONFORMANCE_REQUIRE` (`none` for no
/// backend), or by default [`crate::backends::default_required`]. A default that is opted out of
/// is named on stderr, so an opt-out is never silent.
pub fn required_backends() -> Vec<String> {
    let defaults = crate::backends::default_required();
    let required: Vec<String> = match std::env::var("CONFORMANCE_REQUIRE") {
        Err(_) => return defaults.iter().map(|s| (*s).to_owned()).collect(),
        Ok(list) => list
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty() && *s != "none")
            .map(str::to_owned)
            .collect(),
    };
    let opted_out: Vec<&str> = defaults
        .iter()
        .copied()
        .filter(|d| !required.iter().any(|r| r == d))
        .collect();
    if !opted_out.is_empty() {
        eprintln!(
            "conformance: not required in this run (CONFORMANCE_REQUIRE={}): {}; their skips pass",
            std::env::var("CONFORMANCE_REQUIRE").unwrap_or_default(),
            opted_out.join(", ")
        );
    }
    required
}

/// Builds the trials for the reference backends and runs them as the command line asks; exits the
/// process with the conclusion.
pub fn main() -> ! {
    let args = Arguments::from_args();
    let seed = match crate::world::run_seed() {
        Ok(seed) => seed,
        Err(e) => {
            eprintln!("conformance: {e}");
            std::process::exit(101);
        }
    };
    if !args.list {
        eprintln!(
            "conformance: seed {seed} ({}={seed} replays these trials)",
            crate::world::SEED_VAR
        );
    }
    let required = required_backends();
    let exact = args.filter.as_deref().filter(|_| args.exact && !args.list);
    let trials = exact
        .and_then(|name| targeted(name, &required))
        .unwrap_or_else(|| {
            trials(
                &scenario_root(),
                &expectations_dir(),
                reference_backends(),
                &required,
            )
        });
    if !args.list && !args.ignored && !args.include_ignored {
        report_skips(&trials);
    }
    libtest_mimic::run(
        &args,
        trials.into_iter().map(HarnessTrial::into_libtest).collect(),
    )
    .exit()
}

/// Says on stderr why trials were skipped when listed, grouped by reason (the list format has no
/// room for reasons; the run's output does).
fn report_skips(trials: &[HarnessTrial]) {
    let mut reasons: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
    for reason in trials.iter().filter_map(|t| t.skip_reason.as_deref()) {
        *reasons.entry(reason).or_default() += 1;
    }
    for (reason, count) in reasons {
        eprintln!("conformance: {count} trial(s) skipped when listed: {reason}");
    }
}

/// The fast path for one exactly named case trial (how nextest runs every test): load only its
/// scenario file and probe only its backend. `None` (fall back to the full plan) unless that
/// yields exactly the requested trial, so the fast path can never run nothing in its place.
fn targeted(name: &str, required: &[String]) -> Option<Vec<HarnessTrial>> {
    let [family, backend, slug, _case] = name.split("::").collect::<Vec<_>>()[..] else {
        return None;
    };
    if !crate::backends::REFERENCE_BACKENDS.contains(&backend) {
        return None;
    }
    let root = scenario_root();
    let file = ["yaml", "yml"]
        .iter()
        .map(|ext| root.join(family).join(format!("{slug}.{ext}")))
        .find(|p| p.is_file())?;
    let shown = file
        .strip_prefix(root.parent().unwrap_or(&root))
        .unwrap_or(&file);
    let (scenario, _) = crate::scenario::load::load_file(&root, &file, shown).ok()?;
    let id = scenario.id.clone();
    let single = crate::scenario::load::Suite {
        scenarios: vec![scenario],
        errors: Vec::new(),
    };
    let backend = crate::backends::reference_backend(backend)?;
    // Only this scenario's entries: the others name scenarios this fast path did not load (the
    // full plan, which lists the trials, checks the whole file).
    let expected = crate::expectations::load(&expectations_dir(), &backend.name)
        .ok()?
        .map(|mut file| {
            file.expected_failures.retain(|e| e.scenario == id);
            file
        });
    let planned = plan(
        &single,
        std::slice::from_ref(&backend),
        &[Ok::<_, TrialError>(expected)],
        "",
    );
    let backends = observed(vec![backend]);
    let mut matching: Vec<HarnessTrial> = planned
        .into_iter()
        .filter(|t| t.name == name && !matches!(t.kind, TrialKind::NotPlanned(_)))
        .map(|t| harness_trial(t, &backends, required))
        .collect();
    (matching.len() == 1).then(|| vec![matching.remove(0)])
}

/// Why a trial fails under the harness: the outcomes a run tells apart. Each shows the message
/// the trial has always failed with.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TrialError {
    /// The suite itself is broken: a scenario file that does not load, no scenario at all, a
    /// broken expectation file.
    #[error("{0}")]
    Suite(String),
    /// A required backend cannot run here, or its guard does not hold.
    #[error("{0}")]
    Required(String),
    /// Skipped when listed, and run anyway: the reason.
    #[error("{0}")]
    Skipped(String),
    /// The case failed and nothing excused it (or its excuse is stale).
    #[error("{0}")]
    Case(String),
    /// The backend answered a request and its renamed twin differently: never excused.
    #[error("{0}")]
    Inconsistent(String),
}

/// A trial as the harness builds it, before it is handed to libtest-mimic.
pub struct HarnessTrial {
    /// The trial name.
    pub name: String,
    /// Listed as ignored (skipped when listed, with the reason in `run`'s error).
    pub ignored: bool,
    /// Why it was skipped when listed.
    pub skip_reason: Option<String>,
    /// Runs the trial.
    pub run: Box<dyn FnOnce() -> Result<(), TrialError> + Send>,
}

impl HarnessTrial {
    fn new(
        name: String,
        ignored: bool,
        run: impl FnOnce() -> Result<(), TrialError> + Send + 'static,
    ) -> Self {
        HarnessTrial {
            name,
            ignored,
            skip_reason: None,
            run: Box::new(run),
        }
    }

    /// The libtest-mimic trial.
    pub fn into_libtest(self) -> libtest_mimic::Trial {
        let run = self.run;
        libtest_mimic::Trial::test(self.name, move || {
            run().map_err(|e| Failed::from(e.to_string()))
        })
        .with_ignored_flag(self.ignored)
    }
}

/// The trials for `root` against `backends`, honouring the `required` backends.
pub fn trials(
    root: &std::path::Path,
    expectations: &std::path::Path,
    backends: Vec<Backend>,
    required: &[String],
) -> Vec<HarnessTrial> {
    let suite = load_suite(root);
    let expected: Vec<_> = backends
        .iter()
        .map(|b| {
            let file = crate::expectations::load(expectations, &b.name)
                .map_err(|e| TrialError::Suite(e.to_string()))?;
            // The test harness passes an XFAIL: a must case excused as a known defect would pass
            // here while certify never certifies it. Known defects are for third-party peers.
            match file {
                Some(f) if !f.known_defects.is_empty() => Err(TrialError::Suite(format!(
                    "{}: known_defects are for third-party peers certify judges, not for a backend the tests require",
                    b.name
                ))),
                other => Ok(other),
            }
        })
        .collect();
    let planned = plan(&suite, &backends, &expected, &root.display().to_string());
    let mut out = Vec::with_capacity(planned.len() + required.len());
    for name in required {
        let verdict = match backends.iter().position(|b| &b.name == name) {
            None => Err(TrialError::Required(format!(
                "CONFORMANCE_REQUIRE names {name:?}, which is not a backend of this run"
            ))),
            Some(index) => guard(&backends[index], index, &expected[index], &planned),
        };
        out.push(HarnessTrial::new(
            format!("suite::require::{name}"),
            false,
            move || verdict,
        ));
    }
    // A backend whose probe write landed is broken, not unusable: it fails whether required or
    // not.
    for b in backends.iter().filter(|b| b.confines_nothing()) {
        let why = format!(
            "backend {}: its functional probe wrote under the read-only profile: it confines nothing on this host ({})",
            b.name,
            b.unusable.clone().unwrap_or_default()
        );
        out.push(HarnessTrial::new(
            format!("suite::confines::{}", b.name),
            false,
            move || Err(TrialError::Required(why)),
        ));
    }
    let backends = observed(backends);
    let mut foreign: std::collections::BTreeMap<String, (usize, &'static str)> =
        std::collections::BTreeMap::new();
    for trial in planned {
        // A backend of another platform (Seatbelt off macOS) lists only what runs here (its
        // classifier cases): hundreds of skips would bury the skips that matter.
        if trial.skip.is_some()
            && let TrialKind::Case { backend, .. } = &trial.kind
            && let Some(why) = crate::backends::foreign_platform(&backends.0[*backend].name)
        {
            foreign
                .entry(backends.0[*backend].name.clone())
                .or_insert((0, why))
                .0 += 1;
            continue;
        }
        if let TrialKind::NotPlanned(why) = &trial.kind {
            // Not a test at all on this host (a test that checks nothing would pass): said here.
            if !std::env::args().any(|a| a == "--list") {
                eprintln!("conformance: {} not planned here: {why}", trial.name);
            }
            continue;
        }
        out.push(harness_trial(trial, &backends, required));
    }
    if !std::env::args().any(|a| a == "--list") {
        for (name, (count, why)) in foreign {
            eprintln!("conformance: {count} {name} trial(s) not listed here: {why}");
        }
    }
    out
}

/// The guard of a required backend, never skipped: it is usable here, its capabilities are the
/// committed ones, no `must` case of it is skipped, and its skips stay within the committed
/// baseline.
fn guard(
    backend: &Backend,
    index: usize,
    expected: &Result<Option<crate::expectations::ExpectationFile>, TrialError>,
    planned: &[Trial],
) -> Result<(), TrialError> {
    let fail = |message: String| Err(TrialError::Required(message));
    if let Some(reason) = &backend.unusable {
        return fail(format!(
            "required backend {} is not usable on this host: {reason}",
            backend.name
        ));
    }
    let mine = planned.iter().filter_map(|t| match &t.kind {
        TrialKind::Case { backend, level, .. } if *backend == index => Some((t, *level)),
        _ => None,
    });
    let (mut cases, mut skipped, mut must_skipped) = (0, 0, Vec::new());
    for (trial, level) in mine {
        cases += 1;
        if trial.skip.is_some() {
            skipped += 1;
            if level == crate::scenario::Level::Must {
                must_skipped.push(trial.name.clone());
            }
        }
    }
    if cases == 0 {
        return fail(format!("no scenario case is planned for {}", backend.name));
    }
    if let Some(first) = must_skipped.first() {
        return fail(format!(
            "{} must case(s) of {} would be skipped, for example {first}",
            must_skipped.len(),
            backend.name
        ));
    }
    let file = expected.as_ref().map_err(Clone::clone)?.as_ref();
    if let Some(committed) = file.and_then(|f| f.capabilities.clone()) {
        let mut committed = committed;
        committed.retain(|c| !c.is_derived());
        committed.sort();
        let actual: Vec<_> = backend.capabilities.iter().copied().collect();
        if committed != actual {
            return fail(format!(
                "{}: capabilities here {actual:?}, committed {committed:?}",
                backend.name
            ));
        }
    }
    if let Some(max) = file.and_then(|f| f.max_skipped)
        && skipped > max
    {
        return fail(format!(
            "{}: {skipped} cases skipped, committed baseline {max}",
            backend.name
        ));
    }
    Ok(())
}

/// The backends with every answer of their providers seen on its way to the steps ([`ClassesSeen`],
/// as certify does): a `gap:` entry then holds where a launch of this test reported the gap (a
/// gap of `workspace-write` launches only, such as a shared temp area), not only where the
/// backend's probe did.
fn observed(mut backends: Vec<Backend>) -> Observed {
    let seen = backends
        .iter_mut()
        .map(|b| {
            let seen = Arc::new(ClassesSeen::default());
            b.provider = b.provider.take().map(|p| {
                Arc::new(crate::observed::Observed::new(p, Arc::clone(&seen)))
                    as Arc<dyn sandbox::SandboxProvider>
            });
            seen
        })
        .collect();
    Arc::new((backends, seen))
}

/// The backends of a run and what each one's launches reported ([`observed`]).
type Observed = Arc<(Vec<Backend>, Vec<Arc<ClassesSeen>>)>;

fn harness_trial(trial: Trial, observed: &Observed, required: &[String]) -> HarnessTrial {
    let backends = &observed.0;
    let Trial {
        name, kind, skip, ..
    } = trial;
    let required_here = match &kind {
        TrialKind::Case { backend, .. } => required.contains(&backends[*backend].name),
        _ => false,
    };
    if let Some(reason) = skip {
        // Decided while listing. A required backend turns the skip into a failure; otherwise the
        // trial is listed as ignored and fails with its reason if someone runs it anyway.
        return if required_here {
            HarnessTrial::new(name, false, move || {
                Err(TrialError::Required(format!(
                    "required backend cannot run this trial: {reason}"
                )))
            })
        } else {
            let mut trial = HarnessTrial::new(name, true, {
                let reason = reason.clone();
                move || {
                    Err(TrialError::Skipped(format!(
                        "skipped when listed: {reason}"
                    )))
                }
            });
            trial.skip_reason = Some(reason);
            trial
        };
    }
    let observed = Arc::clone(observed);
    let name_for_seed = name.clone();
    HarnessTrial::new(name, false, move || match kind {
        TrialKind::LoadError(e) => Err(TrialError::Suite(e.to_string())),
        TrialKind::NoScenarios(root) => Err(TrialError::Suite(format!(
            "no scenario files found under {root}; an empty suite certifies nothing"
        ))),
        TrialKind::BadExpectations(problem) => Err(TrialError::Suite(problem)),
        TrialKind::NotPlanned(why) => Err(TrialError::Suite(format!(
            "not planned on this host: {why}"
        ))),
        TrialKind::Case {
            backend,
            scenario_id,
            level,
            case,
            expected_failure,
        } => {
            let seed = crate::world::run_seed().map_err(|e| TrialError::Suite(e.to_string()))?;
            // The failure, as the case's message shows it (with this case's odd names noted),
            // and whether it is the metamorphic check's.
            let result = crate::world::with_case(seed, &name_for_seed, || {
                run_case(&observed.0[backend], &case).map_err(|failure| {
                    let shown = crate::world::noted(failure.to_string());
                    (failure.blame(), shown)
                })
            })
            .map_err(|(blame, e)| (blame, format!("[{scenario_id}, {}] {e}", level.as_str())));
            match &result {
                // Never excused by an expectation file.
                Err((Blame::Inconsistent, message)) => {
                    return Err(TrialError::Inconsistent(message.clone()));
                }
                Err((Blame::Harness, message)) => {
                    return Err(TrialError::Case(format!(
                        "{}: {message}",
                        crate::steps::HARNESS_ERROR
                    )));
                }
                _ => {}
            }
            let result = result.map_err(|(_, message)| message);
            // A `gap:` entry holds only where the backend reported that gap.
            let expected_failure = expected_failure.filter(|e| {
                e.applies(
                    |class| observed.0[backend].reported(class, Some(&observed.1[backend])),
                    result.as_ref().err().map(String::as_str),
                )
            });
            match Judgement::of(result, expected_failure.as_ref()) {
                Judgement::Pass => Ok(()),
                // XFAIL: the known, reasoned failure happened, showing what it pins.
                Judgement::Xfail { .. } => Ok(()),
                Judgement::Fail(message) => Err(TrialError::Case(message)),
                Judgement::Xpass(message) => Err(TrialError::Case(format!(
                    "[{scenario_id}] XPASS: {message}"
                ))),
            }
        }
    })
}
