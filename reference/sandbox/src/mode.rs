//! Sandbox modes and the enforcement fact.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::enforcement::{ClassEnforcement, EnforcementClass};

/// What a confined command may do to files. File effects only: network and process visibility are
/// not claimed by any mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SandboxMode {
    /// Reads everywhere; writes nowhere except `/dev/null`.
    ReadOnly,
    /// Reads everywhere; writes only under the writable roots (workspace root and temp areas).
    WorkspaceWrite,
    /// No confinement at all. Never reaches a provider.
    DangerFullAccess,
}

impl SandboxMode {
    /// Every mode, narrowest first (the escalation ladder's order).
    pub const ALL: [SandboxMode; 3] = [
        SandboxMode::ReadOnly,
        SandboxMode::WorkspaceWrite,
        SandboxMode::DangerFullAccess,
    ];

    /// The wire name (`read-only`, `workspace-write`, `danger-full-access`).
    pub const fn as_str(self) -> &'static str {
        match self {
            SandboxMode::ReadOnly => "read-only",
            SandboxMode::WorkspaceWrite => "workspace-write",
            SandboxMode::DangerFullAccess => "danger-full-access",
        }
    }

    /// True when `self` permits strictly more file effects than `other`.
    pub fn is_wider_than(self, other: SandboxMode) -> bool {
        self > other
    }

    /// The confined mode a provider must enforce, or `None` for `danger-full-access`.
    pub const fn confined(self) -> Option<ConfinedMode> {
        match self {
            SandboxMode::ReadOnly => Some(ConfinedMode::ReadOnly),
            SandboxMode::WorkspaceWrite => Some(ConfinedMode::WorkspaceWrite),
            SandboxMode::DangerFullAccess => None,
        }
    }
}

/// The modes a provider can be asked to enforce (`danger-full-access` excluded by construction).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ConfinedMode {
    /// See [`SandboxMode::ReadOnly`].
    ReadOnly,
    /// See [`SandboxMode::WorkspaceWrite`].
    WorkspaceWrite,
}

impl ConfinedMode {
    /// The wire name.
    pub const fn as_str(self) -> &'static str {
        match self {
            ConfinedMode::ReadOnly => SandboxMode::ReadOnly.as_str(),
            ConfinedMode::WorkspaceWrite => SandboxMode::WorkspaceWrite.as_str(),
        }
    }
}

impl From<ConfinedMode> for SandboxMode {
    fn from(mode: ConfinedMode) -> Self {
        match mode {
            ConfinedMode::ReadOnly => SandboxMode::ReadOnly,
            ConfinedMode::WorkspaceWrite => SandboxMode::WorkspaceWrite,
        }
    }
}

/// A mode name outside the closed vocabulary.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} {given:?}; expected one of {expected}")]
pub struct ModeParseError {
    /// What kind of word it should have been (`sandbox mode`, `network mode`, ...).
    pub what: &'static str,
    /// What was given.
    pub given: String,
    /// The accepted names, comma separated.
    pub expected: &'static str,
}

impl FromStr for SandboxMode {
    type Err = ModeParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        SandboxMode::ALL
            .into_iter()
            .find(|m| m.as_str() == s)
            .ok_or_else(|| ModeParseError {
                what: "sandbox mode",
                given: s.to_owned(),
                expected: "read-only, workspace-write, danger-full-access",
            })
    }
}

impl FromStr for ConfinedMode {
    type Err = ModeParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "read-only" => Ok(ConfinedMode::ReadOnly),
            "workspace-write" => Ok(ConfinedMode::WorkspaceWrite),
            _ => Err(ModeParseError {
                what: "sandbox mode",
                given: s.to_owned(),
                expected: "read-only, workspace-write",
            }),
        }
    }
}

macro_rules! wire_string_serde {
    ($ty:ty) => {
        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
        impl Serialize for $ty {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }
        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = std::borrow::Cow::<'de, str>::deserialize(d)?;
                s.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}
wire_string_serde!(SandboxMode);
wire_string_serde!(ConfinedMode);
wire_string_serde!(SandboxEnforcement);
wire_string_serde!(NetworkMode);
wire_string_serde!(EnforcementClass);
wire_string_serde!(ClassEnforcement);

/// JSON Schema of a wire-string enum: a string from a closed list.
#[cfg(feature = "schema")]
macro_rules! wire_string_schema {
    ($ty:ty, [$($name:literal),+]) => {
        impl schemars::JsonSchema for $ty {
            fn schema_name() -> std::borrow::Cow<'static, str> {
                stringify!($ty).into()
            }
            fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
                schemars::json_schema!({ "type": "string", "enum": [$($name),+] })
            }
        }
    };
}
#[cfg(feature = "schema")]
wire_string_schema!(
    SandboxMode,
    ["read-only", "workspace-write", "danger-full-access"]
);
#[cfg(feature = "schema")]
wire_string_schema!(ConfinedMode, ["read-only", "workspace-write"]);
#[cfg(feature = "schema")]
wire_string_schema!(SandboxEnforcement, ["full", "partial"]);
#[cfg(feature = "schema")]
wire_string_schema!(NetworkMode, ["restricted", "enabled"]);
#[cfg(feature = "schema")]
wire_string_schema!(
    EnforcementClass,
    ["files", "network", "protected", "host-ipc"]
);
#[cfg(feature = "schema")]
wire_string_schema!(ClassEnforcement, ["full", "partial", "not-governed"]);

/// What network a confined command may reach: a knob of its own next to the sandbox mode (the
/// modes claim file effects only). `enabled`, the default, keeps the seeds' behaviour.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum NetworkMode {
    /// No connection out of the sandbox: TCP, UDP, abstract and named unix sockets outside it are
    /// refused, as far as the backend governs them (reported per class, never hidden).
    Restricted,
    /// No network restriction at all (the seeds' behaviour).
    #[default]
    Enabled,
}

impl NetworkMode {
    /// Every network mode, narrowest first.
    pub const ALL: [NetworkMode; 2] = [NetworkMode::Restricted, NetworkMode::Enabled];

    /// The wire name (`restricted`, `enabled`).
    pub const fn as_str(self) -> &'static str {
        match self {
            NetworkMode::Restricted => "restricted",
            NetworkMode::Enabled => "enabled",
        }
    }

    /// True when the network is restricted.
    pub const fn is_restricted(self) -> bool {
        matches!(self, NetworkMode::Restricted)
    }
}

impl FromStr for NetworkMode {
    type Err = ModeParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        NetworkMode::ALL
            .into_iter()
            .find(|m| m.as_str() == s)
            .ok_or_else(|| ModeParseError {
                what: "network mode",
                given: s.to_owned(),
                expected: "restricted, enabled",
            })
    }
}

/// How completely the selected backend governs the file effects a mode promises. A reported fact,
/// never hidden. On the wire (and in the Landlock launcher's probe report) `full` or `partial`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SandboxEnforcement {
    /// Every file effect the mode promises is governed.
    Full,
    /// Only a subset is governed (for example Landlock on an older ABI without truncate control).
    Partial,
}

impl SandboxEnforcement {
    /// The wire name (`full` / `partial`).
    pub const fn as_str(self) -> &'static str {
        match self {
            SandboxEnforcement::Full => "full",
            SandboxEnforcement::Partial => "partial",
        }
    }
}

impl FromStr for SandboxEnforcement {
    type Err = ModeParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "full" => Ok(SandboxEnforcement::Full),
            "partial" => Ok(SandboxEnforcement::Partial),
            _ => Err(ModeParseError {
                what: "enforcement",
                given: s.to_owned(),
                expected: "full, partial",
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_names_round_trip_and_unknown_modes_are_rejected() {
        for m in SandboxMode::ALL {
            assert_eq!(m.as_str().parse::<SandboxMode>(), Ok(m));
            let json = serde_json::to_string(&m).expect("serialize");
            assert_eq!(serde_json::from_str::<SandboxMode>(&json).expect("de"), m);
        }
        let err = "full-access".parse::<SandboxMode>().expect_err("unknown");
        assert!(err.to_string().contains("\"full-access\""), "{err}");
        assert!(serde_json::from_str::<SandboxMode>("\"Read-Only\"").is_err());
        assert!("danger-full-access".parse::<ConfinedMode>().is_err());
    }

    #[test]
    fn network_modes_round_trip_and_enabled_is_the_default() {
        assert_eq!(NetworkMode::default(), NetworkMode::Enabled);
        for (m, wire, restricted) in [
            (NetworkMode::Restricted, "restricted", true),
            (NetworkMode::Enabled, "enabled", false),
        ] {
            assert_eq!(m.as_str(), wire);
            assert_eq!(wire.parse::<NetworkMode>(), Ok(m));
            assert_eq!(m.is_restricted(), restricted);
            let json = serde_json::to_string(&m).expect("serialize");
            assert_eq!(serde_json::from_str::<NetworkMode>(&json).expect("de"), m);
        }
        let err = "offline".parse::<NetworkMode>().expect_err("unknown");
        assert_eq!(
            err.to_string(),
            "unknown network mode \"offline\"; expected one of restricted, enabled"
        );
    }

    #[test]
    fn ladder_order_is_strict() {
        use SandboxMode::*;
        assert!(WorkspaceWrite.is_wider_than(ReadOnly));
        assert!(DangerFullAccess.is_wider_than(WorkspaceWrite));
        assert!(!ReadOnly.is_wider_than(ReadOnly));
        assert!(!ReadOnly.is_wider_than(DangerFullAccess));
        assert_eq!(DangerFullAccess.confined(), None);
    }
}
