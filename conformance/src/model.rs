//! The scenario schema. One YAML file is one scenario; its folder under `scenarios/` is its family.
//! Every struct rejects unknown keys. See `scenarios/README.md` for the author-facing description.

use std::collections::BTreeMap;
use std::fmt;

use sandbox::{Evidence, SpawnErrorKind, StatusFormat};
use serde::{Deserialize, Deserializer};
use serde_saphyr::Spanned;

/// A scenario file. `C` is the case type: [`Case`] for the expanded scenario, and an ignored value
/// while the header (matrix, derivations) is read before expansion.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioFile<C = Case> {
    /// Stable identifier, unique across the suite and never reused (for example `RF-017`).
    pub id: Spanned<String>,
    /// One line saying what the scenario pins.
    pub title: String,
    /// How binding the scenario is.
    pub level: Level,
    /// Capabilities a backend must have on this host for the scenario to run.
    #[serde(default)]
    pub requires: Vec<Capability>,
    /// The specification section the scenario traces to.
    pub seed: String,
    /// Backends the scenario applies to; omitted means every backend in the run.
    #[serde(default)]
    pub backends: Option<Vec<String>>,
    /// Axes expanded as a cartesian product; each value is substituted for `${axis}`.
    #[serde(default)]
    pub matrix: BTreeMap<String, Vec<Scalar>>,
    /// Partial assignments removed from the product.
    #[serde(default)]
    pub exclude: Vec<BTreeMap<String, Scalar>>,
    /// Variables computed from the axes by first-matching rules (for example the expected outcome
    /// of `effect x mode x shape`).
    #[serde(default)]
    pub derive: BTreeMap<String, Vec<DeriveRule>>,
    /// The enforcement classes the promise rests on, per case: on a backend that reports one of
    /// them short of `full`, a case a rule covers is judged at the level of the class's own
    /// family (`should`) for exactly that gap, so its expectation file may name the failure with
    /// `gap:` (the one rule for levels: no family fails an honestly reported gap at `must`).
    #[serde(default)]
    pub governs: Vec<Governs>,
    /// The cases; after expansion each gets its own stable name.
    pub cases: Vec<C>,
}

/// One `governs` rule: the cases (whose variables match `when`) that rest on `class`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Governs {
    /// The class the cases need governed.
    pub class: sandbox::EnforcementClass,
    /// Variable (matrix or derived) to accepted value(s); empty covers every case.
    #[serde(default)]
    pub when: BTreeMap<String, OneOrMany>,
}

impl Governs {
    /// True when this rule covers a case expanded with `vars`.
    pub fn covers(&self, vars: &BTreeMap<String, String>) -> bool {
        self.when
            .iter()
            .all(|(k, v)| vars.get(k).is_some_and(|val| v.accepts(val)))
    }
}

/// How binding a scenario is when certifying.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Level {
    /// Can be neither skipped nor expected to fail when certifying.
    Must,
    /// Expected; an expectation file may record a reasoned failure.
    Should,
    /// Optional behaviour.
    May,
}

impl Level {
    /// The YAML name.
    pub const fn as_str(self) -> &'static str {
        match self {
            Level::Must => "must",
            Level::Should => "should",
            Level::May => "may",
        }
    }
}

/// What a backend must be able to do on this host for a scenario to run. A closed vocabulary:
/// an unknown capability is a load error.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Deserialize,
    serde::Serialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Capability {
    /// Pure classification against the backend's own dialect; needs nothing from the host. A
    /// backend has it exactly when it has a dialect of its own (a reference backend), so it is
    /// never declared or committed.
    Classifier,
    /// The backend can confine a real command on this host.
    Confine,
    /// The backend reports whether the payload ran on an out-of-band status channel.
    StatusChannel,
    /// The backend can be told to use a capped Landlock ABI (and then reports `partial`).
    AbiCap,
    /// The backend is the reference local provider's platform chain, driven through `sandboxctl`
    /// (selection scenarios).
    LocalChain,
    /// This host can simulate hostile hosts for the chain: root (so dropping capabilities takes
    /// bwrap's namespaces away), `setpriv`, and the launcher to exhaust Landlock's layers.
    HostSimulation,
    /// The backend is the reference policy service and ACP bridge (anchoring scenarios).
    PolicyService,
    /// The bridge can run scripted tool calls confined by this host's platform chain.
    ScriptedCalls,
    /// The backend declares its dialect (denial signatures, runner-failure rules, status channel)
    /// in every `confined` answer: an external backend. Derived, never declared or committed.
    DeclaredDialect,
    /// The backend declared protected paths in its handshake (protocol 2), which the suite
    /// verifies. Derived, never declared or committed.
    DeclaredProtected,
}

impl From<crate::protocol::WireCapability> for Capability {
    fn from(c: crate::protocol::WireCapability) -> Capability {
        use crate::protocol::WireCapability;
        match c {
            WireCapability::Confine => Capability::Confine,
            WireCapability::StatusChannel => Capability::StatusChannel,
            WireCapability::AbiCap => Capability::AbiCap,
        }
    }
}

impl Capability {
    /// True for the capabilities that follow from what a backend is, never declared or
    /// committed: `classifier`, `declared-dialect`, `declared-protected`.
    pub const fn is_derived(self) -> bool {
        matches!(
            self,
            Capability::Classifier | Capability::DeclaredDialect | Capability::DeclaredProtected
        )
    }

    /// The YAML name.
    pub const fn as_str(self) -> &'static str {
        match self {
            Capability::Classifier => "classifier",
            Capability::Confine => "confine",
            Capability::StatusChannel => "status-channel",
            Capability::AbiCap => "abi-cap",
            Capability::LocalChain => "local-chain",
            Capability::HostSimulation => "host-simulation",
            Capability::PolicyService => "policy-service",
            Capability::ScriptedCalls => "scripted-calls",
            Capability::DeclaredDialect => "declared-dialect",
            Capability::DeclaredProtected => "declared-protected",
        }
    }
}

/// A matrix value: a plain YAML scalar. `text` is what `${axis}` becomes inside a longer string;
/// `value` (keeping the YAML type: integer, boolean or string) is what a whole-value reference
/// becomes.
#[derive(Clone, Debug, PartialEq)]
pub struct Scalar {
    /// The scalar as text.
    pub text: String,
    /// The scalar with its YAML type.
    pub value: serde_json::Value,
}

impl<'de> Deserialize<'de> for Scalar {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Scalar;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a plain scalar (string, integer or boolean)")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Scalar, E> {
                Ok(Scalar {
                    text: v.to_owned(),
                    value: v.into(),
                })
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Scalar, E> {
                Ok(Scalar {
                    text: v.to_string(),
                    value: v.into(),
                })
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Scalar, E> {
                Ok(Scalar {
                    text: v.to_string(),
                    value: v.into(),
                })
            }
            fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Scalar, E> {
                Ok(Scalar {
                    text: v.to_string(),
                    value: v.into(),
                })
            }
        }
        d.deserialize_any(V)
    }
}

/// One rule of a derived variable: the first rule whose `when` matches the assignment gives the
/// value; a rule without `when` always matches.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeriveRule {
    /// Axis name to accepted value(s).
    #[serde(default)]
    pub when: BTreeMap<String, OneOrMany>,
    /// The derived value.
    pub value: Scalar,
}

/// One scalar or a list of them.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum OneOrMany {
    /// A list of accepted values.
    Many(Vec<Scalar>),
    /// A single accepted value.
    One(Scalar),
}

impl OneOrMany {
    /// True when `value` is accepted.
    pub fn accepts(&self, value: &str) -> bool {
        match self {
            OneOrMany::One(s) => s.text == value,
            OneOrMany::Many(list) => list.iter().any(|s| s.text == value),
        }
    }
}

/// One case: a named sequence of steps, each with its own expectation.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Case {
    /// The trial name's last segment: lowercase letters, digits, `_` and `-`.
    pub name: String,
    /// The composition `tool` steps run in (one world and one session per case).
    #[serde(default)]
    pub setup: Option<ToolSetup>,
    /// Steps run in order; the first failing expectation fails the case.
    pub steps: Vec<Step>,
    /// Planned only on a host that has (or lacks) this: a case about what the host has is
    /// planned by what it has, and the report says why a case was not.
    #[serde(default)]
    pub when_host: Option<HostFact>,
}

/// Something a host has or lacks, that decides which host-dependent cases are planned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HostFact {
    /// bwrap is installed and confines here (its functional probe passes).
    Bwrap,
    /// bwrap is not installed or does not confine here.
    NoBwrap,
}

/// One step. Each kind carries its own `expect`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub enum Step {
    /// Classify a process outcome against the backend's dialect (pure data, no process runs).
    Classify(ClassifyStep),
    /// Perform one file effect confined, then check the disk.
    Effect(EffectStep),
    /// Let the local chain select a backend on a (simulated) host and run a canary command.
    Select(SelectStep),
    /// Call one tool (`bash`, `bash_output`, `read`, `write`, `edit`) in the case's composition.
    Tool(ToolStep),
    /// One editor or process action on the policy bridge (new, load, set, prompt, crash, ...).
    Wire(Box<WireStep>),
    /// Run a hostile payload confined in a fresh world, then check the host (family `hardening`).
    Attack(AttackStep),
    /// Race the write tool against a thread swapping a directory for a symlink that points out.
    FenceRace(FenceRaceStep),
    /// Race confined shell calls in a nested workspace against a swap of its parent for a
    /// symlink between the pin and the runner's bind, then check the outside tree.
    BindRace(BindRaceStep),
    /// Compare the case's world with its snapshot from when the case began.
    World(WorldStep),
    /// Listen outside the sandbox, let a confined payload try to reach the listener under a
    /// network knob, then check what the listener recorded (family `network`).
    Net(NetStep),
    /// Set up one host IPC route outside the sandbox (a daemon on a unix socket, a FIFO reader, a
    /// SysV or POSIX queue, a keyring key, a tmux server), let a confined payload try it, then
    /// check the host for any effect (family `host-ipc`).
    HostIpc(HostIpcStep),
    /// Run payloads that print the backend's own declared runner-failure signatures and exit with
    /// its codes: each ran, so each must be an ordinary result.
    Forge(ForgeStep),
    /// Try to create or change every path the backend declared protected, then check the disk.
    Declared(DeclaredStep),
    /// Try to write in every system and home directory of the host, then check the host: nothing
    /// beyond the writable set (and what the backend declared) may be writable.
    Writable(WritableStep),
    /// Walk every directory the payload can see, try to create a file in each, and map each
    /// place that took one back to the host: nothing may land outside the writable set.
    Walk(WalkStep),
}

impl Step {
    /// The capabilities this step needs from the backend, beyond the scenario's `requires`.
    pub fn needs(&self) -> &'static [Capability] {
        match self {
            Step::Classify(_) => &[Capability::Classifier],
            Step::Effect(_) => &[Capability::Confine],
            Step::Select(s) if s.host != Host::Normal => {
                &[Capability::LocalChain, Capability::HostSimulation]
            }
            Step::Select(_) => &[Capability::LocalChain],
            Step::Tool(_) => &[Capability::Confine],
            // The built agent over stdio confines with the backend under test when that is a
            // reference local backend (the policy bridge: the platform chain): the scenario's
            // `requires` and `backends` say which.
            Step::Wire(w) if w.agent_process() => &[],
            Step::Wire(w) if w.run.is_some() || !w.runs.is_empty() => {
                &[Capability::PolicyService, Capability::ScriptedCalls]
            }
            Step::Wire(_) => &[Capability::PolicyService],
            Step::Attack(_)
            | Step::FenceRace(_)
            | Step::BindRace(_)
            | Step::Net(_)
            | Step::HostIpc(_) => &[Capability::Confine],
            // Checks the world the case's other steps built; needs nothing of its own.
            Step::World(_) => &[],
            // Every backend that confines declares a dialect in its launch (the reference ones
            // too), so every one is held to it, not only those speaking the protocol.
            Step::Forge(_) => &[Capability::Confine],
            Step::Declared(_) => &[Capability::Confine, Capability::DeclaredProtected],
            Step::Writable(_) | Step::Walk(_) => &[Capability::Confine],
        }
    }
}

/// A `classify` step: how the launch ended and what the classifier must conclude.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassifyStep {
    /// Replaces the backend's dialect (required for the `operator` backend).
    #[serde(default)]
    pub dialect: Option<DialectSpec>,
    /// How the process ended.
    pub outcome: OutcomeSpec,
    /// What the out-of-band status channel carried; omitted means the launch has no channel.
    #[serde(default)]
    pub status: Option<StatusSpec>,
    /// The verdict the classifier must reach.
    pub expect: ClassifyExpect,
}

/// An inline dialect.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DialectSpec {
    /// Denial substrings.
    #[serde(default)]
    pub denial_signatures: Vec<String>,
    /// Runner-failure rules.
    #[serde(default)]
    pub runner_failure_rules: Vec<sandbox::RunnerFailureRule>,
}

/// How the process ended: exactly one of `exit`, `signal`, `spawn-error`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct OutcomeSpec {
    /// Exit code.
    #[serde(default)]
    pub exit: Option<i32>,
    /// Killing signal.
    #[serde(default)]
    pub signal: Option<i32>,
    /// The spawn itself failed.
    #[serde(default)]
    pub spawn_error: Option<SpawnErrorSpec>,
    /// Stderr text (use YAML escapes such as `\r\n` for exact bytes).
    #[serde(default)]
    pub stderr: String,
}

/// A spawn failure.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpawnErrorSpec {
    /// `not-found`, `permission-denied` or `other`.
    pub kind: SpawnErrorKind,
    /// What the error is attributed to.
    pub program: Attribution,
    /// Whether the workdir was verified usable.
    pub workdir: Workdir,
}

/// Which program a spawn error is attributed to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Attribution {
    /// The runner, `argv[0]` of the confined launch.
    Runner,
    /// Some other program.
    Other,
    /// No path was attributed.
    Unknown,
}

/// The state of the working directory at spawn time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Workdir {
    /// Independently verified to exist and be a directory.
    Usable,
    /// Missing (so `ENOENT` may be about it, not the runner).
    Missing,
}

/// The raw records the status channel carried, in the given format.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StatusSpec {
    /// The channel's record format.
    pub format: StatusFormat,
    /// Exactly what was written to the channel.
    #[serde(default)]
    pub records: String,
}

/// The classifier's expected verdict.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassifyExpect {
    /// `runner-failure`, `denied`, `start-failed` or `ordinary`.
    pub class: ExpectedClass,
    /// For a runner failure: which evidence proved it.
    #[serde(default)]
    pub evidence: Option<Evidence>,
    /// The exact detail (runner failure), line (denial) or spawn message (start failure).
    #[serde(default)]
    pub detail: Option<String>,
}

/// The classification codes a scenario can expect.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ExpectedClass {
    /// The sandbox failed; the payload never ran.
    RunnerFailure,
    /// A kernel denial.
    Denied,
    /// An ordinary start failure not attributable to the runner.
    StartFailed,
    /// An ordinary result.
    Ordinary,
}

impl ExpectedClass {
    /// The code [`sandbox::Classification::code`] returns for this class.
    pub const fn code(self) -> &'static str {
        match self {
            ExpectedClass::RunnerFailure => "runner-failure",
            ExpectedClass::Denied => "denied",
            ExpectedClass::StartFailed => "start-failed",
            ExpectedClass::Ordinary => "ordinary",
        }
    }
}

/// An `effect` step: one file effect on one path shape under one confined mode.
#[derive(Clone, Debug, PartialEq, Deserialize)]
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
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
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
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
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
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
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
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
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

/// A `select` step: the reference chain (through `sandboxctl run`) on a host, with a canary
/// payload that writes inside and outside the workspace.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SelectStep {
    /// The host to simulate.
    #[serde(default)]
    pub host: Host,
    /// Extra `sandboxctl run` arguments; `@fakes/` names a file under `fixtures/fake-runners/`.
    #[serde(default)]
    pub args: Vec<String>,
    /// What must happen.
    pub expect: SelectExpect,
}

/// A host to run the chain on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Host {
    /// This host as it is.
    #[default]
    Normal,
    /// Every capability dropped (`setpriv --bounding-set=-all --inh-caps=-all`): bwrap cannot
    /// create namespaces, Landlock still works.
    CapsDropped,
    /// Capabilities dropped and all 16 Landlock layers already used: no backend can confine.
    LandlockExhausted,
}

/// What a `select` step must observe.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SelectExpect {
    /// The backend that must be selected and confine the canary (inside lands, outside does not).
    #[serde(default)]
    pub backend: Option<String>,
    /// Fail closed: `SANDBOX_UNAVAILABLE`, exit 125, no canary anywhere.
    #[serde(default)]
    pub unavailable: bool,
    /// The enforcement the facts must report.
    #[serde(default)]
    pub enforcement: Option<sandbox::SandboxEnforcement>,
    /// Substrings the runner's words (the detail) must contain.
    #[serde(default)]
    pub detail_contains: Vec<String>,
}

/// The composition and session a case's `tool` steps share.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolSetup {
    /// The deployment default mode (default `read-only`).
    #[serde(default)]
    pub mode: Option<sandbox::SandboxMode>,
    /// A `sandbox/mode` knob event in the session.
    #[serde(default)]
    pub session_mode: Option<sandbox::SandboxMode>,
    /// An `approval/policy` knob event in the session (`ask` or `never`).
    #[serde(default)]
    pub approval_policy: Option<sandbox_policy::ApprovalPolicy>,
    /// How the tools are composed (default `confining`).
    #[serde(default)]
    pub composition: Option<Composition>,
    /// The scripted answers, in order.
    #[serde(default)]
    pub approver: Vec<Answer>,
    /// Whether an agent routes approval questions (default true).
    #[serde(default)]
    pub agent: Option<bool>,
    /// The commands' `$TMPDIR` (and the policy's temp dir); absent: none.
    #[serde(default)]
    pub tmpdir: Option<TempDirSpelling>,
    /// Where the session's workspace is and how it is spelled (default `ws`).
    #[serde(default)]
    pub workspace: Option<WorkspaceSpelling>,
    /// Make the workspace a git repository (`git init`) before the case.
    #[serde(default)]
    pub repo: bool,
    /// Give the deployment an extra writable root, `%EXTRA%`, made in the world.
    #[serde(default)]
    pub extra_root: bool,
    /// The deployment's protected paths (absent: the default).
    #[serde(default)]
    pub protected_paths: Option<Vec<sandbox::ProtectedPath>>,
}

/// A `tool` step. In every string, `%WS%`, `%OUTSIDE%`, `%TMP%` and `%TMPDIR%` become the
/// world's paths; an argument that is exactly `%LAST_TASK%` becomes the last started task id.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolStep {
    /// The tool.
    pub name: String,
    /// Its arguments, as the model would send them.
    pub args: serde_json::Value,
    /// What must be true afterwards.
    pub expect: ToolExpect,
}

/// What a `tool` step must observe.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolExpect {
    /// The result code (`OK`, `DENIED`, `FS_SANDBOX_DENIED`, `ESCALATION_REJECTED`, ...).
    pub code: String,
    /// The exact result text.
    #[serde(default)]
    pub text: Option<String>,
    /// Substrings the result text must contain.
    #[serde(default)]
    pub text_contains: Vec<String>,
    /// Substrings the result text must not contain.
    #[serde(default)]
    pub text_lacks: Vec<String>,
    /// Facts that must hold (a subset of the result's facts).
    #[serde(default)]
    pub facts: serde_json::Map<String, serde_json::Value>,
    /// How many approval questions the case has asked so far.
    #[serde(default)]
    pub asked: Option<usize>,
    /// Files on disk afterwards: path to exact content, or `<absent>`.
    #[serde(default)]
    pub files: std::collections::BTreeMap<String, String>,
}

/// A `wire` step: one action on the reference bridge, in a sessions directory kept for the case.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WireStep {
    /// `new`, `load`, `set`, `prompt` (begin and end a turn), `begin`, `end`, `step` (the model's
    /// next request in the open turn: its pre-step), `crash` (the process dies: whatever was
    /// pending is lost; sessions must be loaded again) or `restart` (a crash, then a new process
    /// with `config`).
    #[serde(rename = "do")]
    pub action: WireAction,
    /// The session's name in this case (default `a`).
    #[serde(default)]
    pub session: Option<String>,
    /// The value for `set` (a preset id).
    #[serde(default)]
    pub value: Option<String>,
    /// A boolean value for `set` instead (a non-select value).
    #[serde(default)]
    pub value_bool: Option<bool>,
    /// The config id for `set` (default `permission`).
    #[serde(default)]
    pub config_id: Option<String>,
    /// The deployment defaults for `restart` (and for the first process when the case starts).
    #[serde(default)]
    pub config: Option<WireConfig>,
    /// A scripted tool call: a bash command the model runs in the turn (`prompt`) or in the open
    /// turn (`call`), confined by this host's platform chain under the session's policy.
    #[serde(default)]
    pub run: Option<String>,
    /// Several scripted bash calls of one prompt, in order (`prompt`, `start`; after `run` when
    /// both are given).
    #[serde(default)]
    pub runs: Vec<String>,
    /// Over stdio, `start`: a file in the session's workspace the running call creates once it is
    /// set up (its process tree started); the step ends when it exists (bounded).
    #[serde(default)]
    pub ready: Option<String>,
    /// What must be true afterwards.
    #[serde(default)]
    pub expect: WireExpect,
}

impl WireStep {
    /// True for a step that exists only against the built agent process over stdio: `start`,
    /// `wait`, `cancel`, and a `new` that starts the process.
    pub fn agent_process(&self) -> bool {
        matches!(
            self.action,
            WireAction::Start | WireAction::Wait | WireAction::Cancel
        ) || (self.action == WireAction::New
            && self
                .config
                .as_ref()
                .is_some_and(|c| c.transport == Some(Transport::Stdio)))
    }
}

/// The deployment defaults of the agent process.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WireConfig {
    /// The default sandbox mode.
    #[serde(default)]
    pub mode: Option<sandbox::SandboxMode>,
    /// The default approval policy (default `ask`).
    #[serde(default)]
    pub approval: Option<sandbox_policy::ApprovalPolicy>,
    /// The default network mode (default `enabled`); the presets stand for it.
    #[serde(default)]
    pub network: Option<sandbox::NetworkMode>,
    /// The composition mounts an approval service (default true); without one the permission
    /// presets fail loud at load (`BAD_COMPOSITION`).
    #[serde(default)]
    pub approval_service: Option<bool>,
    /// The shell confines (default true); over an unconfined shell the presets fail at load.
    #[serde(default)]
    pub confining: Option<bool>,
    /// `in-process` (default: the bridge as a library) or `stdio` (the built `sandbox-agent`
    /// binary over ACP on stdin/stdout, where `start`, `wait` and `cancel` also exist: a prompt
    /// sent without waiting for its answer, its answer, and `session/cancel`).
    #[serde(default)]
    pub transport: Option<Transport>,
}

/// What a `wire` step does. A closed vocabulary: a typo is a load error.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WireAction {
    /// `session/new`.
    New,
    /// `session/load`.
    Load,
    /// `session/set_config_option`.
    Set,
    /// A prompt: begin a turn, run its scripted calls, end it.
    Prompt,
    /// Open a turn.
    Begin,
    /// Close the open turn.
    End,
    /// The model's next request in the open turn (its pre-step).
    Step,
    /// A scripted call in the open turn.
    Call,
    /// The process dies; pending state is lost.
    Crash,
    /// A crash, then a new process with `config`.
    Restart,
    /// Over stdio: a prompt sent without waiting for its answer.
    Start,
    /// Over stdio: the answer to the started prompt.
    Wait,
    /// Over stdio: `session/cancel`.
    Cancel,
}

impl WireAction {
    /// Its word in the scenario files.
    pub const fn as_str(self) -> &'static str {
        match self {
            WireAction::New => "new",
            WireAction::Load => "load",
            WireAction::Set => "set",
            WireAction::Prompt => "prompt",
            WireAction::Begin => "begin",
            WireAction::End => "end",
            WireAction::Step => "step",
            WireAction::Call => "call",
            WireAction::Crash => "crash",
            WireAction::Restart => "restart",
            WireAction::Start => "start",
            WireAction::Wait => "wait",
            WireAction::Cancel => "cancel",
        }
    }
}

impl std::fmt::Display for WireAction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a `wire` case reaches the agent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Transport {
    /// The bridge as a library, in this process.
    InProcess,
    /// The built `sandbox-agent` binary over ACP on stdin and stdout.
    Stdio,
}

/// What a `wire` step must observe.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WireExpect {
    /// The error code the action must fail with (`UNKNOWN_CONFIG_VALUE`, ...); absent: success.
    #[serde(default)]
    pub error: Option<String>,
    /// The permission select's current value in the answer (new, load, set).
    #[serde(default)]
    pub current: Option<String>,
    /// The values the select offers, in order.
    #[serde(default)]
    pub options: Option<Vec<String>>,
    /// The exact event types in the session's log file on disk.
    #[serde(default)]
    pub log: Option<Vec<String>>,
    /// The number of knob events in the log file.
    #[serde(default)]
    pub knob_events: Option<usize>,
    /// The sandbox mode a tool call in the session would now run under.
    #[serde(default)]
    pub mode_now: Option<sandbox::SandboxMode>,
    /// The network mode a tool call in the session would now run under.
    #[serde(default)]
    pub network_now: Option<sandbox::NetworkMode>,
    /// For `prompt`/`begin`: the notice owed (`user`, `operator` or `none`).
    #[serde(default)]
    pub notice: Option<String>,
    /// For `prompt`/`begin`: substrings the recorded system prompt must contain.
    #[serde(default)]
    pub prompt_contains: Vec<String>,
    /// For `prompt`/`begin`: substrings it must not contain.
    #[serde(default)]
    pub prompt_lacks: Vec<String>,
    /// The code of the scripted tool call (`OK`, `DENIED`, ...).
    #[serde(default)]
    pub run_code: Option<String>,
    /// Over stdio, `prompt` or `wait`: the codes of every scripted call of the prompt, in order.
    #[serde(default)]
    pub run_codes: Option<Vec<String>>,
    /// Over stdio, `prompt` or `wait`: the prompt's stop reason (`end_turn`, `cancelled`).
    #[serde(default)]
    pub stop_reason: Option<String>,
    /// Over stdio: the answer arrived within this many milliseconds of the request.
    #[serde(default)]
    pub answered_within_ms: Option<u64>,
    /// Over stdio, `wait`: when the answer arrives, no process started since the last `start`
    /// (every process of the prompt's calls, runners included: the harness tags the agent's
    /// environment, which its calls inherit) is alive in the host's process table. Those found
    /// are killed.
    #[serde(default)]
    pub no_survivors: bool,
    /// Files in the session's workspace afterwards: relative path to content, or `<absent>`.
    #[serde(default)]
    pub files: std::collections::BTreeMap<String, String>,
}

/// Where a case's workspace is, and how the policy spells it. A closed vocabulary: each value
/// names a place in (or beside) the world the harness builds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WorkspaceSpelling {
    /// The world's workspace, spelled canonically.
    #[default]
    Ws,
    /// The world's workspace spelled through a symlink to it.
    Alias,
    /// The world's workspace spelled with a trailing slash.
    TrailingSlash,
    /// A workspace under `/tmp`, so its parent is writable (the workspace can be swapped).
    UnderTmp,
    /// `/` itself.
    FsRoot,
    /// `/etc`, a system directory.
    Etc,
    /// The world directory: the workspace's parent, which holds the outside tree.
    World,
    /// A path that does not exist.
    Missing,
    /// A regular file.
    File,
}

/// How a tool case composes the tools. A closed vocabulary: a typo is a load error.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Composition {
    /// A confining shell and the fenced filesystem, with an approval service.
    Confining,
    /// Confining, without an approval service.
    NoApproval,
    /// An unconfined shell and filesystem (honestly unconfined), with an approval service.
    NonConfining,
}

/// One scripted answer of the approval service. A closed vocabulary.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Answer {
    /// Granted for this one call.
    AllowOnce,
    /// The user rejected it.
    Reject,
    /// The question was cancelled before an answer.
    Cancel,
    /// The approval service could not be reached.
    Unavailable,
}

/// The temp dir a policy carries and the payload's `$TMPDIR`. A closed vocabulary.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TempDirSpelling {
    /// The world's `tmpdir`: a directory outside `/tmp` and outside the workspace.
    Outside,
    /// `/` itself.
    FsRoot,
    /// `/etc`, a system directory.
    Etc,
    /// The world directory: the workspace's parent, which holds the outside tree.
    World,
    /// A regular file outside the workspace.
    File,
    /// A path that does not exist.
    Missing,
}

/// An `attack` step: a hostile bash payload confined by the backend in a fresh world, then the
/// host is checked (the files named, a world diff, the descriptors and processes it could reach).
#[derive(Clone, Debug, PartialEq, Deserialize)]
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
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostGit {
    /// The folder of the workspace to run them in (default `.`; `wt`, `sub`, `src`).
    #[serde(default = "HostGit::here")]
    pub dir: String,
    /// A file a planted hook or fsmonitor would create (`%OUTSIDE%/pwned`): it must be absent
    /// afterwards, and both commands must succeed.
    pub marker: String,
}

impl HostGit {
    fn here() -> String {
        ".".into()
    }
}

/// What an `attack` step must observe.
#[derive(Clone, Debug, PartialEq, Deserialize)]
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
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
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
#[derive(Clone, Debug, PartialEq, Deserialize)]
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
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BindRaceStep {
    /// How many calls (1 to 200).
    pub iterations: u32,
}

/// What a `fence-race` step must observe beyond "nothing new outside", which always holds.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FenceRaceExpect {
    /// Codes every write call must return one of (absent: any).
    #[serde(default)]
    pub codes: Vec<String>,
}

/// A `world` step: the case's world against its snapshot from when the case's world was built.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorldStep {
    /// Paths under which the world may have changed (each with everything beneath it).
    #[serde(default)]
    pub may_change: Vec<String>,
}

/// A `net` step: the harness listens outside the sandbox on a loopback TCP port, a unix socket
/// bound to a path and an abstract unix socket; a payload confined under `mode` and `network`
/// tries to reach `target`; then what the listener recorded is checked (the world, not the exit
/// code, decides).
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetStep {
    /// The confined mode.
    pub mode: sandbox::ConfinedMode,
    /// The network knob of the call's policy.
    pub network: sandbox::NetworkMode,
    /// The listener the payload tries to reach.
    pub target: NetTarget,
    /// The payload (bash), replacing the default client of `target`. Its environment: `$PORT`,
    /// `$UDP_PORT`, `$UNIX_PATH`, `$ABSTRACT_NAME` (without the leading NUL) and `$MSG`, the line it should send.
    #[serde(default)]
    pub run: Option<String>,
    /// What the listener must have recorded.
    pub expect: NetExpect,
}

/// A `host_ipc` step: the harness sets up `target` on the host, a payload confined under `mode`
/// and `network` tries to use it, and the host is checked for any effect (none is allowed: host
/// IPC is closed in every confined mode, whatever the network knob says).
#[derive(Clone, Debug, PartialEq, Deserialize)]
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
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
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
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
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
#[derive(Clone, Debug, PartialEq, Deserialize)]
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
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ForgeStep {
    /// The confined mode the payloads run under (`workspace-write`: the mark must land).
    pub mode: sandbox::ConfinedMode,
}

/// A `declared` step: every path the backend declared protected, in the shape given, attacked
/// under `workspace-write`, then the disk checked.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeclaredStep {
    /// Whether each protected path exists before the payload runs.
    pub protected: ProtectedBefore,
}

/// A `writable` step: one payload tries to write in every system and home directory of the host
/// under `mode` (see `steps/writable.rs`).
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WritableStep {
    /// The confined mode the payload runs under.
    pub mode: sandbox::ConfinedMode,
}

/// `walk: { mode }`: the writable set found from the inside out (see `steps/walk.rs`).
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WalkStep {
    /// The confined mode the payload runs under.
    pub mode: sandbox::ConfinedMode,
}

/// The state of a declared protected path before the payload tries it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ProtectedBefore {
    /// It does not exist: the payload tries to create it (a file, or a directory with a file).
    Absent,
    /// It exists (a file with content, or a directory holding one): the payload tries to
    /// overwrite, append, add beside, remove and replace it.
    Present,
}
