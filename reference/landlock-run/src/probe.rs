//! The enforcement probe (`landlock-run --probe`): a child restricted as a launch would be tries
//! what the ruleset, the scopes and the setuid guard must refuse, and the parent reports what held
//! as a [`ProbeReport`] on stdout.

use crate::cli::Invocation;
use crate::launcher::{effective_abi, fail, kernel_abi, ruleset, scoped, target_abi, wants_scope};
use crate::{
    DIAGNOSTIC_PREFIX, Enforcement, ProbeReport, SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL, harden,
    net, protect, ungoverned_at,
};
use std::fs::File;
use std::os::fd::OwnedFd;
use std::process::{Command, ExitCode};

use landlock::RulesetStatus;
use nix::errno::Errno;

/// Runs the enforcement check in a child and reports on stdout; exit 0 only when enforced.
pub(crate) fn probe(abi_cap: Option<u32>) -> ExitCode {
    // First, while this process has no other thread: can a launch protect paths here?
    let protect = protect::can_protect();
    let report = |usable: bool, facts: ChildFacts, reason: Option<String>| {
        let ungoverned = ungoverned_at(facts.abi);
        let abstract_scoped = facts.scoped.iter().any(|s| s == SCOPE_ABSTRACT_UNIX_SOCKET);
        let enforcement = if ungoverned.is_empty() {
            Enforcement::Full
        } else {
            Enforcement::Partial
        };
        let report = ProbeReport {
            usable,
            enforcement,
            abi: facts.abi,
            kernel_abi: facts.kernel_abi,
            reason,
            scoped: facts.scoped,
            ungoverned: ungoverned.into_iter().map(str::to_owned).collect(),
            setuid_guard: facts.setuid_guard,
            network: net::governed(facts.kernel_abi, abi_cap, abstract_scoped)
                .into_iter()
                .map(str::to_owned)
                .collect(),
            protect,
        };
        println!("{}", report.to_json());
        ExitCode::from(if usable { 0 } else { 1 })
    };
    // A fresh private directory: a name another user could guess and create first would make
    // the backend look unusable.
    let dir = match tempfile::Builder::new()
        .prefix("landlock-run-probe-")
        .tempdir_in("/tmp")
    {
        Ok(dir) => dir,
        Err(e) => {
            return report(
                false,
                ChildFacts::default(),
                Some(format!("cannot create a probe directory under /tmp: {e}")),
            );
        }
    };
    let target = dir.path().join("must-not-exist");
    let exe = std::env::current_exe();
    let child = exe.and_then(|exe| {
        let child = Invocation::ProbeChild {
            abi_cap,
            target: target.clone(),
        };
        Command::new(exe).args(child.to_args()).output()
    });
    let created = target.exists();
    // The probe child tried to make its directory setgid (metadata no ruleset governs).
    let set_id = std::fs::metadata(dir.path())
        .map(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o6000 != 0)
        .unwrap_or(true);
    if let Err(e) = dir.close() {
        eprintln!("{DIAGNOSTIC_PREFIX}notice: cannot remove the probe directory: {e}");
    }
    match child {
        Err(e) => report(
            false,
            ChildFacts::default(),
            Some(format!("cannot run the probe child: {e}")),
        ),
        Ok(out) => {
            let mut facts = ChildFacts::parse(&String::from_utf8_lossy(&out.stdout));
            facts.setuid_guard &= !set_id;
            let stderr = String::from_utf8_lossy(&out.stderr).trim().to_owned();
            if created {
                report(
                    false,
                    facts,
                    Some("a write was not denied under a maximal ruleset".into()),
                )
            } else if out.status.success() {
                report(true, facts, None)
            } else {
                report(
                    false,
                    facts,
                    Some(if stderr.is_empty() {
                        format!("probe child exited with {}", out.status)
                    } else {
                        stderr
                    }),
                )
            }
        }
    }
}

/// What the probe child prints: `<effective abi> <kernel abi> <scope,scope|-> <setuid-guard|->`.
#[derive(Default)]
struct ChildFacts {
    abi: u32,
    kernel_abi: u32,
    scoped: Vec<String>,
    setuid_guard: bool,
}

/// The probe child's word for "the setuid guard refused a setgid chmod".
const GUARD_WORD: &str = "setuid-guard";

impl ChildFacts {
    fn parse(stdout: &str) -> ChildFacts {
        let mut words = stdout.split_whitespace();
        let mut number = || words.next().and_then(|n| n.parse().ok()).unwrap_or(0);
        let (abi, kernel_abi) = (number(), number());
        let scoped = words
            .next()
            .filter(|w| *w != "-")
            .map(|w| w.split(',').map(str::to_owned).collect())
            .unwrap_or_default();
        let setuid_guard = words.next() == Some(GUARD_WORD);
        ChildFacts {
            abi,
            kernel_abi,
            scoped,
            setuid_guard,
        }
    }
}

/// In the probe child: govern every write, grant nothing, scope as a launch would, and prove a
/// create is denied (and, when signals are scoped, that signalling the parent is).
pub(crate) fn probe_child(abi_cap: Option<u32>, target: &std::path::Path) -> ExitCode {
    let abi = target_abi(abi_cap);
    let wanted = wants_scope(abi_cap);
    let status = ruleset(abi, wanted, false).and_then(|r| r.restrict_self());
    match status {
        Err(e) => fail(None, &format!("cannot restrict the probe child: {e}")),
        Ok(s) if s.ruleset == RulesetStatus::NotEnforced => {
            fail(None, "the kernel does not enforce Landlock")
        }
        Ok(s) => {
            let scopes = scoped(s.landlock, wanted);
            // As a launch would: the guard last. The probe directory is the child's own, so
            // without the guard nothing would refuse making it setgid.
            let guard = match harden::install_setuid_guard(
                harden::IpcGuard::HostNamespace,
                harden::UnixSockets::Refused,
                true,
            ) {
                Err(e) => return fail(None, &e),
                Ok(()) if !harden::SETUID_GUARD_SUPPORTED => false,
                Ok(()) => match target.parent().map(|dir| {
                    nix::sys::stat::fchmodat(
                        nix::fcntl::AT_FDCWD,
                        dir,
                        nix::sys::stat::Mode::from_bits_truncate(0o2700),
                        nix::sys::stat::FchmodatFlags::FollowSymlink,
                    )
                }) {
                    // The same program closes the host's IPC: a unix socket of its own is
                    // refused too.
                    Some(Err(Errno::EPERM)) => match unix_socket() {
                        Err(Errno::EPERM) => true,
                        Ok(_) => return fail(None, "a unix socket was not refused"),
                        Err(e) => {
                            return fail(
                                None,
                                &format!("unix socket probe failed unexpectedly: {e}"),
                            );
                        }
                    },
                    Some(Ok(())) => return fail(None, "a setgid chmod was not refused"),
                    Some(Err(e)) => {
                        return fail(None, &format!("setgid probe failed unexpectedly: {e}"));
                    }
                    None => return fail(None, "the probe target has no directory"),
                },
            };
            println!(
                "{} {} {} {}",
                effective_abi(s.landlock, abi),
                kernel_abi(s.landlock),
                if scopes.is_empty() {
                    "-".to_owned()
                } else {
                    scopes.join(",")
                },
                if guard { GUARD_WORD } else { "-" }
            );
            if scopes.contains(&SCOPE_SIGNAL) {
                let parent = nix::unistd::getppid();
                match nix::sys::signal::kill(parent, None) {
                    Err(nix::errno::Errno::EPERM) => {}
                    Ok(()) => return fail(None, "a signal to the parent was not denied"),
                    Err(e) => return fail(None, &format!("signal probe failed unexpectedly: {e}")),
                }
            }
            match File::create(target) {
                Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => ExitCode::SUCCESS,
                Err(e) => fail(None, &format!("probe write failed unexpectedly: {e}")),
                Ok(_) => fail(None, "probe write was not denied"),
            }
        }
    }
}

/// Creates a unix stream socket (what the host-IPC guard refuses), for the probe child.
fn unix_socket() -> Result<OwnedFd, Errno> {
    use std::os::fd::FromRawFd;
    // SAFETY: socket(2) takes integer arguments only and returns a new descriptor or -1.
    #[allow(unsafe_code)]
    let fd = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(Errno::last());
    }
    // SAFETY: `fd` was just returned by socket(2) and nothing else owns it.
    #[allow(unsafe_code)]
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}
