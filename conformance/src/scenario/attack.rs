//! The `attack` step (a hostile payload, then the host checked), the fence and bind races, and
//! the `world` step.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::*;

/// An `attack` step: a hostile bash payload confined by the backend in a fresh world, then the
/// host is checked (the files named, a world diff, the descriptors and processes it could reach).
#[derive(Clone, Debug, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AttackStep {
    /// The confined mode.
    pub mode: sandbox::ConfinedMode,
    /// Where the workspace is and how the policy spells it (default `ws`).
    #[serde(default)]
    pub workspace: WorkspaceSpelling,
    /// The policy's temp dir and the payload's `$TMPDIR` (absent: none, `$TMPDIR` unset).
    #[serde(default)]
    pub temp_dir: Option<TempDirSpelling>,
    /// Hold a descriptor without close-on-exec, open for append on a file outside, during the
    /// call; its number is `$HELD` (absent: `$HELD` is unset).
    #[serde(default)]
    pub hold_fd: bool,
    /// The call's timeout in milliseconds (absent: 20 s).
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// How long to wait after the call returned before checking the host (at most 5000).
    #[serde(default)]
    pub after_ms: Option<u64>,
    /// Make the workspace a git repository (`git init`) before the call.
    #[serde(default)]
    pub repo: bool,
    /// With `repo`: the repository also gets a commit, a submodule `sub` (its git directory
    /// under `.git/modules/sub`) and a linked worktree `wt` (under `.git/worktrees/wt`), both
    /// inside the workspace.
    #[serde(default)]
    pub linked: bool,
    /// Commands run on the repository before the call, outside the sandbox (`git config
    /// core.hooksPath .husky`: how the person set it up). Run by bash in the workspace.
    #[serde(default)]
    pub setup: Option<String>,
    /// After the call and every check, a real `git commit` and `git status` run by the harness
    /// outside the sandbox (where a planted hook or fsmonitor would run).
    #[serde(default)]
    pub host_git: Option<HostGit>,
    /// The person's own tools, run by the harness on the host WHILE the call runs (the payload
    /// plants, then waits at a rendezvous until the harness has run them) and once more after.
    #[serde(default)]
    pub during: Option<During>,
    /// Give the policy an extra writable root, `%EXTRA%` (`$EXTRA`), made in the world.
    #[serde(default)]
    pub extra_root: bool,
    /// The policy's protected paths (absent: the default, `sandbox::DEFAULT_PROTECTED_PATHS`; a
    /// pattern that is absolute or holds `..` is a load error).
    #[serde(default)]
    pub protected_paths: Option<Vec<sandbox::ProtectedPath>>,
    /// The payload: a bash script. Its environment: `$WS` (the workspace as spelled), `$OUTSIDE`,
    /// `$TMP` (a scratch directory under `/tmp`), `$WORLD`, `$ETC_PROBE` (a unique name under
    /// `/etc`), `$CALLER` (the harness's pid), `$HELD`, `$TMPDIR`.
    pub run: String,
    /// What must be true afterwards.
    pub expect: AttackExpect,
}

/// The harness's own `git commit` and `git status` after an attack, outside the sandbox.
#[derive(Clone, Debug, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HostGit {
    /// The folder of the workspace to run them in (default `.`; `wt`, `sub`, `src`).
    #[serde(default = "HostGit::here")]
    pub dir: String,
    /// A file a planted hook or fsmonitor would create (`%OUTSIDE%/pwned`): it must be absent
    /// afterwards, and both commands must succeed.
    pub marker: String,
    /// The git directory the person's git must find when run in `dir` (`%WS%/.git`), checked
    /// first: a folder the payload made into a repository (a bare repository's shape: `HEAD`,
    /// `objects`, `refs`) would be found instead, and its config's pager and aliases run.
    #[serde(default)]
    pub git_dir: Option<String>,
}

impl HostGit {
    fn here() -> String {
        ".".into()
    }
}

/// The person's tools the harness runs on the host while an attacked call is still running
/// (after the payload reached its rendezvous) and again after it ended; the marker a planted
/// config, hook or fsmonitor would write must stay absent throughout.
#[derive(Clone, Debug, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct During {
    /// Which tools (each at least once in both phases).
    pub tools: Vec<PersonTool>,
    /// The file a planted command would create (`%OUTSIDE%/pwned`).
    pub marker: String,
}

/// One of the person's tools that reads config or runs code from where a payload can plant.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum PersonTool {
    /// `git status` and `git commit` in the workspace and in every folder of it holding a
    /// repository (a `.git` entry), as an editor or a shell prompt runs them.
    Git,
    /// `cargo build` of a tiny crate in a fresh folder of the host's `/tmp` and of the call's
    /// `$TMPDIR`, through the rustup proxy as the person's shell finds it.
    Cargo,
    /// `pytest` in a fresh folder of the host's `/tmp` and of the call's `$TMPDIR`.
    Pytest,
    /// A reader of a FIFO in the host's `/tmp`, open before the call (`$FIFO`): nothing the
    /// payload writes may reach it.
    Fifo,
}

/// What an `attack` step must observe.
#[derive(Clone, Debug, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AttackExpect {
    /// How the call ended.
    pub outcome: AttackOutcome,
    /// The payload's exit code (with `ran`).
    #[serde(default)]
    pub exit: Option<i32>,
    /// The payload's exact stdout (with `ran`).
    #[serde(default)]
    pub stdout: Option<String>,
    /// Substrings the payload's stdout must contain.
    #[serde(default)]
    pub stdout_contains: Vec<String>,
    /// Substrings the payload's stdout must not contain.
    #[serde(default)]
    pub stdout_lacks: Vec<String>,
    /// Files afterwards: path to exact content, or `<absent>` (`%WS%`-style names allowed).
    #[serde(default)]
    pub files: BTreeMap<String, String>,
    /// Paths under which the world may change (each with everything beneath it); everything else
    /// in the world must be exactly as before. Device nodes are never allowed anywhere.
    #[serde(default)]
    pub may_change: Vec<String>,
    /// The `files` may differ only when the launch reported this class short of `full` (the
    /// backend said it cannot keep them); a backend that reported it in full is held to them.
    #[serde(default)]
    pub files_or_reported: Option<sandbox::EnforcementClass>,
}

/// How an attacked call may end.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum AttackOutcome {
    /// The payload ran to its own end (no runner failure, no timeout).
    Ran,
    /// The backend refused: `confine` failed or the runner failed; the payload never ran (its
    /// canary is absent and its stdout empty).
    Refused,
    /// The call was ended by its timeout, in time.
    TimedOut,
    /// Either refused, or ran; the host checks hold in both cases.
    RefusedOrRan,
}

/// A `fence-race` step: the write tool on `path`, `iterations` times, while a thread exchanges
/// `swap` (a real directory) with a symlink to the outside tree (`renameat2(RENAME_EXCHANGE)`).
#[derive(Clone, Debug, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FenceRaceStep {
    /// How many write calls (1 to 2000).
    pub iterations: u32,
    /// The write tool's target (`%WS%/d/f`).
    pub path: String,
    /// The directory swapped with a symlink to `%OUTSIDE%` (`%WS%/d`; made if missing), or a
    /// symlink to a directory (`%WS%` spelled `alias`: the workspace itself flips).
    pub swap: String,
    /// How the writes must come out.
    #[serde(default)]
    pub expect: FenceRaceExpect,
}

/// A `bind-race` step: `iterations` confined calls in `%WS%/nest/inner` (a workspace nested in
/// the case's, pinned once before the race, as a session pins its root), each racing one
/// exchange of `%WS%/nest` with a relative symlink to `%OUTSIDE%` (which holds a look-alike
/// `inner`) at a moment spread over its launch. Each call writes a file into its working
/// directory (the inner workspace); nothing may appear under `%OUTSIDE%`.
#[derive(Clone, Debug, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BindRaceStep {
    /// How many calls (1 to 200).
    pub iterations: u32,
}

/// What a `fence-race` step must observe beyond "nothing new outside", which always holds.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FenceRaceExpect {
    /// Codes every write call must return one of (absent: any).
    #[serde(default)]
    pub codes: Vec<String>,
}

/// A `world` step: the case's world against its snapshot from when the case's world was built.
#[derive(Clone, Debug, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorldStep {
    /// Paths under which the world may have changed (each with everything beneath it).
    #[serde(default)]
    pub may_change: Vec<String>,
}
