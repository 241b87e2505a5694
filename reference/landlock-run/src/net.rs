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
//! Landlock checks TCP connect in the `connect(2)` hook, which a TCP Fast Open send
//! (`sendto`/`sendmsg`/`sendmmsg` with `MSG_FASTOPEN`) never calls: measured on kernel 6.18, such
//! a send from a restricted payload reached a loopback listener. With TCP governed, the launcher
//! therefore also installs a seccomp filter ([`install_fastopen_guard`], x86_64 and aarch64)
//! that fails those sends with `EACCES` when they carry `MSG_FASTOPEN`; elsewhere TCP is reported
//! ungoverned rather than half-governed.
//!
//! Below ABI 4 [`TCP`] is ungoverned too, and below ABI 6 (or capped below it)
//! [`ABSTRACT_UNIX_SOCKETS`]; with neither, the launcher governs nothing of the network and the
//! class is `not-governed`.

#[cfg(target_os = "linux")]
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
    // Without the Fast Open guard a TCP connect can bypass the Landlock hook: not governed.
    if reach >= NET_ABI && FASTOPEN_GUARD {
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
#[cfg(target_os = "linux")]
pub fn handle_tcp(ruleset: Ruleset) -> Result<Ruleset, RulesetError> {
    ruleset.handle_access(AccessNet::from_all(ABI::V4))
}

/// Whether this architecture has the TCP Fast Open guard ([`install_fastopen_guard`]).
pub const FASTOPEN_GUARD: bool = cfg!(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
));

/// `MSG_FASTOPEN` (linux/socket.h).
#[cfg(target_os = "linux")]
const MSG_FASTOPEN: u64 = 0x2000_0000;

/// Fails, in this process and everything it execs, every send that would open a TCP connection
/// on the way (`MSG_FASTOPEN` in the flags of `sendto`, `sendmsg` or `sendmmsg`) with `EACCES`:
/// that path never reaches the `connect` hook Landlock governs TCP with. Ordinary sends are
/// untouched. `no_new_privs` must already be set (the Landlock restriction sets it).
#[cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
pub fn install_fastopen_guard() -> Result<(), String> {
    use std::collections::BTreeMap;

    use seccompiler::{
        SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
        SeccompRule, TargetArch,
    };

    let arch = TargetArch::try_from(std::env::consts::ARCH)
        .map_err(|e| format!("cannot build the TCP Fast Open guard: {e}"))?;
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    // sendto(fd, buf, len, flags, addr, addrlen), sendmsg(fd, msg, flags),
    // sendmmsg(fd, msgvec, vlen, flags): the flags are an int, so the low word is compared.
    for (nr, arg) in [
        (libc::SYS_sendto, 3u8),
        (libc::SYS_sendmsg, 2),
        (libc::SYS_sendmmsg, 3),
    ] {
        let rule = SeccompCondition::new(
            arg,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::MaskedEq(MSG_FASTOPEN),
            MSG_FASTOPEN,
        )
        .and_then(|c| SeccompRule::new(vec![c]))
        .map_err(|e| format!("cannot build the TCP Fast Open guard: {e}"))?;
        rules.insert(nr, vec![rule]);
    }
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EACCES as u32),
        arch,
    )
    .and_then(seccompiler::BpfProgram::try_from)
    .map_err(|e| format!("cannot build the TCP Fast Open guard: {e}"))?;
    seccompiler::apply_filter(&filter)
        .map_err(|e| format!("cannot install the TCP Fast Open guard: {e}"))
}

/// Without a guard for this architecture there is nothing to install; [`governed`] reports TCP
/// as ungoverned.
#[cfg(all(
    target_os = "linux",
    not(any(target_arch = "x86_64", target_arch = "aarch64"))
))]
pub fn install_fastopen_guard() -> Result<(), String> {
    Ok(())
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
