//! What a run reports: a status per case, a verdict per backend, the host's facts, the whole
//! run (serialised as `report.json`). One type, written by a run and read back by `certify
//! merge`, `certify diff` and the tests; a report written before a field existed still reads
//! (every later field has a default).

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::scenario::Level;

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

    pub(super) fn word(self) -> &'static str {
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
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CaseResult {
    /// The trial name (`family::backend::file::case`).
    pub trial: String,
    /// The backend (`-` for a suite-level error).
    pub backend: String,
    /// The family.
    pub family: String,
    /// The scenario id.
    pub scenario: String,
    /// The level it was judged at (`should` for a case excused by a `gap:` entry).
    #[serde(serialize_with = "level_out", deserialize_with = "level_in", default)]
    pub level: Option<Level>,
    /// The scenario's title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What it came to.
    pub status: Status,
    /// Why, when it did not simply pass.
    pub message: Option<String>,
    /// The expectation file's reason, when it expected this case to fail (XFAIL, XPASS).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected: Option<String>,
    /// How long it took, in milliseconds.
    pub duration_ms: f64,
}

fn level_out<S: Serializer>(level: &Option<Level>, s: S) -> Result<S::Ok, S::Error> {
    level.map(Level::as_str).serialize(s)
}

fn level_in<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Level>, D::Error> {
    Option::<Level>::deserialize(d)
}

/// A backend's verdict.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct BackendReport {
    /// Its name.
    pub name: String,
    /// Its version, when known.
    #[serde(default)]
    pub version: Option<String>,
    /// The weakest enforcement its answers reported in this run for any class they were asked
    /// to restrict (what it claimed up front when it was asked nothing).
    pub enforcement: Option<sandbox::SandboxEnforcement>,
    /// Per class (`files`, `network`, `protected`, ...), the weakest report its answers gave in
    /// this run over the requests that restricted that class, with what was left ungoverned;
    /// when it was asked nothing, what its probe found (reference backends) or `None`.
    #[serde(default)]
    pub classes: Option<sandbox::ClassEnforcements>,
    /// Whether it can confine on this host.
    #[serde(default)]
    pub usable: bool,
    /// Why not, when it cannot.
    #[serde(default)]
    pub unusable_reason: Option<String>,
    /// Certified: no bad case, no `must` case skipped, its guard holds.
    pub certified: bool,
    /// Cases per status.
    #[serde(default)]
    pub counts: BTreeMap<Status, usize>,
    /// What denies certification, besides bad cases (the guard's findings).
    #[serde(default)]
    pub problems: Vec<String>,
    /// The protocol version its handshake settled on (external backends).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<u32>,
    /// Where it declared its writable set differs from the reference one: each protected path
    /// is verified by the `declared` scenarios, each extra writable path is a widening.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub declared: Option<crate::protocol::Differences>,
    /// Whether a payload printing the backend's own runner-failure signature passes for a broken
    /// sandbox (scenario [`FORGED_SIGNATURE_SCENARIO`](super::FORGED_SIGNATURE_SCENARIO) failed, expected or not); absent when the
    /// scenario did not run for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fooled_by_forged_runner_failure: Option<bool>,
}

/// Facts about the host the run happened on.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct HostFacts {
    /// `linux`, `macos`, ...
    pub os: String,
    /// The kernel release.
    #[serde(default)]
    pub kernel: Option<String>,
    /// The kernel's Landlock ABI, when the launcher probed it.
    #[serde(default)]
    pub landlock_abi: Option<u32>,
    /// bwrap's version, when it was probed.
    #[serde(default)]
    pub bwrap_version: Option<String>,
    /// Whether bwrap could make the namespaces the reference profile asks for, here, as this
    /// user (`None`: no bwrap).
    #[serde(default)]
    pub bwrap_usable: Option<bool>,
    /// The user the run ran as.
    #[serde(default)]
    pub uid: Option<u32>,
    /// The host's name.
    #[serde(default)]
    pub hostname: Option<String>,
    /// The CI leg the run was (`CONFORMANCE_LEG`, set by `ci/leg.sh`): `certify merge` labels
    /// the host by it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leg: Option<String>,
}

/// A run's verdict.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Verdict {
    /// Every backend certified on the whole suite.
    #[serde(rename = "CERTIFIED")]
    Certified,
    /// Everything the run ran passed, but it left families out: no certificate.
    #[serde(rename = "PARTIAL")]
    Partial,
    /// A backend is not certified, or the suite did not load.
    #[default]
    #[serde(rename = "NOT CERTIFIED")]
    NotCertified,
}

impl Verdict {
    /// Its word in reports (`CERTIFIED`, `PARTIAL`, `NOT CERTIFIED`).
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Certified => "CERTIFIED",
            Verdict::Partial => "PARTIAL",
            Verdict::NotCertified => "NOT CERTIFIED",
        }
    }
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The whole run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Report {
    /// The suite's version.
    pub suite_version: String,
    /// The hash of the scenario set this run loaded ([`crate::suite::hash_dir`]): the embedded
    /// suite's, or that of the `--scenarios` directory. `None` when it could not be read.
    #[serde(default)]
    pub suite_hash: Option<String>,
    /// The commit the suite was built from (embedded at build time), when known.
    #[serde(default)]
    pub commit: Option<String>,
    /// Where it ran.
    pub host: HostFacts,
    /// Unix time the run started.
    #[serde(default)]
    pub started_at: u64,
    /// Wall time of the run, in seconds.
    #[serde(default)]
    pub wall_seconds: f64,
    /// Summed case time per family, in seconds (the slowest families first).
    #[serde(default)]
    pub family_seconds: Vec<(String, f64)>,
    /// Every backend's verdict.
    pub backends: Vec<BackendReport>,
    /// Every case.
    pub cases: Vec<CaseResult>,
    /// Suite-level problems (load errors, no scenarios).
    #[serde(default)]
    pub suite_problems: Vec<String>,
    /// Processes of the run still alive once its last case had ended and its backends were
    /// gone (each `pid N: command line`), killed then: no case claimed them (a payload that
    /// dropped the case's tag from its environment, a helper a runner detached outside any
    /// call). Any one fails the run.
    #[serde(default)]
    pub left_behind: Vec<String>,
    /// What the run left in the host's `/tmp`, `/var/tmp` and `/dev/shm` once every case was
    /// over, and what appeared or changed in `/run` that others could use (each entry named as
    /// the host would name it, with kind, owner and mode): as root on Linux the whole run sees
    /// the first three through overlays of its own ([`crate::leftovers`]), so whatever is in
    /// them then is the run's, whatever else ran on the host. Any one fails the run. Unchecked
    /// otherwise (listed under `not_planned`).
    #[serde(default)]
    pub left_in_shared_places: Vec<String>,
    /// Host paths a case checked and found absent that existed once the run was over (its last
    /// case ended, its backends gone, its worlds removed): a backend's helper wrote them after
    /// the case had looked ([`crate::late`]). Any one fails the run.
    #[serde(default)]
    pub appeared_after_their_case: Vec<String>,
    /// Kernel settings naming a program the kernel runs as root (`core_pattern`, `modprobe`,
    /// `binfmt_misc`, ...) that were not the same when the run was over
    /// ([`crate::leftovers::settings`]), each with what it held and holds. Any one fails the run.
    /// Read as root on Linux only (otherwise listed under `not_planned`).
    #[serde(default)]
    pub changed_host_settings: Vec<String>,
    /// Backends this host has no use of, with the reason (not certified here, not failing).
    #[serde(default)]
    pub excluded_backends: Vec<(String, String)>,
    /// The seed of the run's draws (`certify --seed N` replays it).
    #[serde(default)]
    pub seed: u64,
    /// Host-dependent cases not planned on this host, with the reason (what the host has).
    #[serde(default)]
    pub not_planned: Vec<(String, String)>,
    /// The suite's families this run did not run (`--family`): such a run is `PARTIAL`.
    #[serde(default)]
    pub left_out_families: Vec<String>,
    /// `CERTIFIED`, `PARTIAL` or `NOT CERTIFIED` (see [`Report::verdict`]).
    pub verdict: Verdict,
    /// Where this host's worlds were drawn from, and the places left out with the reason.
    #[serde(default)]
    pub world_places: WorldPlaces,
}

/// Where a run's worlds lie.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
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

    /// Every backend passed what the run ran, the suite loaded cleanly and the run left no
    /// process and nothing in the host's shared places behind (a run that left families out may pass, but it is no certificate).
    pub fn passed(&self) -> bool {
        self.suite_problems.is_empty()
            && self.left_behind.is_empty()
            && self.left_in_shared_places.is_empty()
            && self.changed_host_settings.is_empty()
            && self.appeared_after_their_case.is_empty()
            && !self.backends.is_empty()
            && self.backends.iter().all(|b| b.certified)
    }

    /// Why the run is not certified apart from its cases, one line each, as every view of the
    /// report words it: the suite's problems, processes left behind, entries left in the
    /// shared places, kernel settings changed, and each backend's own problems.
    pub fn run_problems(&self) -> Vec<String> {
        let each = |lines: &[String], lead: &str| -> Vec<String> {
            lines.iter().map(|p| format!("{lead}{p}")).collect()
        };
        let mut out = each(&self.suite_problems, "suite: ");
        out.extend(each(
            &self.left_behind,
            "run: a process still alive after the last case (killed): ",
        ));
        out.extend(each(
            &self.left_in_shared_places,
            "run: left in the host's shared places: ",
        ));
        out.extend(each(
            &self.changed_host_settings,
            "run: a host setting it changed: ",
        ));
        out.extend(each(
            &self.appeared_after_their_case,
            "run: on the host after its case had looked: ",
        ));
        for b in &self.backends {
            out.extend(each(&b.problems, &format!("{}: ", b.name)));
        }
        out
    }

    /// `CERTIFIED`, `PARTIAL` (everything it ran passed, but it left families out) or
    /// `NOT CERTIFIED`.
    pub fn verdict(&self) -> Verdict {
        if self.certified() {
            Verdict::Certified
        } else if self.passed() {
            Verdict::Partial
        } else {
            Verdict::NotCertified
        }
    }
}
