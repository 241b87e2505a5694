//! Certification: every scenario against every backend in the run, a status per case, a verdict
//! per backend, and the reports (JSON, JUnit XML, a Markdown matrix a person reads in a pull
//! request). The cases run exactly as the test harness runs them; only the bookkeeping differs.

use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
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
    levels: &BTreeMap<String, Level>,
    timeout: Duration,
    seed: u64,
) -> CaseResult {
    let family = trial.name.split("::").next().unwrap_or("").to_owned();
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
            let name = trial.name.split("::").nth(1).unwrap_or("-").to_owned();
            return base(&name, "", Status::Error, Some(problem));
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
        .filter(|c| c.status == Status::Xfail && levels.get(&c.scenario) == Some(&Level::Must))
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
        "Suite {} (commit {}) on {} {} (Landlock ABI {}, {}), {:.1} s wall.\n\n",
        report.suite_version,
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
