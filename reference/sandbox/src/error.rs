//! The fail-closed error every sandbox failure becomes.

use crate::mode::ConfinedMode;

/// The stable machine-readable code of [`SandboxUnavailable`].
pub const SANDBOX_UNAVAILABLE: &str = "SANDBOX_UNAVAILABLE";

/// The sandbox itself cannot confine this command: no usable backend, or the runner refused or
/// failed before the payload ran. The command never runs unconfined instead.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{SANDBOX_UNAVAILABLE}: cannot confine under {mode} mode{}: {detail}", backend.as_ref().map(|b| format!(" ({b})")).unwrap_or_default())]
pub struct SandboxUnavailable {
    /// The mode that was asked for.
    pub mode: ConfinedMode,
    /// The backend involved, when one was selected.
    pub backend: Option<String>,
    /// The runner's own words (its stderr line, spawn error, or the probe verdict).
    pub detail: String,
}

impl SandboxUnavailable {
    /// The stable code, [`SANDBOX_UNAVAILABLE`].
    pub const fn code(&self) -> &'static str {
        SANDBOX_UNAVAILABLE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_carries_code_mode_backend_and_the_runners_words() {
        let e = SandboxUnavailable {
            mode: ConfinedMode::ReadOnly,
            backend: Some("bwrap".into()),
            detail: "bwrap: No permissions to create new namespace".into(),
        };
        assert_eq!(
            e.to_string(),
            "SANDBOX_UNAVAILABLE: cannot confine under read-only mode (bwrap): bwrap: No permissions to create new namespace"
        );
        assert_eq!(e.code(), "SANDBOX_UNAVAILABLE");
    }
}
