//! Running a certification: every planned trial on a pool of workers (the cases that mostly
//! wait on their own workers), each case timed out, stopped on request, its result judged.

use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::channel;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::backends::Backend;
use crate::expectations::{ExpectationFile, Judgement};
use crate::external::ProtocolFailure;
use crate::observed::{ClassesSeen, Observed};
use crate::plan::{Trial, TrialKind, plan};
use crate::scenario::load::LoadError;
use crate::scenario::load::{Suite, load_suite};
use crate::scenario::{Level, Step};
use crate::steps::{Blame, run_case};

use super::host::{commit, host_facts};
use super::verdict::verdict;
use super::{CaseResult, Report, Status, WorldPlaces};

/// How to run a certification.
pub struct Options {
    /// The scenario root.
    pub scenarios: PathBuf,
    /// The backends to certify, with their expectation files.
    pub backends: Vec<(Backend, Result<Option<ExpectationFile>, LoadError>)>,
    /// Only these families (empty: all).
    pub families: Vec<String>,
    /// Cases run at once.
    pub jobs: usize,
    /// The longest a case may take.
    pub case_timeout: Duration,
    /// Backends left out of this run because they cannot run here, with the reason.
    pub excluded: Vec<(String, String)>,
    /// The seed every case draws its places and names from (the same seed replays the run).
    pub seed: u64,
    /// Set (say, on Ctrl-C) to start no more cases: the cases under way end, every world of the
    /// run is removed, and [`run`] returns what ran.
    pub stop: Arc<AtomicBool>,
}

/// Runs the certification; `progress(done, total, result)` is called after every case.
pub fn run(options: Options, progress: &(dyn Fn(usize, usize, &CaseResult) + Sync)) -> Report {
    let started = Instant::now();
    let run_start = crate::survivors::CallStart::now();
    let started_at = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let suite: Suite = load_suite(&options.scenarios);
    let suite_hash = crate::suite::hash_dir(&options.scenarios).ok();
    let (mut backends, expectations): (Vec<Backend>, Vec<_>) = options.backends.into_iter().unzip();
    // Every answer of every backend is seen on its way to the steps, so the report states the
    // weakest enforcement each class had in this run.
    let seen: Vec<Arc<ClassesSeen>> = backends
        .iter_mut()
        .map(|b| {
            let seen = Arc::new(ClassesSeen::default());
            b.provider = b.provider.take().map(|p| {
                Arc::new(Observed::new(p, Arc::clone(&seen))) as Arc<dyn sandbox::SandboxProvider>
            });
            seen
        })
        .collect();
    let planned = plan(
        &suite,
        &backends,
        &expectations,
        &options.scenarios.display().to_string(),
    );
    let levels: BTreeMap<String, Level> = suite
        .scenarios
        .iter()
        .map(|s| (s.id.clone(), s.level))
        .collect();
    let titles: BTreeMap<String, String> = suite
        .scenarios
        .iter()
        .map(|s| (s.id.clone(), s.title.clone()))
        .collect();
    let (planned, not_planned, left_out_families) =
        select_families(&suite, planned, &options.families);
    let total = planned.len();
    let backends = Arc::new(backends);
    let (waiting, busy): (VecDeque<Trial>, VecDeque<Trial>) =
        planned.into_iter().partition(mostly_waits);
    let waiting = Mutex::new(waiting);
    let busy = Mutex::new(busy);
    let results = Mutex::new(Vec::with_capacity(total));
    let pop = |q: &Mutex<VecDeque<Trial>>| q.lock().ok().and_then(|mut q| q.pop_front());
    let run_all = |next: &dyn Fn() -> Option<Trial>| {
        while !options.stop.load(Ordering::Relaxed)
            && let Some(trial) = next()
        {
            let mut result = run_trial(
                trial,
                &backends,
                &seen,
                &levels,
                options.case_timeout,
                options.seed,
            );
            result.title = titles.get(&result.scenario).cloned();
            let done = {
                let Ok(mut all) = results.lock() else { break };
                all.push(result.clone());
                all.len()
            };
            progress(done, total, &result);
        }
    };
    crate::world::defer_removal();
    crate::late::record();
    std::thread::scope(|scope| {
        // `jobs` workers run the cases that keep the CPU busy, then help with the waiting ones;
        // as many again run only cases that mostly wait (listeners' grace, survivors), which
        // cost little CPU, so the waits overlap the busy cases instead of holding a worker.
        for _ in 0..options.jobs.max(1) {
            scope.spawn(|| {
                run_all(&|| pop(&busy).or_else(|| pop(&waiting)));
                // Nothing left to start: remove the worlds done so far while the last cases end.
                crate::world::sweep_so_far();
            });
        }
        for _ in 0..options.jobs.max(1) * WAITING_WORKERS_PER_JOB {
            scope.spawn(|| run_all(&|| pop(&waiting)));
        }
    });
    crate::world::sweep(options.jobs);
    let mut cases = results.into_inner().unwrap_or_default();
    cases.sort_by(|a, b| a.trial.cmp(&b.trial));
    let suite_problems: Vec<String> = cases
        .iter()
        .filter(|c| c.backend == "-")
        .map(|c| c.message.clone().unwrap_or_default())
        .collect();
    let backend_reports = backends
        .iter()
        .zip(&expectations)
        .zip(&seen)
        .map(|((b, e), seen)| {
            let expected = e.as_ref().ok().and_then(Option::as_ref);
            let mut report = verdict(b, expected, &cases, &levels, !left_out_families.is_empty());
            if let Some(overall) = seen.overall() {
                report.enforcement = Some(overall);
                report.classes = Some(seen.weakest());
            }
            report
        })
        .collect();
    // The backends' runners and adapters end with them; whatever of the run is still alive
    // after that, no case claimed.
    drop(backends);
    let left_behind = crate::survivors::left_by_run(run_start, crate::survivors::CASE_END_GRACE);
    // What they were still writing in, the sweep could not remove.
    crate::world::sweep_again();
    // Every process of the run is gone and every world removed: what a case found absent on the
    // host must still be.
    let appeared_after_their_case = crate::late::appeared();
    let family_seconds = family_seconds(&cases);
    let mut report = Report {
        suite_version: env!("CARGO_PKG_VERSION").to_owned(),
        suite_hash,
        commit: commit(),
        host: host_facts(),
        started_at,
        wall_seconds: started.elapsed().as_secs_f64(),
        family_seconds,
        backends: backend_reports,
        cases,
        suite_problems,
        left_behind,
        left_in_shared_places: Vec::new(),
        changed_host_settings: Vec::new(),
        appeared_after_their_case,
        excluded_backends: options.excluded,
        seed: options.seed,
        left_out_families,
        not_planned,
        verdict: super::Verdict::NotCertified,
        world_places: {
            let places = crate::world::places();
            WorldPlaces {
                bases: places.bases.iter().map(|(p, _)| p.clone()).collect(),
                left_out: places.left_out.clone(),
            }
        },
    };
    report.verdict = report.verdict();
    report
}

/// The planned trials of `families` (every family when empty; suite-level trials always), the
/// trials not planned on this host with the reason, and the suite's families left out.
fn select_families(
    suite: &Suite,
    planned: Vec<Trial>,
    families: &[String],
) -> (Vec<Trial>, Vec<(String, String)>, Vec<String>) {
    let mut left_out_families: Vec<String> = suite
        .scenarios
        .iter()
        .map(|s| s.family.clone())
        .filter(|f| !families.is_empty() && !families.contains(f))
        .collect();
    left_out_families.sort();
    left_out_families.dedup();
    let planned: Vec<Trial> = planned
        .into_iter()
        .filter(|t| {
            families.is_empty()
                || families
                    .iter()
                    .any(|f| t.name.starts_with(&format!("{f}::")))
                || !matches!(t.kind, TrialKind::Case { .. })
        })
        .collect();
    let (not_planned, planned): (Vec<Trial>, Vec<Trial>) = planned
        .into_iter()
        .partition(|t| matches!(t.kind, TrialKind::NotPlanned(_)));
    let not_planned: Vec<(String, String)> = not_planned
        .into_iter()
        .filter_map(|t| match t.kind {
            TrialKind::NotPlanned(why) => Some((t.name, why)),
            _ => None,
        })
        .collect();
    (planned, not_planned, left_out_families)
}

/// Summed case time per family, in seconds, the slowest first.
fn family_seconds(cases: &[CaseResult]) -> Vec<(String, f64)> {
    let mut family_seconds: BTreeMap<String, f64> = BTreeMap::new();
    for c in cases {
        *family_seconds.entry(c.family.clone()).or_default() += c.duration_ms / 1e3;
    }
    let mut family_seconds: Vec<(String, f64)> = family_seconds.into_iter().collect();
    family_seconds.sort_by(|a, b| b.1.total_cmp(&a.1));
    family_seconds
}

/// Workers per job that run only cases that mostly wait (see [`mostly_waits`]).
const WAITING_WORKERS_PER_JOB: usize = 2;

/// True for a case that spends most of its time waiting rather than on the CPU: a `net` step
/// (its listeners outlive the call) or an attack checked a while after it returned (survivors).
fn mostly_waits(trial: &Trial) -> bool {
    let TrialKind::Case { case, .. } = &trial.kind else {
        return false;
    };
    case.case.steps.iter().any(|step| match step {
        Step::Net(_) | Step::HostIpc(_) => true,
        Step::Attack(a) => a.after_ms.is_some_and(|ms| ms > 0),
        _ => false,
    })
}

fn run_trial(
    trial: Trial,
    backends: &Arc<Vec<Backend>>,
    seen: &[Arc<ClassesSeen>],
    levels: &BTreeMap<String, Level>,
    timeout: Duration,
    seed: u64,
) -> CaseResult {
    let family = trial.family.clone();
    let base = |backend: &str, scenario: &str, status, message: Option<String>| CaseResult {
        trial: trial.name.clone(),
        backend: backend.to_owned(),
        family: family.clone(),
        scenario: scenario.to_owned(),
        level: levels.get(scenario).copied(),
        title: None,
        status,
        message,
        expected: None,
        duration_ms: 0.0,
    };
    let (backend, scenario_id, case, expected_failure) = match trial.kind {
        TrialKind::LoadError(e) => return base("-", "", Status::Error, Some(e.to_string())),
        TrialKind::NoScenarios(root) => {
            return base(
                "-",
                "",
                Status::Error,
                Some(format!("no scenario files found under {root}")),
            );
        }
        TrialKind::BadExpectations(problem) => {
            return base(&trial.backend, "", Status::Error, Some(problem));
        }
        // Partitioned out before the run; never a result.
        TrialKind::NotPlanned(why) => return base("-", "", Status::Error, Some(why)),
        TrialKind::Case {
            backend,
            scenario_id,
            case,
            expected_failure,
            ..
        } => (backend, scenario_id, case, expected_failure),
    };
    let b = &backends[backend];
    if let Some(reason) = trial.skip {
        return base(&b.name, &scenario_id, Status::Skip, Some(reason));
    }
    let start = Instant::now();
    let (tx, rx) = channel();
    let worker_backends = Arc::clone(backends);
    let name = trial.name.clone();
    std::thread::spawn(move || {
        let result = crate::world::with_case(seed, &name, || {
            run_case(&worker_backends[backend], &case)
                .map_err(|e| (e.blame(), crate::world::noted(e.to_string())))
        });
        let _ = tx.send(result);
    });
    let outcome = rx.recv_timeout(timeout);
    // A `gap:` entry holds only where the backend reported that gap; the case is then judged at
    // `should` (the level of the class's own family), otherwise at its own level.
    let failure = match &outcome {
        Ok(Err((_, message))) => Some(message.as_str()),
        _ => None,
    };
    let expected_failure = expected_failure.filter(|e| {
        e.applies(
            |class| b.reported(class, seen.get(backend).map(|s| &**s)),
            failure,
        )
    });
    let gap = expected_failure.as_ref().and_then(|e| e.gap);
    let expected_reason = expected_failure.as_ref().map(|e| e.reason.clone());
    let protocol = b.external().and_then(|e| e.failure());
    let (status, message) = match (outcome, protocol) {
        (_, Some(ProtocolFailure::Timeout(m))) => (Status::Timeout, Some(m)),
        (_, Some(ProtocolFailure::Error(m))) => (Status::Error, Some(m)),
        (Err(_), None) => (
            Status::Timeout,
            Some(format!("the case did not finish within {timeout:?}")),
        ),
        (Ok(Err((Blame::Inconsistent, message))), None) => (Status::Inconsistent, Some(message)),
        (Ok(Err((Blame::Harness, message))), None) => (
            Status::Error,
            Some(format!("{}: {message}", crate::steps::HARNESS_ERROR)),
        ),
        (Ok(result), None) => match Judgement::of(
            result.map_err(|(_, message)| message),
            expected_failure.as_ref(),
        ) {
            Judgement::Pass => (Status::Pass, None),
            Judgement::Fail(message) => (Status::Fail, Some(message)),
            // The reason, and the case's own words: what a reader checks the reason against.
            Judgement::Xfail { reason, message } => (
                Status::Xfail,
                Some(format!("{reason} -- observed: {message}")),
            ),
            Judgement::Xpass(message) => (Status::Xpass, Some(message)),
        },
    };
    let mut result = base(&b.name, &scenario_id, status, message);
    if gap.is_some() && status == Status::Xfail {
        result.level = Some(Level::Should);
    }
    if matches!(status, Status::Xfail | Status::Xpass) {
        result.expected = expected_reason;
    }
    result.duration_ms = start.elapsed().as_secs_f64() * 1e3;
    result
}
