//! The backends a run certifies, with what each can do on this host. Usability is decided once,
//! while the tests are listed, by the same functional probes the provider uses.

use std::collections::BTreeSet;
use std::sync::Arc;

use sandbox::{SandboxEnforcement, SandboxProvider};
use sandbox_local::dialect::Dialect;
use sandbox_local::probe::{ProbeFacts, ProbeVerdict, probe};
use sandbox_local::{Backend as LocalBackend, LocalConfig, LocalProvider};

use crate::external::External;
use crate::scenario::Capability;

/// What a backend is, with what only that kind has.
#[derive(Clone)]
pub enum Kind {
    /// A reference local backend (bwrap, the launcher, Seatbelt), probed on this host.
    Local {
        /// Its configuration.
        config: LocalConfig,
        /// What its probe found, when it passed.
        facts: Option<ProbeFacts>,
        /// Its probe ran and the write landed: it confines nothing here. A broken backend, which
        /// fails the run instead of being skipped as unusable.
        confines_nothing: bool,
    },
    /// An operator's bwrap-compatible runner, asserted (not probed).
    Operator(LocalConfig),
    /// A process speaking the protocol.
    External(Arc<External>),
    /// The reference platform chain, driven through `sandboxctl` (selection scenarios).
    Chain,
    /// The reference policy service and ACP bridge (anchoring scenarios).
    Policy,
    /// A backend only classified (the operator dialect, an external backend whose handshake
    /// failed).
    DialectOnly,
}

/// A backend under test. Built once by one of the constructors below and not changed after.
#[derive(Clone)]
pub struct Backend {
    /// Its name in trial names (`bwrap`, `landlock`, `landlock-abi2`, `seatbelt`, ...).
    pub name: String,
    /// What it is.
    pub kind: Kind,
    /// Its stderr dialect; `None` when every scenario must supply one (the operator runner).
    pub dialect: Option<Dialect>,
    /// What it can do on a host that suits it: a scenario needing more is not planned for it.
    pub declared: BTreeSet<Capability>,
    /// What it can do on this host: a planned scenario needing more is skipped with the reason.
    pub capabilities: BTreeSet<Capability>,
    /// Why it cannot confine on this host, when it cannot.
    pub unusable: Option<String>,
    /// The enforcement it reports when usable.
    pub enforcement: Option<SandboxEnforcement>,
    /// The provider that confines for it, when it can confine here.
    pub provider: Option<Arc<dyn SandboxProvider>>,
    /// Its version, for reports.
    pub version: Option<String>,
}

impl std::fmt::Debug for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Backend")
            .field("name", &self.name)
            .field("capabilities", &self.capabilities)
            .field("unusable", &self.unusable)
            .field("enforcement", &self.enforcement)
            .finish()
    }
}

impl Backend {
    /// The protocol connection, for an external backend.
    pub fn external(&self) -> Option<&Arc<External>> {
        match &self.kind {
            Kind::External(e) => Some(e),
            _ => None,
        }
    }

    /// What its probe found (reference local backends that passed it).
    pub fn facts(&self) -> Option<&ProbeFacts> {
        match &self.kind {
            Kind::Local { facts, .. } => facts.as_ref(),
            _ => None,
        }
    }

    /// Its weakest report of `class`: in its probe's facts (a reference backend on this host) and
    /// in the answers of this run (`seen`, what certify observed); `None` when neither says. A
    /// `gap:` expectation applies only when this is short of `full`.
    pub fn reported(
        &self,
        class: sandbox::EnforcementClass,
        seen: Option<&crate::observed::ClassesSeen>,
    ) -> Option<sandbox::ClassReport> {
        let facts = self
            .facts()
            .map(|f| f.capabilities())
            .filter(|c| c.iter().any(|(reported, _)| reported == class))
            .map(|c| c.get(class));
        let answers = seen
            .map(crate::observed::ClassesSeen::weakest_in_full)
            .filter(|c| c.iter().any(|(reported, _)| reported == class))
            .map(|c| c.get(class));
        match (facts, answers) {
            (Some(a), Some(b)) if b.enforcement < a.enforcement => Some(b),
            // As weak as the facts say: the gaps either named (a launch names gaps of its own,
            // such as the shared temp area or git's surface found per repository).
            (Some(mut a), Some(b)) if b.enforcement == a.enforcement => {
                for gap in b.ungoverned {
                    if !a.ungoverned.contains(&gap) {
                        a.ungoverned.push(gap);
                    }
                }
                Some(a)
            }
            (Some(a), _) => Some(a),
            (None, b) => b,
        }
    }

    /// What it declared writable beyond the writable set under `mode` (an external backend's
    /// `extra_writable`), canonical where the path resolves; empty for every other backend.
    pub fn declared_writable(&self, mode: sandbox::ConfinedMode) -> Vec<std::path::PathBuf> {
        self.external()
            .map(|external| {
                external
                    .differences
                    .extra_writable
                    .iter()
                    .filter(|w| w.modes.contains(&mode))
                    .map(|w| std::fs::canonicalize(&w.path).unwrap_or_else(|_| w.path.clone()))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The places the backend declared private to the sandbox under `mode` (its handshake's
    /// `differences.private`): the payload is judged there on what it can do to the host. A
    /// reference backend declares none yet; one that makes `/tmp` private per session would
    /// report it here too.
    pub fn declared_private(&self, mode: sandbox::ConfinedMode) -> Vec<std::path::PathBuf> {
        self.external()
            .map(|external| {
                external
                    .differences
                    .private
                    .iter()
                    .filter(|p| p.modes.contains(&mode))
                    .map(|p| p.path.clone())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The directories in the host's shared places where the backend keeps its own state (its
    /// handshake's `differences.state`): what is in them is not a leftover.
    pub fn declared_state(&self) -> Vec<std::path::PathBuf> {
        self.external()
            .map(|external| {
                external
                    .differences
                    .state
                    .iter()
                    .map(|s| s.path.clone())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// True when the backend's calls never write the host's `/tmp` nor the caller's `$TMPDIR`,
    /// each having a temp area of its own: a reference local backend or an operator runner (a
    /// per-call area, or the session's), or an external backend that declared it takes the area
    /// the harness names (`differences.temp_area`) or `/tmp` private in both modes.
    pub fn temp_is_private(&self) -> bool {
        match &self.kind {
            // The harness gives each of their calls an area (a case's session holds one across
            // its calls), and the provider honours it: at /tmp where a mount shows it there, else
            // as $TMPDIR with the host's /tmp read-only (an operator runner's case).
            Kind::Local { .. } | Kind::Operator(_) => true,
            Kind::External(external) => {
                external.differences.temp_area.is_some()
                    || [
                        sandbox::ConfinedMode::ReadOnly,
                        sandbox::ConfinedMode::WorkspaceWrite,
                    ]
                    .iter()
                    .all(|m| self.in_private_place(*m, std::path::Path::new("/tmp")))
            }
            _ => false,
        }
    }

    /// True when `path` lies in a place the backend declared private under `mode`.
    pub fn in_private_place(&self, mode: sandbox::ConfinedMode, path: &std::path::Path) -> bool {
        self.declared_private(mode).iter().any(|p| {
            path.starts_with(p)
                || std::fs::canonicalize(p).is_ok_and(|canonical| path.starts_with(canonical))
        })
    }

    /// True when its probe ran and the write landed (see [`Kind::Local`]).
    pub fn confines_nothing(&self) -> bool {
        matches!(
            self.kind,
            Kind::Local {
                confines_nothing: true,
                ..
            }
        )
    }

    /// The local configuration behind a reference backend or an operator runner.
    pub fn local_config(&self) -> Option<&LocalConfig> {
        match &self.kind {
            Kind::Local { config, .. } | Kind::Operator(config) => Some(config),
            _ => None,
        }
    }

    /// True when a scenario needing `needs` applies to this backend at all. `classifier` follows
    /// from having a dialect of its own; every other capability is declared.
    pub fn applies(&self, needs: &[Capability]) -> bool {
        needs.iter().all(|c| match c {
            Capability::Classifier => self.dialect.is_some(),
            Capability::DeclaredDialect => self.external().is_some(),
            Capability::DeclaredProtected => self
                .external()
                .is_some_and(|e| !e.differences.protected.is_empty()),
            Capability::DeclaredPrivate => self
                .external()
                .is_some_and(|e| !e.differences.private.is_empty()),
            Capability::PrivateTemp => self.temp_is_private(),
            Capability::SharedTemp => !self.temp_is_private(),
            other => self.declared.contains(other),
        })
    }

    /// Why this backend cannot run a scenario needing `needs`, or `None` when it can.
    pub fn cannot_run(&self, needs: &[Capability]) -> Option<String> {
        let missing: Vec<&str> = needs
            .iter()
            .filter(|c| !c.is_derived() && !self.capabilities.contains(c))
            .map(|c| c.as_str())
            .collect();
        if missing.is_empty() {
            return None;
        }
        Some(match &self.unusable {
            Some(reason) if missing.contains(&Capability::Confine.as_str()) => {
                format!("backend not usable on this host: {reason}")
            }
            _ => format!(
                "backend {} lacks capability {} on this host",
                self.name,
                missing.join(", ")
            ),
        })
    }

    /// A backend that only has its dialect classified (no host needed).
    fn dialect_only(name: &str, dialect: Option<Dialect>, unusable: &str) -> Backend {
        Backend {
            name: name.to_owned(),
            kind: Kind::DialectOnly,
            dialect,
            declared: BTreeSet::new(),
            capabilities: BTreeSet::new(),
            unusable: Some(unusable.to_owned()),
            enforcement: None,
            provider: None,
            version: None,
        }
    }

    /// An external backend that completed the handshake.
    pub fn from_external(external: External) -> Backend {
        let external = Arc::new(external);
        let declared: BTreeSet<Capability> = external
            .capabilities
            .iter()
            .copied()
            .filter(|c| !c.is_derived())
            .collect();
        let provider: Arc<dyn SandboxProvider> = external.clone();
        Backend {
            name: external.implementation.name.clone(),
            dialect: None,
            capabilities: declared.clone(),
            declared,
            unusable: None,
            enforcement: Some(external.enforcement),
            provider: Some(provider),
            version: Some(external.implementation.version.clone()),
            kind: Kind::External(external),
        }
    }

    /// An operator runner (`runner_command` and its signatures), asserted bwrap-compatible: not
    /// probed, certified by running the scenarios against it.
    pub fn operator_runner(runner: sandbox_local::OperatorRunner) -> Backend {
        let config = LocalConfig {
            operator: Some(runner.clone()),
            ..LocalConfig::default()
        };
        let provider: Arc<dyn SandboxProvider> = Arc::new(LocalProvider::new(config.clone()));
        let declared = BTreeSet::from([Capability::Confine]);
        Backend {
            name: "operator".to_owned(),
            dialect: Some(sandbox_local::dialect::operator(runner.rule().clone())),
            capabilities: declared.clone(),
            declared,
            unusable: None,
            enforcement: Some(SandboxEnforcement::Full),
            provider: Some(provider),
            version: Some(runner_version(runner.argv())),
            kind: Kind::Operator(config),
        }
    }

    /// An external backend whose handshake failed: listed in the report, never certified.
    pub fn external_failed(name: &str, why: &str) -> Backend {
        Backend::dialect_only(name, None, why)
    }

    /// A reference local backend under its own name with its default configuration.
    fn plain(backend: LocalBackend) -> Backend {
        Backend::local(backend.name(), backend, LocalConfig::only(backend))
    }

    /// A reference local backend, probed on this host.
    pub(crate) fn local(name: &str, backend: LocalBackend, config: LocalConfig) -> Backend {
        let verdict: ProbeVerdict = probe(backend, &config);
        let mut declared = BTreeSet::from([Capability::Confine, Capability::StatusChannel]);
        if config.landlock_abi_cap.is_some() {
            declared.insert(Capability::AbiCap);
        }
        let mut capabilities = BTreeSet::new();
        let facts = verdict.result.as_ref().ok().cloned();
        let version = match (&facts, backend) {
            (Some(f), LocalBackend::Landlock) => Some(format!(
                "landlock-run {} (ABI {} of kernel ABI {})",
                env!("CARGO_PKG_VERSION"),
                f.abi.unwrap_or(0),
                f.kernel_abi.unwrap_or(0)
            )),
            (Some(f), _) => f.version.clone(),
            (None, _) => None,
        };
        let (unusable, enforcement, provider) = match verdict.result.clone() {
            Ok(facts) => {
                capabilities.clone_from(&declared);
                // The probe already decided: hand its verdict to the provider so it does not probe
                // a second time in this process.
                let selection = sandbox_local::Selection {
                    backend,
                    program: verdict
                        .program
                        .clone()
                        .unwrap_or_else(|| config.sandbox_exec.clone()),
                    facts: Some(facts.clone()),
                    verdicts: vec![verdict.clone()],
                    cached: false,
                };
                // Every call gets a private temp area of its own, as `sandboxctl run` gives it
                // (a tool case's session holds one across its calls instead).
                let provider: Arc<dyn SandboxProvider> =
                    Arc::new(sandbox_local::temp_area::PerCallArea::new(
                        LocalProvider::with_selection(config.clone(), selection),
                    ));
                (None, Some(facts.enforcement), Some(provider))
            }
            Err(reason) => (Some(reason.to_string()), None, None),
        };
        Backend {
            name: name.to_owned(),
            dialect: Some(backend.dialect()),
            declared,
            capabilities,
            unusable,
            enforcement,
            provider,
            version,
            kind: Kind::Local {
                config,
                facts,
                confines_nothing: verdict
                    .result
                    .as_ref()
                    .is_err_and(sandbox_local::probe::ProbeError::confines_nothing),
            },
        }
    }
}

/// What an operator runner says `--version` is (its first line), or, when it says nothing, that
/// it did not and what it is.
fn runner_version(argv: &[std::ffi::OsString]) -> String {
    let shown = || {
        argv.iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(" ")
    };
    let Some(program) = argv.first() else {
        return "unknown".into();
    };
    // Bounded: a runner that hangs on `--version` (or ignores it) must not hang the run.
    let said = std::process::Command::new(program)
        .args(&argv[1..])
        .arg("--version")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .ok()
        .and_then(|mut child| {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
            let status = loop {
                match child.try_wait() {
                    Ok(Some(status)) => break Some(status),
                    Ok(None) if std::time::Instant::now() < deadline => {
                        std::thread::sleep(std::time::Duration::from_millis(10));
                    }
                    _ => {
                        let _ = child.kill();
                        let _ = child.wait();
                        break None;
                    }
                }
            };
            let mut text = String::new();
            if let Some(mut out) = child.stdout.take() {
                use std::io::Read;
                let _ = out.read_to_string(&mut text);
            }
            status
                .filter(|s| s.success())
                .and_then(|_| text.lines().next().map(|l| l.trim().to_owned()))
        })
        .filter(|line| !line.is_empty());
    said.unwrap_or_else(|| format!("unknown ({} --version said nothing)", shown()))
}

/// What this host lacks that a trial or a backend needs: the reason, as the listing shows it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct NotHere(pub String);

/// Whether this host has `fact`: `Ok` with what it has, or `Err` with why the cases that need
/// it are not planned here. Decided once per process.
pub fn host_has(fact: crate::scenario::HostFact) -> Result<String, NotHere> {
    use crate::scenario::HostFact;
    if fact == HostFact::Cargo {
        return match crate::prerequisites::locate("cargo") {
            Some(cargo) => Ok(format!(
                "the harness's user has cargo ({})",
                cargo.display()
            )),
            None => Err(NotHere(
                "needs the person's cargo, and the harness's user has none (no rustup proxy in \
                 $CARGO_HOME/bin or ~/.cargo/bin, no cargo on PATH)"
                    .into(),
            )),
        };
    }
    if fact == HostFact::Root {
        return if nix::unistd::geteuid().is_root() {
            Ok("the harness runs as root".into())
        } else {
            Err(NotHere(
                "is about root's powers, and the harness runs as an unprivileged user".into(),
            ))
        };
    }
    static BWRAP: std::sync::OnceLock<Result<String, NotHere>> = std::sync::OnceLock::new();
    let bwrap = BWRAP.get_or_init(|| {
        let verdict = probe(LocalBackend::Bwrap, &LocalConfig::only(LocalBackend::Bwrap));
        match verdict.result {
            Ok(facts) => Ok(format!(
                "this host has a bwrap that confines ({})",
                facts.version.unwrap_or_else(|| "version unknown".into())
            )),
            Err(e) => Err(NotHere(format!(
                "this host has no bwrap that confines: {e}"
            ))),
        }
    });
    match (fact, bwrap) {
        (HostFact::Bwrap, Ok(has)) => Ok(has.clone()),
        (HostFact::Bwrap, Err(lacks)) => Err(NotHere(format!("needs bwrap, and {lacks}"))),
        (HostFact::NoBwrap, Err(lacks)) => Ok(lacks.0.clone()),
        (HostFact::NoBwrap, Ok(has)) => {
            Err(NotHere(format!("is for a host without bwrap, and {has}")))
        }
        (HostFact::Root | HostFact::Cargo, _) => Ok("decided above".into()),
    }
}

/// True when this process can simulate hostile hosts for the local chain: it runs as root (so
/// dropping capabilities takes bwrap's namespaces away), `setpriv` exists, and the launcher is
/// there to use up Landlock's layers.
fn can_simulate_hosts() -> Result<(), NotHere> {
    if !nix_is_root() {
        return Err(NotHere(
            "simulating a capability-dropped host needs root".into(),
        ));
    }
    which::which("setpriv").map_err(|_| {
        NotHere("simulating a capability-dropped host needs setpriv (util-linux)".to_owned())
    })?;
    sandbox_local::probe::locate_launcher()
        .map(|_| ())
        .map_err(|e| NotHere(e.to_string()))
}

fn nix_is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|euid| euid == "0"))
        })
        .unwrap_or(false)
}

/// The names of the reference backends, in run order.
pub const REFERENCE_BACKENDS: [&str; 8] = [
    "bwrap",
    "landlock",
    "landlock-abi2",
    "seatbelt",
    crate::seatbelt_model::BACKEND,
    "operator",
    "local",
    "policy",
];

/// Why `backend` belongs to another platform than this one (Seatbelt off macOS): its trials that
/// cannot run here are not listed at all, rather than skipped by the hundred.
pub fn foreign_platform(backend: &str) -> Option<&'static str> {
    if backend == crate::seatbelt_model::BACKEND && !cfg!(target_os = "linux") {
        return Some("the Seatbelt model's sandbox-exec stand-in runs on Linux only");
    }
    (backend == "seatbelt" && !cfg!(target_os = "macos"))
        .then_some("Seatbelt runs on macOS only (/usr/bin/sandbox-exec); its classifier cases run")
}

/// The reference backends a run on this platform requires unless told otherwise: on Linux bwrap
/// (when installed), landlock, landlock-abi2, the Seatbelt model (a named fake) and the policy
/// bridge, plus the local chain when running as root (its
/// hostile-host simulations need root); on macOS seatbelt and the policy bridge.
pub fn default_required() -> Vec<&'static str> {
    if cfg!(target_os = "linux") {
        let mut names = vec![
            "landlock",
            "landlock-abi2",
            crate::seatbelt_model::BACKEND,
            "policy",
        ];
        // An installed bwrap must work (a broken one fails the run); a host without one is
        // certified for what it has, bwrap named as left out with the reason.
        if which::which("bwrap").is_ok() {
            names.insert(0, "bwrap");
        }
        if nix_is_root() {
            names.push("local");
        }
        names
    } else if cfg!(target_os = "macos") {
        vec!["seatbelt", "policy"]
    } else {
        Vec::new()
    }
}

/// The reference backends, probed on this host.
pub fn reference_backends() -> Vec<Backend> {
    REFERENCE_BACKENDS
        .iter()
        .filter_map(|name| reference_backend(name))
        .collect()
}

/// One reference backend by name, probed on this host (only it).
pub fn reference_backend(name: &str) -> Option<Backend> {
    Some(match name {
        "bwrap" => Backend::plain(LocalBackend::Bwrap),
        "landlock" => Backend::plain(LocalBackend::Landlock),
        "landlock-abi2" => Backend::local(
            "landlock-abi2",
            LocalBackend::Landlock,
            LocalConfig {
                landlock_abi_cap: Some(2),
                ..LocalConfig::only(LocalBackend::Landlock)
            },
        ),
        "seatbelt" => Backend::plain(LocalBackend::Seatbelt),
        // A named fake: the reference Seatbelt profile judged through the SBPL model on Linux.
        crate::seatbelt_model::BACKEND => crate::seatbelt_model::backend(),
        // An operator runner speaks bwrap's denial dialect; its failure rule is its own, so the
        // scenarios give it inline.
        "operator" => Backend::dialect_only(
            "operator",
            Some(sandbox_local::dialect::Dialect {
                runner_failure_rules: Vec::new(),
                ..sandbox_local::dialect::bwrap()
            }),
            "an operator runner is certified with its own command",
        ),
        "local" => local_chain(),
        // The reference policy service and ACP bridge: pure logic over a durable log on disk.
        // Its scripted tool calls run confined by this host's platform chain.
        "policy" => policy_bridge(),
        _ => return None,
    })
}

/// The reference policy service and ACP bridge: pure logic over a durable log on disk. Its
/// scripted tool calls run confined by this host's platform chain.
fn policy_bridge() -> Backend {
    let chain = LocalProvider::new(LocalConfig::default());
    let (capabilities, unusable, provider): (_, _, Option<Arc<dyn SandboxProvider>>) =
        match chain.selection() {
            Ok(_) => (
                BTreeSet::from([Capability::PolicyService, Capability::ScriptedCalls]),
                None,
                Some(Arc::new(chain)),
            ),
            Err(reason) => (
                BTreeSet::from([Capability::PolicyService]),
                Some(reason.to_string()),
                None,
            ),
        };
    Backend {
        name: "policy".to_owned(),
        kind: Kind::Policy,
        dialect: None,
        declared: BTreeSet::from([Capability::PolicyService, Capability::ScriptedCalls]),
        capabilities,
        unusable,
        enforcement: None,
        provider,
        version: None,
    }
}

/// The pseudo-backend for selection scenarios: the reference platform chain via `sandboxctl`.
fn local_chain() -> Backend {
    let (capabilities, unusable) =
        match sandbox_local::probe::locate_sibling("sandboxctl", "sandbox-cli") {
            Err(reason) => (BTreeSet::new(), Some(reason)),
            Ok(_) => match can_simulate_hosts() {
                Ok(()) => (
                    BTreeSet::from([Capability::LocalChain, Capability::HostSimulation]),
                    None,
                ),
                Err(NotHere(reason)) => (BTreeSet::from([Capability::LocalChain]), Some(reason)),
            },
        };
    Backend {
        name: "local".to_owned(),
        kind: Kind::Chain,
        dialect: None,
        declared: BTreeSet::from([Capability::LocalChain, Capability::HostSimulation]),
        capabilities,
        unusable,
        enforcement: None,
        provider: None,
        version: None,
    }
}
