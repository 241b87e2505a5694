//! A whole external backend in Rust, certified by the suite: the protocol's typed messages
//! (`sandbox-protocol`) over the reference library's Landlock backend (`sandbox-local` and its
//! launcher, `landlock-run`). It reads one [`Request`] per line on stdin and answers one
//! [`Response`] per line on stdout; it never runs the payload itself.
//!
//! Why Landlock and not the reference bwrap backend: bwrap's argv binds descriptors the provider
//! opened and pinned (`--bind-fd N`), and an answer over the protocol carries an argv, not
//! descriptors, so the harness's spawn would not have them. The launcher's argv stands alone
//! once the provider is told not to stage new git directories while the call runs (that hands
//! the launcher a directory by descriptor too): git's surface is then checked after the call
//! alone, by the settle the harness asks for.
//!
//! Certify it as a backend author would (the suite's own test does exactly this,
//! `the_worked_example_in_rust_is_certified` in `conformance/tests/certify.rs`):
//!
//! ```sh
//! cargo build --workspace
//! target/debug/certify -- target/debug/rust-example-backend
//! ```
//!
//! (`cargo run -p sandbox-protocol --example backend` runs the same program.)

use std::io::{BufRead, Write};
use std::process::ExitCode;

use sandbox::{CallGuard, SANDBOX_UNAVAILABLE, SandboxEnforcement, SandboxProvider};
use sandbox_local::{Backend, LocalConfig, LocalProvider};
use sandbox_protocol::{
    Differences, Implementation, Request, Response, SUPPORTED_VERSIONS, WireCapability, WirePolicy,
};

/// The name it is certified under (trial names carry it).
const NAME: &str = "rust-example";

fn main() -> ExitCode {
    // One provider for the whole run: it probes the launcher once, on first use.
    let provider = LocalProvider::new(LocalConfig {
        prevent_while_running: false,
        ..LocalConfig::only(Backend::Landlock)
    });
    // The checks of confined calls not settled yet, by request id.
    let mut guards: Vec<(u64, Box<dyn CallGuard>)> = Vec::new();
    let mut stdout = std::io::stdout();
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let answer = match serde_json::from_str::<Request>(&line) {
            Err(e) => Response::Error {
                code: "MALFORMED_REQUEST".into(),
                message: e.to_string(),
            },
            Ok(Request::Shutdown) => break,
            Ok(Request::Hello { protocol, .. }) => hello(&provider, protocol),
            Ok(Request::Confine {
                id,
                argv,
                cwd,
                policy,
            }) => confine(&provider, &mut guards, id, argv, cwd, policy),
            Ok(Request::Settle { id }) => {
                let reverted = match guards.iter().position(|(g, _)| *g == id) {
                    Some(at) => guards.remove(at).1.settle(),
                    None => Vec::new(),
                };
                // A request whose argv was never launched is never settled: its guard goes once
                // it is far behind (the harness runs cases in parallel).
                guards.retain(|(g, _)| *g + 256 > id);
                Response::Settled { id, reverted }
            }
        };
        let sent = serde_json::to_string(&answer).is_ok_and(|text| {
            writeln!(stdout, "{text}")
                .and_then(|()| stdout.flush())
                .is_ok()
        });
        if !sent {
            return ExitCode::from(1);
        }
    }
    ExitCode::SUCCESS
}

/// The handshake: what this backend can do on this host. Its writable set is the reference one,
/// so it declares no differences.
fn hello(provider: &LocalProvider, protocol: u32) -> Response {
    if !SUPPORTED_VERSIONS.contains(&protocol) {
        return Response::Error {
            code: "PROTOCOL_VERSION".into(),
            message: format!("this backend speaks protocols {SUPPORTED_VERSIONS:?}"),
        };
    }
    let (capabilities, enforcement) = match provider.selection() {
        // The launcher reports whether the payload ran on a status descriptor of its own.
        Ok(selection) => (
            vec![WireCapability::Confine, WireCapability::StatusChannel],
            selection.enforcement(),
        ),
        // No usable Landlock here: every confine is answered `unavailable`.
        Err(_) => (Vec::new(), SandboxEnforcement::Full),
    };
    Response::Hello {
        protocol,
        implementation: Implementation {
            name: NAME.into(),
            version: env!("CARGO_PKG_VERSION").into(),
        },
        capabilities,
        enforcement,
        differences: Differences::default(),
    }
}

/// One `confine`: the wire policy as a provider policy, confined by the reference provider, or
/// `unavailable` with the runner's own words (never an unconfined argv).
fn confine(
    provider: &LocalProvider,
    guards: &mut Vec<(u64, Box<dyn CallGuard>)>,
    id: u64,
    argv: Vec<String>,
    cwd: Option<std::path::PathBuf>,
    wire: WirePolicy,
) -> Response {
    let unavailable = |detail: String| Response::Unavailable {
        id,
        code: SANDBOX_UNAVAILABLE.into(),
        detail,
    };
    // Absent: the deployment default; a pattern that is not one is refused, not dropped.
    // The protocol crate's conversion: every field of the request, allowed sockets included.
    let policy = match wire.into_provider_policy(cwd) {
        Ok(p) => p,
        Err(e) => return unavailable(e.to_string()),
    };
    let argv: Vec<_> = argv.into_iter().map(Into::into).collect();
    match provider.confine(&argv, &policy) {
        Ok(confined) => {
            // What the profile cannot prevent is checked after the call, when the harness says
            // it is over (`settle`).
            let guard = provider.call_guard(&policy);
            let settle = guard.is_some();
            if let Some(g) = guard {
                guards.push((id, g));
            }
            Response::Confined {
                id,
                argv: confined
                    .argv
                    .iter()
                    .map(|a| a.to_string_lossy().into_owned())
                    .collect(),
                enforcement: confined.enforcement,
                classes: Some(confined.classes),
                denial_signatures: confined.denial_signatures,
                runner_failure_rules: confined.runner_failure_rules,
                status_channel: confined.status_channel,
                settle,
            }
        }
        Err(e) => unavailable(e.detail),
    }
}
