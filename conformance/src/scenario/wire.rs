//! The `wire` step: one action on the reference bridge, and what the wire must show.

use serde::Deserialize;

/// A `wire` step: one action on the reference bridge, in a sessions directory kept for the case.
#[derive(Clone, Debug, PartialEq, Deserialize, schemars::JsonSchema)]
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
#[derive(Clone, Debug, Default, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WireConfig {
    /// The default sandbox mode.
    #[serde(default)]
    pub mode: Option<sandbox::SandboxMode>,
    /// The default approval policy (default `ask`).
    #[serde(default)]
    #[schemars(schema_with = "super::tool::approval_policy_schema")]
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
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
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
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Transport {
    /// The bridge as a library, in this process.
    InProcess,
    /// The built `sandbox-agent` binary over ACP on stdin and stdout.
    Stdio,
}

/// What a `wire` step must observe.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, schemars::JsonSchema)]
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
    /// Over stdio, a request sent while a prompt runs: its answer arrived before the prompt's
    /// (true: during the turn) or after it (false), by the order of the agent's messages.
    #[serde(default)]
    pub answered_during_turn: Option<bool>,
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
