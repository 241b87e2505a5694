//! The host's facts a report carries: OS, kernel, Landlock ABI, bwrap's version and whether it
//! works here, the user, the host's name, the CI leg; and the commit certify was built from.

use std::process::{Command, Stdio};

use super::HostFacts;

/// The commit this certify was built from, embedded at build time (`build.rs`): an installed
/// certify names the commit of its suite, not that of whatever clone it runs in; `None` when it
/// was not built from a git checkout.
pub(super) fn commit() -> Option<String> {
    option_env!("CERTIFY_COMMIT")
        .filter(|c| !c.is_empty())
        .map(str::to_owned)
}

/// The host's facts, measured here whatever backends run (an external backend alone still gets
/// the kernel's Landlock ABI and the installed bwrap's version).
pub(super) fn host_facts() -> HostFacts {
    let bwrap = which::which("bwrap").ok();
    HostFacts {
        os: std::env::consts::OS.to_owned(),
        kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .ok()
            .map(|k| k.trim().to_owned())
            .or_else(|| output("uname", &["-r"])),
        landlock_abi: landlock_abi(),
        bwrap_version: bwrap
            .as_ref()
            .and_then(|b| output(&b.to_string_lossy(), &["--version"])),
        bwrap_usable: bwrap.as_ref().map(|b| {
            // The namespaces the reference profile asks for (ci/leg.sh's check is the same).
            Command::new(b)
                .args(["--unshare-user", "--unshare-pid", "--ro-bind", "/", "/"])
                .args(["--dev", "/dev", "--proc", "/proc", "true"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        }),
        uid: Some(nix::unistd::getuid().as_raw()),
        hostname: std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .map(|h| h.trim().to_owned())
            .or_else(|| output("uname", &["-n"])),
        leg: std::env::var("CONFORMANCE_LEG")
            .ok()
            .filter(|l| !l.is_empty()),
    }
}

/// What `program args` prints, trimmed, when it succeeds and prints something.
fn output(program: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    (out.status.success() && !text.is_empty()).then_some(text)
}

/// The kernel's Landlock ABI version, or `None` when it has no Landlock (or is not Linux).
fn landlock_abi() -> Option<u32> {
    #[cfg(target_os = "linux")]
    {
        const LANDLOCK_CREATE_RULESET_VERSION: nix::libc::c_uint = 1;
        // SAFETY: landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION) reads no
        // memory and returns the ABI version (or -1); nix has no wrapper for it.
        #[allow(unsafe_code)]
        let abi = unsafe {
            nix::libc::syscall(
                nix::libc::SYS_landlock_create_ruleset,
                std::ptr::null::<nix::libc::c_void>(),
                0usize,
                LANDLOCK_CREATE_RULESET_VERSION,
            )
        };
        u32::try_from(abi).ok().filter(|abi| *abi > 0)
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}
