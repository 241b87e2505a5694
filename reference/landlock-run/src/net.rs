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
//! Landlock's network rights are TCP's alone, checked in the `bind(2)` and `connect(2)` hooks.
//! Measured on kernel 6.18, three routes pass beside them: a TCP Fast Open send
//! (`sendto`/`sendmsg`/`sendmmsg` with `MSG_FASTOPEN`) connects without the `connect` hook; a
//! socket of another stream protocol (`IPPROTO_MPTCP`, SCTP) is no TCP socket to Landlock and
//! connects to a host listener; and `listen(2)` on an unbound socket binds an ephemeral port
//! without the `bind` hook, so the host can connect in. With TCP governed, the launcher therefore
//! also installs a seccomp filter ([`install_net_guard`], x86_64 and aarch64) that fails with
//! `EACCES` those sends, every IP socket but TCP's and UDP's (raw, ICMP, MPTCP, SCTP, UDP-Lite,
//! DCCP, seqpacket), every socket family but unix, netlink and IP (packet, vsock, Bluetooth, CAN,
//! TIPC, RDS, XDP, SMC...) and `listen(2)` itself (no socket a restricted payload can make has
//! anything to listen for but an auto-bound port: its own unix sockets are the host-IPC guard's,
//! and stay refused unless the deployment allowed named sockets, which are then for connecting
//! out). Elsewhere TCP is reported ungoverned rather than half-governed.
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
pub use sandbox::gaps::TCP;

/// Connecting to an abstract unix socket created outside the sandbox (the ABI 6 scope).
pub use sandbox::gaps::ABSTRACT_UNIX_SOCKETS;

/// UDP: ungoverned at every ABI.
pub use sandbox::gaps::UDP;

/// Connecting to a unix socket bound to a path: ungoverned at every ABI.
pub use sandbox::gaps::NAMED_UNIX_SOCKETS;

/// What a restricted launch governs, from what the kernel offers and the launch uses: `tcp` when
/// the ABI in reach (the kernel's, lowered by `--abi-cap`) is at least [`NET_ABI`], and
/// `abstract-unix-sockets` when the abstract scope is in force (`abstract_scoped`).
pub fn governed(kernel_abi: u32, abi_cap: Option<u32>, abstract_scoped: bool) -> Vec<&'static str> {
    let reach = abi_cap.map_or(kernel_abi, |cap| cap.min(kernel_abi));
    let mut governed = Vec::new();
    // Without the guard a TCP connect can bypass the Landlock hook (Fast Open, MPTCP): not
    // governed.
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

/// Whether this architecture has the restricted network's guard ([`install_net_guard`]).
pub const FASTOPEN_GUARD: bool = cfg!(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
));

/// `MSG_FASTOPEN` (linux/socket.h).
#[cfg(target_os = "linux")]
const MSG_FASTOPEN: u64 = 0x2000_0000;

/// Fails with `EACCES`, in this process and everything it execs, what a restricted network would
/// let pass beside Landlock's TCP rights (the module's documentation): every send that would open
/// a TCP connection on the way (`MSG_FASTOPEN` in the flags of `sendto`, `sendmsg` or
/// `sendmmsg`), an IP socket of any protocol but TCP and UDP, a socket of any family but unix,
/// netlink and IP, and `listen`. Ordinary sends, TCP sockets (Landlock refuses their bind and
/// connect) and UDP (reported ungoverned) are untouched. `no_new_privs` must already be set (the
/// Landlock restriction sets it).
#[cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
pub fn install_net_guard() -> Result<(), String> {
    use std::collections::BTreeMap;

    use seccompiler::{
        SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
        SeccompRule, TargetArch,
    };

    let arch = TargetArch::try_from(std::env::consts::ARCH)
        .map_err(|e| format!("cannot build the restricted network's guard: {e}"))?;
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
        .map_err(|e| format!("cannot build the restricted network's guard: {e}"))?;
        rules.insert(nr, vec![rule]);
    }
    rules.insert(libc::SYS_socket, socket_rules()?);
    // An empty rule list matches the call whatever its arguments.
    rules.insert(libc::SYS_listen, Vec::new());
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EACCES as u32),
        arch,
    )
    .and_then(seccompiler::BpfProgram::try_from)
    .map_err(|e| format!("cannot build the restricted network's guard: {e}"))?;
    seccompiler::apply_filter(&filter)
        .map_err(|e| format!("cannot install the restricted network's guard: {e}"))
}

/// The `socket(family, type, protocol)` calls [`install_net_guard`] refuses (each rule one
/// conjunction, any rule matching refuses): a family other than unix, netlink, IPv4 and IPv6; an
/// IP socket of a type other than stream and datagram; an IP stream socket of a protocol other
/// than TCP (`0` names TCP); an IP datagram socket of a protocol other than UDP.
#[cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
fn socket_rules() -> Result<Vec<seccompiler::SeccompRule>, String> {
    use seccompiler::{SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompRule};

    // The type shares its word with SOCK_CLOEXEC and SOCK_NONBLOCK: its low bits are the type.
    const SOCK_TYPE_MASK: u64 = 0xf;
    let err =
        |e: seccompiler::BackendError| format!("cannot build the restricted network's guard: {e}");
    let cond = |arg: u8, op: SeccompCmpOp, value: libc::c_int| {
        SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, value as u64).map_err(err)
    };
    let mut rules = Vec::new();
    let other_family = [
        libc::AF_UNIX,
        libc::AF_NETLINK,
        libc::AF_INET,
        libc::AF_INET6,
    ]
    .into_iter()
    .map(|f| cond(0, SeccompCmpOp::Ne, f))
    .collect::<Result<Vec<_>, _>>()?;
    rules.push(SeccompRule::new(other_family).map_err(err)?);
    for family in [libc::AF_INET, libc::AF_INET6] {
        // SOCK_RAW, SOCK_RDM, SOCK_SEQPACKET, SOCK_DCCP and SOCK_PACKET (the other values of the
        // type's bits are no type: the kernel refuses them itself).
        for kind in [3, 4, 5, 6, 10] {
            rules.push(
                SeccompRule::new(vec![
                    cond(0, SeccompCmpOp::Eq, family)?,
                    cond(1, SeccompCmpOp::MaskedEq(SOCK_TYPE_MASK), kind)?,
                ])
                .map_err(err)?,
            );
        }
        for (kind, own) in [
            (libc::SOCK_STREAM, libc::IPPROTO_TCP),
            (libc::SOCK_DGRAM, libc::IPPROTO_UDP),
        ] {
            rules.push(
                SeccompRule::new(vec![
                    cond(0, SeccompCmpOp::Eq, family)?,
                    cond(1, SeccompCmpOp::MaskedEq(SOCK_TYPE_MASK), kind)?,
                    cond(2, SeccompCmpOp::Ne, 0)?,
                    cond(2, SeccompCmpOp::Ne, own)?,
                ])
                .map_err(err)?,
            );
        }
    }
    Ok(rules)
}

/// Without a guard for this architecture there is nothing to install; [`governed`] reports TCP
/// as ungoverned.
#[cfg(all(
    target_os = "linux",
    not(any(target_arch = "x86_64", target_arch = "aarch64"))
))]
pub fn install_net_guard() -> Result<(), String> {
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
