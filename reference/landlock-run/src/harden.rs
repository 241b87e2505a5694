//! What the payload's process does to itself after the Landlock restriction and before exec: drop
//! every capability and keep every descriptor above 2 from crossing the exec.

use std::io;

/// `_LINUX_CAPABILITY_VERSION_3`: two 32-bit words per set.
const CAPABILITY_VERSION_3: u32 = 0x2008_0522;

/// The capability that allows emptying the bounding set.
const CAP_SETPCAP: u32 = 8;

/// The highest capability number a 64-bit capability word can hold.
const CAP_LAST_REPRESENTABLE: u32 = 63;

/// `struct __user_cap_header_struct`.
#[repr(C)]
struct CapHeader {
    version: u32,
    pid: i32,
}

/// `struct __user_cap_data_struct`, one 32-bit word of each set.
#[repr(C)]
#[derive(Clone, Copy, Default, PartialEq, Eq)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

type CapSets = [CapData; 2];

fn header() -> CapHeader {
    CapHeader {
        version: CAPABILITY_VERSION_3,
        pid: 0,
    }
}

/// This thread's effective, permitted and inheritable sets.
#[allow(unsafe_code)]
fn capget() -> io::Result<CapSets> {
    let mut hdr = header();
    let mut data = CapSets::default();
    // SAFETY: capget(2) with a version-3 header writes exactly two `__user_cap_data_struct`s,
    // which `data` provides; both pointers are valid for the duration of the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_capget,
            &mut hdr as *mut CapHeader,
            data.as_mut_ptr(),
        )
    };
    if rc == 0 {
        Ok(data)
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Replaces this thread's effective, permitted and inheritable sets.
#[allow(unsafe_code)]
fn capset(data: &CapSets) -> io::Result<()> {
    let mut hdr = header();
    // SAFETY: capset(2) with a version-3 header reads exactly two `__user_cap_data_struct`s,
    // which `data` provides; both pointers are valid for the duration of the call.
    let rc = unsafe { libc::syscall(libc::SYS_capset, &mut hdr as *mut CapHeader, data.as_ptr()) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `prctl(option, arg2, 0, 0, 0)` for the capability options, which take integer arguments.
#[allow(unsafe_code)]
fn prctl(option: libc::c_int, arg2: libc::c_ulong) -> io::Result<libc::c_int> {
    let zero: libc::c_ulong = 0;
    // SAFETY: PR_CAPBSET_DROP and PR_CAP_AMBIENT take integer arguments only; no pointer is
    // passed and no memory of this process is read or written.
    let rc = unsafe { libc::prctl(option, arg2, zero, zero, zero) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// The kernel's highest capability number, from `/proc/sys/kernel/cap_last_cap`, or `None` when
/// it cannot be read (then the caller drops until the kernel says a number is not a capability).
fn cap_last_cap() -> Option<u32> {
    std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Drops every capability this process holds: the bounding set (when it holds `CAP_SETPCAP`),
/// then the ambient, inheritable, permitted and effective sets. A process that holds none has
/// nothing to drop and succeeds without touching anything. Any failure while capabilities are
/// held is returned: the caller must not exec.
pub fn drop_capabilities() -> Result<(), String> {
    let held = capget().map_err(|e| format!("cannot read this process's capabilities: {e}"))?;
    if held == CapSets::default() {
        // Ambient capabilities are a subset of permitted and inheritable ones: none are held.
        return Ok(());
    }
    let setpcap = 1u32 << CAP_SETPCAP;
    if held[0].permitted & setpcap != 0 {
        if held[0].effective & setpcap == 0 {
            let mut raised = held;
            raised[0].effective |= setpcap;
            capset(&raised).map_err(|e| format!("cannot raise CAP_SETPCAP: {e}"))?;
        }
        drop_bounding_set()?;
    }
    prctl(
        libc::PR_CAP_AMBIENT,
        libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
    )
    .map_err(|e| format!("cannot clear the ambient capabilities: {e}"))?;
    capset(&CapSets::default()).map_err(|e| format!("cannot drop capabilities: {e}"))?;
    match capget() {
        Ok(left) if left == CapSets::default() => Ok(()),
        Ok(_) => Err("capabilities are still held after dropping them".into()),
        Err(e) => Err(format!("cannot verify the capability drop: {e}")),
    }
}

fn drop_bounding_set() -> Result<(), String> {
    let last = cap_last_cap();
    for cap in 0..=last.unwrap_or(CAP_LAST_REPRESENTABLE) {
        match prctl(libc::PR_CAPBSET_DROP, libc::c_ulong::from(cap)) {
            Ok(_) => {}
            // Past the kernel's last capability (only reachable when cap_last_cap was unreadable).
            Err(e) if last.is_none() && cap > 0 && e.raw_os_error() == Some(libc::EINVAL) => break,
            Err(e) => {
                return Err(format!(
                    "cannot drop capability {cap} from the bounding set: {e}"
                ));
            }
        }
    }
    Ok(())
}

/// Marks every descriptor above 2 close-on-exec, so only stdin, stdout and stderr reach the
/// payload: `close_range(2)` when the kernel has it, otherwise each entry of `/proc/self/fd`.
#[allow(unsafe_code)]
pub fn cloexec_above_stderr() -> Result<(), String> {
    // SAFETY: close_range(2) with CLOSE_RANGE_CLOEXEC only sets the close-on-exec flag of open
    // descriptors; it closes nothing and touches no memory of this process.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            3 as libc::c_uint,
            libc::c_uint::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    };
    if rc == 0 {
        return Ok(());
    }
    let dir = std::fs::read_dir("/proc/self/fd")
        .map_err(|e| format!("cannot list this process's descriptors: {e}"))?;
    for entry in dir {
        let entry = entry.map_err(|e| format!("cannot list this process's descriptors: {e}"))?;
        let Some(fd) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<libc::c_int>().ok())
        else {
            continue;
        };
        if fd <= 2 {
            continue;
        }
        // SAFETY: F_SETFD only changes a descriptor's close-on-exec flag; it neither closes
        // the descriptor nor touches memory, so no owner of `fd` in this process is affected.
        let rc = unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            // The directory listing's own descriptor is gone once the listing ends.
            if e.raw_os_error() != Some(libc::EBADF) {
                return Err(format!("cannot mark descriptor {fd} close-on-exec: {e}"));
            }
        }
    }
    Ok(())
}
