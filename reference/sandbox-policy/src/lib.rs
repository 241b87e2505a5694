//! The one home of sandbox policy: the deployment default (mode and workspace root), the
//! per-session knob events and their folds, the write path for each knob, and [`PolicyService::resolve`],
//! which every tool calls so none of them repeats the precedence.
//!
//! Precedence: an approved grant > the session's last knob event > the deployment default.
//! Workspace root: the session's cwd (canonicalized with filesystem semantics first) > the
//! configured root.

pub mod log;
pub mod presets;
pub mod prompt;
mod session;

pub use session::{
    ApprovalPolicy, Event, Session, effective_approval_policy, effective_network,
    effective_sandbox_mode, rejected_escalation,
};

use std::path::{Path, PathBuf};

use sandbox::{
    ConfinedMode, ExecutionPolicy, ExtraRoot, NetworkMode, PathError, PinnedDir, ProtectedPath,
    ProviderPolicy, RootError, Roots, SandboxMode, canonical_path,
};

/// Why a policy could not be resolved or configured.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// The workspace root cannot be canonicalized.
    #[error("workspace root {path:?}: {source}")]
    Root {
        /// The root as given.
        path: PathBuf,
        /// Why.
        source: PathError,
    },
    /// The configured workspace root is not an existing directory.
    #[error("workspace root {0:?} is not an existing directory")]
    NotADirectory(PathBuf),
    /// The configured workspace root could not be pinned.
    #[error(transparent)]
    Pin(RootError),
}

/// The deployment's policy: its default mode and its roots (workspace root and the rest of the
/// writable set, every one pinned), validated at load.
#[derive(Clone, Debug)]
pub struct PolicyService {
    default_mode: SandboxMode,
    default_approval: ApprovalPolicy,
    default_network: NetworkMode,
    /// The configured roots: the workspace root canonical and pinned (always `Some`), the temp
    /// dir pinned when it existed, the extra roots pinned.
    roots: Roots,
}

impl PolicyService {
    /// A service with `default_mode` over `roots`, checked and pinned now: the workspace root is
    /// canonicalized (it must be an existing directory), the temp dir pinned when it is one, the
    /// extra roots and the sockets checked as [`PolicyService::with_writable_roots`] and
    /// [`PolicyService::with_allow_unix_sockets`] check them. Every pin is taken now (pins
    /// `roots` carries are replaced). The temp dir is `roots.temp_dir`: nothing here reads
    /// `$TMPDIR`.
    pub fn from_roots(default_mode: SandboxMode, roots: Roots) -> Result<Self, PolicyError> {
        let Roots {
            workspace_root,
            temp_dir,
            extra_roots,
            protected_paths,
            allow_unix_sockets,
            temp_area,
            ..
        } = roots;
        let root = canonical_path(&workspace_root).map_err(|source| PolicyError::Root {
            path: workspace_root.clone(),
            source,
        })?;
        if !root.is_dir() {
            return Err(PolicyError::NotADirectory(workspace_root));
        }
        let workspace_pin = PinnedDir::pin(&root).map_err(PolicyError::Pin)?;
        let service = PolicyService {
            default_mode,
            default_approval: ApprovalPolicy::Ask,
            default_network: NetworkMode::default(),
            roots: Roots {
                workspace_pin: Some(workspace_pin),
                ..Roots::new(root, None)
            },
        }
        .with_temp_dir(temp_dir)
        .with_temp_area(temp_area)
        .with_protected_paths(protected_paths);
        let extra: Vec<PathBuf> = extra_roots.into_iter().map(|r| r.path).collect();
        service
            .with_writable_roots(&extra)?
            .with_allow_unix_sockets(&allow_unix_sockets)
    }

    /// A service with `default_mode` and `workspace_root` (canonicalized now; it must exist).
    /// The temp dir commands see is this process's `$TMPDIR` ([`Roots::from_env`]).
    pub fn new(default_mode: SandboxMode, workspace_root: &Path) -> Result<Self, PolicyError> {
        PolicyService::from_roots(default_mode, Roots::from_env(workspace_root))
    }

    /// The same service with another default approval policy.
    pub fn with_default_approval(mut self, policy: ApprovalPolicy) -> Self {
        self.default_approval = policy;
        self
    }

    /// The same service with another default network mode (`enabled` unless configured: the
    /// seeds' behaviour).
    pub fn with_default_network(mut self, network: NetworkMode) -> Self {
        self.default_network = network;
        self
    }

    /// The same service with another `$TMPDIR` for commands (writable under `workspace-write`),
    /// pinned now when it is an existing directory, so a swap later fails closed.
    pub fn with_temp_dir(mut self, temp_dir: Option<PathBuf>) -> Self {
        self.roots = self.roots.with_pinned_temp_dir(temp_dir);
        self
    }

    /// The same service with this temp area for commands (see [`sandbox::TempArea`]): a
    /// session's private area (made and removed by the caller: `sandbox_local::temp_area`), or
    /// the host's `/tmp` and `$TMPDIR` shared, which every launch then reports as a gap.
    pub fn with_temp_area(mut self, area: sandbox::TempArea) -> Self {
        self.roots = self.roots.with_temp_area(area);
        self
    }

    /// The same service with extra writable roots for `workspace-write` (beyond the workspace,
    /// `/tmp` and `$TMPDIR`), checked now exactly like the workspace (absolute, an existing
    /// directory, not `/`, a system directory, or the home directory or an ancestor of it) and
    /// pinned: a root that resolves to another directory later fails every call
    /// (`WRITABLE_ROOT_MOVED`).
    pub fn with_writable_roots(mut self, roots: &[PathBuf]) -> Result<Self, PolicyError> {
        let pinned = roots
            .iter()
            .map(|r| ExtraRoot::new(r).pinned())
            .collect::<Result<Vec<_>, _>>()
            .map_err(PolicyError::Pin)?;
        let probe = ProviderPolicy::from_roots(
            ConfinedMode::WorkspaceWrite,
            Roots::new(&self.roots.workspace_root, None).with_extra_roots(pinned.clone()),
        );
        // Only the extra roots are judged here; the workspace is judged per call, in its mode.
        if let Err(e @ RootError::ExtraRoot { .. }) = sandbox::writable_roots(&probe) {
            return Err(PolicyError::Pin(e));
        }
        self.roots.extra_roots = pinned;
        Ok(self)
    }

    /// The same service with other protected paths (default
    /// [`sandbox::DEFAULT_PROTECTED_PATHS`]; empty: none).
    pub fn with_protected_paths(mut self, paths: Vec<ProtectedPath>) -> Self {
        self.roots.protected_paths = paths;
        self
    }

    /// The same service allowing every call's payload to connect to these named unix sockets on
    /// the host (an ssh agent's `$SSH_AUTH_SOCK`), checked now ([`sandbox::check_unix_sockets`]:
    /// absolute, an existing socket, outside the workspace and the extra roots) and again per
    /// call. Set the writable roots first: a socket inside one is refused.
    pub fn with_allow_unix_sockets(mut self, sockets: &[PathBuf]) -> Result<Self, PolicyError> {
        let probe = ProviderPolicy::from_roots(
            ConfinedMode::WorkspaceWrite,
            Roots::new(&self.roots.workspace_root, None)
                .with_extra_roots(self.roots.extra_roots.clone())
                .with_allow_unix_sockets(sockets.to_vec()),
        );
        sandbox::check_unix_sockets(&probe).map_err(PolicyError::Pin)?;
        self.roots.allow_unix_sockets = sockets.to_vec();
        Ok(self)
    }

    /// The deployment default mode.
    pub fn default_mode(&self) -> SandboxMode {
        self.default_mode
    }

    /// The deployment default network mode.
    pub fn default_network(&self) -> NetworkMode {
        self.default_network
    }

    /// The deployment default approval policy.
    pub fn default_approval(&self) -> ApprovalPolicy {
        self.default_approval
    }

    /// The configured (canonical) workspace root, the fallback for calls without a session.
    pub fn workspace_root(&self) -> &Path {
        &self.roots.workspace_root
    }

    /// The configured roots, pinned: what every call's policy carries (with the session's
    /// workspace in place of the configured one).
    pub fn roots(&self) -> &Roots {
        &self.roots
    }

    /// The mode a call in `session` runs under without a grant.
    pub fn effective_mode(&self, session: Option<&Session>) -> SandboxMode {
        session
            .and_then(|s| s.with_events(effective_sandbox_mode))
            .unwrap_or(self.default_mode)
    }

    /// The network mode a call in `session` runs under: the session's last `sandbox/network`
    /// event, else the default. A grant widens only the file mode, never the network.
    pub fn effective_network(&self, session: Option<&Session>) -> NetworkMode {
        session
            .and_then(|s| s.with_events(effective_network))
            .unwrap_or(self.default_network)
    }

    /// Every knob of `session` as it is now (its log folded over the deployment defaults).
    pub fn knobs(&self, session: Option<&Session>) -> presets::Knobs {
        presets::Knobs {
            mode: self.effective_mode(session),
            approval: self.effective_approval(session),
            network: self.effective_network(session),
        }
    }

    /// The approval policy in force for `session`.
    pub fn effective_approval(&self, session: Option<&Session>) -> ApprovalPolicy {
        session
            .and_then(|s| s.with_events(effective_approval_policy))
            .unwrap_or(self.default_approval)
    }

    /// The policy of a call that carries no per-call stamp (a direct filesystem caller, no
    /// session, no grant): the deployment default, in the configured root.
    pub fn default_stamp(&self) -> Result<Stamp, PolicyError> {
        self.resolve(None, None)
    }

    /// The complete policy of one call, stamped: `granted` (an approved escalation) > the
    /// session's last `sandbox/mode` event > the default; root = the session's cwd > the
    /// configured root.
    pub fn resolve(
        &self,
        session: Option<&Session>,
        granted: Option<SandboxMode>,
    ) -> Result<Stamp, PolicyError> {
        let mode = granted.unwrap_or_else(|| self.effective_mode(session));
        let (workspace_root, workspace_pin) = match session {
            Some(s) => (
                canonical_path(s.cwd()).map_err(|source| PolicyError::Root {
                    path: s.cwd().to_path_buf(),
                    source,
                })?,
                s.pin().cloned(),
            ),
            None => (
                self.roots.workspace_root.clone(),
                self.roots.workspace_pin.clone(),
            ),
        };
        let roots = Roots {
            workspace_root,
            workspace_pin,
            ..self.roots.clone()
        };
        Ok(Stamp(
            ExecutionPolicy::from_roots(mode, roots).with_network(self.effective_network(session)),
        ))
    }
}

/// The policy of one call as the policy service resolved it: the only policy the fenced
/// filesystem accepts, so no caller can hand it a policy of its own making (say, a
/// `danger-full-access` one). Made only by [`PolicyService::resolve`] and
/// [`PolicyService::default_stamp`]; reads as the [`ExecutionPolicy`] it carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stamp(ExecutionPolicy);

impl Stamp {
    /// The policy it carries.
    pub fn policy(&self) -> &ExecutionPolicy {
        &self.0
    }

    /// The policy it carries, by value (for a background task that outlives the call).
    pub fn into_policy(self) -> ExecutionPolicy {
        self.0
    }
}

impl std::ops::Deref for Stamp {
    type Target = ExecutionPolicy;
    fn deref(&self) -> &ExecutionPolicy {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grant_beats_session_beats_default() {
        let dir = tempfile::tempdir().expect("tempdir");
        let service = PolicyService::new(SandboxMode::ReadOnly, dir.path()).expect("service");
        let session = Session::new("s", dir.path());
        assert_eq!(
            service.resolve(Some(&session), None).expect("r").mode,
            SandboxMode::ReadOnly
        );
        session
            .set_sandbox_mode(SandboxMode::WorkspaceWrite)
            .expect("append");
        assert_eq!(
            service.resolve(Some(&session), None).expect("r").mode,
            SandboxMode::WorkspaceWrite
        );
        assert_eq!(
            service
                .resolve(Some(&session), Some(SandboxMode::DangerFullAccess))
                .expect("r")
                .mode,
            SandboxMode::DangerFullAccess
        );
        assert_eq!(
            service.resolve(None, None).expect("r").mode,
            SandboxMode::ReadOnly
        );
    }

    #[test]
    fn the_network_is_the_last_event_over_the_default_and_a_grant_keeps_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let service = PolicyService::new(SandboxMode::ReadOnly, dir.path()).expect("service");
        assert_eq!(service.default_network(), NetworkMode::Enabled);
        let session = Session::new("s", dir.path());
        assert_eq!(
            service.effective_network(Some(&session)),
            NetworkMode::Enabled
        );
        session
            .set_network(NetworkMode::Restricted)
            .expect("append");
        session
            .set_sandbox_mode(SandboxMode::WorkspaceWrite)
            .expect("append");
        assert_eq!(
            session.events().first(),
            Some(&Event::SandboxNetwork {
                network: NetworkMode::Restricted
            })
        );
        assert_eq!(
            service.effective_network(Some(&session)),
            NetworkMode::Restricted
        );
        let granted = service
            .resolve(Some(&session), Some(SandboxMode::DangerFullAccess))
            .expect("r");
        assert_eq!(granted.network, NetworkMode::Restricted);
        session.set_network(NetworkMode::Enabled).expect("append");
        assert_eq!(
            service.resolve(Some(&session), None).expect("r").network,
            NetworkMode::Enabled
        );
        // A deployment default: sessions without an event, and calls without a session.
        let offline = service.with_default_network(NetworkMode::Restricted);
        assert_eq!(offline.default_network(), NetworkMode::Restricted);
        let fresh = Session::new("t", dir.path());
        assert_eq!(
            offline.resolve(Some(&fresh), None).expect("r").network,
            NetworkMode::Restricted
        );
        assert_eq!(
            offline.resolve(None, None).expect("r").network,
            NetworkMode::Restricted
        );
        assert_eq!(
            offline.knobs(Some(&session)),
            presets::Knobs {
                mode: SandboxMode::WorkspaceWrite,
                approval: ApprovalPolicy::Ask,
                network: NetworkMode::Enabled,
            }
        );
        assert_eq!(
            effective_network(&session.events()),
            Some(NetworkMode::Enabled)
        );
        assert_eq!(effective_network(&[]), None);
    }

    #[test]
    fn two_sessions_resolve_their_own_roots_through_one_service() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        std::fs::create_dir_all(&a).expect("a");
        std::fs::create_dir_all(&b).expect("b");
        let service = PolicyService::new(SandboxMode::WorkspaceWrite, dir.path()).expect("service");
        let (sa, sb) = (Session::new("a", &a), Session::new("b", &b));
        sb.set_sandbox_mode(SandboxMode::ReadOnly).expect("append");
        let (pa, pb) = (
            service.resolve(Some(&sa), None).expect("a"),
            service.resolve(Some(&sb), None).expect("b"),
        );
        assert_eq!(
            pa.roots.workspace_root,
            std::fs::canonicalize(&a).expect("canon")
        );
        assert_eq!(
            pb.roots.workspace_root,
            std::fs::canonicalize(&b).expect("canon")
        );
        assert_eq!(
            (pa.mode, pb.mode),
            (SandboxMode::WorkspaceWrite, SandboxMode::ReadOnly)
        );
    }

    #[test]
    fn a_session_cwd_through_symlink_dotdot_is_where_commands_run() {
        let dir = tempfile::tempdir().expect("tempdir");
        let base = std::fs::canonicalize(dir.path()).expect("canon");
        std::fs::create_dir_all(base.join("real/inner")).expect("mkdir");
        std::os::unix::fs::symlink(base.join("real/inner"), base.join("link")).expect("symlink");
        let service = PolicyService::new(SandboxMode::ReadOnly, &base).expect("service");
        let session = Session::new("s", &base.join("link/.."));
        let root = service
            .resolve(Some(&session), None)
            .expect("r")
            .roots
            .workspace_root
            .clone();
        assert_eq!(root, base.join("real"));
    }

    #[test]
    fn a_bad_extra_root_is_a_load_error_with_its_code_and_a_good_one_reaches_every_call() {
        let dir = sandbox_test_support::scratch_dir("unit-");
        let base = std::fs::canonicalize(dir.path()).expect("canon");
        let (ws, extra) = (base.join("ws"), base.join("extra"));
        std::fs::create_dir_all(&ws).expect("ws");
        std::fs::create_dir_all(&extra).expect("extra");
        let service = || PolicyService::new(SandboxMode::WorkspaceWrite, &ws).expect("service");
        for (root, code) in [
            (PathBuf::from("rel"), "WRITABLE_ROOT_RELATIVE"),
            (base.join("missing"), "WRITABLE_ROOT_MISSING"),
            (PathBuf::from("/usr"), "WRITABLE_ROOT_TOO_BROAD"),
        ] {
            let err = service()
                .with_writable_roots(std::slice::from_ref(&root))
                .expect_err(code);
            assert!(err.to_string().starts_with(code), "{err}");
        }
        let service = service()
            .with_writable_roots(std::slice::from_ref(&extra))
            .expect("extra");
        let stamp = service.resolve(None, None).expect("stamp");
        assert_eq!(stamp.roots.extra_roots.len(), 1);
        assert!(stamp.roots.extra_roots[0].pin.is_some());
        assert_eq!(
            stamp.roots.protected_paths,
            sandbox::ProtectedPath::defaults()
        );
        assert!(stamp.check().expect("roots").contains(&extra));
    }

    #[test]
    fn a_bad_socket_allowance_is_a_load_error_with_its_code_and_a_good_one_reaches_every_call() {
        let dir = sandbox_test_support::scratch_dir("unit-");
        let base = std::fs::canonicalize(dir.path()).expect("canon");
        let (ws, extra, agent) = (base.join("ws"), base.join("extra"), base.join("agent"));
        for d in [&ws, &extra, &agent] {
            std::fs::create_dir_all(d).expect("dir");
        }
        let sock = agent.join("agent.sock");
        let _listener = std::os::unix::net::UnixListener::bind(&sock).expect("bind");
        let _in_extra = std::os::unix::net::UnixListener::bind(extra.join("s")).expect("bind");
        std::fs::write(agent.join("plain"), "x").expect("write");
        let service = || {
            PolicyService::new(SandboxMode::WorkspaceWrite, &ws)
                .and_then(|s| s.with_writable_roots(std::slice::from_ref(&extra)))
                .expect("service")
        };
        for (path, code) in [
            (PathBuf::from("agent.sock"), sandbox::UNIX_SOCKET_RELATIVE),
            (agent.join("gone"), sandbox::UNIX_SOCKET_MISSING),
            (agent.join("plain"), sandbox::UNIX_SOCKET_NOT_A_SOCKET),
            (extra.join("s"), sandbox::UNIX_SOCKET_NOT_GRANTABLE),
        ] {
            let err = service()
                .with_allow_unix_sockets(std::slice::from_ref(&path))
                .expect_err(code);
            assert!(err.to_string().starts_with(code), "{err}");
        }
        let service = service()
            .with_allow_unix_sockets(std::slice::from_ref(&sock))
            .expect("allowed");
        let stamp = service.resolve(None, None).expect("stamp");
        assert_eq!(stamp.roots.allow_unix_sockets, std::slice::from_ref(&sock));
        let provider = stamp.for_provider().expect("confined");
        assert_eq!(provider.roots.allow_unix_sockets, [sock]);
    }

    #[test]
    fn a_missing_configured_root_fails_loudly() {
        assert!(matches!(
            PolicyService::new(SandboxMode::ReadOnly, Path::new("/nonexistent/root")),
            Err(PolicyError::NotADirectory(_))
        ));
    }
}
