//! The backend protocol, version 2 (version 1 still accepted): JSON lines over the backend's stdin
//! and stdout.
//!
//! The harness sends `hello`, one `confine` per case, then `shutdown`; the backend answers each
//! request with one line. Version 2 adds the command's working directory to `confine` and lets
//! the handshake declare where the backend's writable set differs from the reference one
//! ([`Differences`]), which the suite then verifies. A backend that answers the handshake with
//! version 1, or refuses version 2 with `PROTOCOL_VERSION` (the harness then offers 1), keeps
//! working and is reported as version 1. The harness spawns every returned argv itself and checks the disk, so a
//! backend cannot certify itself by saying so. The JSON Schema is `conformance/protocol/schema.json`
//! and the author-facing description `conformance/protocol/README.md`.

use std::path::PathBuf;

use sandbox::{
    ClassEnforcements, ConfinedMode, NetworkMode, RunnerFailureRule, SandboxEnforcement,
    StatusChannel,
};
use serde::{Deserialize, Serialize};

use crate::model::Capability;

/// What an external backend can declare in its handshake (a subset of the suite's capabilities:
/// the rest describe the reference implementation itself).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum WireCapability {
    /// It can confine a real command on this host.
    Confine,
    /// Its answers carry an out-of-band status channel.
    StatusChannel,
    /// It can be told to use a capped Landlock ABI.
    AbiCap,
}

impl From<WireCapability> for Capability {
    fn from(c: WireCapability) -> Capability {
        match c {
            WireCapability::Confine => Capability::Confine,
            WireCapability::StatusChannel => Capability::StatusChannel,
            WireCapability::AbiCap => Capability::AbiCap,
        }
    }
}

/// The newest protocol version this harness speaks (the one its handshake offers first).
pub const PROTOCOL_VERSION: u32 = 2;

/// Every protocol version this harness accepts, oldest first.
pub const SUPPORTED_VERSIONS: [u32; 2] = [1, 2];

/// Where a backend's writable set differs from the reference one (`writable_roots`: the canonical
/// workspace root, `/tmp`, the call's `$TMPDIR`), declared in its version 2 handshake. The suite
/// verifies each protected path (it must really be unwritable) and reports each extra writable
/// path as a widening.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Differences {
    /// Paths the backend lets a confined command write beyond the reference set (for example a
    /// temp or log directory of its own). Each is a widening, listed in the report.
    #[serde(default)]
    pub extra_writable: Vec<ExtraWritable>,
    /// Paths inside the workspace the backend keeps read-only under `workspace-write` (for
    /// example `.git`). Each is verified: a command must not be able to create, change or
    /// replace it.
    #[serde(default)]
    pub protected: Vec<ProtectedPath>,
}

impl Differences {
    /// True when nothing is declared.
    pub fn is_empty(&self) -> bool {
        self.extra_writable.is_empty() && self.protected.is_empty()
    }
}

/// A path a backend makes writable beyond the reference set.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExtraWritable {
    /// The absolute path, as the backend resolves it on this host.
    pub path: PathBuf,
    /// The modes under which it is writable (`read-only` too means even read-only is wider).
    pub modes: Vec<ConfinedMode>,
    /// Why the backend needs it.
    #[serde(default)]
    pub reason: Option<String>,
}

/// A path inside the workspace a backend keeps read-only under `workspace-write`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProtectedPath {
    /// The path relative to the workspace root (`.git`, `.git/hooks`, `.bashrc`).
    pub path: PathBuf,
    /// Whether it is protected as a file or as a directory (with everything below it).
    pub kind: ProtectedKind,
    /// Why the backend protects it.
    #[serde(default)]
    pub reason: Option<String>,
}

/// What a protected path is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ProtectedKind {
    /// A file: it must not be created, overwritten or replaced.
    File,
    /// A directory: nothing may be created or changed below it, and it must not be created.
    Directory,
}

/// A request from the harness.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum Request {
    /// The handshake.
    Hello {
        /// The protocol version the harness offers (2; a backend that refuses it with
        /// `PROTOCOL_VERSION` is offered 1).
        protocol: u32,
        /// Every version the harness accepts in the answer (version 2 on).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        supported: Vec<u32>,
        /// The suite's version.
        suite: String,
    },
    /// Confine one argv under one policy.
    Confine {
        /// Echoed in the answer.
        id: u64,
        /// The payload argv (UTF-8; names that are not travel in the environment).
        argv: Vec<String>,
        /// The directory the harness runs the confined argv in (version 2 on; absent in 1).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cwd: Option<PathBuf>,
        /// The policy to enforce.
        policy: WirePolicy,
    },
    /// The call confined by `id` (whose answer said `settle`) has ended and every process of it
    /// is gone: check and revert what the backend watches, before the harness looks at the host.
    Settle {
        /// The `confine` request's id.
        id: u64,
    },
    /// The run is over; exit 0.
    Shutdown,
}

/// The policy a `confine` request carries.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WirePolicy {
    /// `read-only` or `workspace-write`.
    pub mode: ConfinedMode,
    /// The workspace root, as the caller spelled it (canonicalize it before use).
    pub workspace_root: PathBuf,
    /// The `$TMPDIR` the payload will see (writable under `workspace-write`), if any.
    #[serde(default)]
    pub temp_dir: Option<PathBuf>,
    /// Extra writable roots under `workspace-write`, beyond the workspace, `/tmp` and
    /// `temp_dir`: absolute existing directories, refused like the workspace when too broad.
    /// Absent: none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub writable_roots: Vec<PathBuf>,
    /// Paths relative to the workspace and to every extra root (no `..`, not absolute) that
    /// `workspace-write` never writes, existing or not. Absent: the backend's deployment default
    /// (the reference's is `.git/hooks` and `.git/config`); empty: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protected_paths: Option<Vec<String>>,
    /// `restricted` (no connection out of the sandbox) or `enabled` (no network restriction).
    /// Absent means `enabled`; the harness sends it only when it is `restricted`, so a backend
    /// that predates the field sees the requests it always saw.
    #[serde(default, skip_serializing_if = "is_enabled")]
    pub network: NetworkMode,
    /// Named unix sockets on the host the deployment allows the payload to connect to (absolute,
    /// existing sockets; an ssh agent's). Absent: none. A backend that cannot allow them by path
    /// reports `host-ipc` `partial` naming what it leaves open, and lists them under the class's
    /// `allowed`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_unix_sockets: Vec<PathBuf>,
}

fn is_enabled(network: &NetworkMode) -> bool {
    !network.is_restricted()
}

/// An answer from the backend.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum Response {
    /// The handshake answer.
    Hello {
        /// The protocol version the backend speaks (one of the harness's `supported`).
        protocol: u32,
        /// Who the backend is.
        implementation: Implementation,
        /// What it can do on this host (`confine`, `status-channel`, `abi-cap`).
        capabilities: Vec<WireCapability>,
        /// The enforcement it achieves on this host.
        enforcement: SandboxEnforcement,
        /// Where its writable set differs from the reference one (version 2 on).
        #[serde(default, skip_serializing_if = "Differences::is_empty")]
        differences: Differences,
    },
    /// The confined argv and how to read its result.
    Confined {
        /// The request's id.
        id: u64,
        /// The argv the harness spawns instead of the payload's.
        argv: Vec<String>,
        /// The enforcement of this launch: the weakest of the classes its policy restricts.
        enforcement: SandboxEnforcement,
        /// The enforcement of this launch per class (`files`, `network`), each with what it
        /// leaves ungoverned. Absent: `enforcement` applies to files and the network is not
        /// governed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        classes: Option<ClassEnforcements>,
        /// Stderr substrings of a denied file effect.
        #[serde(default)]
        denial_signatures: Vec<String>,
        /// How the runner failing identifies itself on stderr.
        #[serde(default)]
        runner_failure_rules: Vec<RunnerFailureRule>,
        /// An out-of-band channel saying whether the payload ran.
        #[serde(default)]
        status_channel: Option<StatusChannel>,
        /// The backend checks this call afterwards: the harness sends `settle` with this id once
        /// the call has ended (the reference backends' git surface guard). Absent: false.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        settle: bool,
    },
    /// The answer to `settle`: one line per path the backend reverted (each a denial; empty when
    /// the call changed nothing it watches).
    Settled {
        /// The `confine` request's id.
        id: u64,
        /// What was reverted, each line carrying the denial marker.
        #[serde(default)]
        reverted: Vec<String>,
    },
    /// No usable sandbox for this request: fail closed.
    Unavailable {
        /// The request's id.
        id: u64,
        /// Always `SANDBOX_UNAVAILABLE`.
        code: String,
        /// The runner's own words.
        detail: String,
    },
    /// The backend cannot serve the request at all (for example an unsupported protocol version).
    Error {
        /// A stable code.
        code: String,
        /// What went wrong.
        message: String,
    },
}

/// Who a backend is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Implementation {
    /// Its name (used in trial names, so lowercase letters, digits, `_` and `-`).
    pub name: String,
    /// Its version.
    pub version: String,
}

/// The JSON Schemas of both directions, as published in `conformance/protocol/`, with every
/// object's keys sorted so the published text does not depend on how `serde_json` orders maps.
pub fn schemas() -> [(&'static str, serde_json::Value); 2] {
    let request = schemars::schema_for!(Request);
    let response = schemars::schema_for!(Response);
    [
        ("request.schema.json", sorted(request.to_value())),
        ("response.schema.json", sorted(response.to_value())),
    ]
}

/// `value` with the keys of every object in sorted order.
fn sorted(value: serde_json::Value) -> serde_json::Value {
    match value {
        serde_json::Value::Object(map) => {
            let mut entries: Vec<(String, serde_json::Value)> = map.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            serde_json::Value::Object(entries.into_iter().map(|(k, v)| (k, sorted(v))).collect())
        }
        serde_json::Value::Array(items) => {
            serde_json::Value::Array(items.into_iter().map(sorted).collect())
        }
        other => other,
    }
}
