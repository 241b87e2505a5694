//! The steps that probe the host from inside: `net` and `host_ipc` listeners, forged runner
//! signatures, declared protected paths, and the writable set (`writable`, `walk`).

use serde::Deserialize;

/// A `net` step: the harness listens outside the sandbox on a loopback TCP port, a unix socket
/// bound to a path and an abstract unix socket; a payload confined under `mode` and `network`
/// tries to reach `target`; then what the listener recorded is checked (the world, not the exit
/// code, decides).
#[derive(Clone, Debug, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NetStep {
    /// The confined mode.
    pub mode: sandbox::ConfinedMode,
    /// The network knob of the call's policy.
    pub network: sandbox::NetworkMode,
    /// The listener the payload tries to reach.
    pub target: NetTarget,
    /// The payload (bash), replacing the default client of `target`. Its environment: `$PORT`,
    /// `$UDP_PORT`, `$UNIX_PATH`, `$ABSTRACT_NAME` (without the leading NUL), `$SOCK` (the
    /// address of a `unix` or `abstract` target) and `$MSG`, the line it should send.
    #[serde(default)]
    pub run: Option<String>,
    /// What the listener must have recorded.
    pub expect: NetExpect,
}

/// A `host_ipc` step: the harness sets up `target` on the host, a payload confined under `mode`
/// and `network` tries to use it, and the host is checked for any effect (none is allowed: host
/// IPC is closed in every confined mode, whatever the network knob says).
#[derive(Clone, Debug, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HostIpcStep {
    /// The confined mode.
    pub mode: sandbox::ConfinedMode,
    /// The network knob of the call's policy.
    pub network: sandbox::NetworkMode,
    /// The route the payload tries.
    pub target: IpcTarget,
}

/// The host IPC routes a `host_ipc` step sets up.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum IpcTarget {
    /// A daemon on a named unix socket in `/tmp` (where tmux and ssh-agent keep theirs).
    NamedTmp,
    /// A daemon on a named unix socket in a directory named like `$XDG_RUNTIME_DIR`.
    NamedRuntime,
    /// A daemon on an abstract unix socket.
    Abstract,
    /// A FIFO outside the writable set with a reader on the host.
    Fifo,
    /// A SysV message queue of the host.
    SysvMsg,
    /// A SysV shared memory segment of the host.
    SysvShm,
    /// A POSIX message queue of the host.
    PosixMq,
    /// A key in the user's keyring.
    Keyring,
    /// A real tmux server whose shell would run what the payload types.
    Tmux,
}

/// The listeners a `net` step runs outside the sandbox.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum NetTarget {
    /// A TCP listener on `127.0.0.1:$PORT`.
    Tcp,
    /// A UDP socket on `127.0.0.1:$UDP_PORT` (datagrams, no connection).
    Udp,
    /// A unix socket bound to the path `$UNIX_PATH`, outside every writable root.
    Unix,
    /// An abstract unix socket named `$ABSTRACT_NAME`.
    Abstract,
}

/// What a `net` step must observe.
#[derive(Clone, Debug, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NetExpect {
    /// `true`: the listener recorded the payload's `$MSG` line. `false`: no listener recorded any
    /// connection at all, and the payload ran and printed `refused` (its attempt failed).
    pub reached: bool,
}

/// A `forge` step: for every fatal signature of every runner-failure rule the backend declares,
/// a payload prints that signature on stderr, leaves a mark in the workspace and exits with the
/// rule's code (1 when the rule admits any). The mark proves it ran, so the classifier must call
/// each one an ordinary result; a backend whose rules read it as a runner failure can be fooled
/// by any payload into reporting a broken sandbox.
#[derive(Clone, Debug, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ForgeStep {
    /// The confined mode the payloads run under (`workspace-write`: the mark must land).
    pub mode: sandbox::ConfinedMode,
}

/// A `declared` step: every path the backend declared protected, in the shape given, attacked
/// under `workspace-write`, then the disk checked.
#[derive(Clone, Debug, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeclaredStep {
    /// Whether each protected path exists before the payload runs.
    pub protected: ProtectedBefore,
}

/// A `writable` step: one payload tries to write in every system and home directory of the host
/// under `mode` (see `steps/writable.rs`).
#[derive(Clone, Debug, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WritableStep {
    /// The confined mode the payload runs under.
    pub mode: sandbox::ConfinedMode,
}

/// `walk: { mode }`: the writable set found from the inside out (see `steps/walk.rs`).
#[derive(Clone, Debug, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WalkStep {
    /// The confined mode the payload runs under.
    pub mode: sandbox::ConfinedMode,
}

/// `mounts: { mode }`: every mount the payload sees, from the kernel's own table, tried and
/// mapped back to the host by device and the directory of the filesystem it exposes (see
/// `steps/mounts.rs`).
#[derive(Clone, Debug, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MountsStep {
    /// The confined mode the payload runs under.
    pub mode: sandbox::ConfinedMode,
}

/// `metadata: { mode, effect }`: one metadata effect tried on files, a directory and a symlink
/// outside the writable set (and, under `read-only`, in the workspace); the host's inodes
/// decide (see `steps/metadata.rs`).
#[derive(Clone, Debug, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MetadataStep {
    /// The confined mode the payload runs under.
    pub mode: sandbox::ConfinedMode,
    /// The effect tried.
    pub effect: MetadataEffect,
}

/// A change to an inode's metadata, not its content.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum MetadataEffect {
    /// `chmod` to another mode.
    Chmod,
    /// `chown` (as root to another user; as a user to itself, which still changes the inode).
    Chown,
    /// `lchown` of a symlink itself.
    Lchown,
    /// `utimes` to another time.
    Utimes,
    /// Set a `user.*` xattr and remove one that was there.
    XattrUser,
    /// Set a `trusted.*` xattr (root).
    XattrTrusted,
    /// Set `security.capability` (a file capability) and another `security.*` xattr (root).
    XattrSecurity,
    /// Set the setuid bit on a file and the setgid bit on a directory.
    Setid,
    /// Grant another user every permission in a POSIX access ACL (and on a directory a default
    /// ACL too): the mode bits may not change at all when the ACL mask already allows as much.
    Acl,
    /// `truncate` by path.
    Truncate,
}

impl MetadataEffect {
    /// The effect's word, as scenarios and payloads spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            MetadataEffect::Chmod => "chmod",
            MetadataEffect::Chown => "chown",
            MetadataEffect::Lchown => "lchown",
            MetadataEffect::Utimes => "utimes",
            MetadataEffect::XattrUser => "xattr-user",
            MetadataEffect::XattrTrusted => "xattr-trusted",
            MetadataEffect::XattrSecurity => "xattr-security",
            MetadataEffect::Setid => "setid",
            MetadataEffect::Acl => "acl",
            MetadataEffect::Truncate => "truncate",
        }
    }
}

/// `private: { mode }`: every place the backend declared private, verified (see
/// `steps/private.rs`).
#[derive(Clone, Debug, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PrivateStep {
    /// The confined mode the payload runs under.
    pub mode: sandbox::ConfinedMode,
}

/// The state of a declared protected path before the payload tries it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ProtectedBefore {
    /// It does not exist: the payload tries to create it (a file, or a directory with a file).
    Absent,
    /// It exists (a file with content, or a directory holding one): the payload tries to
    /// overwrite, append, add beside, remove and replace it.
    Present,
}
