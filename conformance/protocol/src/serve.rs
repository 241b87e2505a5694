//! One serve loop for a backend built on a [`SandboxProvider`]: it reads a [`Request`] per line,
//! answers a [`Response`] per line, refuses what is not a request and a protocol it does not
//! speak, turns each `confine` into the provider's argv (never an unconfined one: a policy it
//! cannot take and a provider that cannot confine are `unavailable` with their own words), and
//! keeps each call's check after the call until the harness says `settle`.

use std::io::{BufRead, Write};

use sandbox::{CallGuard, SANDBOX_UNAVAILABLE, SandboxProvider};

use crate::{Differences, ErrorCode, Implementation, Request, Response, SUPPORTED_VERSIONS};
use crate::{WireCapability, WirePolicy};

/// What a backend says of itself in the handshake.
#[derive(Clone, Debug)]
pub struct Handshake {
    /// Its name and version.
    pub implementation: Implementation,
    /// What it can do on this host (empty when it cannot confine here).
    pub capabilities: Vec<WireCapability>,
    /// How completely it governs what the modes promise.
    pub enforcement: sandbox::SandboxEnforcement,
    /// Where its writable set differs from the reference one.
    pub differences: Differences,
}

/// How far behind the newest request a guard that was never settled is dropped: a request whose
/// argv was never launched (the harness's metamorphic twin) is never settled, and the harness
/// runs cases in parallel, so a slightly older one may still be some case's own.
const UNSETTLED_KEPT: u64 = 256;

/// Serves `input` until it ends or says `shutdown`. `provider` is the backend's provider, or why
/// it has none on this host (every `confine` is then `unavailable` with that text); `handshake`
/// is asked on each supported `hello`. Fails only when `output` cannot be written.
pub fn serve(
    provider: Result<&dyn SandboxProvider, &str>,
    handshake: &dyn Fn() -> Handshake,
    input: impl BufRead,
    mut output: impl Write,
) -> std::io::Result<()> {
    // The checks of confined calls not settled yet, by request id.
    let mut guards: Vec<(u64, Box<dyn CallGuard>)> = Vec::new();
    for line in input.lines() {
        let Ok(line) = line else { break };
        let answer = match serde_json::from_str::<Request>(&line) {
            Err(e) => Response::error(ErrorCode::MalformedRequest, e.to_string()),
            Ok(Request::Shutdown) => break,
            Ok(Request::Hello { protocol, .. }) if !SUPPORTED_VERSIONS.contains(&protocol) => {
                Response::error(
                    ErrorCode::ProtocolVersion,
                    format!("this backend speaks protocols {SUPPORTED_VERSIONS:?}"),
                )
            }
            Ok(Request::Hello { protocol, .. }) => {
                let hello = handshake();
                Response::Hello {
                    protocol,
                    implementation: hello.implementation,
                    capabilities: hello.capabilities,
                    enforcement: hello.enforcement,
                    differences: hello.differences,
                }
            }
            Ok(Request::Confine {
                id,
                argv,
                cwd,
                policy,
            }) => confine(provider, &mut guards, id, argv, cwd, policy),
            Ok(Request::Settle { id }) => {
                let reverted = match guards.iter().position(|(g, _)| *g == id) {
                    Some(at) => guards.remove(at).1.settle(),
                    None => Vec::new(),
                };
                guards.retain(|(g, _)| *g + UNSETTLED_KEPT > id);
                Response::Settled { id, reverted }
            }
        };
        let text = serde_json::to_string(&answer).map_err(std::io::Error::other)?;
        writeln!(output, "{text}")?;
        output.flush()?;
    }
    Ok(())
}

/// One `confine`: the wire policy as a provider policy, confined by the provider, or
/// `unavailable` with the runner's own words.
fn confine(
    provider: Result<&dyn SandboxProvider, &str>,
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
    let provider = match provider {
        Ok(p) => p,
        Err(why) => return unavailable(why.to_owned()),
    };
    // Every field of the request (allowed sockets included); a pattern that is not one is
    // refused, not dropped.
    let policy = match wire.into_provider_policy(cwd) {
        Ok(p) => p,
        Err(e) => return unavailable(e.to_string()),
    };
    let argv: Vec<_> = argv.into_iter().map(Into::into).collect();
    match provider.confine(&argv, &policy) {
        Ok(confined) => {
            // What the profile cannot prevent is checked after the call, when the harness says
            // it is over.
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

#[cfg(test)]
mod tests {
    use super::*;

    fn handshake() -> Handshake {
        Handshake {
            implementation: Implementation {
                name: "test".into(),
                version: "0".into(),
            },
            capabilities: Vec::new(),
            enforcement: sandbox::SandboxEnforcement::Full,
            differences: Differences::default(),
        }
    }

    /// Serves `lines` with no provider; returns the answers, one JSON value each.
    fn answers(lines: &str) -> Vec<serde_json::Value> {
        let mut out = Vec::new();
        serve(
            Err("no backend here"),
            &handshake,
            lines.as_bytes(),
            &mut out,
        )
        .expect("serve");
        String::from_utf8(out)
            .expect("utf-8")
            .lines()
            .map(|l| serde_json::from_str(l).expect("json"))
            .collect()
    }

    #[test]
    fn each_request_gets_one_answer_and_shutdown_ends_the_loop() {
        let got = answers(concat!(
            "not json\n",
            "{\"type\":\"hello\",\"protocol\":99,\"suite\":\"0.1.0\"}\n",
            "{\"type\":\"hello\",\"protocol\":2,\"suite\":\"0.1.0\"}\n",
            "{\"type\":\"confine\",\"id\":1,\"argv\":[\"true\"],\"policy\":{\"mode\":\"read-only\",\"workspace_root\":\"/\"}}\n",
            "{\"type\":\"settle\",\"id\":1}\n",
            "{\"type\":\"shutdown\"}\n",
            "{\"type\":\"hello\",\"protocol\":2,\"suite\":\"0.1.0\"}\n",
        ));
        let kinds: Vec<&str> = got
            .iter()
            .map(|a| a["type"].as_str().unwrap_or("?"))
            .collect();
        assert_eq!(
            kinds,
            ["error", "error", "hello", "unavailable", "settled"],
            "{got:?}"
        );
        assert_eq!(got[0]["code"], ErrorCode::MalformedRequest.as_str());
        assert_eq!(got[1]["code"], ErrorCode::ProtocolVersion.as_str());
        assert_eq!(got[3]["code"], SANDBOX_UNAVAILABLE);
        assert_eq!(got[3]["detail"], "no backend here");
    }

    #[test]
    fn every_error_code_reads_back() {
        for code in ErrorCode::ALL {
            assert_eq!(ErrorCode::of(code.as_str()), Some(code));
        }
        assert_eq!(ErrorCode::of("protocol_version"), None);
    }
}
