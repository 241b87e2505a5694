//! The `select` and `tool` steps (the reference chain on a host, the tools in a session) and
//! the spellings of a policy's workspace and temp dir.

use serde::Deserialize;

/// A `select` step: the reference chain (through `sandboxctl run`) on a host, with a canary
/// payload that writes inside and outside the workspace.
#[derive(Clone, Debug, PartialEq, Deserialize, schemars::JsonSchema)]
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
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
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
#[derive(Clone, Debug, PartialEq, Deserialize, schemars::JsonSchema)]
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
#[derive(Clone, Debug, Default, PartialEq, Deserialize, schemars::JsonSchema)]
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
    #[schemars(schema_with = "approval_policy_schema")]
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
#[derive(Clone, Debug, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolStep {
    /// The tool.
    pub name: String,
    /// Its arguments, as the model would send them.
    pub args: serde_json::Value,
    /// What must be true afterwards.
    pub expect: ToolExpect,
}

/// A tool result code a scenario expects: one of [`sandbox_tools::outcome::CODES`], so a typo
/// fails when the scenario file loads (at its line and column), not when the case runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolCode(String);

impl ToolCode {
    /// The code as the wire spells it.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl schemars::JsonSchema for ToolCode {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ToolCode".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "A code a tool call ends with.",
            "type": "string",
            "enum": sandbox_tools::outcome::CODES
        })
    }
}

/// The schema of an approval policy (`sandbox_policy::ApprovalPolicy`, which has none of its
/// own): `ask` or `never`.
pub(crate) fn approval_policy_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "description": "Whether a human is asked before an escalated retry.",
        "type": "string",
        "enum": ["ask", "never"]
    })
}

impl<'de> Deserialize<'de> for ToolCode {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<ToolCode, D::Error> {
        let code = String::deserialize(d)?;
        if sandbox_tools::outcome::CODES.contains(&code.as_str()) {
            Ok(ToolCode(code))
        } else {
            Err(serde::de::Error::custom(format!(
                "{code:?} is no code a tool call ends with (one of {})",
                sandbox_tools::outcome::CODES.join(", ")
            )))
        }
    }
}

impl std::fmt::Display for ToolCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl PartialEq<str> for ToolCode {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

/// What a `tool` step must observe.
#[derive(Clone, Debug, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolExpect {
    /// The result code (`OK`, `DENIED`, `FS_SANDBOX_DENIED`, `ESCALATION_REJECTED`, ...): one of
    /// the codes a tool call can end with, checked when the file loads.
    pub code: ToolCode,
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
    /// The backend may refuse this call instead (a denial, or the command failing, say a
    /// workspace that is its own mount point cannot be renamed: `EBUSY`) while the workspace is
    /// still the directory it was: the rest of the case's tool steps are then moot and skipped,
    /// and its world steps still check the host.
    #[serde(default)]
    pub or_refused: bool,
}

/// Where a case's workspace is, and how the policy spells it. A closed vocabulary: each value
/// names a place in (or beside) the world the harness builds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
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
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
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
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
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
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
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
