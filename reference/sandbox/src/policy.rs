//! The per-call policy and its provider-facing narrowing.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::mode::{ConfinedMode, SandboxMode};

/// The complete policy resolved for one capability call: the mode it runs under and the workspace
/// root `workspace-write` may write beneath. Carried per call, never fixed on a provider.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecutionPolicy {
    /// The effective mode of this call.
    pub mode: SandboxMode,
    /// The workspace root (already canonicalized by whoever resolved the policy).
    pub workspace_root: PathBuf,
}

impl ExecutionPolicy {
    /// The policy a provider must enforce, or `None` when the call runs unconfined
    /// (`danger-full-access`, which never reaches a provider).
    pub fn for_provider(&self) -> Option<ProviderPolicy> {
        self.mode.confined().map(|mode| ProviderPolicy {
            mode,
            workspace_root: self.workspace_root.clone(),
        })
    }
}

/// The policy a provider enforces: a confined mode and the same workspace root.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProviderPolicy {
    /// The confined mode.
    pub mode: ConfinedMode,
    /// The workspace root.
    pub workspace_root: PathBuf,
}
