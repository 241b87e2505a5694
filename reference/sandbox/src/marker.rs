//! The marker the model sees when a file effect was denied.

use crate::mode::SandboxMode;

/// `[sandbox: file access denied under <mode> mode]`, the wire string fixed by the specification.
pub fn denial_marker(mode: SandboxMode) -> String {
    format!("[sandbox: file access denied under {} mode]", mode.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marker_is_the_contract_string() {
        assert_eq!(
            denial_marker(SandboxMode::ReadOnly),
            "[sandbox: file access denied under read-only mode]"
        );
        assert_eq!(
            denial_marker(SandboxMode::WorkspaceWrite),
            "[sandbox: file access denied under workspace-write mode]"
        );
    }
}
