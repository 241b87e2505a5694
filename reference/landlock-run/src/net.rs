//! The network part of the launcher's contract: `--net restricted` and what it can govern.
//!
//! With `--net restricted` (the default is `enabled`: no network rule at all) the launcher
//! handles `LANDLOCK_ACCESS_NET_BIND_TCP` and `LANDLOCK_ACCESS_NET_CONNECT_TCP` and grants no
//! port, so every TCP `bind` and `connect` fails with `EACCES` (Landlock ABI 4 and newer), and
//! relies on the abstract-unix-socket scope every launch applies from ABI 6. What Landlock cannot
//! govern at any ABI, and the launcher therefore reports as ungoverned (never hidden):
//!
//! - [`UDP`]: datagrams (`sendto`/`connect` on a UDP socket) are not a Landlock right;
//! - [`NAMED_UNIX_SOCKETS`]: `connect` to a unix socket bound to a path is not a Landlock right
//!   (only creating the socket file is), so a host daemon listening on a path stays reachable.
//!
//! Below ABI 4 [`TCP`] is ungoverned too, and below ABI 6 (or capped below it)
//! [`ABSTRACT_UNIX_SOCKETS`]; with neither, the launcher governs nothing of the network and the
//! class is `not-governed`.

use landlock::{ABI, Access, AccessNet, Ruleset, RulesetAttr, RulesetError};

/// The launcher flag (`--net restricted` or `--net enabled`).
pub const NET_FLAG: &str = "--net";

/// The lowest Landlock ABI that governs TCP bind and connect.
pub const NET_ABI: u32 = 4;

/// TCP bind and connect (ABI 4).
pub const TCP: &str = "tcp";

/// Connecting to an abstract unix socket created outside the sandbox (the ABI 6 scope).
pub const ABSTRACT_UNIX_SOCKETS: &str = "abstract-unix-sockets";

/// UDP: ungoverned at every ABI.
pub const UDP: &str = "udp";

/// Connecting to a unix socket bound to a path: ungoverned at every ABI.
pub const NAMED_UNIX_SOCKETS: &str = "named-unix-sockets";

/// What a restricted launch governs, from what the kernel offers and the launch uses: `tcp` when
/// the ABI in reach (the kernel's, lowered by `--abi-cap`) is at least [`NET_ABI`], and
/// `abstract-unix-sockets` when the abstract scope is in force (`abstract_scoped`).
pub fn governed(kernel_abi: u32, abi_cap: Option<u32>, abstract_scoped: bool) -> Vec<&'static str> {
    let reach = abi_cap.map_or(kernel_abi, |cap| cap.min(kernel_abi));
    let mut governed = Vec::new();
    if reach >= NET_ABI {
        governed.push(TCP);
    }
    if abstract_scoped {
        governed.push(ABSTRACT_UNIX_SOCKETS);
    }
    governed
}

/// What a restricted launch leaves ungoverned, given what it governs ([`governed`]), in a fixed
/// order: `tcp` and `abstract-unix-sockets` when not governed, then `udp` and
/// `named-unix-sockets` always.
pub fn ungoverned(governed: &[&str]) -> Vec<&'static str> {
    [TCP, ABSTRACT_UNIX_SOCKETS]
        .into_iter()
        .filter(|g| !governed.contains(g))
        .chain([UDP, NAMED_UNIX_SOCKETS])
        .collect()
}

/// Whether a launch capped at `cap` may handle the network rights (capping only weakens).
pub fn wants_net(cap: Option<u32>) -> bool {
    cap.is_none_or(|c| c >= NET_ABI)
}

/// `ruleset` also handling TCP bind and connect (no port is ever granted), best effort: a kernel
/// below ABI 4 drops them, which [`governed`] reports.
pub fn handle_tcp(ruleset: Ruleset) -> Result<Ruleset, RulesetError> {
    ruleset.handle_access(AccessNet::from_all(ABI::V4))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tcp_needs_abi_4_and_unix_paths_and_udp_are_never_governed() {
        assert_eq!(
            governed(7, None, true),
            [TCP, ABSTRACT_UNIX_SOCKETS].as_slice()
        );
        assert_eq!(governed(7, Some(4), false), [TCP].as_slice());
        assert!(governed(7, Some(3), false).is_empty());
        assert!(governed(3, None, false).is_empty());
        assert_eq!(
            ungoverned(&governed(7, None, true)),
            [UDP, NAMED_UNIX_SOCKETS].as_slice()
        );
        assert_eq!(
            ungoverned(&[]),
            [TCP, ABSTRACT_UNIX_SOCKETS, UDP, NAMED_UNIX_SOCKETS].as_slice()
        );
        assert!(wants_net(None) && wants_net(Some(4)) && !wants_net(Some(2)));
    }
}
