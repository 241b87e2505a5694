//! `reference-backend --backend NAME`: a reference backend (bwrap, landlock, landlock-abi2,
//! seatbelt) behind the JSON-lines protocol, so the reference is certified through exactly the
//! path an external backend takes: `certify --expectations fixtures/expectations/landlock.yaml --
//! target/debug/reference-backend --backend landlock`.

use std::process::ExitCode;

use conformance::backends::reference_backend;
use conformance::protocol::{Differences, Handshake, Implementation, TempAreaView, WireCapability};
use conformance::scenario::Capability;
use sandbox::SandboxEnforcement;

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
    let provider = backend.local_config().map(|c| {
        let mut config = c.clone();
        config.prevent_while_running = false;
        sandbox_local::LocalProvider::new(config)
    });
    let unusable = backend
        .unusable
        .clone()
        .unwrap_or_else(|| "backend not usable".into());
    // The reference writable set is the reference; each call gets the temp area the harness
    // names, at /tmp where the selected backend has a mount namespace.
    let view = match provider
        .as_ref()
        .map(|p| p.selection().map(|s| s.mounts_temp_area()))
    {
        Some(Ok(false)) => TempAreaView::Tmpdir,
        _ => TempAreaView::AtTmp,
    };
    let handshake = || Handshake {
        differences: Differences {
            temp_area: Some(view),
            ..Differences::default()
        },
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
    };
    let provider = provider
        .as_ref()
        .map(|p| p as &dyn sandbox::SandboxProvider)
        .ok_or(unusable.as_str());
    match conformance::protocol::serve(
        provider,
        &handshake,
        std::io::stdin().lock(),
        std::io::stdout(),
    ) {
        Ok(()) => ExitCode::SUCCESS,
        Err(_) => ExitCode::from(1),
    }
}
