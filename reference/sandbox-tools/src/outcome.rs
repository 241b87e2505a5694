//! What a tool call came to, typed: its stable [`Code`] and its [`Facts`] (one struct per shape of
//! result), serialised to the JSON the model and the editor read.

use std::fmt;
use std::path::PathBuf;

use sandbox::{SandboxEnforcement, SandboxMode};
use sandbox_local::launch::Dropped;
use serde::{Serialize, Serializer};
use serde_json::Value;

use crate::shell::{ShellResult, TaskId};

/// The stable machine-readable code of a tool call's outcome. Two codes are equal when their
/// wire words are.
#[derive(Clone, Copy, Debug)]
pub enum Code {
    /// `OK`: the call did what it was asked (a command ran, whatever its exit code).
    Ok,
    /// `STARTED`: a background task started.
    Started,
    /// `RUNNING`: a background task has not finished.
    Running,
    /// `CANCELLED`: a background task is being stopped as asked, or (in an agent) the turn's
    /// cancellation killed the call.
    Cancelled,
    /// `DENIED`: the command ran and the kernel refused a file effect.
    Denied,
    /// `FS_SANDBOX_DENIED`: the fenced filesystem refused a write or an edit.
    FsSandboxDenied,
    /// `SANDBOX_UNAVAILABLE`: the sandbox could not confine the command; it never ran.
    SandboxUnavailable,
    /// `BAD_ARGUMENTS`: the call could not be parsed (or names no tool); nothing was run.
    BadArguments,
    /// `POLICY_ERROR`: the call's policy could not be resolved; nothing was run.
    PolicyError,
    /// `HOOK_BLOCKED`: an agent's pre-tool hook refused the call; nothing was run.
    HookBlocked,
    /// Another stable code, the error's own: an `ESCALATION_*` refusal, a filesystem error
    /// (`FS_NOT_FOUND`, ...), a refused root (`WORKSPACE_MOVED`, ...), `SHELL_START_FAILED`.
    Other(&'static str),
}

impl Code {
    /// The code as it is written on the wire.
    pub const fn as_str(self) -> &'static str {
        match self {
            Code::Ok => "OK",
            Code::Started => "STARTED",
            Code::Running => "RUNNING",
            Code::Cancelled => "CANCELLED",
            Code::Denied => "DENIED",
            Code::FsSandboxDenied => crate::fs::FS_SANDBOX_DENIED,
            Code::SandboxUnavailable => sandbox::SANDBOX_UNAVAILABLE,
            Code::BadArguments => "BAD_ARGUMENTS",
            Code::PolicyError => "POLICY_ERROR",
            Code::HookBlocked => "HOOK_BLOCKED",
            Code::Other(code) => code,
        }
    }

    /// The code an error's stable code string names: a named variant when there is one.
    pub fn from_error_code(code: &'static str) -> Code {
        [
            Code::FsSandboxDenied,
            Code::SandboxUnavailable,
            Code::BadArguments,
            Code::PolicyError,
        ]
        .into_iter()
        .find(|c| c.as_str() == code)
        .unwrap_or(Code::Other(code))
    }
}

/// Every code a tool call can end with: [`Code`]'s named variants and every stable error code
/// the tools, the shell, the fenced filesystem, the escalation ladder and the writable set can
/// give (`Code::Other`). A closed list, so a scenario's expected code is checked when it loads
/// (a test keeps it complete against the crates' sources).
pub const CODES: &[&str] = &[
    "OK",
    "STARTED",
    "RUNNING",
    "CANCELLED",
    "DENIED",
    "BAD_ARGUMENTS",
    "POLICY_ERROR",
    "HOOK_BLOCKED",
    crate::fs::FS_SANDBOX_DENIED,
    crate::fs::FS_PERMISSION_DENIED,
    "FS_NOT_FOUND",
    "FS_EDIT_NO_MATCH",
    "FS_BAD_PATH",
    "FS_NOT_A_FILE",
    "FS_TOO_LARGE",
    "FS_LINK_OUT",
    "FS_IO",
    sandbox::SANDBOX_UNAVAILABLE,
    "SHELL_START_FAILED",
    "ESCALATION_BAD_PAIRING",
    "ESCALATION_NOT_ADVERTISED",
    "ESCALATION_UNKNOWN_MODE",
    "ESCALATION_EMPTY_JUSTIFICATION",
    "ESCALATION_NOT_WIDER",
    "ESCALATION_NO_APPROVAL_SERVICE",
    "ESCALATION_NO_AGENT",
    "ESCALATION_ALREADY_REJECTED",
    "ESCALATION_REJECTED",
    "ESCALATION_POLICY_NEVER",
    "ESCALATION_CANCELLED",
    "ESCALATION_UNAVAILABLE",
    sandbox::BAD_PROTECTED_PATH,
    sandbox::BAD_PATH,
    sandbox::WORKSPACE_MISSING,
    sandbox::WORKSPACE_NOT_A_DIRECTORY,
    sandbox::WORKSPACE_TOO_BROAD,
    sandbox::WORKSPACE_MOVED,
    sandbox::TEMP_DIR_NOT_A_DIRECTORY,
    sandbox::TEMP_DIR_TOO_BROAD,
    sandbox::TEMP_DIR_MOVED,
    sandbox::WRITABLE_ROOT_RELATIVE,
    sandbox::WRITABLE_ROOT_MISSING,
    sandbox::WRITABLE_ROOT_NOT_A_DIRECTORY,
    sandbox::WRITABLE_ROOT_TOO_BROAD,
    sandbox::WRITABLE_ROOT_MOVED,
    sandbox::UNIX_SOCKET_RELATIVE,
    sandbox::UNIX_SOCKET_MISSING,
    sandbox::UNIX_SOCKET_NOT_A_SOCKET,
    sandbox::UNIX_SOCKET_NOT_GRANTABLE,
];

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq for Code {
    fn eq(&self, other: &Code) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for Code {}

impl std::hash::Hash for Code {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl PartialOrd for Code {
    fn partial_cmp(&self, other: &Code) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Code {
    fn cmp(&self, other: &Code) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

/// A map keyed by codes is looked up by wire word (hash, equality and order are the word's).
impl std::borrow::Borrow<str> for Code {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl Serialize for Code {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl PartialEq<str> for Code {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Code {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<String> for Code {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == other
    }
}

impl From<Code> for String {
    fn from(code: Code) -> String {
        code.as_str().to_owned()
    }
}

/// The facts of one call, by the shape of its result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Facts {
    /// Nothing ran.
    NotRun(NotRun),
    /// A background task started.
    Started(Started),
    /// A background task named by id (still running, or being cancelled).
    Task(TaskRef),
    /// A shell command finished (or its sandbox failed, for a background task).
    Shell(ShellFacts),
    /// A file was read (or the read failed).
    Read(ReadFacts),
    /// A file was written or edited (or the fence or the host refused it).
    File(FileFacts),
    /// An agent's pre-tool hook refused the call.
    Hook(HookFacts),
}

impl Facts {
    /// Nothing ran.
    pub fn not_run() -> Facts {
        Facts::NotRun(NotRun {
            ran: false,
            mode: None,
        })
    }

    /// Nothing ran, under `mode`.
    pub fn not_run_under(mode: SandboxMode) -> Facts {
        Facts::NotRun(NotRun {
            ran: false,
            mode: Some(mode),
        })
    }

    /// Whether something ran, when these facts say.
    pub fn ran(&self) -> Option<bool> {
        match self {
            Facts::NotRun(f) => Some(f.ran),
            Facts::Shell(f) => Some(f.ran),
            Facts::Read(f) => Some(f.ran),
            Facts::File(f) => Some(f.ran),
            Facts::Hook(f) => Some(f.ran),
            Facts::Started(_) | Facts::Task(_) => None,
        }
    }

    /// The command's facts, when a shell command finished.
    pub fn shell(&self) -> Option<&ShellFacts> {
        match self {
            Facts::Shell(f) => Some(f),
            _ => None,
        }
    }

    /// True when cancellation killed the command.
    pub fn cancelled(&self) -> bool {
        self.shell().is_some_and(|f| f.cancelled)
    }

    /// The command's exit code, when it exited.
    pub fn exit_code(&self) -> Option<i32> {
        self.shell().and_then(|f| f.exit_code)
    }

    /// The background task these facts name, if any.
    pub fn task_id(&self) -> Option<TaskId> {
        match self {
            Facts::Started(f) => Some(f.task_id),
            Facts::Task(f) => Some(f.task_id),
            _ => None,
        }
    }

    /// The facts as the JSON the model and the editor read.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

impl fmt::Display for Facts {
    /// The facts as compact JSON.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.to_json(), f)
    }
}

/// Nothing ran: `{"ran": false}`, with the mode when the call's policy was resolved.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NotRun {
    /// Always false.
    pub ran: bool,
    /// The mode the call would have run under.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<SandboxMode>,
}

/// A background task started.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Started {
    /// Its id.
    pub task_id: TaskId,
    /// The mode it runs under.
    pub mode: SandboxMode,
    /// A granted escalation started it.
    pub escalated: bool,
}

/// A background task named by id.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TaskRef {
    /// Its id.
    pub task_id: TaskId,
}

/// What a finished shell command did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ShellFacts {
    /// The command ran (its sandbox did not fail).
    pub ran: bool,
    /// The mode it actually ran under.
    pub mode: SandboxMode,
    /// The backend that confined it.
    pub backend: String,
    /// The enforcement of that launch.
    pub enforcement: SandboxEnforcement,
    /// Its exit code, when it exited.
    pub exit_code: Option<i32>,
    /// The signal that killed it, when one did.
    pub signal: Option<i32>,
    /// The kernel refused a file effect.
    pub denied: bool,
    /// The sandbox itself failed and the command never ran.
    pub runner_failed: bool,
    /// The timeout killed it.
    pub timed_out: bool,
    /// Cancellation killed it.
    pub cancelled: bool,
    /// A granted escalation ran it.
    pub escalated: bool,
    /// How much output was cut; only present when some was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dropped: Option<Dropped>,
}

impl ShellFacts {
    /// The facts of `result`.
    pub fn of(result: &ShellResult, escalated: bool) -> ShellFacts {
        ShellFacts {
            ran: !result.runner_failed,
            mode: result.mode,
            backend: result.backend.clone(),
            enforcement: result.enforcement,
            exit_code: result.exit_code,
            signal: result.signal,
            denied: result.denied,
            runner_failed: result.runner_failed,
            timed_out: result.timed_out,
            cancelled: result.cancelled,
            escalated,
            // Only present when output was cut, so a result without a cut reads as it always did.
            dropped: result.dropped.any().then_some(result.dropped),
        }
    }
}

/// A file was read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ReadFacts {
    /// Always true (reads are never refused by the sandbox).
    pub ran: bool,
    /// The file, under the workspace root.
    pub path: PathBuf,
}

/// A file was written or edited.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FileFacts {
    /// Always true: the call's policy was resolved and the operation was attempted.
    pub ran: bool,
    /// The mode it ran under.
    pub mode: SandboxMode,
    /// A granted escalation ran it.
    pub escalated: bool,
    /// The file, under the workspace root.
    pub path: PathBuf,
}

/// An agent's pre-tool hook refused the call.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct HookFacts {
    /// Always false.
    pub ran: bool,
    /// The hook's own call's facts.
    pub hook: Box<Facts>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every code-like word the tools' sources and the writable set's codes spell is in
    /// [`CODES`]: a new code that is not listed fails here, not in a scenario that expects it.
    #[test]
    fn the_closed_list_of_codes_is_complete() {
        const PREFIXES: [&str; 8] = [
            "ESCALATION_",
            "FS_",
            "SHELL_",
            "WORKSPACE_",
            "TEMP_DIR_",
            "WRITABLE_ROOT_",
            "UNIX_SOCKET_",
            "BAD_",
        ];
        let here = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut sources: Vec<std::path::PathBuf> = std::fs::read_dir(here.join("src"))
            .expect("src")
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.is_file())
            .collect();
        sources.push(here.join("../sandbox/src/workspace.rs"));
        sources.push(here.join("../sandbox/src/protected.rs"));
        let mut seen = 0;
        for path in sources {
            let text = std::fs::read_to_string(&path).expect("source");
            for word in text.split('"').skip(1).step_by(2) {
                let code_like = !word.is_empty()
                    && word
                        .bytes()
                        .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_');
                if code_like && !word.ends_with('_') && PREFIXES.iter().any(|p| word.starts_with(p))
                {
                    seen += 1;
                    assert!(
                        CODES.contains(&word),
                        "{word} ({}) is not in CODES",
                        path.display()
                    );
                }
            }
        }
        assert!(seen > 30, "only {seen} codes found: the scan is broken");
        for code in [
            Code::Ok,
            Code::Started,
            Code::Running,
            Code::Cancelled,
            Code::Denied,
        ] {
            assert!(CODES.contains(&code.as_str()), "{code}");
        }
    }

    #[test]
    fn codes_read_as_their_wire_words() {
        assert_eq!(Code::Ok.as_str(), "OK");
        assert_eq!(Code::FsSandboxDenied, "FS_SANDBOX_DENIED");
        assert_eq!(Code::SandboxUnavailable.to_string(), "SANDBOX_UNAVAILABLE");
        assert_eq!(
            serde_json::to_value(Code::Other("ESCALATION_REJECTED")).expect("json"),
            "ESCALATION_REJECTED"
        );
        assert_eq!(
            Code::from_error_code(sandbox::SANDBOX_UNAVAILABLE),
            Code::SandboxUnavailable
        );
        assert_eq!(
            Code::from_error_code("FS_NOT_FOUND"),
            Code::Other("FS_NOT_FOUND")
        );
        assert_eq!(Code::Other("OK"), Code::Ok, "equal by their wire words");
    }

    #[test]
    fn not_run_facts_carry_the_mode_only_when_known() {
        assert_eq!(
            serde_json::to_string(&Facts::not_run()).expect("json"),
            r#"{"ran":false}"#
        );
        assert_eq!(
            serde_json::to_string(&Facts::not_run_under(SandboxMode::ReadOnly)).expect("json"),
            r#"{"ran":false,"mode":"read-only"}"#
        );
    }

    #[test]
    fn hook_facts_nest_the_hooks_own_facts() {
        let facts = Facts::Hook(HookFacts {
            ran: false,
            hook: Box::new(Facts::not_run()),
        });
        assert_eq!(
            serde_json::to_string(&facts).expect("json"),
            r#"{"ran":false,"hook":{"ran":false}}"#
        );
        assert_eq!(facts.ran(), Some(false));
        assert!(!facts.cancelled());
    }
}
