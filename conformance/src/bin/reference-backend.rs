//! `reference-backend --backend NAME`: a reference backend (bwrap, landlock, landlock-abi2,
//! seatbelt) behind the JSON-lines protocol, so the reference is certified through exactly the
//! path an external backend takes: `certify --expectations fixtures/expectations/landlock.yaml --
//! target/debug/reference-backend --backend landlock`.

use std::io::{BufRead, Write};
use std::process::ExitCode;

use conformance::backends::reference_backend;
use conformance::model::Capability;
use conformance::protocol::{
    Differences, Implementation, Request, Response, SUPPORTED_VERSIONS, WireCapability,
};
use sandbox::{SANDBOX_UNAVAILABLE, SandboxEnforcement};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let name = match args.as_slice() {
        [flag, name] if flag == "--backend" => name.clone(),
        _ => {
            eprintln!("usage: reference-backend --backend bwrap|landlock|landlock-abi2|seatbelt");
            return ExitCode::from(2);
        }
    };
    let Some(backend) =
        reference_backend(&name).filter(|b| b.local_config().is_some() && name != "local")
    else {
        eprintln!("reference-backend: {name:?} is not a local reference backend");
        return ExitCode::from(2);
    };
    // The argv leaves this process, so no descriptor goes with it: the launcher cannot be handed
    // its staging directory, and git's surface is checked after the call alone (settled).
    let provider: Option<std::sync::Arc<dyn sandbox::SandboxProvider>> =
        backend.local_config().map(|c| {
            let mut config = c.clone();
            config.prevent_while_running = false;
            std::sync::Arc::new(sandbox_local::LocalProvider::new(config))
                as std::sync::Arc<dyn sandbox::SandboxProvider>
        });
    let stdin = std::io::stdin();
    let mut stdout = std::io::stdout();
    // The checks of confined calls not settled yet, by request id.
    let mut guards: Vec<(u64, Box<dyn sandbox::CallGuard>)> = Vec::new();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        let answer = match serde_json::from_str::<Request>(&line) {
            Err(e) => Response::Error {
                code: "MALFORMED_REQUEST".into(),
                message: e.to_string(),
            },
            Ok(Request::Shutdown) => break,
            Ok(Request::Settle { id }) => {
                let reverted = match guards.iter().position(|(g, _)| *g == id) {
                    Some(at) => guards.remove(at).1.settle(),
                    None => Vec::new(),
                };
                // A confined request never launched (the harness's metamorphic twin) is never
                // settled: its guard goes once it is far behind (cases run in parallel, so a
                // slightly older one may still be some case's own).
                guards.retain(|(g, _)| *g + 256 > id);
                Response::Settled { id, reverted }
            }
            Ok(Request::Hello { protocol, .. }) if !SUPPORTED_VERSIONS.contains(&protocol) => {
                Response::Error {
                    code: "PROTOCOL_VERSION".into(),
                    message: format!("this backend speaks protocols {SUPPORTED_VERSIONS:?}"),
                }
            }
            // The reference writable set is the reference: nothing to declare.
            Ok(Request::Hello { protocol, .. }) => Response::Hello {
                protocol,
                differences: Differences::default(),
                implementation: Implementation {
                    name: backend.name.clone(),
                    version: backend.version.clone().unwrap_or_default(),
                },
                capabilities: backend
                    .capabilities
                    .iter()
                    .filter_map(|c| match c {
                        Capability::Confine => Some(WireCapability::Confine),
                        Capability::StatusChannel => Some(WireCapability::StatusChannel),
                        Capability::AbiCap => Some(WireCapability::AbiCap),
                        _ => None,
                    })
                    .collect(),
                enforcement: backend.enforcement.unwrap_or(SandboxEnforcement::Full),
            },
            Ok(Request::Confine {
                id,
                argv,
                cwd,
                policy,
            }) => {
                let policy = match policy.into_provider_policy(cwd) {
                    Ok(p) => p,
                    Err(e) => {
                        let refused = Response::Unavailable {
                            id,
                            code: SANDBOX_UNAVAILABLE.into(),
                            detail: e.to_string(),
                        };
                        if !send(&mut stdout, &refused) {
                            return ExitCode::from(1);
                        }
                        continue;
                    }
                };
                let argv: Vec<_> = argv.into_iter().map(Into::into).collect();
                match provider.as_ref().map(|p| p.confine(&argv, &policy)) {
                    Some(Ok(c)) => {
                        // The provider's check after the call, settled when the harness says
                        // the call is over.
                        let guard = provider.as_ref().and_then(|p| p.call_guard(&policy));
                        let settle = guard.is_some();
                        if let Some(g) = guard {
                            guards.push((id, g));
                        }
                        Response::Confined {
                            id,
                            argv: c
                                .argv
                                .iter()
                                .map(|a| a.to_string_lossy().into_owned())
                                .collect(),
                            enforcement: c.enforcement,
                            classes: Some(c.classes),
                            denial_signatures: c.denial_signatures,
                            runner_failure_rules: c.runner_failure_rules,
                            status_channel: c.status_channel,
                            settle,
                        }
                    }
                    Some(Err(e)) => Response::Unavailable {
                        id,
                        code: SANDBOX_UNAVAILABLE.into(),
                        detail: e.detail,
                    },
                    None => Response::Unavailable {
                        id,
                        code: SANDBOX_UNAVAILABLE.into(),
                        detail: backend
                            .unusable
                            .clone()
                            .unwrap_or_else(|| "backend not usable".into()),
                    },
                }
            }
        };
        if !send(&mut stdout, &answer) {
            return ExitCode::from(1);
        }
    }
    ExitCode::SUCCESS
}

/// Writes one answer line; false when stdout is gone.
fn send(stdout: &mut std::io::Stdout, answer: &Response) -> bool {
    serde_json::to_string(answer).is_ok_and(|text| {
        writeln!(stdout, "{text}")
            .and_then(|()| stdout.flush())
            .is_ok()
    })
}
