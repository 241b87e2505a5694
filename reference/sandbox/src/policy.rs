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
    /// The `$TMPDIR` the command will see, which `workspace-write` also makes writable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temp_dir: Option<PathBuf>,
}

impl ExecutionPolicy {
    /// The policy a provider must enforce, or `None` when the call runs unconfined
    /// (`danger-full-access`, which never reaches a provider).
    pub fn for_provider(&self) -> Option<ProviderPolicy> {
        self.mode.confined().map(|mode| ProviderPolicy {
            mode,
            workspace_root: self.workspace_root.clone(),
            temp_dir: self.temp_dir.clone(),
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
    /// The `$TMPDIR` the command will see (writable under `workspace-write` when absolute).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temp_dir: Option<PathBuf>,
}

impl ProviderPolicy {
    /// A policy whose temp dir is this process's `$TMPDIR` (what a spawned command inherits).
    pub fn new(mode: ConfinedMode, workspace_root: impl Into<PathBuf>) -> Self {
        ProviderPolicy {
            mode,
            workspace_root: workspace_root.into(),
            temp_dir: std::env::var_os("TMPDIR").map(PathBuf::from),
        }
    }
}
