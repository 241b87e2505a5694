//! The local provider: selects one runner per provider lifetime (functional probes, cached), then
//! wraps every call's argv in that runner's profile for the call's own policy.

use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::OnceLock;
use std::time::Duration;

use sandbox::{
    ClassEnforcements, ClassReport, ConfinedArgv, EnforcementClass, LaunchFds, ProviderPolicy,
    RuleError, RunnerFailureRule, SandboxEnforcement, SandboxProvider, SandboxUnavailable,
    StatusChannel, StatusFormat,
};
use serde::{Deserialize, Serialize};

use crate::bind::{self, BindError};
use crate::cache;
use crate::classes::launch_classes;
use crate::dialect::{self, Dialect};
use crate::probe::{self, ProbeError, ProbeFacts, ProbeVerdict};
use crate::profile::{self, STATUS_FD, WritableSet};

/// A local runner.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Backend {
    /// bubblewrap: mount namespaces with a read-only bind of `/`.
    Bwrap,
    /// The `landlock-run` launcher: a Landlock ruleset on itself, then exec.
    Landlock,
    /// macOS `sandbox-exec` with an SBPL profile.
    Seatbelt,
}

impl Backend {
    /// Every local backend.
    pub const ALL: [Backend; 3] = [Backend::Bwrap, Backend::Landlock, Backend::Seatbelt];

    /// Its name in reports and trial names.
    pub const fn name(self) -> &'static str {
        match self {
            Backend::Bwrap => "bwrap",
            Backend::Landlock => "landlock",
            Backend::Seatbelt => "seatbelt",
        }
    }

    /// Its stderr dialect.
    pub fn dialect(self) -> Dialect {
        match self {
            Backend::Bwrap => dialect::bwrap_guarded(),
            Backend::Landlock => dialect::landlock(),
            Backend::Seatbelt => dialect::seatbelt(),
        }
    }

    /// The chain this platform probes, in order. Empty means fail closed (no backend exists).
    pub fn platform_chain() -> Vec<Backend> {
        if cfg!(target_os = "linux") {
            vec![Backend::Bwrap, Backend::Landlock]
        } else if cfg!(target_os = "macos") {
            vec![Backend::Seatbelt]
        } else {
            Vec::new()
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Backend {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Backend::ALL
            .into_iter()
            .find(|b| b.name() == s)
            .ok_or_else(|| format!("unknown backend {s:?}; expected bwrap, landlock or seatbelt"))
    }
}

/// An operator-asserted bwrap-compatible runner: selection and probes are skipped, its own
/// runner-failure signatures classify it. Built only through [`OperatorRunner::new`], so its
/// command is never empty.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OperatorRunner {
    argv: Vec<OsString>,
    rule: RunnerFailureRule,
}

/// Why an operator runner cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum OperatorError {
    /// No command was given.
    #[error("the runner command is empty")]
    EmptyCommand,
    /// The signatures are not a valid runner-failure rule.
    #[error(transparent)]
    Rule(#[from] RuleError),
}

impl OperatorRunner {
    /// Validates the command (non-empty) and the signatures (at least one, none empty or
    /// multi-line).
    pub fn new<S: AsRef<str>>(
        argv: Vec<OsString>,
        signatures: &[S],
    ) -> Result<Self, OperatorError> {
        if argv.is_empty() {
            return Err(OperatorError::EmptyCommand);
        }
        let rule = RunnerFailureRule::from_signatures(signatures)?;
        Ok(OperatorRunner { argv, rule })
    }

    /// The runner command (program and leading arguments) that replaces `bwrap`; never empty.
    pub fn argv(&self) -> &[OsString] {
        &self.argv
    }

    /// Its validated runner-failure rule.
    pub fn rule(&self) -> &RunnerFailureRule {
        &self.rule
    }

    /// The program and its leading arguments.
    fn split(&self) -> (&OsString, &[OsString]) {
        // `new` refuses an empty command, and the fields are private.
        match self.argv.split_first() {
            Some((program, args)) => (program, args),
            None => unreachable!("OperatorRunner::new refuses an empty command"),
        }
    }
}

/// How the local provider is set up.
#[derive(Clone, Debug)]
pub struct LocalConfig {
    /// Candidates in probe order (default: [`Backend::platform_chain`]).
    pub chain: Vec<Backend>,
    /// The bwrap program (default: `bwrap` on `PATH`).
    pub bwrap: Option<PathBuf>,
    /// The launcher (default: `landlock-run` next to this executable, then on `PATH`).
    pub launcher: Option<PathBuf>,
    /// The Seatbelt runner, always by absolute path.
    pub sandbox_exec: PathBuf,
    /// Cap the Landlock ABI the launcher uses (it then reports `partial` below ABI 3).
    pub landlock_abi_cap: Option<u32>,
    /// An operator runner, which skips selection entirely.
    pub operator: Option<OperatorRunner>,
    /// How long one probe may take before its backend counts as unusable.
    pub probe_timeout: Duration,
    /// Where usable probe verdicts are shared across processes ([`crate::cache`]); `None`
    /// probes in every process.
    pub verdict_cache: Option<PathBuf>,
    /// Whether the launcher prevents git's code surface while a `workspace-write` call runs
    /// (its emulator, `--prevent`; default on). A launch whose argv leaves this process (the
    /// protocol's reference backend) cannot hand the launcher its staging descriptor, so it turns
    /// this off and keeps the check after the call alone.
    pub prevent_while_running: bool,
    /// The most data each payload process may map, in bytes (the launcher's `--memory`,
    /// `RLIMIT_DATA`, which the payload cannot raise; default [`DEFAULT_MEMORY_LIMIT`]). `None`
    /// sets none. The bwrap and Landlock backends apply it; Seatbelt and operator runners do not.
    pub memory_limit: Option<u64>,
}

/// The default per-process memory limit of a confined call: 8 GiB of data mappings, more than a
/// compiler, a test runner or a language server uses, less than a payload that holds memory to
/// starve the host would like.
pub const DEFAULT_MEMORY_LIMIT: u64 = 8 * 1024 * 1024 * 1024;

/// How long one probe may take by default before its backend counts as unusable: a guard against
/// a runner that hangs, not a speed limit. A probe takes tens of milliseconds on a quiet host and
/// was seen to take over 5 s on a shared one at load 46, which then failed every trial of a
/// backend that works.
pub const DEFAULT_PROBE_TIMEOUT: Duration = Duration::from_secs(30);

impl Default for LocalConfig {
    fn default() -> Self {
        LocalConfig {
            chain: Backend::platform_chain(),
            bwrap: None,
            launcher: None,
            sandbox_exec: PathBuf::from("/usr/bin/sandbox-exec"),
            landlock_abi_cap: None,
            operator: None,
            probe_timeout: DEFAULT_PROBE_TIMEOUT,
            verdict_cache: None,
            prevent_while_running: true,
            memory_limit: Some(DEFAULT_MEMORY_LIMIT),
        }
    }
}

impl LocalConfig {
    /// The default configuration restricted to one backend.
    pub fn only(backend: Backend) -> Self {
        LocalConfig {
            chain: vec![backend],
            ..LocalConfig::default()
        }
    }
}

/// The runner a provider selected for its lifetime.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selection {
    /// Which backend.
    pub backend: Backend,
    /// The runner program.
    pub program: PathBuf,
    /// What its probe found (`None` when selected without probing).
    pub facts: Option<ProbeFacts>,
    /// Every probe that ran, in chain order (why earlier candidates were passed over).
    pub verdicts: Vec<ProbeVerdict>,
    /// True when the verdict came from the shared cache instead of a probe in this process.
    pub cached: bool,
}

impl Selection {
    /// The enforcement this selection achieves for file effects (the seeds' overall word).
    pub fn enforcement(&self) -> SandboxEnforcement {
        self.facts
            .as_ref()
            .map(|f| f.enforcement)
            .unwrap_or(SandboxEnforcement::Full)
    }

    /// True when this selection's launches show a private temp area at `/tmp`: bwrap (the
    /// launcher inside mounts it), the launcher where it can make a mount namespace (its
    /// protected class is then governed); never Seatbelt.
    pub fn mounts_temp_area(&self) -> bool {
        mounts_temp_area(self.backend, &self.capabilities())
    }

    /// What this selection can govern, per class (a Seatbelt selected unprobed: its profile's
    /// classes by construction).
    pub fn capabilities(&self) -> ClassEnforcements {
        self.facts.as_ref().map_or_else(
            || {
                probe::capabilities(
                    ClassReport::full(),
                    probe::network_capability(self.backend, &[]),
                    ClassReport::full(),
                    probe::host_ipc_capability(self.backend, false),
                )
            },
            ProbeFacts::capabilities,
        )
    }
}

/// Why no backend could be selected on this host.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SelectionError {
    /// This platform has no backend at all.
    #[error("no sandbox backend exists for this platform ({os}); failing closed")]
    NoBackendForPlatform {
        /// `std::env::consts::OS`.
        os: &'static str,
    },
    /// Every candidate's probe failed, in chain order.
    #[error("no usable sandbox backend ({})", verdicts.iter().map(|(b, e)| format!("{b}: {e}")).collect::<Vec<_>>().join("; "))]
    NoneUsable {
        /// Each candidate and why it is unusable.
        verdicts: Vec<(Backend, ProbeError)>,
    },
}

/// The local sandbox provider.
#[derive(Debug)]
pub struct LocalProvider {
    config: LocalConfig,
    selection: OnceLock<Result<Selection, SelectionError>>,
    cache: cache::Cache,
}

impl LocalProvider {
    /// A provider that selects on first use.
    pub fn new(config: LocalConfig) -> Self {
        LocalProvider {
            cache: cache::Cache::new(config.verdict_cache.clone()),
            config,
            selection: OnceLock::new(),
        }
    }

    /// A provider whose selection was already made (for example from a probe run for a report),
    /// so it does not probe again.
    pub fn with_selection(config: LocalConfig, selection: Selection) -> Self {
        let selected = OnceLock::new();
        let _ = selected.set(Ok(selection));
        LocalProvider {
            cache: cache::Cache::new(config.verdict_cache.clone()),
            config,
            selection: selected,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &LocalConfig {
        &self.config
    }

    /// Drops the shared cache's entry for this provider's selection, so the next process probes
    /// again: call it when a launch of the selected runner failed (a cached verdict only ever
    /// fails closed, and never twice).
    pub fn forget_cached_selection(&self) {
        if let (Some(dir), Some(Ok(selection))) = (self.cache.usable(), self.selection.get()) {
            cache::forget(
                dir,
                &cache::key(selection.backend, &self.config, &selection.program),
            );
        }
    }

    /// The cached selection: the first chain candidate whose functional probe passes. A sole
    /// Seatbelt candidate is selected without probing (its refusal at exec time still fails
    /// closed). `Err` says why no backend is usable.
    pub fn selection(&self) -> Result<&Selection, &SelectionError> {
        self.selection
            .get_or_init(|| select(&self.config, self.cache.usable()))
            .as_ref()
    }

    /// Why the probe cache is not used, when it was refused: it lies in a writable root of a
    /// policy this provider served (or `/tmp`), or others may write it. The provider probes
    /// instead.
    pub fn cache_refusal(&self) -> Option<sandbox::StateDirError> {
        self.cache.refusal()
    }
}

fn select(config: &LocalConfig, cache_dir: Option<&Path>) -> Result<Selection, SelectionError> {
    if config.chain.is_empty() {
        return Err(SelectionError::NoBackendForPlatform {
            os: std::env::consts::OS,
        });
    }
    if config.chain == [Backend::Seatbelt] {
        return Ok(Selection {
            backend: Backend::Seatbelt,
            program: config.sandbox_exec.clone(),
            facts: None,
            verdicts: Vec::new(),
            cached: false,
        });
    }
    let mut verdicts = Vec::new();
    for &backend in &config.chain {
        let cache = cache_dir.and_then(|dir| {
            let program = probe::locate(backend, config).ok()?;
            let key = cache::key(backend, config, &program);
            Some((dir, key, program))
        });
        // The runner is always the one located now (its identity is in the key); an entry naming
        // another program is not ours to trust (a planted entry could name an unconfining one).
        if let Some((program, facts)) = cache.as_ref().and_then(|(dir, key, located)| {
            cache::load(dir, key).filter(|(program, _)| program == located)
        }) {
            return Ok(Selection {
                backend,
                program,
                facts: Some(facts),
                verdicts,
                cached: true,
            });
        }
        let verdict = probe::probe(backend, config);
        if let (Ok(facts), Some(program)) = (&verdict.result, &verdict.program) {
            let (facts, program) = (facts.clone(), program.clone());
            if let Some((dir, key, _)) = &cache {
                cache::store(dir, key, &program, &facts);
            }
            verdicts.push(verdict);
            return Ok(Selection {
                backend,
                program,
                facts: Some(facts),
                verdicts,
                cached: false,
            });
        }
        verdicts.push(verdict);
    }
    Err(SelectionError::NoneUsable {
        verdicts: verdicts
            .into_iter()
            .filter_map(|v| v.result.err().map(|e| (v.backend, e)))
            .collect(),
    })
}

/// True when `backend` with `capabilities` shows a private temp area at `/tmp` (the one answer the
/// launch and the tools' view of `/tmp` both follow): bwrap always runs the launcher, which
/// mounts it; the launcher on its own needs a mount namespace (its protected class is then
/// governed); Seatbelt has none.
fn mounts_temp_area(backend: Backend, capabilities: &ClassEnforcements) -> bool {
    match backend {
        Backend::Bwrap => true,
        Backend::Landlock => {
            capabilities.get(EnforcementClass::Protected).enforcement
                != sandbox::ClassEnforcement::NotGoverned
        }
        Backend::Seatbelt => false,
    }
}

/// The confined launch for one backend and program, without selection. Shared by the provider
/// and the probes so a probe exercises exactly the profile a command gets. `guard` is the
/// launcher bwrap runs the payload through (bwrap only; see [`profile::bwrap_guard_args`]). bwrap
/// gets every bind as a descriptor opened now and checked against `policy`'s pins
/// ([`bind::open_binds`]).
#[allow(clippy::too_many_arguments)]
pub(crate) fn wrap(
    prevent: bool,
    backend: Backend,
    program: &std::path::Path,
    guard: Option<&std::path::Path>,
    capabilities: &ClassEnforcements,
    abi_cap: Option<u32>,
    set: &WritableSet,
    policy: &ProviderPolicy,
    payload: &[OsString],
) -> Result<ConfinedArgv, BindError> {
    let network = policy.network;
    let channel = |format| {
        Some(StatusChannel {
            fd: STATUS_FD,
            format,
        })
    };
    // A backend that cannot protect paths here is not asked to (the launcher would fail every
    // launch); its report says `not-governed` instead.
    let mut set = set.clone();
    set.protected_by_mounts = backend != Backend::Seatbelt;
    let mounts_here = capabilities.get(EnforcementClass::Protected).enforcement
        != sandbox::ClassEnforcement::NotGoverned;
    if capabilities.get(EnforcementClass::Protected).enforcement
        == sandbox::ClassEnforcement::NotGoverned
    {
        set.protected.pinned.clear();
        set.protected.read_only.clear();
    }
    // A private temp area is mounted at /tmp where the launcher has a mount namespace (inside
    // bwrap, or on its own where it can make one); elsewhere its `tmp` is a writable root of its
    // own, the payload's $TMPDIR, and the host's /tmp is not writable.
    set.area_at_tmp = set.temp_area.is_some()
        && mounts_temp_area(backend, capabilities)
        && (backend != Backend::Bwrap || guard.is_some());
    if set.area_at_tmp
        && let Some(area) = &set.temp_area
    {
        let shown = area.join("tmp");
        set.temp.retain(|t| *t != shown);
    }
    let mut fds = LaunchFds::default();
    // Git's surface is prevented where the launcher runs and can mount; a launcher that cannot
    // (the protected class not governed) still refuses it, and new git directories with it.
    let launcher_inside = (backend == Backend::Landlock || guard.is_some()) && prevent;
    match set.prevent.as_mut() {
        Some(prevent) if launcher_inside => {
            if mounts_here && let Some((root, dir, fd)) = crate::stage::create(policy) {
                prevent.stage_fd = Some(fds.add(fd));
                prevent.stage_root = Some(root);
                let staging = sandbox::Staging {
                    dir: dir.path().to_path_buf(),
                    roots: sandbox::writable_roots(policy).unwrap_or_default(),
                };
                fds.set_staging(staging, std::sync::Arc::new(dir));
            }
        }
        _ => set.prevent = None,
    }
    let set = &set;
    let (args, status_channel) = match backend {
        // With the launcher inside, the status channel is the launcher's (its `exec` record is
        // written only once bwrap and the launcher both set up); bwrap's own status records
        // would say "ran" for a launcher that failed (exit 125, never exec'd).
        Backend::Bwrap => {
            let mut binds = bind::open_binds(&profile::bwrap_binds(set), policy, &mut fds)?;
            if let Some(root) = set.prevent.as_ref().and_then(|p| p.stage_root.as_ref()) {
                binds.push(bind::open_stage(root, &mut fds)?);
            }
            if let Some(area) = set.temp_area.as_ref().filter(|_| set.area_at_tmp) {
                binds.push(bind::open_temp_area(area, &mut fds)?);
            }
            let format = match guard {
                Some(_) => StatusFormat::LaunchReport,
                None => StatusFormat::BwrapJson,
            };
            (
                profile::bwrap_args(set, &binds, network, Some(STATUS_FD), guard),
                channel(format),
            )
        }
        Backend::Landlock => (
            profile::landlock_args(set, network, abi_cap, Some(STATUS_FD)),
            channel(StatusFormat::LaunchReport),
        ),
        Backend::Seatbelt => (
            profile::seatbelt_args(set, network, Some(STATUS_FD)),
            channel(StatusFormat::LaunchReport),
        ),
    };
    let dialect = backend.dialect();
    let classes = launch_classes(capabilities, set, network);
    let restricted = EnforcementClass::restricted_by(network);
    Ok(ConfinedArgv {
        argv: profile::assemble(program.as_os_str(), args, payload),
        backend: backend.name().to_owned(),
        enforcement: classes.overall(&restricted),
        classes,
        denial_signatures: dialect.denial_signatures,
        runner_failure_rules: dialect.runner_failure_rules,
        status_channel,
        fds,
    })
}

impl SandboxProvider for LocalProvider {
    fn call_guard(&self, policy: &ProviderPolicy) -> Option<Box<dyn sandbox::CallGuard>> {
        crate::gitguard::GitGuard::before(policy)
            .map(|g| Box::new(g) as Box<dyn sandbox::CallGuard>)
    }

    fn temp_area_at_tmp(&self, policy: &ProviderPolicy) -> bool {
        !policy.roots.temp_area.is_shared()
            && self.config.operator.is_none()
            && self.selection().is_ok_and(Selection::mounts_temp_area)
    }

    fn confine(
        &self,
        argv: &[OsString],
        policy: &ProviderPolicy,
    ) -> Result<ConfinedArgv, SandboxUnavailable> {
        let unavailable = |backend: Option<&str>, detail: String| SandboxUnavailable {
            mode: policy.mode,
            backend: backend.map(str::to_owned),
            detail,
        };
        if argv.is_empty() {
            return Err(unavailable(
                None,
                "nothing to run: the argv is empty".into(),
            ));
        }
        // Before selection reads the cache and before this policy's payload runs.
        self.cache.admit(policy);
        let mut set = WritableSet::of(policy).map_err(|e| unavailable(None, e.to_string()))?;
        set.memory_limit = self.config.memory_limit;
        if let Some(operator) = &self.config.operator {
            // No launcher, so no emulator: git's surface is checked after the call alone.
            set.prevent = None;
            let dialect = dialect::operator(operator.rule().clone());
            let (program, leading) = operator.split();
            let mut args = leading.to_vec();
            let mut fds = LaunchFds::default();
            let binds = bind::open_binds(&profile::bwrap_binds(&set), policy, &mut fds)
                .map_err(|e| unavailable(None, e.to_string()))?;
            args.extend(profile::bwrap_args(
                &set,
                &binds,
                policy.network,
                None,
                None,
            ));
            // An operator runner is asserted to be bwrap-compatible: it governs what bwrap's
            // arguments govern (the protected paths by mounts).
            let capabilities = probe::capabilities(
                ClassReport::full(),
                probe::network_capability(Backend::Bwrap, &[]),
                ClassReport::full(),
                probe::operator_host_ipc(),
            );
            let mut by_mounts = set.clone();
            by_mounts.protected_by_mounts = true;
            let classes = launch_classes(&capabilities, &by_mounts, policy.network);
            return Ok(ConfinedArgv {
                argv: profile::assemble(program, args, argv),
                backend: "operator".to_owned(),
                enforcement: classes.overall(&policy.restricted_classes()),
                classes,
                denial_signatures: dialect.denial_signatures,
                runner_failure_rules: dialect.runner_failure_rules,
                status_channel: None,
                fds,
            });
        }
        let selection = self
            .selection()
            .map_err(|e| unavailable(None, e.to_string()))?;
        // bwrap runs the payload through the launcher; without it there is no bwrap launch.
        let guard = match selection.backend {
            Backend::Bwrap => Some(
                probe::locate(Backend::Landlock, &self.config)
                    .map_err(|e| unavailable(Some(selection.backend.name()), e))?,
            ),
            _ => None,
        };
        wrap(
            self.config.prevent_while_running,
            selection.backend,
            &selection.program,
            guard.as_deref(),
            &selection.capabilities(),
            self.config.landlock_abi_cap,
            &set,
            policy,
            argv,
        )
        .map_err(|e| unavailable(Some(selection.backend.name()), e.to_string()))
    }
}
