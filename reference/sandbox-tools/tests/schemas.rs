//! The tool definitions the model is given, per composition, pinned by named snapshots: the
//! escalation fields and their teaching sentence appear exactly where the executor or the
//! filesystem confines (confining, mixed, non-confining), and every schema is derived from the
//! argument type that parses the call (so `bash_cancel` takes only `task_id`).

use std::sync::Arc;

use sandbox::SandboxMode;
use sandbox_local::{Backend, LocalConfig, LocalProvider};
use sandbox_policy::PolicyService;
use sandbox_tools::fs::FileSystem;
use sandbox_tools::shell::ShellExecutor;
use sandbox_tools::tools::Toolbox;

fn toolbox(confining_shell: bool, fs: FileSystem) -> (tempfile::TempDir, Toolbox) {
    let dir = tempfile::tempdir().expect("tempdir");
    let policy = Arc::new(PolicyService::new(SandboxMode::ReadOnly, dir.path()).expect("policy"));
    let shell = if confining_shell {
        ShellExecutor::confining(Arc::new(LocalProvider::new(LocalConfig::only(
            Backend::Landlock,
        ))))
    } else {
        ShellExecutor::unconfined()
    };
    let tools = Toolbox::new(policy, Arc::new(shell), fs, None);
    (dir, tools)
}

/// Pretty JSON with object keys sorted, whatever order serde_json keeps (a crate elsewhere in the
/// build may turn on `preserve_order`).
fn pretty(tools: &Toolbox) -> String {
    fn sorted(v: &serde_json::Value) -> serde_json::Value {
        match v {
            serde_json::Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                serde_json::Value::Object(
                    keys.into_iter()
                        .map(|k| (k.clone(), sorted(&map[k])))
                        .collect(),
                )
            }
            serde_json::Value::Array(items) => {
                serde_json::Value::Array(items.iter().map(sorted).collect())
            }
            other => other.clone(),
        }
    }
    serde_json::to_string_pretty(&sorted(&tools.schemas())).expect("json")
}

#[test]
fn a_confining_composition_advertises_escalation_on_bash_write_and_edit() {
    let (_d, tools) = toolbox(true, FileSystem::Fenced);
    insta::assert_snapshot!("tool_schemas_confining", pretty(&tools));
}

#[test]
fn a_mixed_composition_advertises_escalation_only_where_it_confines() {
    let (_d, tools) = toolbox(true, FileSystem::Local);
    let schemas = tools.schemas();
    let advertised: Vec<(String, bool)> = schemas
        .as_array()
        .expect("array")
        .iter()
        .map(|t| {
            (
                t["name"].as_str().expect("name").to_owned(),
                t["parameters"]["properties"]
                    .get("sandbox_permissions")
                    .is_some(),
            )
        })
        .collect();
    assert_eq!(
        advertised,
        [
            ("bash", true),
            ("bash_cancel", false),
            ("read", false),
            ("bash_output", false),
            ("write", false),
            ("edit", false)
        ]
        .map(|(n, a)| (n.to_owned(), a))
    );
    insta::assert_snapshot!("tool_schemas_mixed", pretty(&tools));
}

#[test]
fn a_non_confining_composition_advertises_no_escalation_at_all() {
    let (_d, tools) = toolbox(false, FileSystem::Local);
    let text = pretty(&tools);
    assert!(!text.contains("sandbox_permissions") && !text.contains("retry the same call"));
    insta::assert_snapshot!("tool_schemas_non_confining", text);
}
