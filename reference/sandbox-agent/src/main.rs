//! `sandbox-agent`: the reference ACP agent over stdio (newline-delimited JSON-RPC 2.0). Every
//! request and response is one of the `agent-client-protocol` crate's types; the model is
//! scripted: each prompt opens a turn, anchors pending switches, records its request header, runs
//! the `tool <name> <json>` lines of the prompt through the reference tools (escalations ask the
//! editor with `session/request_permission`), and ends the turn.
//!
//! `sandbox-agent --sessions DIR [--mode read-only] [--approval ask] [--workspace DIR]`

use std::io::{BufReader, Stdin, Stdout};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    AgentCapabilities, Implementation, InitializeRequest, InitializeResponse, LoadSessionRequest,
    LoadSessionResponse, NewSessionRequest, NewSessionResponse, PromptRequest, PromptResponse,
    SetSessionConfigOptionRequest, SetSessionConfigOptionResponse, StopReason,
};
use clap::Parser;
use sandbox::SandboxMode;
use sandbox_agent::model::{AcpApprover, SharedWire, Wire, report, scripted_calls};
use sandbox_agent::{Bridge, BridgeError};
use sandbox_local::{LocalConfig, LocalProvider};
use sandbox_policy::presets::PresetTable;
use sandbox_policy::{ApprovalPolicy, PolicyService};
use sandbox_tools::fs::FileSystem;
use sandbox_tools::shell::ShellExecutor;
use sandbox_tools::tools::{CallContext, Toolbox};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

#[derive(Parser)]
#[command(
    name = "sandbox-agent",
    version,
    about = "The reference ACP agent (scripted model) over stdio"
)]
struct Cli {
    /// Where session logs live (one JSON-lines file per session).
    #[arg(long)]
    sessions: PathBuf,
    /// The deployment default sandbox mode.
    #[arg(long, default_value = "read-only")]
    mode: SandboxMode,
    /// The deployment default approval policy: ask or never.
    #[arg(long, default_value = "ask", value_parser = ["ask", "never"])]
    approval: String,
    /// The configured workspace root (the fallback; sessions use their own cwd).
    #[arg(long)]
    workspace: Option<PathBuf>,
}

/// A JSON-RPC error: invalid params carries the bridge's stable code as `data.code`.
struct RpcError {
    code: i64,
    message: String,
    data: Option<Value>,
}

fn invalid_params(e: &BridgeError) -> RpcError {
    RpcError {
        code: -32602,
        message: e.to_string(),
        data: Some(json!({ "code": e.code() })),
    }
}

fn params<T: DeserializeOwned>(value: Value) -> Result<T, RpcError> {
    serde_json::from_value(value).map_err(|e| RpcError {
        code: -32602,
        message: format!("invalid params: {e}"),
        data: Some(json!({ "code": "MALFORMED_PARAMS" })),
    })
}

fn to_value<T: serde::Serialize>(v: &T) -> Result<Value, RpcError> {
    serde_json::to_value(v).map_err(|e| RpcError {
        code: -32603,
        message: e.to_string(),
        data: None,
    })
}

type StdioWire = SharedWire<BufReader<Stdin>, Stdout>;

/// Runs the scripted tool calls of a prompt in its open turn, reporting each to the editor.
fn run_scripted(
    bridge: &Bridge,
    id: &str,
    prompt: &[agent_client_protocol::v1::schema::ContentBlock],
    wire: &StdioWire,
    provider: &Arc<LocalProvider>,
) -> Result<(), RpcError> {
    let session = bridge.session(id).map_err(|e| invalid_params(&e))?;
    let tools = Toolbox::new(
        Arc::new(bridge.policy().clone()),
        Arc::new(ShellExecutor::confining(provider.clone())),
        FileSystem::Fenced,
        Some(Arc::new(AcpApprover::new(wire.clone(), id))),
    );
    for (n, (tool, args)) in scripted_calls(prompt).into_iter().enumerate() {
        let call_id = format!("{id}-call-{}", n + 1);
        let out = tools.call(
            &tool,
            &args,
            &CallContext {
                session: Some(session),
                agent: Some("sandbox-agent"),
                call_id: &call_id,
            },
        );
        let note = to_value(&report(id, &tool, &out.code, &out.text))?;
        if let Ok(mut w) = wire.lock() {
            let _ =
                w.send(&json!({ "jsonrpc": "2.0", "method": "session/update", "params": note }));
        }
    }
    Ok(())
}

fn handle(
    bridge: &mut Bridge,
    method: &str,
    p: Value,
    wire: &StdioWire,
    provider: &Arc<LocalProvider>,
) -> Result<Value, RpcError> {
    match method {
        "initialize" => {
            let _: InitializeRequest = params(p)?;
            to_value(
                &InitializeResponse::new(ProtocolVersion::V1)
                    .agent_capabilities(AgentCapabilities::new().load_session(true))
                    .agent_info(Implementation::new(
                        "sandbox-agent",
                        env!("CARGO_PKG_VERSION"),
                    )),
            )
        }
        "session/new" => {
            let r: NewSessionRequest = params(p)?;
            let (id, options) = bridge.new_session(&r.cwd).map_err(|e| invalid_params(&e))?;
            to_value(&NewSessionResponse::new(id).config_options(options))
        }
        "session/load" => {
            let r: LoadSessionRequest = params(p)?;
            let options = bridge
                .load_session(&r.session_id.0, &r.cwd)
                .map_err(|e| invalid_params(&e))?;
            to_value(&LoadSessionResponse::new().config_options(options))
        }
        "session/set_config_option" => {
            let r: SetSessionConfigOptionRequest = params(p)?;
            let options = bridge
                .set_config_option(&r.session_id.0, &r.config_id.0, &r.value)
                .map_err(|e| invalid_params(&e))?;
            to_value(&SetSessionConfigOptionResponse::new(options))
        }
        "session/prompt" => {
            let r: PromptRequest = params(p)?;
            let id = r.session_id.0.to_string();
            bridge.begin_turn(&id).map_err(|e| invalid_params(&e))?;
            let ran = run_scripted(bridge, &id, &r.prompt, wire, provider);
            bridge.end_turn(&id).map_err(|e| invalid_params(&e))?;
            ran?;
            to_value(&PromptResponse::new(StopReason::EndTurn))
        }
        other => Err(RpcError {
            code: -32601,
            message: format!("method not found: {other}"),
            data: None,
        }),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let approval = if cli.approval == "never" {
        ApprovalPolicy::Never
    } else {
        ApprovalPolicy::Ask
    };
    let workspace = cli
        .workspace
        .clone()
        .or_else(|| std::env::current_dir().ok())
        .unwrap_or_else(|| PathBuf::from("/"));
    let setup = PolicyService::new(cli.mode, &workspace)
        .map_err(|e| e.to_string())
        .and_then(|policy| {
            let presets = PresetTable::standard(cli.mode, approval).map_err(|e| e.to_string())?;
            std::fs::create_dir_all(&cli.sessions).map_err(|e| e.to_string())?;
            Ok((policy.with_default_approval(approval), presets))
        });
    let (policy, presets) = match setup {
        Ok(s) => s,
        Err(e) => {
            eprintln!("sandbox-agent: bad configuration: {e}");
            return ExitCode::from(2);
        }
    };
    let mut bridge = Bridge::new(policy, presets, &cli.sessions);
    let provider = Arc::new(LocalProvider::new(LocalConfig::default()));
    let wire: StdioWire = Arc::new(Mutex::new(Wire::new(
        BufReader::new(std::io::stdin()),
        std::io::stdout(),
    )));
    loop {
        let next = match wire.lock() {
            Ok(mut w) => w.next_message(),
            Err(_) => return ExitCode::from(1),
        };
        let Some(message) = next else { break };
        let message = match message {
            Ok(m) => m,
            Err(e) => {
                let reply = json!({ "jsonrpc": "2.0", "id": null,
                    "error": { "code": -32700, "message": e } });
                if let Ok(mut w) = wire.lock() {
                    let _ = w.send(&reply);
                }
                continue;
            }
        };
        let Some(id) = message.get("id").cloned() else {
            continue; // a notification (for example session/cancel): nothing to answer
        };
        let method = message.get("method").and_then(Value::as_str).unwrap_or("");
        let p = message.get("params").cloned().unwrap_or(Value::Null);
        let answer = handle(&mut bridge, method, p, &wire, &provider);
        for warning in bridge.take_warnings() {
            eprintln!("sandbox-agent: warning: {warning}");
        }
        let reply = match answer {
            Ok(result) => json!({ "jsonrpc": "2.0", "id": id, "result": result }),
            Err(e) => {
                let mut error = json!({ "code": e.code, "message": e.message });
                if let Some(data) = e.data {
                    error["data"] = data;
                }
                json!({ "jsonrpc": "2.0", "id": id, "error": error })
            }
        };
        let sent = wire.lock().map(|mut w| w.send(&reply));
        if !matches!(sent, Ok(Ok(()))) {
            return ExitCode::from(1);
        }
    }
    ExitCode::SUCCESS
}
