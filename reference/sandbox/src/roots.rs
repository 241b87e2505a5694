//! The writable set of a call and its pins, in one type: [`Roots`], embedded by
//! [`crate::ExecutionPolicy`], [`crate::ProviderPolicy`] and the policy service, and handed from
//! one to the next whole.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

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

/// What `workspace-write` may write and what it may reach on the host, with the identity each
/// directory had when it was set. Under `read-only` nothing here is writable, but the workspace
/// is still checked (and its pin enforced) and the sockets still allowed. The writable set itself
/// is [`crate::writable_roots`]: the workspace root, `/tmp`, the temp dir and the extra roots,
/// less the protected paths inside them.
///
/// Serialised flattened into the policy that carries it: its fields are the policy's own keys.
///
/// ```
/// use sandbox::{ExtraRoot, Roots};
///
/// // Pure: the temp dir is an argument ([`Roots::from_env`] reads `$TMPDIR`).
/// let roots = Roots::new("/srv/work", Some("/var/tmp/call".into()))
///     .with_extra_roots(vec![ExtraRoot::new("/srv/cache")]);
/// assert_eq!(roots.temp_dir.as_deref(), Some(std::path::Path::new("/var/tmp/call")));
/// assert!(roots.workspace_pin.is_none() && roots.allow_unix_sockets.is_empty());
/// assert_eq!(roots.protected_paths, sandbox::ProtectedPath::defaults());
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Roots {
    /// The workspace root: writable (and its protected paths not) under `workspace-write`, checked
    /// in every mode. Canonicalized by whoever resolved the policy.
    pub workspace_root: PathBuf,
    /// The `$TMPDIR` the command will see: writable under `workspace-write` when absolute and an
    /// existing directory (and not too broad: see [`crate::writable_roots`]); `None`: the command
    /// sees no `$TMPDIR`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temp_dir: Option<PathBuf>,
    /// The directory the workspace root was when it was set: a call whose root now resolves to
    /// another directory fails closed (`WORKSPACE_MOVED`). `None`: not pinned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace_pin: Option<PinnedDir>,
    /// The directory the temp dir was when it was set (`TEMP_DIR_MOVED` otherwise). `None`: not
    /// pinned, or a temp dir that did not exist then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temp_dir_pin: Option<PinnedDir>,
    /// Writable roots beyond the workspace (`workspace-write` only), configured per deployment.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extra_roots: Vec<ExtraRoot>,
    /// Paths inside the workspace and every extra root that are never written
    /// (default [`crate::DEFAULT_PROTECTED_PATHS`]; empty: none).
    #[serde(
        default = "default_protected",
        skip_serializing_if = "is_default_protected"
    )]
    pub protected_paths: Vec<ProtectedPath>,
    /// Named unix sockets on the host the payload may connect to (an ssh agent's
    /// `$SSH_AUTH_SOCK`), configured per deployment; empty (the default): none. Checked before
    /// anything runs ([`crate::check_unix_sockets`]); a backend that cannot allow them by path
    /// reports `host-ipc` as `partial` and lists them under `allowed`. They widen no file rule.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_unix_sockets: Vec<PathBuf>,
}

impl Roots {
    /// The roots of `workspace_root` with `temp_dir` as the command's `$TMPDIR`, nothing pinned,
    /// no extra root, the default protected paths and no socket. Reads nothing.
    pub fn new(workspace_root: impl Into<PathBuf>, temp_dir: Option<PathBuf>) -> Roots {
        Roots {
            workspace_root: workspace_root.into(),
            temp_dir,
            workspace_pin: None,
            temp_dir_pin: None,
            extra_roots: Vec::new(),
            protected_paths: ProtectedPath::defaults(),
            allow_unix_sockets: Vec::new(),
        }
    }

    /// [`Roots::new`] with this process's `$TMPDIR` (what a spawned command inherits) as the temp
    /// dir: the one place this crate reads the environment for a policy.
    pub fn from_env(workspace_root: impl Into<PathBuf>) -> Roots {
        Roots::new(
            workspace_root,
            std::env::var_os("TMPDIR").map(PathBuf::from),
        )
    }

    /// The same roots with the workspace root, the temp dir and every extra root not pinned yet
    /// pinned as they resolve now. The workspace and the extra roots must be existing
    /// directories; a temp dir that is not one is not pinned (and is never made writable).
    pub fn pinned(mut self) -> Result<Roots, RootError> {
        self.workspace_pin = Some(PinnedDir::pin(&self.workspace_root)?);
        let temp_dir = self.temp_dir.take();
        self = self.with_pinned_temp_dir(temp_dir);
        self.extra_roots = std::mem::take(&mut self.extra_roots)
            .into_iter()
            .map(|r| match r.pin {
                Some(_) => Ok(r),
                None => r.pinned(),
            })
            .collect::<Result<_, _>>()?;
        Ok(self)
    }

    /// The same roots with another temp dir, its pin left as it was.
    pub fn with_temp_dir(mut self, temp_dir: Option<PathBuf>) -> Roots {
        self.temp_dir = temp_dir;
        self
    }

    /// The same roots with another temp dir, pinned as it resolves now when it is an absolute
    /// existing directory (not pinned otherwise), so a swap later fails closed.
    pub fn with_pinned_temp_dir(mut self, temp_dir: Option<PathBuf>) -> Roots {
        self.temp_dir_pin = temp_dir
            .as_ref()
            .filter(|t| t.is_absolute() && t.is_dir())
            .and_then(|t| PinnedDir::pin(t).ok());
        self.temp_dir = temp_dir;
        self
    }

    /// The same roots with these writable roots beyond the workspace.
    pub fn with_extra_roots(mut self, roots: Vec<ExtraRoot>) -> Roots {
        self.extra_roots = roots;
        self
    }

    /// The same roots with these protected paths instead of the defaults (empty: none).
    pub fn with_protected_paths(mut self, paths: Vec<ProtectedPath>) -> Roots {
        self.protected_paths = paths;
        self
    }

    /// The same roots allowing the payload to connect to these named unix sockets.
    pub fn with_allow_unix_sockets(mut self, sockets: Vec<PathBuf>) -> Roots {
        self.allow_unix_sockets = sockets;
        self
    }
}
