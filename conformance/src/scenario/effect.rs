//! The `effect` step: one file effect on one path shape under one confined mode.

use serde::Deserialize;

/// An `effect` step: one file effect on one path shape under one confined mode.
#[derive(Clone, Debug, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EffectStep {
    /// The confined mode.
    pub mode: sandbox::ConfinedMode,
    /// What the command does.
    pub op: Effect,
    /// Where it does it, and how the workspace root is spelled.
    pub shape: Shape,
    /// What must be true of the host afterwards.
    pub expect: ExpectedEffect,
    /// How the paths reach the command (default `argv`).
    #[serde(default)]
    pub via: PathRoute,
}

/// How an effect's paths reach its command.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PathRoute {
    /// Spelled in the command itself, as an ordinary command spells them; a name that is not
    /// UTF-8 is built by bash from octal escapes (`$'...\377'`), so the argv is UTF-8.
    #[default]
    Argv,
    /// In the environment (`$T`, the target, and `$W`, the workspace), byte for byte: a backend
    /// must carry an environment that is not UTF-8.
    Env,
}

/// A file effect.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Effect {
    /// Create a new file.
    Create,
    /// Replace an existing file's content.
    Overwrite,
    /// Append to an existing file.
    Append,
    /// `truncate(2)` an existing file by path.
    Truncate,
    /// Remove an existing file.
    Unlink,
    /// Move a workspace file to the target.
    RenameIn,
    /// Move the target into the workspace.
    RenameOut,
    /// Create a directory.
    Mkdir,
    /// Remove an empty directory.
    Rmdir,
    /// Create a symbolic link.
    Symlink,
    /// Create a hard link to a workspace file.
    Hardlink,
    /// Change an existing file's mode.
    Chmod,
}

/// Where an effect lands, and how the workspace root is spelled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Shape {
    /// A directory inside the workspace.
    Inside,
    /// Directly in the workspace root.
    Root,
    /// `ws/dir/../../outside`.
    Dotdot,
    /// An absolute path outside the workspace.
    AbsoluteOutside,
    /// Through a symlinked directory inside the workspace that points out.
    SymlinkDir,
    /// Through a symlinked file inside the workspace that points out (a dangling one for `create`).
    SymlinkFile,
    /// Under `/tmp`.
    Tmp,
    /// Under a `$TMPDIR` set outside `/tmp`.
    Tmpdir,
    /// `/dev/null`.
    DevNull,
    /// Under `/dev/shm`.
    DevShm,
    /// A workspace that itself lives under `/tmp`.
    WsUnderTmp,
    /// Inside, with the root spelled through a symlink.
    RootViaSymlink,
    /// Inside, with the root spelled with a trailing slash.
    RootTrailingSlash,
    /// Outside the usual workspace, with `/` as the workspace root.
    FsRootWorkspace,
    /// Inside, with names that are not UTF-8.
    NonUtf8,
    /// Outside, with names that are not UTF-8.
    NonUtf8Outside,
    /// Inside, with names containing spaces.
    Space,
    /// Through a hard link made beforehand inside the workspace to a file outside.
    Prelinked,
}

/// What must be true of the host after an effect.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ExpectedEffect {
    /// The effect happened, the command succeeded and nothing was classified as denied.
    Allowed,
    /// The effect did not happen and the kernel denial was classified (the marker is shown).
    Denied,
    /// The host is unchanged; the runner may have let it happen in a private copy (bwrap's fresh
    /// `/dev`) or denied it.
    Contained,
    /// The backend refused the policy before anything ran (a workspace root of `/` under
    /// `workspace-write`): `confine` failed or the runner failed, and the host is unchanged.
    Refused,
}
