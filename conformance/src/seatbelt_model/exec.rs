//! `seatbelt-model-exec`: a stand-in for `/usr/bin/sandbox-exec` on Linux (**a fake**, named so
//! everywhere). It takes `sandbox-exec`'s arguments (`-p PROFILE`, `-D NAME=VALUE`, then the
//! command), compiles the profile with the model, runs the command with a seccomp filter that
//! hands every file-writing, socket and IPC call to this process (user notification), and answers
//! each with the model's verdict: `EPERM` where the profile denies, the call itself where it
//! allows. So the scenarios' own payloads (shells, git, coreutils) run against the generated
//! profile, and a rule-order or missing-operation mistake shows on the host.
//!
//! What it is not: a sandbox. The calls are judged from the payload's memory, which another of
//! its threads may change before the kernel reads it again (a race a hostile payload can win);
//! reads, `exec`, `ptrace`, `io_uring` (refused) and every macOS-only operation (Mach services,
//! Apple events) are not judged. It is planned only for the families whose effects it judges
//! ([`super::FAMILIES`]).

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::judge::{self, Task};
use super::{Action, Profile, Request, split_args};

/// The exit code `sandbox-exec` uses for a profile it cannot compile.
const PROFILE_ERROR: i32 = 65;
/// The exit code `sandbox-exec` uses when it cannot exec the command.
const EXEC_ERROR: i32 = 71;

/// The program's entry: never returns.
pub fn main() -> ! {
    let args: Vec<Vec<u8>> = std::env::args_os()
        .skip(1)
        .map(|a| a.as_bytes().to_vec())
        .collect();
    let (text, params, at) = match split_args(&args) {
        Ok(split) => split,
        Err(e) => fail(PROFILE_ERROR, &e.to_string()),
    };
    let profile = match Profile::compile(&text, &params) {
        Ok(p) => p,
        Err(e) => fail(PROFILE_ERROR, &e.to_string()),
    };
    let command = &args[at..];
    if command.is_empty() {
        fail(64, "no command");
    }
    match supervise(&profile, command) {
        Ok(never) => match never {},
        Err(e) => fail(EXEC_ERROR, &e),
    }
}

fn fail(code: i32, why: &str) -> ! {
    eprintln!("sandbox-exec: {why}");
    std::process::exit(code)
}

/// The system calls judged, by number on this architecture.
fn judged() -> Vec<i64> {
    let mut calls = vec![
        libc::SYS_openat,
        libc::SYS_mkdirat,
        libc::SYS_unlinkat,
        libc::SYS_renameat,
        libc::SYS_renameat2,
        libc::SYS_linkat,
        libc::SYS_symlinkat,
        libc::SYS_fchmod,
        libc::SYS_fchmodat,
        452, // fchmodat2
        libc::SYS_fchown,
        libc::SYS_fchownat,
        libc::SYS_truncate,
        libc::SYS_mknodat,
        libc::SYS_utimensat,
        libc::SYS_setxattr,
        libc::SYS_lsetxattr,
        libc::SYS_fsetxattr,
        libc::SYS_removexattr,
        libc::SYS_lremovexattr,
        libc::SYS_fremovexattr,
        libc::SYS_socket,
        libc::SYS_connect,
        libc::SYS_bind,
        libc::SYS_sendto,
        libc::SYS_sendmsg,
        libc::SYS_msgget,
        libc::SYS_msgsnd,
        libc::SYS_msgrcv,
        libc::SYS_msgctl,
        libc::SYS_semget,
        libc::SYS_semop,
        libc::SYS_semtimedop,
        libc::SYS_semctl,
        libc::SYS_shmget,
        libc::SYS_shmat,
        libc::SYS_shmctl,
        libc::SYS_mq_open,
        libc::SYS_add_key,
        libc::SYS_request_key,
        libc::SYS_keyctl,
        libc::SYS_kill,
        libc::SYS_tgkill,
        libc::SYS_tkill,
        libc::SYS_io_uring_setup,
        437, // openat2
    ];
    #[cfg(target_arch = "x86_64")]
    calls.extend([
        libc::SYS_open,
        libc::SYS_creat,
        libc::SYS_mkdir,
        libc::SYS_rmdir,
        libc::SYS_unlink,
        libc::SYS_rename,
        libc::SYS_link,
        libc::SYS_symlink,
        libc::SYS_chmod,
        libc::SYS_chown,
        libc::SYS_lchown,
        libc::SYS_mknod,
        libc::SYS_utimes,
        libc::SYS_futimesat,
    ]);
    calls
}

/// The payload's process and the call's arguments.
struct Call<'a> {
    task: Task,
    nr: i64,
    args: [u64; 6],
    /// The command's own process: signals reach its descendants only.
    root: u32,
    profile: &'a Profile,
}

/// What to answer a call: go ahead, or fail with this errno.
enum Answer {
    Continue,
    Errno(i32),
}

impl Call<'_> {
    fn arg(&self, i: usize) -> i64 {
        self.args[i] as i64
    }

    /// The absolute path of argument `i` (a string) relative to the directory descriptor `dirfd`.
    fn path(&self, dirfd: i64, i: usize) -> Option<PathBuf> {
        let bytes = self.task.string(self.args[i])?;
        if bytes.is_empty() {
            return None;
        }
        self.task.absolute(dirfd, &bytes)
    }

    /// The path of a `*at` call: argument `i` under `dirfd`, or the descriptor itself for an
    /// empty path (`AT_EMPTY_PATH`, `futimens`).
    fn at_path(&self, dirfd_arg: usize, i: usize) -> Option<PathBuf> {
        let dirfd = self.arg(dirfd_arg);
        self.path(dirfd, i).or_else(|| self.task.fd_path(dirfd))
    }

    fn follow_or_not(path: &Path, nofollow: bool) -> PathBuf {
        if nofollow {
            judge::nofollow(path)
        } else {
            judge::follow(path)
        }
    }

    /// The verdict: the first request the profile denies, or none.
    fn answer(&self) -> Answer {
        if self.nr == libc::SYS_io_uring_setup {
            return Answer::Errno(libc::ENOSYS);
        }
        match self.requests() {
            Some(requests) => {
                if requests
                    .iter()
                    .any(|r| self.profile.decide(r) == Action::Deny)
                {
                    Answer::Errno(libc::EPERM)
                } else {
                    Answer::Continue
                }
            }
            // A call the model cannot read (a bad pointer): the kernel decides (EFAULT).
            None => Answer::Continue,
        }
    }

    /// The SBPL requests this call makes, or `None` when its arguments cannot be read.
    fn requests(&self) -> Option<Vec<Request>> {
        let cwd = libc::AT_FDCWD as i64;
        let nr = self.nr;
        let nofollow_flag = |i: usize| self.arg(i) as i32 & libc::AT_SYMLINK_NOFOLLOW != 0;
        #[cfg(target_arch = "x86_64")]
        if let Some(legacy) = self.legacy(cwd) {
            return legacy;
        }
        Some(match nr {
            n if n == libc::SYS_openat => {
                judge::open(&self.path(self.arg(0), 1)?, self.arg(2) as i32)
            }
            437 => {
                let how = self.task.bytes(self.args[2], 8)?;
                let flags = u64::from_ne_bytes(how.try_into().ok()?);
                judge::open(&self.path(self.arg(0), 1)?, flags as i32)
            }
            n if n == libc::SYS_mkdirat => vec![judge::on(
                "file-write-create",
                &judge::nofollow(&self.path(self.arg(0), 1)?),
            )],
            n if n == libc::SYS_mknodat => self.mknod(&self.path(self.arg(0), 1)?, self.arg(2)),
            n if n == libc::SYS_unlinkat => vec![judge::on(
                "file-write-unlink",
                &judge::nofollow(&self.path(self.arg(0), 1)?),
            )],
            n if n == libc::SYS_renameat => judge::rename(
                &self.path(self.arg(0), 1)?,
                &self.path(self.arg(2), 3)?,
                false,
            ),
            n if n == libc::SYS_renameat2 => {
                let exchange = self.arg(4) as u32 & libc::RENAME_EXCHANGE != 0;
                judge::rename(
                    &self.path(self.arg(0), 1)?,
                    &self.path(self.arg(2), 3)?,
                    exchange,
                )
            }
            n if n == libc::SYS_linkat => {
                let follow = self.arg(4) as i32 & libc::AT_SYMLINK_FOLLOW != 0;
                let from = self.at_path(0, 1)?;
                let to = self.path(self.arg(2), 3)?;
                vec![
                    judge::on("file-link", &Self::follow_or_not(&from, !follow)),
                    judge::on("file-write-create", &judge::nofollow(&to)),
                ]
            }
            n if n == libc::SYS_symlinkat => vec![judge::on(
                "file-write-create",
                &judge::nofollow(&self.path(self.arg(1), 2)?),
            )],
            n if n == libc::SYS_fchmod => {
                judge::chmod(&self.task.fd_path(self.arg(0))?, self.args[1])
            }
            n if n == libc::SYS_fchmodat || n == 452 => {
                let nofollow = n == 452 && nofollow_flag(3);
                judge::chmod(
                    &Self::follow_or_not(&self.at_path(0, 1)?, nofollow),
                    self.args[2],
                )
            }
            n if n == libc::SYS_fchown => vec![judge::on(
                "file-write-owner",
                &self.task.fd_path(self.arg(0))?,
            )],
            n if n == libc::SYS_fchownat => vec![judge::on(
                "file-write-owner",
                &Self::follow_or_not(&self.at_path(0, 1)?, nofollow_flag(4)),
            )],
            n if n == libc::SYS_truncate => vec![judge::on(
                "file-write-data",
                &judge::follow(&self.path(cwd, 0)?),
            )],
            n if n == libc::SYS_utimensat => vec![judge::on(
                "file-write-times",
                &Self::follow_or_not(&self.at_path(0, 1)?, nofollow_flag(3)),
            )],
            n if n == libc::SYS_setxattr || n == libc::SYS_removexattr => vec![judge::on(
                "file-write-xattr",
                &judge::follow(&self.path(cwd, 0)?),
            )],
            n if n == libc::SYS_lsetxattr || n == libc::SYS_lremovexattr => vec![judge::on(
                "file-write-xattr",
                &judge::nofollow(&self.path(cwd, 0)?),
            )],
            n if n == libc::SYS_fsetxattr || n == libc::SYS_fremovexattr => vec![judge::on(
                "file-write-xattr",
                &self.task.fd_path(self.arg(0))?,
            )],
            _ => return self.ipc(),
        })
    }

    /// The legacy x86_64 calls without a directory descriptor.
    #[cfg(target_arch = "x86_64")]
    fn legacy(&self, cwd: i64) -> Option<Option<Vec<Request>>> {
        let path = |i| self.path(cwd, i);
        let nr = self.nr;
        let requests = match nr {
            n if n == libc::SYS_open => path(0).map(|p| judge::open(&p, self.arg(1) as i32)),
            n if n == libc::SYS_creat => {
                path(0).map(|p| judge::open(&p, libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC))
            }
            n if n == libc::SYS_mkdir => {
                path(0).map(|p| vec![judge::on("file-write-create", &judge::nofollow(&p))])
            }
            n if n == libc::SYS_mknod => path(0).map(|p| self.mknod(&p, self.arg(1))),
            n if n == libc::SYS_rmdir || n == libc::SYS_unlink => {
                path(0).map(|p| vec![judge::on("file-write-unlink", &judge::nofollow(&p))])
            }
            n if n == libc::SYS_rename => path(0)
                .zip(path(1))
                .map(|(a, b)| judge::rename(&a, &b, false)),
            n if n == libc::SYS_link => path(0).zip(path(1)).map(|(a, b)| {
                vec![
                    judge::on("file-link", &judge::nofollow(&a)),
                    judge::on("file-write-create", &judge::nofollow(&b)),
                ]
            }),
            n if n == libc::SYS_symlink => {
                path(1).map(|p| vec![judge::on("file-write-create", &judge::nofollow(&p))])
            }
            n if n == libc::SYS_chmod => {
                path(0).map(|p| judge::chmod(&judge::follow(&p), self.args[1]))
            }
            n if n == libc::SYS_chown => {
                path(0).map(|p| vec![judge::on("file-write-owner", &judge::follow(&p))])
            }
            n if n == libc::SYS_lchown => {
                path(0).map(|p| vec![judge::on("file-write-owner", &judge::nofollow(&p))])
            }
            n if n == libc::SYS_utimes => {
                path(0).map(|p| vec![judge::on("file-write-times", &judge::follow(&p))])
            }
            n if n == libc::SYS_futimesat => self
                .at_path(0, 1)
                .map(|p| vec![judge::on("file-write-times", &judge::follow(&p))]),
            _ => return None,
        };
        Some(requests)
    }

    /// mknod: a new node (`file-write-create`); a device also needs `file-mknod`.
    fn mknod(&self, path: &Path, mode: i64) -> Vec<Request> {
        let at = judge::nofollow(path);
        let mut out = vec![judge::on("file-write-create", &at)];
        let kind = mode as u32 & libc::S_IFMT;
        if kind == libc::S_IFCHR || kind == libc::S_IFBLK {
            out.push(judge::on("file-mknod", &at));
        }
        out
    }

    /// Sockets, IPC, keyrings and signals, with the macOS route each stands for.
    fn ipc(&self) -> Option<Vec<Request>> {
        let nr = self.nr;
        Some(match nr {
            n if n == libc::SYS_socket => vec![Request {
                socket_domain: Some(judge::domain(self.arg(0))),
                ..Request::op("system-socket")
            }],
            n if n == libc::SYS_connect => {
                judge::address(&self.task, self.args[1], self.args[2], "network-outbound")?
            }
            n if n == libc::SYS_bind => {
                judge::address(&self.task, self.args[1], self.args[2], "network-bind")?
            }
            n if n == libc::SYS_sendto => {
                judge::address(&self.task, self.args[4], self.args[5], "network-outbound")
                    .unwrap_or_default()
            }
            n if n == libc::SYS_sendmsg => {
                let header = self.task.bytes(self.args[1], 16)?;
                let name = u64::from_ne_bytes(header[..8].try_into().ok()?);
                let len = u64::from(u32::from_ne_bytes(header[8..12].try_into().ok()?));
                judge::address(&self.task, name, len, "network-outbound").unwrap_or_default()
            }
            n if [
                libc::SYS_msgget,
                libc::SYS_msgsnd,
                libc::SYS_msgrcv,
                libc::SYS_msgctl,
            ]
            .contains(&n) =>
            {
                vec![Request::op("ipc-sysv-msg")]
            }
            n if [
                libc::SYS_semget,
                libc::SYS_semop,
                libc::SYS_semtimedop,
                libc::SYS_semctl,
            ]
            .contains(&n) =>
            {
                vec![Request::op("ipc-sysv-sem")]
            }
            n if [libc::SYS_shmget, libc::SYS_shmat, libc::SYS_shmctl].contains(&n) => {
                vec![Request::op("ipc-sysv-shm")]
            }
            // macOS has no POSIX message queues: the nearest route is its POSIX IPC.
            n if n == libc::SYS_mq_open => vec![Request::op("ipc-posix-mq")],
            // macOS has no keyrings: the keychain is reached through securityd's Mach service.
            n if n == libc::SYS_add_key || n == libc::SYS_request_key || n == libc::SYS_keyctl => {
                vec![Request {
                    global_name: Some("com.apple.SecurityServer".into()),
                    ..Request::op("mach-lookup")
                }]
            }
            n if n == libc::SYS_kill || n == libc::SYS_tkill => self.signal(self.arg(0))?,
            n if n == libc::SYS_tgkill => self.signal(self.arg(0))?,
            _ => Vec::new(),
        })
    }

    /// A signal to `pid`: within the sandbox when it (or, for a group, its leader) descends from
    /// the command; `kill(-1)` is never within (the model cannot limit it to the sandbox).
    fn signal(&self, pid: i64) -> Option<Vec<Request>> {
        let same = match pid {
            0 => true,
            -1 => false,
            p => judge::descends(p.unsigned_abs() as u32, self.root),
        };
        Some(vec![Request {
            same_sandbox: Some(same),
            ..Request::op("signal")
        }])
    }
}

/// Forks the command under the filter, then answers its calls until it ends; exits as it did.
fn supervise(profile: &Profile, command: &[Vec<u8>]) -> Result<std::convert::Infallible, String> {
    let argv: Vec<CString> = command
        .iter()
        .map(|a| CString::new(a.clone()).map_err(|e| e.to_string()))
        .collect::<Result<_, _>>()?;
    let (listener, child) = super::notify::spawn(&argv, &judged())?;
    super::notify::serve(listener, child, |pid, nr, args| {
        let call = Call {
            task: Task { pid },
            nr,
            args,
            root: child,
            profile,
        };
        match call.answer() {
            Answer::Continue => None,
            Answer::Errno(e) => Some(e),
        }
    })
}
