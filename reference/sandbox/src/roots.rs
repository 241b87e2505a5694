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

/// Where a confined call's temporary files go: the host's `/tmp` is shared with every tool the
/// person runs (cargo, rustup and pytest read config from every parent folder; host processes
/// read FIFOs there), so what a payload plants there runs outside the sandbox.
///
/// ```
/// use sandbox::TempArea;
/// let area = TempArea::Private("/var/cache/s/tmp-area".into());
/// assert_eq!(area.dir().as_deref(), Some(std::path::Path::new("/var/cache/s/tmp-area/tmp")));
/// assert_eq!(TempArea::Shared.dir(), None);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub enum TempArea {
    /// The host's `/tmp` and the caller's `$TMPDIR`, writable under `workspace-write` and shared
    /// with the host (the seeds' behaviour): a deployment asks for it explicitly, and every
    /// launch reports it as a gap (`shared temp area`).
    #[default]
    Shared,
    /// A directory of the session's own, made by the trusted side (outside every writable root
    /// and outside `/tmp`) and removed with the session. It holds `tmp`, what the call sees,
    /// and `work`, a scratch directory on the same filesystem. Where the backend has a mount
    /// namespace, `/tmp` is an overlay of the host's `/tmp` whose writes go to `tmp` (the
    /// payload still sees what was there) and `$TMPDIR` is `/tmp`; where it has none, the
    /// host's `/tmp` is not writable and `$TMPDIR` is `tmp` itself. Neither the host's `/tmp`
    /// nor the caller's `$TMPDIR` is writable.
    Private(PathBuf),
}

impl TempArea {
    /// The directory that holds what the call writes as temp files (`<area>/tmp`), for a
    /// private area.
    pub fn dir(&self) -> Option<PathBuf> {
        match self {
            TempArea::Shared => None,
            TempArea::Private(area) => Some(area.join("tmp")),
        }
    }

    /// True for [`TempArea::Shared`].
    pub fn is_shared(&self) -> bool {
        *self == TempArea::Shared
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
    /// Where the call's temp files go: the session's private area, or the host's `/tmp` and
    /// `temp_dir` shared (the default of this value type; the policy service makes a private
    /// area per session unless the deployment asks for the shared one).
    #[serde(default, skip_serializing_if = "TempArea::is_shared")]
    pub temp_area: TempArea,
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
            temp_area: TempArea::Shared,
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

    /// The same roots with this temp area.
    pub fn with_temp_area(mut self, area: TempArea) -> Roots {
        self.temp_area = area;
        self
    }

    /// The `$TMPDIR` a command is given: the private area's `tmp` (a backend with a mount
    /// namespace shows it at `/tmp` and says so itself), else the caller's temp dir.
    pub fn command_tmpdir(&self) -> Option<PathBuf> {
        self.temp_area.dir().or_else(|| self.temp_dir.clone())
    }

    /// Where `path`, as a call sees it, lies on the host. With a private temp area a mount shows at
    /// `/tmp` (`at_tmp`, [`crate::SandboxProvider::temp_area_at_tmp`]), a path in `/tmp` outside
    /// the workspace and the extra roots (which the mount keeps the host's own) is the area's
    /// `tmp/<rest>`, where the call's writes there land; any other path is itself. Lexical (`..`
    /// is resolved by name, symlinks are not followed): the fence checks the result as it checks
    /// any path.
    ///
    /// ```
    /// use sandbox::{Roots, TempArea};
    /// use std::path::Path;
    /// let roots = Roots::new("/tmp/ws", None).with_temp_area(TempArea::Private("/c/a".into()));
    /// assert_eq!(roots.host_path(Path::new("/tmp/x/../y"), true), Path::new("/c/a/tmp/y"));
    /// assert_eq!(roots.host_path(Path::new("/tmp/ws/f"), true), Path::new("/tmp/ws/f"));
    /// assert_eq!(roots.host_path(Path::new("/tmp/y"), false), Path::new("/tmp/y"));
    /// ```
    pub fn host_path(&self, path: &std::path::Path, at_tmp: bool) -> PathBuf {
        let Some(area) = self.temp_area.dir().filter(|_| at_tmp) else {
            return path.to_path_buf();
        };
        let mut lexical = PathBuf::new();
        for part in path.components() {
            match part {
                std::path::Component::ParentDir => {
                    lexical.pop();
                }
                std::path::Component::CurDir => {}
                other => lexical.push(other),
            }
        }
        let Ok(rest) = lexical.strip_prefix("/tmp") else {
            return path.to_path_buf();
        };
        let kept = std::iter::once(&self.workspace_root)
            .chain(self.extra_roots.iter().map(|r| &r.path))
            .any(|root| lexical.starts_with(root));
        if kept {
            return path.to_path_buf();
        }
        area.join(rest)
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
