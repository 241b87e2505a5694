//! `sandboxctl probe`: what each backend would do on this host, and which one the platform chain
//! selects, as JSON.

use std::process::ExitCode;

use sandbox_local::probe::probe_all;
use sandbox_local::{LocalConfig, LocalProvider};
use serde_json::{Value, json};

use crate::print_json;

/// Prints every backend's verdict and the chain's selection.
pub(crate) fn probe(config: LocalConfig) -> ExitCode {
    let backends: Vec<Value> = probe_all(&config)
        .into_iter()
        .map(|v| {
            let mut entry = json!({ "backend": v.backend.name(), "program": v.program });
            match v.result {
                Ok(facts) => {
                    entry["usable"] = json!(true);
                    entry["enforcement"] = json!(facts.enforcement);
                    entry["version"] = json!(facts.version);
                    entry["landlock_abi"] = json!(facts.abi);
                    entry["kernel_landlock_abi"] = json!(facts.kernel_abi);
                    entry["ungoverned"] = json!(facts.ungoverned);
                    entry["classes"] = json!(facts.capabilities());
                }
                Err(reason) => {
                    entry["usable"] = json!(false);
                    entry["confines_nothing"] = json!(reason.confines_nothing());
                    entry["reason"] = json!(reason.to_string());
                }
            }
            entry
        })
        .collect();
    let provider = LocalProvider::new(config);
    let selected = match provider.selection() {
        Ok(s) => json!({
            "backend": s.backend.name(),
            "enforcement": s.enforcement(),
            "classes": s.capabilities(),
        }),
        Err(reason) => json!({ "error": "SANDBOX_UNAVAILABLE", "detail": reason.to_string() }),
    };
    let report = json!({
        "os": std::env::consts::OS,
        "chain": provider.config().chain.iter().map(|b| b.name()).collect::<Vec<_>>(),
        "selected": selected,
        "backends": backends,
    });
    print_json(&report);
    ExitCode::SUCCESS
}
