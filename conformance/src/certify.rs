//! Certification: every scenario against every backend in the run, a status per case, a verdict
//! per backend, and the reports (JSON, JUnit XML, a Markdown matrix a person reads in a pull
//! request). The cases run exactly as the test harness runs them; only the bookkeeping differs.

use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::channel;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::backends::Backend;
use crate::expectations::{ExpectationFile, Judgement};
use crate::external::ProtocolFailure;
use crate::load::{Suite, load_suite};
use crate::model::{Level, Step};
use crate::observed::{ClassesSeen, Observed};
use crate::plan::{Trial, TrialKind, plan};
use crate::steps::run_case;

mod report;
pub(crate) use report::cell;
pub use report::{families, junit, markdown, wrap, write};

/// What a case came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Status {
    /// Passed.
    Pass,
    /// An expectation was not met.
    Fail,
    /// Could not run on this host (with the reason).
    Skip,
    /// Failed as the backend's expectation file says it does.
    Xfail,
    /// Expected to fail but passed: the expectation is stale.
    Xpass,
    /// The suite or the backend broke (a load error, a protocol failure).
    Error,
    /// The case or the backend did not finish in time.
    Timeout,
    /// The backend answered the same request about two places differently (never excused by an
    /// expectation file).
    Inconsistent,
}

impl Status {
    /// Every status, in report order.
    pub const ALL: [Status; 8] = [
        Status::Pass,
        Status::Fail,
        Status::Skip,
        Status::Xfail,
        Status::Xpass,
        Status::Error,
        Status::Timeout,
        Status::Inconsistent,
    ];

    /// True for the statuses that deny certification by themselves.
    pub fn is_bad(self) -> bool {
        matches!(
            self,
            Status::Fail | Status::Xpass | Status::Error | Status::Timeout | Status::Inconsistent
        )
    }

    /// Its name in reports, as `report.json` spells it (`PASS`, `FAIL`, ..., `INCONSISTENT`).
    pub fn code(self) -> &'static str {
        match self {
            Status::Pass => "PASS",
            Status::Fail => "FAIL",
            Status::Skip => "SKIP",
            Status::Xfail => "XFAIL",
            Status::Xpass => "XPASS",
            Status::Error => "ERROR",
            Status::Timeout => "TIMEOUT",
            Status::Inconsistent => "INCONSISTENT",
        }
    }

    fn word(self) -> &'static str {
        match self {
            Status::Pass => "passed",
            Status::Fail => "failed",
            Status::Skip => "skipped",
            Status::Xfail => "xfail",
            Status::Xpass => "XPASS",
            Status::Error => "error",
            Status::Timeout => "timeout",
            Status::Inconsistent => "INCONSISTENT",
        }
    }
}

/// One case's result.
#[derive(Clone, Debug, Serialize)]
pub struct CaseResult {
    /// The trial name (`family::backend::file::case`).
    pub trial: String,
    /// The backend (`-` for a suite-level error).
    pub backend: String,
    /// The family.
    pub family: String,
    /// The scenario id.
    pub scenario: String,
    /// The scenario level.
    pub level: Option<&'static str>,
    /// What it came to.
    pub status: Status,
    /// Why, when it did not simply pass.
    pub message: Option<String>,
    /// How long it took, in milliseconds.
    pub duration_ms: f64,
}

/// A backend's verdict.
#[derive(Clone, Debug, Serialize)]
pub struct BackendReport {
    /// Its name.
    pub name: String,
    /// Its version, when known.
    pub version: Option<String>,
    /// The weakest enforcement its answers reported in this run for any class they were asked
    /// to restrict (what it claimed up front when it was asked nothing).
    pub enforcement: Option<sandbox::SandboxEnforcement>,
    /// Per class (`files`, `network`, `protected`, ...), the weakest report its answers gave in
    /// this run over the requests that restricted that class, with what was left ungoverned;
    /// when it was asked nothing, what its probe found (reference backends) or `None`.
    pub classes: Option<sandbox::ClassEnforcements>,
    /// Whether it can confine on this host.
    pub usable: bool,
    /// Why not, when it cannot.
    pub unusable_reason: Option<String>,
    /// Certified: no bad case, no `must` case skipped, its guard holds.
    pub certified: bool,
    /// Cases per status.
    pub counts: BTreeMap<Status, usize>,
    /// What denies certification, besides bad cases (the guard's findings).
    pub problems: Vec<String>,
    /// The protocol version its handshake settled on (external backends).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub protocol: Option<u32>,
    /// Where it declared its writable set differs from the reference one: each protected path
    /// is verified by the `declared` scenarios, each extra writable path is a widening.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub declared: Option<crate::protocol::Differences>,
    /// Whether a payload printing the backend's own runner-failure signature passes for a broken
    /// sandbox (scenario [`FORGED_SIGNATURE_SCENARIO`] failed, expected or not); absent when the
    /// scenario did not run for it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fooled_by_forged_runner_failure: Option<bool>,
}

/// Facts about the host the run happened on.
#[derive(Clone, Debug, Serialize)]
pub struct HostFacts {
    /// `linux`, `macos`, ...
    pub os: &'static str,
    /// The kernel release.
    pub kernel: Option<String>,
    /// The kernel's Landlock ABI, when the launcher probed it.
    pub landlock_abi: Option<u32>,
    /// bwrap's version, when it was probed.
    pub bwrap_version: Option<String>,
}

/// The whole run.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// The suite's version.
    pub suite_version: &'static str,
    /// The hash of the scenario set this run loaded ([`crate::suite::hash_dir`]): the embedded
    /// suite's, or that of the `--scenarios` directory. `None` when it could not be read.
    pub suite_hash: Option<String>,
    /// The suite's commit, when known.
    pub commit: Option<String>,
    /// Where it ran.
    pub host: HostFacts,
    /// Unix time the run started.
    pub started_at: u64,
    /// Wall time of the run, in seconds.
    pub wall_seconds: f64,
    /// Summed case time per family, in seconds (the slowest families first).
    pub family_seconds: Vec<(String, f64)>,
    /// Every backend's verdict.
    pub backends: Vec<BackendReport>,
    /// Every case.
    pub cases: Vec<CaseResult>,
    /// Suite-level problems (load errors, no scenarios).
    pub suite_problems: Vec<String>,
    /// Backends this host has no use of, with the reason (not certified here, not failing).
    pub excluded_backends: Vec<(String, String)>,
    /// The seed of the run's draws (`certify --seed N` replays it).
    pub seed: u64,
    /// Host-dependent cases not planned on this host, with the reason (what the host has).
    pub not_planned: Vec<(String, String)>,
    /// The suite's families this run did not run (`--family`): such a run is `PARTIAL`.
    pub left_out_families: Vec<String>,
    /// `CERTIFIED`, `PARTIAL` or `NOT CERTIFIED` (see [`Report::verdict`]).
    pub verdict: &'static str,
    /// Where this host's worlds were drawn from, and the places left out with the reason.
    pub world_places: WorldPlaces,
}

/// Where a run's worlds lie.
#[derive(Clone, Debug, Serialize)]
pub struct WorldPlaces {
    /// The bases worlds were drawn from.
    pub bases: Vec<PathBuf>,
    /// Candidate bases left out on this host, with the reason.
    pub left_out: Vec<(PathBuf, String)>,
}

impl Report {
    /// Certified: every backend in the run is certified, the suite itself loaded cleanly and no
    /// family was left out.
    pub fn certified(&self) -> bool {
        self.passed() && self.left_out_families.is_empty()
    }

    /// Every backend passed what the run ran and the suite loaded cleanly (a run that left
    /// families out may pass, but it is no certificate).
    pub fn passed(&self) -> bool {
        self.suite_problems.is_empty()
            && !self.backends.is_empty()
            && self.backends.iter().all(|b| b.certified)
    }

    /// `CERTIFIED`, `PARTIAL` (everything it ran passed, but it left families out) or
    /// `NOT CERTIFIED`.
    pub fn verdict(&self) -> &'static str {
        if self.certified() {
            "CERTIFIED"
        } else if self.passed() {
            "PARTIAL"
        } else {
            "NOT CERTIFIED"
        }
    }
}

/// How to run a certification.
pub struct Options {
    /// The scenario root.
    pub scenarios: PathBuf,
    /// The backends to certify, with their expectation files.
    pub backends: Vec<(Backend, Result<Option<ExpectationFile>, String>)>,
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
    let families = &options.families;
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
            let result = run_trial(
                trial,
                &backends,
                &seen,
                &levels,
                options.case_timeout,
                options.seed,
            );
            let done = {
                let Ok(mut all) = results.lock() else { break };
                all.push(result.clone());
                all.len()
            };
            progress(done, total, &result);
        }
    };
    crate::world::defer_removal();
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
    let mut family_seconds: BTreeMap<String, f64> = BTreeMap::new();
    for c in &cases {
        *family_seconds.entry(c.family.clone()).or_default() += c.duration_ms / 1e3;
    }
    let mut family_seconds: Vec<(String, f64)> = family_seconds.into_iter().collect();
    family_seconds.sort_by(|a, b| b.1.total_cmp(&a.1));
    let mut report = Report {
        suite_version: env!("CARGO_PKG_VERSION"),
        suite_hash,
        commit: commit(),
        host: host_facts(),
        started_at,
        wall_seconds: started.elapsed().as_secs_f64(),
        family_seconds,
        backends: backend_reports,
        cases,
        suite_problems,
        excluded_backends: options.excluded,
        seed: options.seed,
        left_out_families,
        not_planned,
        verdict: "",
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
        level: levels.get(scenario).map(|l| l.as_str()),
        status,
        message,
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
                .map_err(|e| crate::world::noted(e.to_string()))
        });
        let _ = tx.send(result);
    });
    let outcome = rx.recv_timeout(timeout);
    // A `gap:` entry holds only where the backend reported that gap; the case is then judged at
    // `should` (the level of the class's own family), otherwise at its own level.
    let expected_failure = expected_failure
        .filter(|e| e.applies(|class| b.reported(class, seen.get(backend).map(|s| &**s))));
    let gap = expected_failure.as_ref().and_then(|e| e.gap);
    let protocol = b.external().and_then(|e| e.failure());
    let (status, message) = match (outcome, protocol) {
        (_, Some(ProtocolFailure::Timeout(m))) => (Status::Timeout, Some(m)),
        (_, Some(ProtocolFailure::Error(m))) => (Status::Error, Some(m)),
        (Err(_), None) => (
            Status::Timeout,
            Some(format!("the case did not finish within {timeout:?}")),
        ),
        (Ok(Err(message)), None) if crate::metamorphic::is_inconsistent(&message) => {
            (Status::Inconsistent, Some(message))
        }
        (Ok(result), None) => match Judgement::of(result, expected_failure.as_ref()) {
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
        result.level = Some(Level::Should.as_str());
    }
    result.duration_ms = start.elapsed().as_secs_f64() * 1e3;
    result
}

/// A backend's verdict, with its guard: a usable backend, no bad case, no `must` case skipped,
/// the committed capabilities and skip baseline held.
fn verdict(
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
        .filter(|c| c.status == Status::Xfail && c.level == Some(Level::Must.as_str()))
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

fn commit() -> Option<String> {
    let out = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// The host's facts, measured here whatever backends run (an external backend alone still gets
/// the kernel's Landlock ABI and the installed bwrap's version).
fn host_facts() -> HostFacts {
    HostFacts {
        os: std::env::consts::OS,
        kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .ok()
            .map(|k| k.trim().to_owned()),
        landlock_abi: landlock_abi(),
        bwrap_version: which::which("bwrap").ok().and_then(|bwrap| {
            let out = std::process::Command::new(bwrap)
                .arg("--version")
                .stdin(std::process::Stdio::null())
                .output()
                .ok()?;
            let text = String::from_utf8_lossy(&out.stdout).trim().to_owned();
            (out.status.success() && !text.is_empty()).then_some(text)
        }),
    }
}

/// The kernel's Landlock ABI version, or `None` when it has no Landlock (or is not Linux).
fn landlock_abi() -> Option<u32> {
    #[cfg(target_os = "linux")]
    {
        const LANDLOCK_CREATE_RULESET_VERSION: nix::libc::c_uint = 1;
        // SAFETY: landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION) reads no
        // memory and returns the ABI version (or -1); nix has no wrapper for it.
        #[allow(unsafe_code)]
        let abi = unsafe {
            nix::libc::syscall(
                nix::libc::SYS_landlock_create_ruleset,
                std::ptr::null::<nix::libc::c_void>(),
                0usize,
                LANDLOCK_CREATE_RULESET_VERSION,
            )
        };
        u32::try_from(abi).ok().filter(|abi| *abi > 0)
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

/// The scenario whose failure means a payload can pass for a broken sandbox
/// (`scenarios/runner-failure/forged_signatures_stderr_only.yaml`).
pub const FORGED_SIGNATURE_SCENARIO: &str = "RF-013";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrapping_keeps_every_character_and_bounds_each_line() {
        let text = format!("short words here\n{} tail", "x".repeat(250));
        let lines = wrap(&text, 100);
        assert!(lines.iter().all(|l| l.chars().count() <= 100), "{lines:?}");
        let joined: String = lines.concat();
        let kept: String = text.chars().filter(|c| !c.is_whitespace()).collect();
        assert_eq!(joined.replace(' ', ""), kept);
    }
}
