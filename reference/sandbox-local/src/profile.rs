//! The argv each backend wraps a payload in. Pure: paths in, argv out. Every profile starts from
//! the same canonical writable set and grants `/dev/null` in every confined mode, never all of
//! `/dev`.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use landlock_run::cli::{LaunchArgs, Namespace, WritableRoot};
use sandbox::{NetworkMode, ProtectedPlan, ProviderPolicy, RootError};

/// The Seatbelt dialect lives in [`crate::seatbelt`]; its entry points stay reachable here.
pub use crate::seatbelt::{SEATBELT_TRAMPOLINE, seatbelt_args, seatbelt_profile};

/// The descriptor number every status channel uses in the child.
pub const STATUS_FD: i32 = 3;

/// The one device every confined mode may write.
pub const DEV_NULL: &str = "/dev/null";

/// What a profile needs to know about the writable set.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WritableSet {
    /// The canonical workspace root, when the mode writes to it (it must exist: a missing root
    /// is a runner failure, never a silently narrower sandbox).
    pub workspace: Option<PathBuf>,
    /// The other writable roots (`/tmp`, `$TMPDIR`; with a private temp area, its `tmp` where
    /// no mount shows it at `/tmp`), granted only if they exist.
    pub temp: Vec<PathBuf>,
    /// The session's private temp area (canonical; it holds `tmp` and `work`, see
    /// [`sandbox::TempArea`]); `None` when the host's temp places are shared.
    pub temp_area: Option<PathBuf>,
    /// The launcher mounts [`WritableSet::temp_area`] at `/tmp` (`--tmp-area`): set by the
    /// provider for a backend with a mount namespace.
    pub area_at_tmp: bool,
    /// The deployment's extra writable roots (they must exist, like the workspace).
    pub extra: Vec<PathBuf>,
    /// The protected paths inside those roots and how each dialect keeps them unwritten.
    pub protected: ProtectedPlan,
    /// The dialect keeps protected paths by mounts (bwrap, the launcher), so a path that does not
    /// exist yet is not covered; `false` for a path-based dialect (Seatbelt).
    pub protected_by_mounts: bool,
    /// The named unix sockets the deployment allowed (`allow_unix_sockets`, as configured and
    /// checked): the launcher is then told `--allow-unix-sockets`.
    pub unix_sockets: Vec<PathBuf>,
    /// What the launcher prevents while the call runs (`--prevent`): set under `workspace-write`
    /// when the policy protects paths.
    pub prevent: Option<Prevention>,
    /// The most data each payload process may map, in bytes (the launcher's `--memory`,
    /// `RLIMIT_DATA`); `None` sets no limit. Not a write: the launch's one resource bound.
    pub memory_limit: Option<u64>,
}

/// What the launcher's emulator refuses while the call runs (git's code surface everywhere, and
/// these protected paths), and where it stages new git directories.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Prevention {
    /// The roots the protected paths are relative to (the workspace and the extra roots).
    pub anchors: Vec<PathBuf>,
    /// The protected paths, relative (they apply at every worktree top below an anchor too).
    pub patterns: Vec<PathBuf>,
    /// The names protected in every folder ([`sandbox::PROTECTED_IN_EVERY_FOLDER`] the policy
    /// protects).
    pub everywhere: Vec<OsString>,
    /// The child descriptor of the launch's staging directory (made per launch by the provider);
    /// without one, new git directories are refused.
    pub stage_fd: Option<i32>,
    /// The directory holding it, stable for this process: bwrap binds it at its own path so the
    /// launcher inside finds the staging directory there.
    pub stage_root: Option<PathBuf>,
}

impl Prevention {
    /// The prevention of `policy`, or `None` when it has nothing to prevent (`read-only`, or no
    /// protected path: then git's surface is not protected either).
    pub fn of(policy: &ProviderPolicy) -> Option<Prevention> {
        if policy.mode == sandbox::ConfinedMode::ReadOnly || policy.roots.protected_paths.is_empty()
        {
            return None;
        }
        let mut anchors: Vec<PathBuf> = Vec::new();
        for root in std::iter::once(&policy.roots.workspace_root)
            .chain(policy.roots.extra_roots.iter().map(|r| &r.path))
        {
            if let Ok(c) = sandbox::canonical_path(root)
                && !anchors.contains(&c)
            {
                anchors.push(c);
            }
        }
        let patterns: Vec<PathBuf> = policy
            .roots
            .protected_paths
            .iter()
            .map(|p| p.as_path().to_path_buf())
            .collect();
        let everywhere = sandbox::PROTECTED_IN_EVERY_FOLDER
            .iter()
            .filter(|name| patterns.iter().any(|p| p.as_os_str() == **name))
            .map(OsString::from)
            .collect();
        Some(Prevention {
            anchors,
            patterns,
            everywhere,
            stage_fd: None,
            stage_root: None,
        })
    }

    /// Sets the launcher's `--prevent` and its companions on `launch`.
    fn apply(&self, launch: &mut LaunchArgs) {
        launch.prevent = true;
        launch.stage_fd = self.stage_fd;
        launch.anchors.clone_from(&self.anchors);
        launch.protected_rel.clone_from(&self.patterns);
        launch.protected_names.clone_from(&self.everywhere);
    }
}

impl WritableSet {
    /// Splits [`sandbox::writable_roots`] output into the workspace root and the temp roots.
    pub fn from_roots(roots: Vec<PathBuf>, workspace_root: &Path) -> WritableSet {
        let workspace = sandbox::canonical_path(workspace_root).ok();
        let mut set = WritableSet::default();
        for root in roots {
            if Some(&root) == workspace.as_ref() {
                set.workspace = Some(root);
            } else {
                set.temp.push(root);
            }
        }
        set
    }

    /// The writable set of `policy`: [`sandbox::writable_roots`] split into the workspace, the
    /// temp roots and the extra roots, with [`sandbox::protected_plan`]. The roots are checked
    /// first; nothing runs on a bad policy.
    pub fn of(policy: &ProviderPolicy) -> Result<WritableSet, RootError> {
        let roots = sandbox::writable_roots(policy)?;
        let protected = sandbox::protected_plan(policy, &roots)?;
        let extras: Vec<PathBuf> = policy
            .roots
            .extra_roots
            .iter()
            .filter_map(|r| sandbox::canonical_path(&r.path).ok())
            .collect();
        let mut set = WritableSet::from_roots(Vec::new(), &policy.roots.workspace_root);
        let workspace = sandbox::canonical_path(&policy.roots.workspace_root).ok();
        for root in roots {
            if Some(&root) == workspace.as_ref() {
                set.workspace = Some(root);
            } else if extras.contains(&root) {
                set.extra.push(root);
            } else {
                set.temp.push(root);
            }
        }
        set.protected = protected;
        if let sandbox::TempArea::Private(area) = &policy.roots.temp_area {
            set.temp_area = Some(sandbox::canonical_path(area)?);
        }
        sandbox::check_unix_sockets(policy)?;
        set.unix_sockets = policy.roots.allow_unix_sockets.clone();
        set.prevent = Prevention::of(policy);
        Ok(set)
    }
}

fn os(s: &str) -> OsString {
    OsString::from(s)
}

/// bwrap's isolation flags, the same in every mode. A user namespace (`--unshare-user`) and
/// `--cap-drop ALL` leave the payload no capability over the host even when bwrap runs as root
/// (without them root's payload can remount `/` read-write), and `--disable-userns` keeps it from
/// nesting a user namespace of its own (where an unprivileged payload would regain capabilities
/// over new mounts); a PID namespace (`--unshare-pid`)
/// hides every host process, so `/proc/<pid>/root` and `/proc/<pid>/fd` of the caller are out of
/// reach, and when its init dies every process the payload started dies with it;
/// an IPC namespace (`--unshare-ipc`) gives the payload SysV IPC and POSIX message queues of its
/// own, so the host's are out of reach while its own processes still share theirs;
/// `--new-session` detaches it from the caller's terminal (no `TIOCSTI` injection);
/// `--die-with-parent` ends the sandbox if the caller dies.
pub const BWRAP_ISOLATION: [&str; 8] = [
    "--unshare-user",
    "--disable-userns",
    "--unshare-pid",
    "--unshare-ipc",
    "--new-session",
    "--die-with-parent",
    "--cap-drop",
    "ALL",
];

/// What one bwrap bind is for: it decides read-write or read-only, and which pin and which code
/// a swap is refused with ([`crate::bind::open_binds`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BindKind {
    /// The workspace root (read-write; `WORKSPACE_MOVED`).
    Workspace,
    /// A temp root, `/tmp` or `$TMPDIR` (read-write, left out when missing; `TEMP_DIR_MOVED`).
    Temp,
    /// An extra writable root (read-write; `WRITABLE_ROOT_MOVED`).
    Extra,
    /// A directory on the way to a protected path, made a mount point (read-write).
    Pinned,
    /// A protected path, bound read-only onto itself.
    ReadOnly,
}

/// A path bwrap binds onto itself, before it is opened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BindTarget {
    /// What it is for.
    pub kind: BindKind,
    /// Its canonical path: where the directory is opened and where bwrap mounts it.
    pub path: PathBuf,
}

impl BindTarget {
    /// True for a read-write bind (every kind but [`BindKind::ReadOnly`]).
    pub fn writable(&self) -> bool {
        self.kind != BindKind::ReadOnly
    }
}

/// A bind bwrap makes from an open descriptor: `--bind-fd FD DEST` or `--ro-bind-fd FD DEST`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FdBind {
    /// The descriptor's number in bwrap (a [`sandbox::LaunchFds`] number).
    pub fd: i32,
    /// Where it is mounted (its canonical path, resolved by bwrap in the new root).
    pub dest: PathBuf,
    /// Read-write (`--bind-fd`) or read-only (`--ro-bind-fd`).
    pub writable: bool,
    /// The device and inode of the directory the descriptor holds: the launcher inside bwrap
    /// checks that what is mounted at `dest` is this very directory (`--rw-identity`).
    pub identity: Option<sandbox::DirIdentity>,
}

/// What bwrap binds for `set`, in order: the workspace, the temp roots, the extra roots, then the
/// protected paths (the directories on the way pinned as mount points, then the protected paths
/// bound read-only). Each is opened as a descriptor before bwrap starts
/// ([`crate::bind::open_binds`]); bwrap never binds one by its path.
pub fn bwrap_binds(set: &WritableSet) -> Vec<BindTarget> {
    let target = |kind, path: &PathBuf| BindTarget {
        kind,
        path: path.clone(),
    };
    let mut binds: Vec<BindTarget> = set
        .workspace
        .iter()
        .map(|ws| target(BindKind::Workspace, ws))
        .collect();
    binds.extend(set.temp.iter().map(|t| target(BindKind::Temp, t)));
    binds.extend(set.extra.iter().map(|r| target(BindKind::Extra, r)));
    binds.extend(
        set.protected
            .pinned
            .iter()
            .map(|d| target(BindKind::Pinned, d)),
    );
    binds.extend(
        set.protected
            .read_only
            .iter()
            .map(|p| target(BindKind::ReadOnly, p)),
    );
    binds
}

/// bwrap: read-only bind of `/`, a fresh `/dev` (its `null` is writable) and `/proc` with a
/// read-only `/proc/sys`, the isolation flags ([`BWRAP_ISOLATION`]), then `binds` (from
/// [`bwrap_binds`], each an open descriptor: a writable bind per root, then the protected paths,
/// the pinned directories and the read-only binds). With `status_fd`,
/// bwrap writes its JSON status records there. With the network `restricted`, `--unshare-net`
/// gives the payload a network namespace of its own with only a loopback device: nothing of the
/// host's network (TCP, UDP, abstract unix sockets) is reachable; a unix socket bound to a host
/// path still is (connecting is not a write).
///
/// bwrap resolves each destination in the new root, a read-only bind of the host's `/`, so a
/// destination whose parent was swapped for a symlink may mount the pinned directory somewhere
/// else in the sandbox's view: what is mounted is still the pinned directory (bwrap checks the
/// mount against the descriptor and fails when they differ), and that view is the sandbox's own.
///
/// With `guard` (the launcher's path), bwrap runs the launcher and the launcher runs the payload
/// ([`bwrap_guard_args`], which takes its roots from `set`): the launcher's seccomp guard and
/// Landlock ruleset apply inside bwrap's namespaces, and the status channel is the launcher's
/// (`status_fd` passes through bwrap, which leaves descriptors it is not told about open).
pub fn bwrap_args(
    set: &WritableSet,
    binds: &[FdBind],
    network: NetworkMode,
    status_fd: Option<i32>,
    guard: Option<&Path>,
) -> Vec<OsString> {
    let mut args = vec![
        os("--ro-bind"),
        os("/"),
        os("/"),
        os("--dev"),
        os("/dev"),
        os("--proc"),
        os("/proc"),
        // bwrap covers /proc/sys only when the directory itself is writable, which it never is,
        // so the files in it stay writable to a payload whose uid is root on the host
        // (core_pattern would run a program as root at the next crash).
        os("--ro-bind"),
        os("/proc/sys"),
        os("/proc/sys"),
    ];
    args.extend(BWRAP_ISOLATION.iter().map(|a| os(a)));
    if guard.is_some() && (set.prevent.is_some() || set.area_at_tmp) {
        // The launcher inside mounts the staged git directories and the private temp area; it
        // drops this capability (and every other) before the payload runs.
        args.extend([os("--cap-add"), os("CAP_SYS_ADMIN")]);
    }
    if guard.is_some() && set.area_at_tmp {
        // overlayfs works in its work directory (made mode 0) with its mounter's credentials,
        // which must override file permissions there; held in bwrap's user namespace only, and
        // dropped by the launcher with the rest.
        args.extend([os("--cap-add"), os("CAP_DAC_OVERRIDE")]);
    }
    if network.is_restricted() {
        args.push(os("--unshare-net"));
    }
    // The roots, then the protected paths: each directory on the way is made a mount point (a
    // writable bind onto itself), so it cannot be renamed or removed (EBUSY), then each existing
    // protected path is bound read-only onto itself (EROFS; a rename over it or of it is EBUSY).
    for bind in binds {
        let flag = if bind.writable {
            "--bind-fd"
        } else {
            "--ro-bind-fd"
        };
        args.extend([os(flag), os(&bind.fd.to_string()), bind.dest.clone().into()]);
    }
    match guard {
        Some(launcher) => {
            args.push(os("--"));
            args.extend(bwrap_guard_args(launcher, set, binds, network, status_fd));
        }
        None => {
            if let Some(fd) = status_fd {
                args.extend([os("--json-status-fd"), os(&fd.to_string())]);
            }
            args.push(os("--"));
        }
    }
    args
}

/// The launcher's flag for a policy that allows named unix sockets.
pub use landlock_run::cli::ALLOW_UNIX_SOCKETS_FLAG;

/// What every launch of the launcher shares: the memory limit, the status channel, the network
/// rule, the unix-socket allowance, `--ro /`, then `--rw` for the workspace, each existing temp
/// root and the extra roots, each with its identity when `identity` knows it.
fn launch_of(
    set: &WritableSet,
    network: NetworkMode,
    status_fd: Option<i32>,
    identity: impl Fn(&PathBuf) -> Option<(u64, u64)>,
) -> LaunchArgs {
    let roots = set
        .workspace
        .iter()
        .chain(set.temp.iter().filter(|t| t.exists()))
        .chain(&set.extra);
    let mut launch = LaunchArgs {
        memory: set.memory_limit,
        status_fd,
        net_restricted: network.is_restricted(),
        allow_unix_sockets: !set.unix_sockets.is_empty(),
        read_only: vec![PathBuf::from("/")],
        read_write: roots
            .map(|root| WritableRoot {
                path: root.clone(),
                identity: identity(root),
            })
            .collect(),
        ..LaunchArgs::default()
    };
    if let Some(prevent) = &set.prevent {
        prevent.apply(&mut launch);
    }
    match &set.temp_area {
        Some(area) if set.area_at_tmp => {
            launch.tmp_area = Some(area.clone());
            if set.workspace.is_some() {
                // Under workspace-write the payload writes its /tmp, which is then the area's.
                launch.read_write.push(WritableRoot::new(TMP));
            }
        }
        // No mount: the area's `tmp` is a writable root of its own and the payload's $TMPDIR.
        Some(area) => launch.tmpdir = Some(area.join("tmp")),
        None => {}
    }
    launch
}

/// Where a private temp area is seen when a mount shows it.
pub const TMP: &str = "/tmp";

/// The launcher inside bwrap: `--ipc private` (bwrap's `--unshare-ipc` made SysV IPC and POSIX
/// message queues the sandbox's own), the network flag, then `--ro /`, `--rw` per writable root
/// and `/dev` (bwrap's fresh `/dev`, its own tmpfs: the payload may write there as it may under
/// bwrap alone), ending with `--`. No `--pin` or `--protect`: bwrap's binds already keep the
/// protected paths. Landlock then refuses what a read-only bind does not: opening a host FIFO
/// outside the writable set for writing.
pub fn bwrap_guard_args(
    launcher: &Path,
    set: &WritableSet,
    binds: &[FdBind],
    network: NetworkMode,
    status_fd: Option<i32>,
) -> Vec<OsString> {
    // Each root with the identity of the directory bwrap was handed for it: bwrap turns a
    // descriptor back into a path before it mounts, so a swap racing it could mount another
    // directory there; the launcher then refuses to grant it (the call fails closed).
    let identity = |root: &PathBuf| {
        binds
            .iter()
            .find(|b| b.writable && b.dest == *root)
            .and_then(|b| b.identity)
            .map(|id| (id.dev, id.ino))
    };
    let mut launch = launch_of(set, network, status_fd, identity);
    launch.ipc = Namespace::Private;
    launch.pids = Namespace::Private;
    launch.read_write.push(WritableRoot::new("/dev"));
    let mut args = vec![launcher.as_os_str().to_owned()];
    args.extend(launch.flags());
    args
}

/// The Landlock launcher: `--ro /`, `--rw` per existing root and `/dev/null`,
/// `--net restricted` when the network is restricted (TCP from Landlock ABI 4; see
/// `landlock_run::net` for what it cannot govern), then `--pin` and `--protect` for the
/// protected paths (the launcher binds them in a private mount namespace).
pub fn landlock_args(
    set: &WritableSet,
    network: NetworkMode,
    abi_cap: Option<u32>,
    status_fd: Option<i32>,
) -> Vec<OsString> {
    let mut launch = launch_of(set, network, status_fd, |_| None);
    // A PID namespace of its own wherever the launcher can make one: no host process of the
    // payload's uid is then within its reach.
    launch.pid_namespace = true;
    launch.abi_cap = abi_cap;
    launch.read_write.push(WritableRoot::new(DEV_NULL));
    launch.pinned.clone_from(&set.protected.pinned);
    launch.protected.clone_from(&set.protected.read_only);
    launch.flags()
}

/// `program` followed by `args` and then `payload`.
pub fn assemble(program: &OsStr, args: Vec<OsString>, payload: &[OsString]) -> Vec<OsString> {
    let mut argv = Vec::with_capacity(1 + args.len() + payload.len());
    argv.push(program.to_os_string());
    argv.extend(args);
    argv.extend(payload.iter().cloned());
    argv
}
