//! What a provider returns: the argv to spawn instead of the caller's, and how to read its result.

use std::ffi::OsString;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::classify::PayloadStatus;
use crate::enforcement::{ClassEnforcements, ClassReport, EnforcementClass};
use crate::error::SandboxUnavailable;
use crate::mode::SandboxEnforcement;
use crate::policy::ProviderPolicy;
use crate::status::Record;

/// A sandbox backend: wraps an argv so the process and everything it spawns run confined.
///
/// `confine` never returns an unconfined passthrough: with no usable backend it returns
/// [`SandboxUnavailable`].
pub trait SandboxProvider: Send + Sync {
    /// The argv to spawn instead of `argv`, confined under `policy`.
    fn confine(
        &self,
        argv: &[OsString],
        policy: &ProviderPolicy,
    ) -> Result<ConfinedArgv, SandboxUnavailable>;

    /// A check the provider makes around one call under `policy`, taken just before the call
    /// starts and settled after it ends (before its result is returned): what its profile cannot
    /// prevent, it finds and reverts. `None` (the default) when the provider has none.
    fn call_guard(&self, policy: &ProviderPolicy) -> Option<Box<dyn CallGuard>> {
        let _ = policy;
        None
    }

    /// True when a call under `policy` sees its private temp area at `/tmp` (a mount of the
    /// backend's shows it there: see [`crate::TempArea`]); `false` (the default) when the call
    /// sees the area only as `$TMPDIR`, or the temp area is shared. The write and read tools
    /// map `/tmp` as the shell sees it.
    fn temp_area_at_tmp(&self, policy: &ProviderPolicy) -> bool {
        let _ = policy;
        false
    }
}

/// A shared provider confines as the provider it shares (a wrapper can hold one that its caller
/// keeps using too).
impl<P: SandboxProvider + ?Sized> SandboxProvider for Arc<P> {
    fn confine(
        &self,
        argv: &[OsString],
        policy: &ProviderPolicy,
    ) -> Result<ConfinedArgv, SandboxUnavailable> {
        (**self).confine(argv, policy)
    }

    fn call_guard(&self, policy: &ProviderPolicy) -> Option<Box<dyn CallGuard>> {
        (**self).call_guard(policy)
    }

    fn temp_area_at_tmp(&self, policy: &ProviderPolicy) -> bool {
        (**self).temp_area_at_tmp(policy)
    }
}

/// A provider's check around one call ([`SandboxProvider::call_guard`]).
pub trait CallGuard: Send {
    /// Finds every change the call made to what the guard watches and reverts it; returns one
    /// line per reverted path (empty when the call changed nothing there). Each is a denial.
    fn settle(self: Box<Self>) -> Vec<String>;
}

/// The confined launch a consumer spawns directly (no outer shell), plus the facts needed to
/// classify its result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfinedArgv {
    /// The replacement argv; `argv[0]` is the runner program.
    pub argv: Vec<OsString>,
    /// The backend that produced it (`bwrap`, `landlock`, `seatbelt`, `operator`, or an external
    /// backend's name).
    pub backend: String,
    /// How completely this launch governs what its policy restricts: the weakest of the
    /// restricted classes in [`classes`](Self::classes) (see [`ClassEnforcements::overall`]).
    pub enforcement: SandboxEnforcement,
    /// How completely this launch governs each class (files, network), with what it leaves
    /// ungoverned. Empty in a launch that predates classes: read it through
    /// [`class_report`](Self::class_report).
    #[serde(default, skip_serializing_if = "ClassEnforcements::is_empty")]
    pub classes: ClassEnforcements,
    /// Case-insensitive stderr substrings the backend's kernel prints on a denied file effect.
    pub denial_signatures: Vec<String>,
    /// How the runner itself failing (so the payload never ran) identifies itself on stderr.
    pub runner_failure_rules: Vec<RunnerFailureRule>,
    /// An out-of-band channel that says whether the payload actually ran. When present it decides
    /// runner failure and the stderr rules are not consulted.
    pub status_channel: Option<StatusChannel>,
    /// Open descriptors the runner gets at fixed numbers (never on the wire: see [`LaunchFds`]).
    #[serde(skip)]
    pub fds: LaunchFds,
}

/// Open descriptors a launch hands its runner, each at a fixed number in the child (bwrap's
/// `--bind-fd` sources, for example): a list of (child fd number, descriptor), mapped by the
/// spawner (`sandbox_local::launch`). They exist only in this process, so they are never
/// serialized: a launch read from the wire carries none, and one written out names numbers
/// nobody holds (its runner then fails closed). Cloning shares the descriptors.
///
/// It also carries the launch's staging directory, the one other resource of this process a
/// launch holds: where the launcher makes new git directories private while the call runs, for
/// the caller to judge and move into place after it (`sandbox_local::stage`).
#[derive(Clone, Default)]
pub struct LaunchFds(Vec<(i32, Arc<OwnedFd>)>, Option<Staging>, Vec<Held>);

/// Something the launch needs kept until it is dropped (a per-call temp area the caller made:
/// removed when the last copy of the launch goes).
pub type Held = Arc<dyn std::any::Any + Send + Sync>;

/// A launch's staging directory and the writable roots its staged entries may go into.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Staging {
    /// The directory (made by the provider for this launch).
    pub dir: std::path::PathBuf,
    /// The launch's writable roots, canonical: a staged entry is merged only beneath one.
    pub roots: Vec<std::path::PathBuf>,
}

impl LaunchFds {
    /// The first number [`add`](Self::add) hands out: 0 to 2 are the standard streams and 3 is
    /// the status channel's.
    pub const FIRST: i32 = 4;

    /// Hands `fd` to the child at the next free number from [`FIRST`](Self::FIRST) on, and
    /// returns that number.
    pub fn add(&mut self, fd: OwnedFd) -> i32 {
        let number = self
            .0
            .iter()
            .map(|(n, _)| n + 1)
            .max()
            .unwrap_or(Self::FIRST)
            .max(Self::FIRST);
        self.0.push((number, Arc::new(fd)));
        number
    }

    /// Hands `fd` to the child at `child_fd`, replacing a descriptor given that number before.
    pub fn insert(&mut self, child_fd: i32, fd: OwnedFd) {
        self.0.retain(|(n, _)| *n != child_fd);
        self.0.push((child_fd, Arc::new(fd)));
    }

    /// Each child number with its descriptor, in the order they were given.
    pub fn iter(&self) -> impl Iterator<Item = (i32, BorrowedFd<'_>)> {
        self.0.iter().map(|(n, fd)| (*n, fd.as_fd()))
    }

    /// The child numbers, in the order they were given.
    pub fn numbers(&self) -> Vec<i32> {
        self.0.iter().map(|(n, _)| *n).collect()
    }

    /// True when the launch hands over no descriptor.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Records the launch's staging directory (made by the provider, private to this process's
    /// user, outside every writable root), and keeps `guard` (what removes the directory) until
    /// the last copy of this launch is dropped.
    pub fn set_staging(&mut self, staging: Staging, guard: Held) {
        self.1 = Some(staging);
        self.hold(guard);
    }

    /// The launch's staging directory, if it has one.
    pub fn staging(&self) -> Option<&Staging> {
        self.1.as_ref()
    }

    /// Keeps `held` until the last copy of this launch is dropped.
    pub fn hold(&mut self, held: Held) {
        self.2.push(held);
    }
}

/// Equal when the same numbers carry the same open descriptors of this process.
impl PartialEq for LaunchFds {
    fn eq(&self, other: &Self) -> bool {
        self.0.len() == other.0.len()
            && self.1 == other.1
            && self
                .0
                .iter()
                .zip(&other.0)
                .all(|((a, fa), (b, fb))| a == b && fa.as_raw_fd() == fb.as_raw_fd())
    }
}

impl Eq for LaunchFds {}

impl std::fmt::Debug for LaunchFds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map()
            .entries(self.0.iter().map(|(n, fd)| (n, fd.as_raw_fd())))
            .finish()
    }
}

impl ConfinedArgv {
    /// `argv` run as it is, by no backend (`none`): what `danger-full-access` and the unconfined
    /// baselines spawn. No denial signature and no runner of its own to fail.
    pub fn unconfined(argv: Vec<OsString>) -> ConfinedArgv {
        ConfinedArgv {
            argv,
            backend: "none".into(),
            enforcement: SandboxEnforcement::Full,
            classes: ClassEnforcements::default(),
            denial_signatures: Vec::new(),
            runner_failure_rules: Vec::new(),
            status_channel: None,
            fds: LaunchFds::default(),
        }
    }

    /// The report for `class`. A launch that reports no classes states files through its overall
    /// enforcement and governs nothing else.
    pub fn class_report(&self, class: EnforcementClass) -> ClassReport {
        if self.classes.is_empty() {
            ClassEnforcements::from_overall(self.enforcement).get(class)
        } else {
            self.classes.get(class)
        }
    }
}

/// Stderr evidence that a runner failed before executing the wrapped command.
///
/// A rule matches when the process exited non-zero, the exit code passes
/// [`allowed_exit_codes`](Self::allowed_exit_codes) when given, and, after removing lines equal
/// (case-insensitively, whole line) to an [`informational_lines`](Self::informational_lines) entry,
/// some remaining line contains a [`fatal_signatures`](Self::fatal_signatures) entry
/// (case-insensitively). Exit status alone never proves runner failure.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct RunnerFailureRule {
    /// Non-zero exit codes on which the rule may match; `None` permits any non-zero exit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_exit_codes: Option<Vec<i32>>,
    /// Non-empty single-line substrings identifying a fatal runner diagnostic.
    pub fatal_signatures: Vec<String>,
    /// Benign whole lines removed before fatal matching (for example a partial-enforcement notice).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub informational_lines: Vec<String>,
}

/// Why an operator-supplied runner-failure rule was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RuleError {
    /// No signatures at all.
    #[error("runner_failure_signatures must contain at least one signature")]
    NoSignatures,
    /// An empty or whitespace-only signature (it would match every line).
    #[error("runner failure signature #{index} is empty")]
    EmptySignature {
        /// Zero-based position in the list.
        index: usize,
    },
    /// A signature spanning lines can never match one stderr line.
    #[error("runner failure signature #{index} spans more than one line: {signature:?}")]
    MultiLineSignature {
        /// Zero-based position in the list.
        index: usize,
        /// The offending signature.
        signature: String,
    },
    /// An exit code of zero can never be a runner failure.
    #[error("allowed exit code 0 can never identify a runner failure")]
    ZeroExitCode,
}

impl RunnerFailureRule {
    /// Builds and validates a rule from an operator's signature list (any non-zero exit).
    pub fn from_signatures<S: AsRef<str>>(signatures: &[S]) -> Result<Self, RuleError> {
        let rule = RunnerFailureRule {
            allowed_exit_codes: None,
            fatal_signatures: signatures.iter().map(|s| s.as_ref().to_owned()).collect(),
            informational_lines: Vec::new(),
        };
        rule.validate()?;
        Ok(rule)
    }

    /// Checks the rule is usable: at least one signature, none empty or multi-line, no exit code 0.
    pub fn validate(&self) -> Result<(), RuleError> {
        if self.fatal_signatures.is_empty() {
            return Err(RuleError::NoSignatures);
        }
        for (index, sig) in self.fatal_signatures.iter().enumerate() {
            if sig.trim().is_empty() {
                return Err(RuleError::EmptySignature { index });
            }
            if sig.contains(['\n', '\r']) {
                return Err(RuleError::MultiLineSignature {
                    index,
                    signature: sig.clone(),
                });
            }
        }
        if self
            .allowed_exit_codes
            .as_ref()
            .is_some_and(|codes| codes.contains(&0))
        {
            return Err(RuleError::ZeroExitCode);
        }
        Ok(())
    }
}

/// An out-of-band status channel: the consumer passes the write end of a pipe to the runner as
/// file descriptor [`fd`](Self::fd) and reads it after the process ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct StatusChannel {
    /// The descriptor number the runner writes its status records to.
    pub fd: i32,
    /// How to read what it writes.
    pub format: StatusFormat,
}

/// The record formats a status channel can speak.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "kebab-case")]
pub enum StatusFormat {
    /// bwrap's `--json-status-fd`: an `{"exit-code": N}` record exists only when the payload ran.
    BwrapJson,
    /// The launcher's report: `{"exec": ...}` just before `execve` on a close-on-exec descriptor,
    /// then `{"exec-failed": ...}` or `{"error": ...}` if the launch failed. The payload ran
    /// exactly when an `exec` record is present and no failure record follows (the records are
    /// defined in the `sandbox` crate's `status` module).
    LaunchReport,
}

impl StatusFormat {
    /// Reads what the runner wrote to the channel. Anything short of positive evidence that the
    /// payload ran (nothing written, a torn record, a failure record) means it never ran.
    pub fn parse(self, bytes: &[u8]) -> PayloadStatus {
        let text = String::from_utf8_lossy(bytes);
        match self {
            StatusFormat::BwrapJson => {
                let code = text.lines().find_map(|l| {
                    serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(l.trim())
                        .ok()?
                        .remove("exit-code")
                });
                match code {
                    Some(code) => PayloadStatus::Ran {
                        exit_code: code.as_i64().and_then(|c| i32::try_from(c).ok()),
                    },
                    None => PayloadStatus::NeverRan { detail: None },
                }
            }
            StatusFormat::LaunchReport => {
                let records: Vec<Record> = text.lines().flat_map(Record::parse_line).collect();
                let failure = records
                    .iter()
                    .find(|r| r.is_failure())
                    .map(|r| r.detail().to_owned());
                let launched = records.iter().any(|r| matches!(r, Record::Exec(_)));
                match (launched, failure) {
                    (true, None) => PayloadStatus::Ran { exit_code: None },
                    (_, detail) => PayloadStatus::NeverRan { detail },
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A provider whose calls see their temp area at `/tmp` (it confines nothing).
    struct AtTmp;

    impl SandboxProvider for AtTmp {
        fn confine(
            &self,
            _argv: &[OsString],
            policy: &ProviderPolicy,
        ) -> Result<ConfinedArgv, SandboxUnavailable> {
            Err(SandboxUnavailable {
                mode: policy.mode,
                backend: None,
                detail: "a fake that confines nothing".into(),
            })
        }

        fn temp_area_at_tmp(&self, _policy: &ProviderPolicy) -> bool {
            true
        }
    }

    /// A provider that says nothing beyond `confine`: the trait's defaults (it confines
    /// nothing).
    struct Plain;

    impl SandboxProvider for Plain {
        fn confine(
            &self,
            argv: &[OsString],
            policy: &ProviderPolicy,
        ) -> Result<ConfinedArgv, SandboxUnavailable> {
            AtTmp.confine(argv, policy)
        }
    }

    /// A guard that finds nothing.
    struct Quiet;

    impl CallGuard for Quiet {
        fn settle(self: Box<Self>) -> Vec<String> {
            Vec::new()
        }
    }

    /// A provider with a guard around every call (it confines nothing).
    struct Guarded;

    impl SandboxProvider for Guarded {
        fn confine(
            &self,
            argv: &[OsString],
            policy: &ProviderPolicy,
        ) -> Result<ConfinedArgv, SandboxUnavailable> {
            AtTmp.confine(argv, policy)
        }

        fn call_guard(&self, _policy: &ProviderPolicy) -> Option<Box<dyn CallGuard>> {
            Some(Box::new(Quiet))
        }
    }

    #[test]
    fn a_shared_provider_shows_the_temp_area_where_the_provider_it_shares_does() {
        let policy = ProviderPolicy::new(crate::ConfinedMode::WorkspaceWrite, "/w");
        assert!(
            !Plain.temp_area_at_tmp(&policy),
            "by default the area is no mount"
        );
        assert!(!Arc::new(Plain).temp_area_at_tmp(&policy));
        assert!(Arc::new(AtTmp).temp_area_at_tmp(&policy));
        let shared: Arc<dyn SandboxProvider> = Arc::new(AtTmp);
        assert!(Arc::new(shared).temp_area_at_tmp(&policy));
    }

    #[test]
    fn a_shared_provider_guards_a_call_as_the_provider_it_shares_does() {
        let policy = ProviderPolicy::new(crate::ConfinedMode::WorkspaceWrite, "/w");
        assert!(Arc::new(Plain).call_guard(&policy).is_none());
        let guard = Arc::new(Guarded)
            .call_guard(&policy)
            .expect("the shared guard");
        assert!(guard.settle().is_empty());
    }

    #[test]
    fn a_launch_carries_its_staging_directory_to_the_caller_that_merges_it() {
        let mut fds = LaunchFds::default();
        assert_eq!(fds.staging(), None);
        let staging = Staging {
            dir: "/state/stage/1".into(),
            roots: vec!["/ws".into()],
        };
        fds.set_staging(staging.clone(), Arc::new(()));
        assert_eq!(fds.staging(), Some(&staging));
        assert_ne!(
            fds,
            LaunchFds::default(),
            "the staging directory is part of the launch"
        );
    }

    #[test]
    fn a_launch_without_classes_reports_files_by_its_overall_word() {
        use crate::enforcement::ClassEnforcement;
        let mut launch = ConfinedArgv {
            argv: vec!["x".into()],
            backend: "b".into(),
            enforcement: SandboxEnforcement::Partial,
            classes: ClassEnforcements::default(),
            denial_signatures: Vec::new(),
            runner_failure_rules: Vec::new(),
            status_channel: None,
            fds: LaunchFds::default(),
        };
        assert_eq!(
            launch.class_report(EnforcementClass::Files).enforcement,
            ClassEnforcement::Partial
        );
        assert_eq!(
            launch.class_report(EnforcementClass::Network).enforcement,
            ClassEnforcement::NotGoverned
        );
        launch.classes =
            ClassEnforcements::default().with(EnforcementClass::Network, ClassReport::full());
        assert_eq!(
            launch.class_report(EnforcementClass::Network).enforcement,
            ClassEnforcement::Full
        );
        assert_eq!(
            launch.class_report(EnforcementClass::Files).enforcement,
            ClassEnforcement::NotGoverned
        );
    }

    #[test]
    fn operator_signatures_are_validated() {
        assert_eq!(
            RunnerFailureRule::from_signatures::<&str>(&[]),
            Err(RuleError::NoSignatures)
        );
        assert_eq!(
            RunnerFailureRule::from_signatures(&["runner:", "  "]),
            Err(RuleError::EmptySignature { index: 1 })
        );
        assert!(matches!(
            RunnerFailureRule::from_signatures(&["a\nb"]),
            Err(RuleError::MultiLineSignature { index: 0, .. })
        ));
        assert!(RunnerFailureRule::from_signatures(&["myrunner: "]).is_ok());
    }

    #[test]
    fn bwrap_status_needs_an_exit_code_record() {
        let f = StatusFormat::BwrapJson;
        assert_eq!(
            f.parse(b"{ \"child-pid\": 12 }\n{ \"exit-code\": 3 }\n"),
            PayloadStatus::Ran { exit_code: Some(3) }
        );
        assert_eq!(
            f.parse(b"{ \"child-pid\": 12 }\n"),
            PayloadStatus::NeverRan { detail: None }
        );
        assert_eq!(f.parse(b""), PayloadStatus::NeverRan { detail: None });
    }

    #[test]
    fn launch_report_needs_exec_without_failure() {
        let f = StatusFormat::LaunchReport;
        assert_eq!(
            f.parse(b"{\"exec\":\"bash\"}\n"),
            PayloadStatus::Ran { exit_code: None }
        );
        assert_eq!(
            f.parse(b"{\"exec\":\"nope\"}\n{\"exec-failed\":\"No such file or directory\"}\n"),
            PayloadStatus::NeverRan {
                detail: Some("No such file or directory".into())
            }
        );
        assert_eq!(
            f.parse(b"{\"exec\""),
            PayloadStatus::NeverRan { detail: None }
        );
    }
}

#[cfg(test)]
mod launch_fds {
    use super::*;
    use std::os::fd::AsRawFd;

    fn open() -> OwnedFd {
        OwnedFd::from(std::fs::File::open("/dev/null").expect("open /dev/null"))
    }

    #[test]
    fn what_a_launch_holds_lives_as_long_as_its_last_copy() {
        let area = std::sync::Arc::new(());
        let mut fds = LaunchFds::default();
        fds.hold(area.clone());
        let copy = fds.clone();
        drop(fds);
        assert_eq!(
            std::sync::Arc::strong_count(&area),
            2,
            "a copy still holds it"
        );
        drop(copy);
        assert_eq!(std::sync::Arc::strong_count(&area), 1);
    }

    #[test]
    fn numbers_are_handed_out_from_first_on_and_insert_replaces() {
        let mut fds = LaunchFds::default();
        assert!(fds.is_empty());
        assert_eq!(fds.numbers(), Vec::<i32>::new());
        assert_eq!(fds.add(open()), LaunchFds::FIRST);
        assert_eq!(fds.add(open()), LaunchFds::FIRST + 1);
        assert!(!fds.is_empty());
        fds.insert(9, open());
        assert_eq!(fds.add(open()), 10, "after the highest number given");
        let replaced = open();
        let raw = replaced.as_raw_fd();
        fds.insert(LaunchFds::FIRST, replaced);
        assert_eq!(fds.numbers(), vec![5, 9, 10, LaunchFds::FIRST]);
        let held: Vec<(i32, i32)> = fds.iter().map(|(n, fd)| (n, fd.as_raw_fd())).collect();
        assert_eq!(held.len(), 4);
        assert_eq!(held[3], (LaunchFds::FIRST, raw));
        assert!(format!("{fds:?}").contains(&format!("{}: {raw}", LaunchFds::FIRST)));
    }

    #[test]
    fn equal_when_the_same_numbers_hold_the_same_descriptors() {
        let mut a = LaunchFds::default();
        a.add(open());
        let b = a.clone();
        assert_eq!(a, b, "a clone shares the descriptors");
        let mut c = LaunchFds::default();
        c.add(open());
        assert_ne!(a, c, "another descriptor at the same number");
        let mut d = a.clone();
        d.add(open());
        assert_ne!(a, d, "one more");
        let mut e = LaunchFds::default();
        e.insert(LaunchFds::FIRST + 1, open());
        let mut f = LaunchFds::default();
        f.0.push((LaunchFds::FIRST, Arc::clone(&e.0[0].1)));
        assert_ne!(e, f, "the same descriptor at another number");
        assert_eq!(LaunchFds::default(), LaunchFds::default());
    }

    struct NoGuard;
    impl SandboxProvider for NoGuard {
        fn confine(
            &self,
            _: &[OsString],
            policy: &ProviderPolicy,
        ) -> Result<ConfinedArgv, SandboxUnavailable> {
            Err(SandboxUnavailable {
                mode: policy.mode,
                backend: None,
                detail: "none".into(),
            })
        }
    }

    #[test]
    fn a_provider_has_no_call_guard_unless_it_says_so() {
        let policy = ProviderPolicy::new(crate::ConfinedMode::ReadOnly, "/w");
        assert!(NoGuard.call_guard(&policy).is_none());
    }
}
