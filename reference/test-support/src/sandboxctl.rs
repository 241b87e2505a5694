//! What `sandboxctl` prints: one JSON object of facts on stdout, for a run and for a refusal.

use std::fmt::Display;
use std::process::Output;

use serde_json::Value;

/// The JSON facts on `out`'s stdout; fails the test with `what` ran and both streams when stdout
/// is not JSON.
pub fn facts(what: impl Display, out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "no JSON ({e}) from {what}: {} / {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// The JSON facts on `out`'s stdout, or `null` when there are none (a run the test expects may
/// print nothing, its assertions then say what was missing).
pub fn facts_or_null(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
}
