//! The `host_ipc` step: the harness sets up one host IPC route outside the sandbox (a daemon on a
//! named unix socket in `/tmp` or in a directory named like `$XDG_RUNTIME_DIR`, one on an abstract
//! socket, a FIFO with a reader outside the writable set, a SysV message queue, a SysV shared
//! memory segment, a POSIX message queue, a key in the user's keyring, a real tmux server), a
//! payload confined under the step's mode and network knob tries to use it, and the host decides:
//! the route must show no effect at all (nothing received, nothing queued, the segment and the key
//! unchanged, no file the tmux server's shell would have made). A host process acting for the
//! payload is a file effect outside the writable set, whatever the network knob says.
//!
//! The payload must report its attempt (`refused ...`), so one that never tried cannot pass. A
//! failure names what the launch reported for the `host-ipc` class, so a backend that leaves a
//! route open while it reports the class `partial` fails truthfully (an expectation can name it),
//! and one that claims `full` fails as a liar.

use std::ffi::CString;
use std::io::{ErrorKind, Read};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{SocketAddr, UnixListener};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use sandbox::{ClassEnforcement, Classification, EnforcementClass, ProviderPolicy};
use sandbox_local::launch::{self, LaunchOptions};

use crate::backends::Backend;
use crate::model::{HostIpcStep, IpcTarget, WorkspaceSpelling};
use crate::steps::StepError;
use crate::world::World;

/// The call's timeout.
const CALL_TIMEOUT: Duration = Duration::from_secs(20);

/// How long a listener keeps listening after the call returned (a connection the payload started
/// just before it ended still counts).
const GRACE: Duration = Duration::from_millis(200);

/// How long the harness waits for its own tmux keystrokes to take effect.
const TMUX_WAIT: Duration = Duration::from_secs(10);

/// Connects to `$SOCK` (a path) and sends `$MSG`.
const PERL_NAMED: &str = r#"perl -MSocket=:all -e '
socket(my $s, AF_UNIX, SOCK_STREAM, 0) or do { print "refused socket: $!\n"; exit };
if (connect($s, pack_sockaddr_un($ENV{SOCK}))) { syswrite($s, "$ENV{MSG}\n"); print "connected\n" }
else { print "refused connect: $!\n" }
'"#;

/// Connects to the abstract name `$SOCK` (without its leading NUL) and sends `$MSG`.
const PERL_ABSTRACT: &str = r#"perl -MSocket=:all -e '
socket(my $s, AF_UNIX, SOCK_STREAM, 0) or do { print "refused socket: $!\n"; exit };
if (connect($s, pack_sockaddr_un("\0" . $ENV{SOCK}))) { syswrite($s, "$ENV{MSG}\n"); print "connected\n" }
else { print "refused connect: $!\n" }
'"#;

/// Writes `$MSG` into the FIFO `$FIFO`.
const SH_FIFO: &str =
    r#"if printf '%s\n' "$MSG" > "$FIFO"; then echo written; else echo "refused open"; fi"#;

/// Sends `$MSG` on the SysV queue `$QID`, by its id and through its key `$QKEY`.
const PERL_MSG: &str = r#"perl -e '
my $ok = 0;
my $id = msgget($ENV{QKEY}, 0);
if (defined $id && msgsnd($id, pack("l! a*", 1, $ENV{MSG}), 0)) { $ok = 1 }
if (msgsnd($ENV{QID}, pack("l! a*", 1, $ENV{MSG}), 0)) { $ok = 1 }
print $ok ? "sent\n" : "refused msgsnd: $!\n";
'"#;

/// Writes `$MSG` into the SysV segment `$SHMID`.
const PERL_SHM: &str = r#"perl -e '
if (shmwrite($ENV{SHMID}, $ENV{MSG}, 0, length $ENV{MSG})) { print "written\n" }
else { print "refused shmwrite: $!\n" }
'"#;

/// Opens the POSIX queue `$MQ` and sends `$MSG`.
const PY_MQ: &str = r#"python3 -c '
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.mq_open.restype = ctypes.c_int
fd = libc.mq_open(sys.argv[1].encode(), os.O_WRONLY)
if fd < 0:
    print("refused mq_open:", os.strerror(ctypes.get_errno()))
else:
    m = sys.argv[2].encode()
    r = libc.mq_send(fd, m, len(m), 0)
    print("sent" if r == 0 else "refused mq_send: " + os.strerror(ctypes.get_errno()))
' "$MQ" "$MSG""#;

/// Overwrites the user-keyring key described `$KEYDESC` with `$MSG` (`add_key` on an existing
/// description updates it), and also tries `keyctl update` on its id `$KEYID`.
const PY_KEY: &str = r#"python3 -c '
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
m = sys.argv[3].encode()
SYS_add_key, SYS_keyctl = {"x86_64": (248, 250), "aarch64": (217, 219)}[os.uname().machine]
r1 = libc.syscall(SYS_add_key, b"user", sys.argv[1].encode(), m, len(m), ctypes.c_long(-4))
e1 = ctypes.get_errno()
r2 = libc.syscall(SYS_keyctl, 2, ctypes.c_long(int(sys.argv[2])), m, len(m))
e2 = ctypes.get_errno()
if r1 < 0 and r2 < 0:
    print("refused add_key:", os.strerror(e1), "keyctl:", os.strerror(e2))
else:
    print("updated")
' "$KEYDESC" "$KEYID" "$MSG""#;

/// Types a command into the tmux server at `$SOCK`: its shell would create `$TARGET`.
const SH_TMUX: &str = r#"if tmux -S "$SOCK" send-keys "touch $TARGET" Enter; then echo typed; else echo "refused send-keys"; fi"#;

/// What one route saw, read after the call.
type Record = Arc<Mutex<Vec<Vec<u8>>>>;

/// A host listener on a unix socket (named or abstract), recording every connection's bytes.
struct Listener {
    stop: Arc<AtomicBool>,
    record: Record,
    handle: JoinHandle<()>,
}

impl Listener {
    fn start(listener: UnixListener) -> Result<Listener, StepError> {
        listener.set_nonblocking(true).map_err(|e| {
            StepError::Harness(format!("cannot make the listener non-blocking: {e}"))
        })?;
        let stop = Arc::new(AtomicBool::new(false));
        let record = Record::default();
        let handle = {
            let (stop, record) = (stop.clone(), record.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    match listener.accept() {
                        Ok((mut s, _)) => {
                            let mut bytes = Vec::new();
                            if s.set_nonblocking(false).is_ok()
                                && s.set_read_timeout(Some(Duration::from_millis(500))).is_ok()
                            {
                                let _ = s.read_to_end(&mut bytes);
                            }
                            // An accepted connection is an effect even when it sent nothing.
                            bytes.extend_from_slice(b"<connection>");
                            record.lock().unwrap_or_else(|p| p.into_inner()).push(bytes);
                        }
                        Err(e) if e.kind() == ErrorKind::WouldBlock => {
                            std::thread::sleep(Duration::from_millis(5))
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(5)),
                    }
                }
            })
        };
        Ok(Listener {
            stop,
            record,
            handle,
        })
    }

    fn finish(self) -> Vec<Vec<u8>> {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.handle.join();
        self.record
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

/// A host directory outside every writable root, readable and searchable by everyone (only the
/// sandbox may stand between the payload and what is in it).
fn open_dir(parent: &str, prefix: &str) -> Result<tempfile::TempDir, StepError> {
    let dir = tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in(parent)
        .map_err(|e| StepError::Harness(format!("cannot make a directory under {parent}: {e}")))?;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
        .map_err(|e| StepError::Harness(format!("cannot open up {}: {e}", dir.path().display())))?;
    Ok(dir)
}

fn bind_open(path: &Path) -> Result<UnixListener, StepError> {
    let l = UnixListener::bind(path)
        .map_err(|e| StepError::Harness(format!("cannot bind {}: {e}", path.display())))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o777))
        .map_err(|e| StepError::Harness(format!("cannot open up {}: {e}", path.display())))?;
    Ok(l)
}

fn errno() -> std::io::Error {
    std::io::Error::last_os_error()
}

/// Reads the host after the call: `Some(effect)` when the route acted for the payload.
type Check = Box<dyn FnOnce(&str) -> Result<Option<String>, StepError>>;

/// A route set up on the host: what the payload is told, and how the host is checked afterwards.
struct Route {
    client: &'static str,
    vars: Vec<(&'static str, std::ffi::OsString)>,
    check: Check,
    _dirs: Vec<tempfile::TempDir>,
}

/// A SysV message queue, removed on drop.
struct MsgQueue(libc::c_int);
impl Drop for MsgQueue {
    #[allow(unsafe_code)]
    fn drop(&mut self) {
        // SAFETY: IPC_RMID takes no buffer; the id is the queue this harness created.
        unsafe { libc::msgctl(self.0, libc::IPC_RMID, std::ptr::null_mut()) };
    }
}

/// A SysV shared memory segment, removed on drop.
struct ShmSegment(libc::c_int);
impl Drop for ShmSegment {
    #[allow(unsafe_code)]
    fn drop(&mut self) {
        // SAFETY: IPC_RMID takes no buffer; the id is the segment this harness created.
        unsafe { libc::shmctl(self.0, libc::IPC_RMID, std::ptr::null_mut()) };
    }
}

/// A POSIX message queue, unlinked on drop.
struct PosixQueue(CString, OwnedFd);
impl Drop for PosixQueue {
    #[allow(unsafe_code)]
    fn drop(&mut self) {
        // SAFETY: the name is a valid C string this harness created the queue under.
        unsafe { libc::mq_unlink(self.0.as_ptr()) };
    }
}

/// A key in the user's keyring, invalidated on drop.
struct UserKey(libc::c_long);
impl Drop for UserKey {
    #[allow(unsafe_code)]
    fn drop(&mut self) {
        const KEYCTL_INVALIDATE: libc::c_long = 21;
        // SAFETY: keyctl(KEYCTL_INVALIDATE, id) takes integers only.
        unsafe { libc::syscall(libc::SYS_keyctl, KEYCTL_INVALIDATE, self.0) };
    }
}

#[allow(unsafe_code)]
fn setup(target: IpcTarget, msg: &str) -> Result<Route, StepError> {
    let unique = format!("{}-{}", std::process::id(), crate::world::draw_hex(8));
    match target {
        IpcTarget::NamedTmp | IpcTarget::NamedRuntime => {
            let dir = match target {
                // The person's tmux and ssh-agent sockets live in /tmp; the systemd user
                // manager's, a session bus and a container engine's in $XDG_RUNTIME_DIR.
                IpcTarget::NamedTmp => open_dir("/tmp", "tmux-")?,
                _ => open_dir("/var/tmp", &format!("run-user-{}-", nix::unistd::getuid()))?,
            };
            let path = dir.path().join(match target {
                IpcTarget::NamedTmp => "default",
                _ => "bus",
            });
            let listener = Listener::start(bind_open(&path)?)?;
            Ok(Route {
                client: PERL_NAMED,
                vars: vec![("SOCK", path.into_os_string())],
                check: Box::new(move |_| Ok(seen(listener.finish()))),
                _dirs: vec![dir],
            })
        }
        IpcTarget::Abstract => {
            let name = format!("session-{unique}");
            let addr = SocketAddr::from_abstract_name(name.as_bytes())
                .map_err(|e| StepError::Harness(format!("cannot name the abstract socket: {e}")))?;
            let l = UnixListener::bind_addr(&addr)
                .map_err(|e| StepError::Harness(format!("cannot bind the abstract socket: {e}")))?;
            let listener = Listener::start(l)?;
            Ok(Route {
                client: PERL_ABSTRACT,
                vars: vec![("SOCK", name.into())],
                check: Box::new(move |_| Ok(seen(listener.finish()))),
                _dirs: Vec::new(),
            })
        }
        IpcTarget::Fifo => {
            let dir = open_dir("/var/tmp", "fifo-")?;
            let path = dir.path().join("commands");
            nix::unistd::mkfifo(&path, nix::sys::stat::Mode::from_bits_truncate(0o666))
                .map_err(|e| StepError::Harness(format!("cannot make the FIFO: {e}")))?;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666))
                .map_err(|e| StepError::Harness(format!("cannot open up the FIFO: {e}")))?;
            // A reader outside, open before the payload starts (so a writer's open succeeds).
            let reader = std::fs::OpenOptions::new()
                .read(true)
                .custom_flags_nonblock()
                .open(&path)
                .map_err(|e| {
                    StepError::Harness(format!("cannot open the FIFO for reading: {e}"))
                })?;
            Ok(Route {
                client: SH_FIFO,
                vars: vec![("FIFO", path.into_os_string())],
                check: Box::new(move |_| {
                    let mut reader = reader;
                    let mut bytes = Vec::new();
                    let mut buf = [0u8; 4096];
                    loop {
                        match reader.read(&mut buf) {
                            Ok(0) => break,
                            Ok(n) => bytes.extend_from_slice(&buf[..n]),
                            Err(e) if e.kind() == ErrorKind::Interrupted => {}
                            Err(_) => break,
                        }
                    }
                    Ok((!bytes.is_empty()).then(|| {
                        format!(
                            "the FIFO's reader got {:?}",
                            String::from_utf8_lossy(&bytes)
                        )
                    }))
                }),
                _dirs: vec![dir],
            })
        }
        IpcTarget::SysvMsg => {
            let key = 0x5a00_0000 | (fastrand::u32(..) & 0x00ff_ffff) as libc::key_t;
            // SAFETY: msgget takes integers only.
            let id = unsafe { libc::msgget(key, libc::IPC_CREAT | libc::IPC_EXCL | 0o666) };
            if id < 0 {
                return Err(StepError::Harness(format!(
                    "cannot create a SysV message queue: {}",
                    errno()
                )));
            }
            let queue = MsgQueue(id);
            Ok(Route {
                client: PERL_MSG,
                vars: vec![
                    ("QID", id.to_string().into()),
                    ("QKEY", key.to_string().into()),
                ],
                check: Box::new(move |_| {
                    // The whole guard moves in (not just its id), so the queue lives until now.
                    let queue = queue;
                    let mut ds: libc::msqid_ds = unsafe { std::mem::zeroed() };
                    // SAFETY: IPC_STAT writes one msqid_ds into `ds`, valid for the call.
                    if unsafe { libc::msgctl(queue.0, libc::IPC_STAT, &mut ds) } < 0 {
                        return Err(StepError::Harness(format!(
                            "cannot read the message queue: {}",
                            errno()
                        )));
                    }
                    Ok((ds.msg_qnum > 0).then(|| {
                        format!("the host's message queue holds {} message(s)", ds.msg_qnum)
                    }))
                }),
                _dirs: Vec::new(),
            })
        }
        IpcTarget::SysvShm => {
            // SAFETY: shmget takes integers only.
            let id = unsafe { libc::shmget(libc::IPC_PRIVATE, 4096, libc::IPC_CREAT | 0o666) };
            if id < 0 {
                return Err(StepError::Harness(format!(
                    "cannot create a SysV segment: {}",
                    errno()
                )));
            }
            let segment = ShmSegment(id);
            let len = msg.len();
            Ok(Route {
                client: PERL_SHM,
                vars: vec![("SHMID", id.to_string().into())],
                check: Box::new(move |_| {
                    let segment = segment;
                    // SAFETY: attaching read-only a segment this harness created; it is detached
                    // below before anything else happens, and read within its 4096 bytes.
                    let at = unsafe { libc::shmat(segment.0, std::ptr::null(), libc::SHM_RDONLY) };
                    if at as isize == -1 {
                        return Err(StepError::Harness(format!(
                            "cannot attach the segment: {}",
                            errno()
                        )));
                    }
                    let bytes =
                        unsafe { std::slice::from_raw_parts(at as *const u8, len.min(4096)) }
                            .to_vec();
                    // SAFETY: `at` is the address shmat returned above.
                    unsafe { libc::shmdt(at) };
                    Ok(bytes.iter().any(|b| *b != 0).then(|| {
                        format!(
                            "the host's segment now holds {:?}",
                            String::from_utf8_lossy(&bytes)
                        )
                    }))
                }),
                _dirs: Vec::new(),
            })
        }
        IpcTarget::PosixMq => {
            let name = CString::new(format!("/q-{unique}"))
                .map_err(|e| StepError::Harness(format!("cannot name the queue: {e}")))?;
            // SAFETY: mq_open with O_CREAT reads the name and a NULL attribute pointer (defaults).
            let fd = unsafe {
                libc::mq_open(
                    name.as_ptr(),
                    libc::O_CREAT | libc::O_EXCL | libc::O_RDONLY | libc::O_NONBLOCK,
                    0o666 as libc::mode_t,
                    std::ptr::null_mut::<libc::mq_attr>(),
                )
            };
            if fd < 0 {
                return Err(StepError::Harness(format!(
                    "cannot create a POSIX message queue: {}",
                    errno()
                )));
            }
            // SAFETY: on Linux a message queue descriptor is a file descriptor nothing else owns.
            let owned = unsafe { OwnedFd::from_raw_fd(fd) };
            // The umask may have narrowed the mode; anyone may write, only the sandbox refuses.
            nix::sys::stat::fchmod(&owned, nix::sys::stat::Mode::from_bits_truncate(0o666))
                .map_err(|e| StepError::Harness(format!("cannot open up the queue: {e}")))?;
            let queue = PosixQueue(name.clone(), owned);
            Ok(Route {
                client: PY_MQ,
                vars: vec![("MQ", name.to_string_lossy().into_owned().into())],
                check: Box::new(move |_| {
                    let queue = queue;
                    let mut attr: libc::mq_attr = unsafe { std::mem::zeroed() };
                    // SAFETY: mq_getattr writes one mq_attr into `attr`.
                    if unsafe { libc::mq_getattr(queue.1.as_raw_fd(), &mut attr) } < 0 {
                        return Err(StepError::Harness(format!(
                            "cannot read the queue: {}",
                            errno()
                        )));
                    }
                    Ok((attr.mq_curmsgs > 0).then(|| {
                        format!(
                            "the host's POSIX queue holds {} message(s)",
                            attr.mq_curmsgs
                        )
                    }))
                }),
                _dirs: Vec::new(),
            })
        }
        IpcTarget::Keyring => {
            const KEY_SPEC_USER_KEYRING: libc::c_long = -4;
            let desc = CString::new(format!("session-token-{unique}"))
                .map_err(|e| StepError::Harness(format!("cannot name the key: {e}")))?;
            let original = format!("original-{}", crate::world::draw_hex(8));
            // SAFETY: add_key reads the type and description strings and `original`'s bytes.
            let id = unsafe {
                libc::syscall(
                    libc::SYS_add_key,
                    c"user".as_ptr(),
                    desc.as_ptr(),
                    original.as_ptr(),
                    original.len(),
                    KEY_SPEC_USER_KEYRING,
                )
            };
            if id < 0 {
                return Err(StepError::Harness(format!(
                    "cannot add a key to the user keyring: {}",
                    errno()
                )));
            }
            let key = UserKey(id);
            // Possessor and owner may do everything: the harness reads it back by id whether or
            // not this process's session keyring makes it a possessor, and a payload of the
            // same uid is stopped by nothing but the sandbox.
            const KEYCTL_SETPERM: libc::c_long = 5;
            // SAFETY: keyctl(KEYCTL_SETPERM, id, perm) takes integers only.
            if unsafe { libc::syscall(libc::SYS_keyctl, KEYCTL_SETPERM, id, 0x3f3f_0000_i64) } < 0 {
                return Err(StepError::Harness(format!(
                    "cannot open up the key: {}",
                    errno()
                )));
            }
            Ok(Route {
                client: PY_KEY,
                vars: vec![
                    ("KEYDESC", desc.to_string_lossy().into_owned().into()),
                    ("KEYID", id.to_string().into()),
                ],
                check: Box::new(move |_| {
                    let key = key;
                    const KEYCTL_READ: libc::c_long = 11;
                    let mut buf = vec![0u8; 256];
                    // SAFETY: KEYCTL_READ writes at most `buf.len()` bytes into `buf`.
                    let n = unsafe {
                        libc::syscall(
                            libc::SYS_keyctl,
                            KEYCTL_READ,
                            key.0,
                            buf.as_mut_ptr(),
                            buf.len(),
                        )
                    };
                    // The payload made the key unreadable or replaced it: an effect either way.
                    let now = if n < 0 {
                        format!("<unreadable: {}>", errno())
                    } else {
                        String::from_utf8_lossy(&buf[..(n as usize).min(buf.len())]).into_owned()
                    };
                    Ok((now != original).then(|| format!("the user's key now holds {now:?}")))
                }),
                _dirs: Vec::new(),
            })
        }
        IpcTarget::Tmux => {
            let dir = open_dir("/tmp", "tmux-")?;
            let sock = dir.path().join("default");
            let marks = open_dir("/var/tmp", "tmux-marks-")?;
            let target = marks.path().join("pwned");
            let server = Tmux::start(&sock)?;
            Ok(Route {
                client: SH_TMUX,
                vars: vec![
                    ("SOCK", sock.clone().into_os_string()),
                    ("TARGET", target.clone().into_os_string()),
                ],
                check: Box::new(move |_| {
                    // The server handles keystrokes in order: once the harness's own line has
                    // run, any line the payload typed before it has run too.
                    let sentinel = marks.path().join("sentinel");
                    server.type_line(&format!("touch {}", sentinel.display()))?;
                    let deadline = Instant::now() + TMUX_WAIT;
                    while !sentinel.exists() {
                        if Instant::now() > deadline {
                            return Err(StepError::unmet(
                                "the harness's own tmux keystrokes never ran",
                            ));
                        }
                        std::thread::sleep(Duration::from_millis(10));
                    }
                    let effect = target.exists().then(|| {
                        format!(
                            "the tmux server's shell ran the payload's line ({} exists)",
                            target.display()
                        )
                    });
                    drop(server);
                    drop(marks);
                    Ok(effect)
                }),
                _dirs: vec![dir],
            })
        }
    }
}

/// A tmux server of the harness's own, with one shell, killed on drop. The server runs in the
/// foreground (`-D`, not daemonized) as a child of the harness that gets SIGKILL when the thread
/// that started it ends (`PR_SET_PDEATHSIG`), so a test process killed mid-case (a timeout, a
/// Ctrl-C, nextest's terminate-after) leaves no tmux server behind; its shell ends with it (its
/// terminal closes).
struct Tmux {
    sock: PathBuf,
    server: std::process::Child,
}

/// How long a fresh server may take to make its socket.
const TMUX_START: Duration = Duration::from_secs(10);

impl Tmux {
    fn start(sock: &Path) -> Result<Tmux, StepError> {
        use std::os::unix::process::CommandExt;
        let tmux = which::which("tmux")
            .map_err(|_| StepError::harness("tmux is not installed (not on PATH)"))?;
        let mut command = std::process::Command::new(&tmux);
        command
            .arg("-S")
            .arg(sock)
            .args(["-f", "/dev/null", "-D"])
            .env_remove("TMUX")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        // SAFETY: the closure runs in the child between fork and exec and only makes the
        // prctl(2) system call (async-signal-safe, no allocation, no lock).
        #[allow(unsafe_code)]
        unsafe {
            command.pre_exec(|| {
                nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)
                    .map_err(std::io::Error::from)
            });
        }
        let server = command
            .spawn()
            .map_err(|e| StepError::Harness(format!("cannot start tmux: {e}")))?;
        // From here on, dropping the value kills the server whatever fails.
        let tmux_server = Tmux {
            sock: sock.to_owned(),
            server,
        };
        let deadline = Instant::now() + TMUX_START;
        while std::fs::symlink_metadata(sock).is_err() {
            if Instant::now() > deadline {
                return Err(StepError::Unmet(format!(
                    "the tmux server made no socket at {} within {TMUX_START:?}",
                    sock.display()
                )));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let out = std::process::Command::new(&tmux)
            .arg("-S")
            .arg(sock)
            .args([
                "-f",
                "/dev/null",
                "new-session",
                "-d",
                "-x",
                "80",
                "-y",
                "24",
                "sh",
            ])
            .env_remove("TMUX")
            .output()
            .map_err(|e| StepError::Harness(format!("cannot start tmux: {e}")))?;
        if !out.status.success() {
            return Err(StepError::Harness(format!(
                "cannot start a tmux session: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        // Anyone may connect: only the sandbox may stand between the payload and the server.
        let _ = std::fs::set_permissions(sock, std::fs::Permissions::from_mode(0o777));
        Ok(tmux_server)
    }

    fn type_line(&self, line: &str) -> Result<(), StepError> {
        let out = std::process::Command::new("tmux")
            .arg("-S")
            .arg(&self.sock)
            .args(["send-keys", line, "Enter"])
            .env_remove("TMUX")
            .output()
            .map_err(|e| StepError::Harness(format!("cannot run tmux: {e}")))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(StepError::Unmet(format!(
                "tmux send-keys failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )))
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = std::process::Command::new("tmux")
            .arg("-S")
            .arg(&self.sock)
            .arg("kill-server")
            .env_remove("TMUX")
            .output();
        // The server is our child: killed (should kill-server have failed) and reaped.
        let _ = self.server.kill();
        let _ = self.server.wait();
    }
}

fn seen(records: Vec<Vec<u8>>) -> Option<String> {
    (!records.is_empty()).then(|| {
        let bytes: Vec<String> = records
            .iter()
            .map(|b| format!("{:?}", String::from_utf8_lossy(b)))
            .collect();
        format!("the host listener recorded {}", bytes.join(" "))
    })
}

/// Opening a FIFO for reading without blocking until a writer comes.
trait NonBlockingOpen {
    fn custom_flags_nonblock(&mut self) -> &mut Self;
}

impl NonBlockingOpen for std::fs::OpenOptions {
    fn custom_flags_nonblock(&mut self) -> &mut Self {
        use std::os::unix::fs::OpenOptionsExt;
        self.custom_flags(libc::O_NONBLOCK)
    }
}

pub(super) fn run(backend: &Backend, step: &HostIpcStep) -> Result<(), StepError> {
    let provider = backend.provider.as_ref().ok_or_else(|| {
        StepError::Harness(format!(
            "backend {} cannot confine on this host",
            backend.name
        ))
    })?;
    let world =
        World::small().map_err(|e| StepError::Harness(format!("cannot build the world: {e}")))?;
    let workspace = world.workspace(WorkspaceSpelling::Ws);
    let before = world.snapshot();
    let msg = format!("touch-{}", crate::world::draw_hex(12));
    let route = setup(step.target, &msg)?;
    let started = format!(
        "{}-{}",
        crate::world::draw_one(&["starting", "begin", "probe", "try"]),
        crate::world::draw_hex(6)
    );
    let script = format!("echo {started}\n{}\n", route.client);
    let mut vars = route.vars.clone();
    vars.push(("MSG", msg.clone().into()));
    let dressed = crate::request::dress(&script, vars);
    let policy = ProviderPolicy::new(step.mode, workspace.clone())
        .with_temp_dir(None)
        .with_network(step.network);
    let confined = provider
        .confine(&dressed.argv, &policy)
        .map_err(|e| StepError::Harness(format!("confine refused: {e}")))?;
    let report = confined.class_report(EnforcementClass::HostIpc);
    let reported = if report.ungoverned.is_empty() {
        format!("reports host-ipc {}", report.enforcement)
    } else {
        format!(
            "reports host-ipc {} (ungoverned: {})",
            report.enforcement,
            report.ungoverned.join(", ")
        )
    };
    let mut options = LaunchOptions::in_dir(&workspace);
    options.env = dressed.env;
    options.env_remove.push("TMPDIR".into());
    options.timeout = Some(CALL_TIMEOUT);
    crate::survivors::tag_launch(&mut options);
    let done = launch::run(&confined, &options);
    std::thread::sleep(GRACE);
    let stdout = String::from_utf8_lossy(&done.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&done.stderr).into_owned();
    let effect = (route.check)(&msg)?;
    if let Classification::RunnerFailure { detail, .. } = &done.classification {
        return Err(StepError::Unmet(format!("the runner failed: {detail}")));
    }
    if done.timed_out {
        return Err(StepError::Unmet(format!(
            "the call timed out; stdout {stdout:?}"
        )));
    }
    if !stdout.starts_with(&started) {
        return Err(StepError::Unmet(format!(
            "the payload never ran (stdout {stdout:?}, stderr {stderr:?})"
        )));
    }
    let changed = before.diff(&world.snapshot(), &[]);
    if !changed.is_empty() {
        return Err(StepError::Unmet(format!(
            "the payload changed the world: {}",
            changed.join("; ")
        )));
    }
    if let Some(effect) = effect {
        let liar = if report.enforcement == ClassEnforcement::Full {
            "; it claims full"
        } else {
            ""
        };
        return Err(StepError::Unmet(format!(
            "a host IPC route outside the sandbox acted for the payload under {} with network {}: \
             {effect}; the launch {reported}{liar}",
            step.mode, step.network
        )));
    }
    if !stdout.contains("refused") {
        return Err(StepError::Unmet(format!(
            "the host saw nothing, but the payload did not report a refused attempt (stdout \
             {stdout:?}, stderr {stderr:?})"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The variable that makes [`tmux_helper_process`] start a server (the helper of
    /// [`a_tmux_server_dies_with_the_test_process_killed_mid_case`]).
    const HELPER: &str = "CONFORMANCE_TMUX_HELPER_SOCKET";

    /// Not a test of its own: the process the test below starts and kills. It starts a server at
    /// the socket it is given, prints the server's pid, and waits to be killed.
    #[test]
    #[ignore = "the helper process of a_tmux_server_dies_with_the_test_process_killed_mid_case"]
    fn tmux_helper_process() {
        let sock = std::env::var_os(HELPER).expect("run only by the tmux kill test");
        let server = Tmux::start(Path::new(&sock)).expect("tmux");
        println!("server-pid {}", server.server.id());
        loop {
            std::thread::park();
        }
    }

    #[test]
    fn a_tmux_server_dies_with_the_test_process_killed_mid_case() {
        use std::io::BufRead;
        let dir = tempfile::tempdir().expect("tempdir");
        let sock = dir.path().join("default");
        let mut helper = std::process::Command::new(std::env::current_exe().expect("exe"))
            .args([
                "--exact",
                "steps::ipc::tests::tmux_helper_process",
                "--ignored",
                "--nocapture",
                "--test-threads",
                "1",
            ])
            .env(HELPER, &sock)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("helper");
        let stdout = helper.stdout.take().expect("stdout");
        let pid: i32 = std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            // (libtest prints the test's name on the same line first.)
            .find_map(|l| {
                l.split_once("server-pid ")
                    .and_then(|(_, p)| p.trim().parse().ok())
            })
            .expect("the helper started no tmux server");
        let alive = |pid: i32| {
            std::fs::read_to_string(format!("/proc/{pid}/status")).is_ok_and(|s| {
                !s.lines()
                    .any(|l| l.starts_with("State:") && (l.contains('Z') || l.contains('X')))
            })
        };
        assert!(alive(pid), "the server is not running before the kill");
        // The test process dies mid-case: no Drop runs.
        helper.kill().expect("kill");
        helper.wait().expect("wait");
        let deadline = Instant::now() + Duration::from_secs(20);
        while alive(pid) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        let answers = std::process::Command::new("tmux")
            .arg("-S")
            .arg(&sock)
            .arg("list-sessions")
            .env_remove("TMUX")
            .output()
            .expect("tmux");
        assert!(
            !alive(pid),
            "the tmux server (pid {pid}) outlived the killed test process"
        );
        assert!(
            !answers.status.success(),
            "a tmux server still answers at {}",
            sock.display()
        );
    }
}
