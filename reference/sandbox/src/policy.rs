//! The per-call policy and its provider-facing narrowing.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::enforcement::EnforcementClass;
use crate::mode::{ConfinedMode, NetworkMode, SandboxMode};
use crate::protected::ProtectedPath;
use crate::workspace::{DirIdentity, PinnedDir, RootError};

/// A writable root beyond the workspace, configured per deployment: checked like the workspace
/// (absolute, an existing directory, not `/`, a system directory or the home directory or an
/// ancestor of it) and, once pinned, required to stay the same directory.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ExtraRoot {
    /// The root as configured (absolute).
    pub path: PathBuf,
    /// The directory it was when it was pinned (`WRITABLE_ROOT_MOVED` otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pin: Option<DirIdentity>,
}

impl ExtraRoot {
    /// An extra root, not pinned yet.
    pub fn new(path: impl Into<PathBuf>) -> ExtraRoot {
        ExtraRoot {
            path: path.into(),
            pin: None,
        }
    }

    /// The same root pinned as it resolves now (it must be an existing directory).
    pub fn pinned(self) -> Result<ExtraRoot, RootError> {
        let pin = crate::paths::check_extra_root(&self, None)?.1;
        Ok(ExtraRoot {
            path: self.path,
            pin: Some(pin),
        })
    }
}

fn default_protected() -> Vec<ProtectedPath> {
    ProtectedPath::defaults()
}

fn is_default_protected(p: &[ProtectedPath]) -> bool {
    p == ProtectedPath::defaults().as_slice()
}

/// The complete policy resolved for one capability call: the mode it runs under and the workspace
/// root `workspace-write` may write beneath. Carried per call, never fixed on a provider.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecutionPolicy {
    /// The effective mode of this call.
    pub mode: SandboxMode,
    /// The network this call may reach (`enabled` when absent: the seeds' behaviour).
    #[serde(default)]
    pub network: NetworkMode,
    /// The workspace root (already canonicalized by whoever resolved the policy).
    pub workspace_root: PathBuf,
    /// The `$TMPDIR` the command will see, which `workspace-write` also makes writable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temp_dir: Option<PathBuf>,
    /// The directory the workspace root was when it was set: a call whose root now resolves to
    /// another directory fails closed (`WORKSPACE_MOVED`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace_pin: Option<PinnedDir>,
    /// The directory the temp dir was when it was set (`TEMP_DIR_MOVED` otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temp_dir_pin: Option<PinnedDir>,
    /// Writable roots beyond the workspace (`workspace-write` only), configured per deployment.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extra_roots: Vec<ExtraRoot>,
    /// Paths inside the workspace and every extra root that are never written
    /// (default [`crate::DEFAULT_PROTECTED_PATHS`]).
    #[serde(
        default = "default_protected",
        skip_serializing_if = "is_default_protected"
    )]
    pub protected_paths: Vec<ProtectedPath>,
    /// Named unix sockets on the host the payload may connect to (an ssh agent's
    /// `$SSH_AUTH_SOCK`), configured per deployment; empty (the default): none. Checked before
    /// anything runs ([`crate::check_unix_sockets`]); a backend that cannot allow them by path
    /// reports `host-ipc` as `partial` and lists them under `allowed`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_unix_sockets: Vec<PathBuf>,
}

impl ExecutionPolicy {
    /// A policy for `mode` in `workspace_root` whose temp dir is this process's `$TMPDIR`, with
    /// nothing pinned yet.
    pub fn new(mode: SandboxMode, workspace_root: impl Into<PathBuf>) -> Self {
        ExecutionPolicy {
            mode,
            network: NetworkMode::default(),
            workspace_root: workspace_root.into(),
            temp_dir: std::env::var_os("TMPDIR").map(PathBuf::from),
            workspace_pin: None,
            temp_dir_pin: None,
            extra_roots: Vec::new(),
            protected_paths: ProtectedPath::defaults(),
            allow_unix_sockets: Vec::new(),
        }
    }

    /// The same policy with the workspace root and the temp dir pinned as they resolve now. The
    /// workspace must be an existing directory; a temp dir that does not exist is not pinned
    /// (and is never made writable).
    pub fn pinned(mut self) -> Result<Self, RootError> {
        self.workspace_pin = Some(PinnedDir::pin(&self.workspace_root)?);
        self.temp_dir_pin = self
            .temp_dir
            .as_ref()
            .filter(|t| t.is_absolute() && t.is_dir())
            .and_then(|t| PinnedDir::pin(t).ok());
        self.extra_roots = std::mem::take(&mut self.extra_roots)
            .into_iter()
            .map(|r| match r.pin {
                Some(_) => Ok(r),
                None => r.pinned(),
            })
            .collect::<Result<_, _>>()?;
        Ok(self)
    }

    /// Checks the roots before anything runs and returns the writable set (empty when nothing is
    /// writable through the sandbox): see [`crate::writable_roots`]. Under `danger-full-access`
    /// only the workspace itself is checked (it exists, is a directory, is still the pinned one).
    pub fn check(&self) -> Result<Vec<PathBuf>, RootError> {
        match self.for_provider() {
            Some(provider) => crate::writable_roots(&provider),
            None => {
                let mut narrowed =
                    ProviderPolicy::new(ConfinedMode::ReadOnly, &self.workspace_root);
                narrowed.workspace_pin = self.workspace_pin.clone();
                narrowed.allow_unix_sockets = self.allow_unix_sockets.clone();
                crate::writable_roots(&narrowed).map(|_| Vec::new())
            }
        }
    }

    /// The same policy with another network mode.
    pub fn with_network(mut self, network: NetworkMode) -> Self {
        self.network = network;
        self
    }

    /// The same policy with these writable roots beyond the workspace (checked when pinned).
    pub fn with_extra_roots(mut self, roots: Vec<ExtraRoot>) -> Self {
        self.extra_roots = roots;
        self
    }

    /// The same policy with these protected paths instead of the defaults.
    pub fn with_protected_paths(mut self, paths: Vec<ProtectedPath>) -> Self {
        self.protected_paths = paths;
        self
    }

    /// The same policy allowing the payload to connect to these named unix sockets.
    pub fn with_allow_unix_sockets(mut self, sockets: Vec<PathBuf>) -> Self {
        self.allow_unix_sockets = sockets;
        self
    }

    /// The policy a provider must enforce, or `None` when the call runs unconfined
    /// (`danger-full-access`, which never reaches a provider).
    pub fn for_provider(&self) -> Option<ProviderPolicy> {
        self.mode.confined().map(|mode| ProviderPolicy {
            mode,
            network: self.network,
            workspace_root: self.workspace_root.clone(),
            temp_dir: self.temp_dir.clone(),
            workspace_pin: self.workspace_pin.clone(),
            temp_dir_pin: self.temp_dir_pin.clone(),
            cwd: None,
            extra_roots: self.extra_roots.clone(),
            protected_paths: self.protected_paths.clone(),
            allow_unix_sockets: self.allow_unix_sockets.clone(),
        })
    }
}

/// The policy a provider enforces: a confined mode and the same workspace root.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProviderPolicy {
    /// The confined mode.
    pub mode: ConfinedMode,
    /// The network the command may reach (`enabled` when absent).
    #[serde(default)]
    pub network: NetworkMode,
    /// The workspace root.
    pub workspace_root: PathBuf,
    /// The `$TMPDIR` the command will see (writable under `workspace-write` when absolute).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temp_dir: Option<PathBuf>,
    /// The directory the workspace root must still be (see [`ExecutionPolicy::workspace_pin`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace_pin: Option<PinnedDir>,
    /// The directory the temp dir must still be.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temp_dir_pin: Option<PinnedDir>,
    /// The directory the confined command will run in, when the caller knows it. Only carried
    /// (an external backend receives it as the protocol's `cwd`); it widens nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<PathBuf>,
    /// Writable roots beyond the workspace (see [`ExecutionPolicy::extra_roots`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extra_roots: Vec<ExtraRoot>,
    /// Paths never written (see [`ExecutionPolicy::protected_paths`]).
    #[serde(
        default = "default_protected",
        skip_serializing_if = "is_default_protected"
    )]
    pub protected_paths: Vec<ProtectedPath>,
    /// Named unix sockets the payload may connect to (see [`ExecutionPolicy::allow_unix_sockets`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_unix_sockets: Vec<PathBuf>,
}

impl ProviderPolicy {
    /// A policy whose temp dir is this process's `$TMPDIR` (what a spawned command inherits),
    /// with nothing pinned.
    pub fn new(mode: ConfinedMode, workspace_root: impl Into<PathBuf>) -> Self {
        ProviderPolicy {
            mode,
            network: NetworkMode::default(),
            workspace_root: workspace_root.into(),
            temp_dir: std::env::var_os("TMPDIR").map(PathBuf::from),
            workspace_pin: None,
            temp_dir_pin: None,
            cwd: None,
            extra_roots: Vec::new(),
            protected_paths: ProtectedPath::defaults(),
            allow_unix_sockets: Vec::new(),
        }
    }

    /// The same policy with another network mode.
    pub fn with_network(mut self, network: NetworkMode) -> Self {
        self.network = network;
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

    /// The same policy with extra writable roots (checked by [`crate::writable_roots`]).
    pub fn with_extra_roots(mut self, roots: Vec<ExtraRoot>) -> Self {
        self.extra_roots = roots;
        self
    }

    /// The same policy with another set of protected paths (empty: none).
    pub fn with_protected_paths(mut self, paths: Vec<ProtectedPath>) -> Self {
        self.protected_paths = paths;
        self
    }

    /// The same policy allowing the payload to connect to these named unix sockets.
    pub fn with_allow_unix_sockets(mut self, sockets: Vec<PathBuf>) -> Self {
        self.allow_unix_sockets = sockets;
        self
    }

    /// The same policy with another temp dir (`None`: the command sees no `$TMPDIR`).
    pub fn with_temp_dir(mut self, temp_dir: Option<PathBuf>) -> Self {
        self.temp_dir = temp_dir;
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
}
