//! The per-call policy and its provider-facing narrowing, each carrying its [`Roots`] whole.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::enforcement::EnforcementClass;
use crate::mode::{ConfinedMode, NetworkMode, SandboxMode};
use crate::roots::Roots;
use crate::workspace::RootError;

/// The complete policy resolved for one capability call: the mode it runs under and the roots
/// `workspace-write` may write beneath. Carried per call, never fixed on a provider. Its writable
/// set is [`ExecutionPolicy::roots`] (`policy.roots.workspace_root`), changed with [`Roots`]'s
/// own builders ([`ExecutionPolicy::with_roots`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecutionPolicy {
    /// The effective mode of this call.
    pub mode: SandboxMode,
    /// The network this call may reach (`enabled` when absent: the seeds' behaviour).
    #[serde(default)]
    pub network: NetworkMode,
    /// The writable set and its pins (the workspace root already canonicalized by whoever
    /// resolved the policy); its fields are this policy's own keys on the wire.
    #[serde(flatten)]
    pub roots: Roots,
}

impl ExecutionPolicy {
    /// A policy for `mode` over `roots`, the network enabled. Reads nothing.
    pub fn from_roots(mode: SandboxMode, roots: Roots) -> Self {
        ExecutionPolicy {
            mode,
            network: NetworkMode::default(),
            roots,
        }
    }

    /// A policy for `mode` in `workspace_root` whose temp dir is this process's `$TMPDIR`
    /// ([`Roots::from_env`]), with nothing pinned yet.
    pub fn new(mode: SandboxMode, workspace_root: impl Into<PathBuf>) -> Self {
        ExecutionPolicy::from_roots(mode, Roots::from_env(workspace_root))
    }

    /// The same policy with its roots pinned as they resolve now ([`Roots::pinned`]).
    pub fn pinned(mut self) -> Result<Self, RootError> {
        self.roots = self.roots.pinned()?;
        Ok(self)
    }

    /// Checks the roots before anything runs and returns the writable set (empty when nothing is
    /// writable through the sandbox): see [`crate::writable_roots`]. Under `danger-full-access`
    /// only the workspace itself (it exists, is a directory, is still the pinned one) and the
    /// allowed sockets are checked.
    pub fn check(&self) -> Result<Vec<PathBuf>, RootError> {
        match self.for_provider() {
            Some(provider) => crate::writable_roots(&provider),
            None => {
                let workspace_only = Roots {
                    extra_roots: Vec::new(),
                    ..self.roots.clone()
                };
                let narrowed = ProviderPolicy::from_roots(ConfinedMode::ReadOnly, workspace_only);
                crate::writable_roots(&narrowed).map(|_| Vec::new())
            }
        }
    }

    /// The same policy with another network mode.
    pub fn with_network(mut self, network: NetworkMode) -> Self {
        self.network = network;
        self
    }

    /// The same policy with its roots changed by `change` (the builders are [`Roots`]'s own:
    /// `policy.with_roots(|r| r.with_extra_roots(extra))`).
    pub fn with_roots(mut self, change: impl FnOnce(Roots) -> Roots) -> Self {
        self.roots = change(self.roots);
        self
    }

    /// The policy a provider must enforce, or `None` when the call runs unconfined
    /// (`danger-full-access`, which never reaches a provider).
    pub fn for_provider(&self) -> Option<ProviderPolicy> {
        self.mode.confined().map(|mode| {
            ProviderPolicy::from_roots(mode, self.roots.clone()).with_network(self.network)
        })
    }
}

/// The policy a provider enforces: a confined mode and the same [`Roots`] (`policy.roots`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProviderPolicy {
    /// The confined mode.
    pub mode: ConfinedMode,
    /// The network the command may reach (`enabled` when absent).
    #[serde(default)]
    pub network: NetworkMode,
    /// The writable set and its pins (see [`ExecutionPolicy::roots`]); its fields are this
    /// policy's own keys on the wire.
    #[serde(flatten)]
    pub roots: Roots,
    /// The directory the confined command will run in, when the caller knows it. Only carried
    /// (an external backend receives it as the protocol's `cwd`); it widens nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<PathBuf>,
}

impl ProviderPolicy {
    /// A policy for `mode` over `roots`, the network enabled, no working directory. Reads
    /// nothing.
    pub fn from_roots(mode: ConfinedMode, roots: Roots) -> Self {
        ProviderPolicy {
            mode,
            network: NetworkMode::default(),
            roots,
            cwd: None,
        }
    }

    /// A policy whose temp dir is this process's `$TMPDIR` (what a spawned command inherits:
    /// [`Roots::from_env`]), with nothing pinned.
    pub fn new(mode: ConfinedMode, workspace_root: impl Into<PathBuf>) -> Self {
        ProviderPolicy::from_roots(mode, Roots::from_env(workspace_root))
    }

    /// The same policy with another network mode.
    pub fn with_network(mut self, network: NetworkMode) -> Self {
        self.network = network;
        self
    }

    /// The same policy with its roots changed by `change` (the builders are [`Roots`]'s own:
    /// `policy.with_roots(|r| r.with_extra_roots(extra))`).
    pub fn with_roots(mut self, change: impl FnOnce(Roots) -> Roots) -> Self {
        self.roots = change(self.roots);
        self
    }

    /// The classes this policy restricts: `files` always, `network` when restricted. A launch's
    /// overall enforcement is the weakest of these ([`crate::ClassEnforcements::overall`]).
    pub fn restricted_classes(&self) -> Vec<EnforcementClass> {
        EnforcementClass::restricted_by(self.network)
    }

    /// The same policy, saying the command will run in `cwd`.
    pub fn with_cwd(mut self, cwd: impl Into<PathBuf>) -> Self {
        self.cwd = Some(cwd.into());
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::enforcement::EnforcementClass;

    #[test]
    fn the_network_rides_the_policy_to_the_provider() {
        let policy = ExecutionPolicy::new(SandboxMode::ReadOnly, "/w");
        assert_eq!(policy.network, NetworkMode::Enabled);
        let restricted = policy.with_network(NetworkMode::Restricted);
        let provider = restricted.for_provider().expect("confined");
        assert_eq!(provider.network, NetworkMode::Restricted);
        assert_eq!(
            provider.restricted_classes(),
            [EnforcementClass::Files, EnforcementClass::Network]
        );
        let plain = ProviderPolicy::new(ConfinedMode::ReadOnly, "/w");
        assert_eq!(plain.network, NetworkMode::Enabled);
        assert_eq!(plain.restricted_classes(), [EnforcementClass::Files]);
        assert_eq!(
            plain.with_network(NetworkMode::Restricted).network,
            NetworkMode::Restricted
        );
        // A policy written before the field reads as enabled.
        let old: ProviderPolicy =
            serde_json::from_str(r#"{"mode":"read-only","workspace_root":"/w"}"#).expect("de");
        assert_eq!(old.network, NetworkMode::Enabled);
    }

    fn full_roots() -> Roots {
        use crate::protected::ProtectedPath;
        use crate::roots::ExtraRoot;
        use crate::workspace::{DirIdentity, PinnedDir};
        let pin = |path: &str, ino| PinnedDir {
            path: path.into(),
            id: DirIdentity { dev: 7, ino },
        };
        Roots {
            workspace_pin: Some(pin("/w", 1)),
            temp_dir_pin: Some(pin("/t", 2)),
            ..Roots::new("/w", Some("/t".into()))
        }
        .with_extra_roots(vec![ExtraRoot {
            path: "/x".into(),
            pin: Some(DirIdentity { dev: 7, ino: 3 }),
        }])
        .with_protected_paths(vec![ProtectedPath::new(".envrc").expect("ok")])
        .with_allow_unix_sockets(vec!["/s.sock".into()])
    }

    /// The keys in the order both policies wrote them before their roots were one type.
    const ROOT_KEYS: &str = r#""workspace_root":"/w","temp_dir":"/t","workspace_pin":{"path":"/w","id":{"dev":7,"ino":1}},"temp_dir_pin":{"path":"/t","id":{"dev":7,"ino":2}}"#;
    const MORE_KEYS: &str = r#""extra_roots":[{"path":"/x","pin":{"dev":7,"ino":3}}],"protected_paths":[".envrc"],"allow_unix_sockets":["/s.sock"]"#;

    #[test]
    fn the_flattened_roots_keep_the_wire_of_both_policies() {
        let exec = ExecutionPolicy::from_roots(SandboxMode::WorkspaceWrite, full_roots());
        let text = serde_json::to_string(&exec).expect("json");
        assert_eq!(
            text,
            format!(r#"{{"mode":"workspace-write","network":"enabled",{ROOT_KEYS},{MORE_KEYS}}}"#)
        );
        assert_eq!(
            serde_json::from_str::<ExecutionPolicy>(&text).expect("de"),
            exec
        );
        let provider = exec.for_provider().expect("confined");
        assert_eq!(provider.roots, exec.roots);
        let text = serde_json::to_string(&provider).expect("json");
        assert_eq!(
            text,
            format!(r#"{{"mode":"workspace-write","network":"enabled",{ROOT_KEYS},{MORE_KEYS}}}"#)
        );
        // A working directory now follows the roots instead of sitting between the pins and the
        // extra roots. Nothing serialises a provider policy onto a recorded wire (the protocol
        // has its own request type), and a JSON object's keys are unordered to every reader: the
        // old order reads back as the same policy.
        let with_cwd = provider.with_cwd("/w/sub");
        let text = serde_json::to_string(&with_cwd).expect("json");
        assert!(text.ends_with(r#","cwd":"/w/sub"}"#), "{text}");
        let old_order = format!(
            r#"{{"mode":"workspace-write","network":"enabled",{ROOT_KEYS},"cwd":"/w/sub",{MORE_KEYS}}}"#
        );
        assert_eq!(
            serde_json::from_str::<ProviderPolicy>(&old_order).expect("de"),
            with_cwd
        );
        // The minimal wire is unchanged too, and reads back with the defaults.
        let bare = ProviderPolicy::from_roots(ConfinedMode::ReadOnly, Roots::new("/w", None));
        let text = serde_json::to_string(&bare).expect("json");
        assert_eq!(
            text,
            r#"{"mode":"read-only","network":"enabled","workspace_root":"/w"}"#
        );
        assert_eq!(
            serde_json::from_str::<ProviderPolicy>(&text).expect("de"),
            bare
        );
    }

    #[test]
    fn the_pure_constructors_read_no_environment() {
        let roots = Roots::new("/w", None);
        assert_eq!(roots.temp_dir, None);
        let exec = ExecutionPolicy::from_roots(SandboxMode::ReadOnly, roots.clone());
        assert_eq!(exec.roots, roots);
        assert_eq!(
            ProviderPolicy::from_roots(ConfinedMode::ReadOnly, roots.clone()).roots,
            roots
        );
        // The environment's constructor and the policies' `new` agree with it.
        let env = std::env::var_os("TMPDIR").map(PathBuf::from);
        assert_eq!(Roots::from_env("/w"), Roots::new("/w", env.clone()));
        assert_eq!(
            ExecutionPolicy::new(SandboxMode::ReadOnly, "/w").roots,
            Roots::new("/w", env)
        );
    }
}
