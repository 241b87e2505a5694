//! The closed set of model-facing tools: each one's wire name, its kind, and its schema (the
//! description and the JSON Schema of the arguments it parses). This is the one place a tool's
//! name is spelled; everything else names a [`Tool`].

use std::fmt;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::escalation::EscalationFields;

/// A model-facing tool.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Tool {
    /// `bash`: run a command in the confined shell (foreground or background).
    Bash,
    /// `bash_output`: read a background task's result.
    BashOutput,
    /// `bash_cancel`: stop a background task and its whole process tree.
    BashCancel,
    /// `read`: read a text file (never restricted).
    Read,
    /// `write`: replace a file (fenced).
    Write,
    /// `edit`: replace one occurrence of a text in a file (fenced).
    Edit,
}

/// What kind of thing a tool does (an editor shows a call by it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ToolKind {
    /// Runs a command or reads what one did.
    Execute,
    /// Reads a file.
    Read,
    /// Changes a file.
    Edit,
    /// Anything else.
    Other,
}

impl Tool {
    /// Every tool, in the order the model is told about them in prose.
    pub const ALL: [Tool; 6] = [
        Tool::Bash,
        Tool::BashOutput,
        Tool::BashCancel,
        Tool::Read,
        Tool::Write,
        Tool::Edit,
    ];

    /// The order the tool definitions are advertised in (the wire of [`crate::tools::Toolbox::schemas`]).
    pub const ADVERTISED: [Tool; 6] = [
        Tool::Bash,
        Tool::BashCancel,
        Tool::Read,
        Tool::BashOutput,
        Tool::Write,
        Tool::Edit,
    ];

    /// The wire name the model calls it by.
    pub const fn name(self) -> &'static str {
        match self {
            Tool::Bash => "bash",
            Tool::BashOutput => "bash_output",
            Tool::BashCancel => "bash_cancel",
            Tool::Read => "read",
            Tool::Write => "write",
            Tool::Edit => "edit",
        }
    }

    /// The tool a wire name names, if any.
    pub fn from_name(name: &str) -> Option<Tool> {
        Tool::ALL.into_iter().find(|t| t.name() == name)
    }

    /// What kind of thing it does.
    pub const fn kind(self) -> ToolKind {
        match self {
            Tool::Bash | Tool::BashOutput => ToolKind::Execute,
            Tool::Read => ToolKind::Read,
            Tool::Write | Tool::Edit => ToolKind::Edit,
            Tool::BashCancel => ToolKind::Other,
        }
    }

    /// True when the tool can carry the escalation fields (it runs under the sandbox: the shell
    /// or the fenced filesystem). Its policy is fixed only after any approval.
    pub const fn escalates(self) -> bool {
        matches!(self, Tool::Bash | Tool::Write | Tool::Edit)
    }

    /// True when the tool's arguments name a file (`path`).
    pub const fn names_file(self) -> bool {
        matches!(self, Tool::Read | Tool::Write | Tool::Edit)
    }

    /// True when the tool changes the file it names.
    pub const fn changes_file(self) -> bool {
        matches!(self, Tool::Write | Tool::Edit)
    }

    /// The tool's description, with the escalation sentence when `escalation` is advertised.
    pub fn description(self, escalation: bool) -> String {
        let base = match self {
            Tool::Bash => BASH_DESCRIPTION,
            Tool::BashCancel => "Stop a background bash task and everything it started.",
            Tool::Read => "Read a text file. Reads are never restricted.",
            Tool::BashOutput => "Read the result of a background bash task.",
            Tool::Write => {
                "Write a file (replacing it). Writes outside what the sandbox allows fail with [sandbox: file access denied under <mode> mode]; never retry around a denial."
            }
            Tool::Edit => {
                "Replace the one occurrence of old_text in a file with new_text. Denied edits fail like writes."
            }
        };
        if escalation && self.escalates() {
            format!("{base}{ESCALATION_DESCRIPTION}")
        } else {
            base.to_owned()
        }
    }

    /// The JSON Schema of the arguments, derived from the type that parses them, with the
    /// escalation fields exactly when `escalation` is advertised.
    pub fn parameters(self, escalation: bool) -> Value {
        match self {
            Tool::Bash => parameters::<BashArgs>(escalation),
            Tool::BashOutput => parameters::<OutputArgs>(false),
            Tool::BashCancel => parameters::<CancelArgs>(false),
            Tool::Read => parameters::<ReadArgs>(false),
            Tool::Write => parameters::<WriteArgs>(escalation),
            Tool::Edit => parameters::<EditArgs>(escalation),
        }
    }

    /// The tool definition the model is given: name, description, JSON Schema of the arguments.
    pub fn definition(self, escalation: bool) -> Value {
        json!({
            "name": self.name(),
            "description": self.description(escalation),
            "parameters": self.parameters(escalation),
        })
    }
}

impl fmt::Display for Tool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Tool {
    type Err = UnknownTool;

    fn from_str(s: &str) -> Result<Tool, UnknownTool> {
        Tool::from_name(s).ok_or_else(|| UnknownTool(s.to_owned()))
    }
}

/// A name that is no tool.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("no such tool: {0:?}")]
pub struct UnknownTool(pub String);

const BASH_DESCRIPTION: &str = "Run a shell command with bash. Commands run in a file sandbox: a file access the sandbox does not allow fails, and the result then carries [sandbox: file access denied under <mode> mode]. Attempt commands even when they may be denied; never retry around a denial.";
const ESCALATION_DESCRIPTION: &str = " After a denial you may retry the same call once with sandbox_permissions and a justification; the user is asked and decides.";

/// The escalation fields' schema vocabulary: the modes an escalation may ask for.
pub(crate) fn escalation_targets(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let mut schema = <Option<String>>::json_schema(generator);
    schema.insert(
        "enum".into(),
        json!(
            crate::escalation::ESCALATION_TARGETS
                .iter()
                .map(|m| m.as_str())
                .collect::<Vec<_>>()
        ),
    );
    schema
}

/// The names of [`EscalationFields`]' fields, as the model sends them.
const ESCALATION_KEYS: [&str; 2] = ["sandbox_permissions", "justification"];

/// Parses the arguments of a tool that escalates (`bash`, `write`, `edit`): its own (`T`, which
/// refuses an unknown field with serde's own message) and the escalation fields, spelled once in
/// [`EscalationFields`] and taken out of the object first.
pub(crate) fn with_escalation<T: serde::de::DeserializeOwned>(
    args: &Value,
) -> Result<(T, EscalationFields), serde_json::Error> {
    let Some(object) = args.as_object() else {
        return T::deserialize(args).map(|own| (own, EscalationFields::default()));
    };
    let mut own = object.clone();
    let mut escalation = serde_json::Map::new();
    for key in ESCALATION_KEYS {
        if let Some(value) = own.remove(key) {
            escalation.insert(key.to_owned(), value);
        }
    }
    let escalation = EscalationFields::deserialize(Value::Object(escalation))?;
    Ok((T::deserialize(Value::Object(own))?, escalation))
}

/// `bash`'s arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct BashArgs {
    /// The command, run as `bash -c <command>` in the workspace.
    pub(crate) command: String,
    /// Kill the command and everything it started after this many milliseconds.
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub(crate) timeout_ms: Option<u64>,
    /// Start it in the background; read it with bash_output.
    #[serde(default)]
    pub(crate) run_in_background: bool,
}

/// `bash_output`'s arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct OutputArgs {
    /// The background task.
    pub(crate) task_id: u64,
    /// How long to wait for it to finish, in milliseconds (default 30000).
    #[serde(default)]
    pub(crate) wait_ms: Option<u64>,
}

/// `bash_cancel`'s arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CancelArgs {
    /// The background task.
    pub(crate) task_id: u64,
}

/// `read`'s arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReadArgs {
    /// The file, relative to the workspace or absolute.
    pub(crate) path: String,
}

/// `write`'s arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct WriteArgs {
    /// The file, relative to the workspace or absolute.
    pub(crate) path: String,
    /// Its whole new content.
    pub(crate) content: String,
}

/// `edit`'s arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct EditArgs {
    /// The file, relative to the workspace or absolute.
    pub(crate) path: String,
    /// The text to replace; it must occur exactly once.
    pub(crate) old_text: String,
    /// What replaces it.
    pub(crate) new_text: String,
}

/// The JSON Schema of `T`, derived from the argument type itself, with [`EscalationFields`]'
/// fields added when `escalation` (so what is advertised is exactly what is parsed).
fn parameters<T: JsonSchema>(escalation: bool) -> Value {
    let settings = schemars::generate::SchemaSettings::draft2020_12().with(|s| {
        s.meta_schema = None;
    });
    let mut schema = settings
        .into_generator()
        .into_root_schema_for::<T>()
        .to_value();
    if let Some(obj) = schema.as_object_mut() {
        obj.remove("title");
        obj.remove("description");
        if escalation && let Some(props) = obj.get_mut("properties").and_then(Value::as_object_mut)
        {
            let fields = parameters::<EscalationFields>(false);
            if let Some(extra) = fields.get("properties").and_then(Value::as_object) {
                props.extend(extra.clone());
            }
        }
    }
    schema
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_escalation_fields_parse_beside_each_tools_own_and_nothing_unknown_passes() {
        let (args, fields) = with_escalation::<WriteArgs>(&json!({
            "path": "a", "content": "x",
            "sandbox_permissions": "workspace-write", "justification": "why"
        }))
        .expect("parses");
        assert_eq!((args.path.as_str(), args.content.as_str()), ("a", "x"));
        assert_eq!(
            fields,
            EscalationFields::new(Some("workspace-write".into()), Some("why".into()))
        );
        let (_, none) = with_escalation::<BashArgs>(&json!({"command": "ls"})).expect("parses");
        assert_eq!(none, EscalationFields::default());
        let unknown = with_escalation::<BashArgs>(&json!({"command": "ls", "sudo": true}))
            .err()
            .expect("an unknown field is refused");
        assert!(
            unknown.to_string().contains("unknown field `sudo`"),
            "{unknown}"
        );
        let mistyped = with_escalation::<EditArgs>(&json!({
            "path": "a", "old_text": "x", "new_text": "y", "justification": 5
        }))
        .err()
        .expect("a justification that is not a string is refused");
        assert!(mistyped.to_string().contains("invalid type"), "{mistyped}");
        assert!(with_escalation::<BashArgs>(&json!("ls")).is_err());
    }

    #[test]
    fn every_name_parses_back_to_its_tool_and_nothing_else_parses() {
        for tool in Tool::ALL {
            assert_eq!(Tool::from_name(tool.name()), Some(tool));
            assert_eq!(tool.name().parse::<Tool>(), Ok(tool));
            assert_eq!(tool.to_string(), tool.name());
        }
        assert_eq!(Tool::from_name("Bash"), None);
        assert_eq!(Tool::from_name(""), None);
        assert!("frob".parse::<Tool>().is_err());
    }

    #[test]
    fn the_advertised_order_lists_every_tool_once() {
        let mut advertised = Tool::ADVERTISED.to_vec();
        advertised.sort_by_key(|t| t.name());
        let mut all = Tool::ALL.to_vec();
        all.sort_by_key(|t| t.name());
        assert_eq!(advertised, all);
    }

    #[test]
    fn only_the_sandboxed_tools_escalate_and_only_file_tools_name_files() {
        let escalates: Vec<Tool> = Tool::ALL.into_iter().filter(|t| t.escalates()).collect();
        assert_eq!(escalates, [Tool::Bash, Tool::Write, Tool::Edit]);
        let files: Vec<Tool> = Tool::ALL.into_iter().filter(|t| t.names_file()).collect();
        assert_eq!(files, [Tool::Read, Tool::Write, Tool::Edit]);
        let changes: Vec<Tool> = Tool::ALL.into_iter().filter(|t| t.changes_file()).collect();
        assert_eq!(changes, [Tool::Write, Tool::Edit]);
        assert_eq!(Tool::BashCancel.kind(), ToolKind::Other);
        assert_eq!(Tool::BashOutput.kind(), ToolKind::Execute);
    }

    #[test]
    fn a_tool_that_cannot_escalate_never_gets_the_escalation_sentence() {
        assert_eq!(Tool::Read.description(true), Tool::Read.description(false));
        assert!(
            Tool::Bash
                .description(true)
                .ends_with(ESCALATION_DESCRIPTION)
        );
    }
}
