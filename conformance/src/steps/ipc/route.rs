//! The host side of each route: the listener, the IPC objects, and how the host is read back.

use super::*;

use crate::steps::listen::{Record, serve_unix};

/// A host listener on a unix socket (named or abstract), recording every connection's bytes
/// ([`crate::steps::listen`]).
struct Listener {
    stop: Arc<AtomicBool>,
    record: Record,
    handle: JoinHandle<()>,
}

impl Listener {
    fn start(listener: UnixListener) -> Result<Listener, StepError> {
        let stop = Arc::new(AtomicBool::new(false));
        let record = Record::default();
        let handle = serve_unix(listener, stop.clone(), record.clone()).map_err(|e| {
            StepError::Harness(format!("cannot make the listener non-blocking: {e}"))
        })?;
        Ok(Listener {
            stop,
            record,
            handle,
        })
    }

    /// Stops listening and returns each connection's bytes, `<connection>` appended to each: an
    /// accepted connection is an effect even when it sent nothing.
    fn finish(self) -> Vec<Vec<u8>> {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.handle.join();
        let mut records = self
            .record
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        for bytes in &mut records {
            bytes.extend_from_slice(b"<connection>");
        }
        records
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
pub(super) struct Route {
    pub(super) client: &'static str,
    pub(super) vars: Vec<(&'static str, std::ffi::OsString)>,
    pub(super) check: Check,
    pub(super) _dirs: Vec<tempfile::TempDir>,
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

pub(super) fn setup(target: IpcTarget, msg: &str) -> Result<Route, StepError> {
    let unique = format!("{}-{}", std::process::id(), crate::world::draw_hex(8));
    match target {
        IpcTarget::NamedTmp | IpcTarget::NamedRuntime => named_socket(target),
        IpcTarget::Abstract => abstract_socket(&unique),
        IpcTarget::Fifo => fifo(),
        IpcTarget::SysvMsg => sysv_queue(),
        IpcTarget::SysvShm => sysv_segment(msg),
        IpcTarget::PosixMq => posix_queue(&unique),
        IpcTarget::Keyring => keyring(&unique),
        IpcTarget::Tmux => tmux(),
    }
}

/// A named unix socket the person's tools listen on, in `/tmp` or the runtime dir.
fn named_socket(target: IpcTarget) -> Result<Route, StepError> {
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
        client: crate::steps::unix_client::NAMED,
        vars: vec![("SOCK", path.into_os_string())],
        check: Box::new(move |_| Ok(seen(listener.finish()))),
        _dirs: vec![dir],
    })
}

/// An abstract unix socket of the host.
fn abstract_socket(unique: &str) -> Result<Route, StepError> {
    let name = format!("session-{unique}");
    let addr = SocketAddr::from_abstract_name(name.as_bytes())
        .map_err(|e| StepError::Harness(format!("cannot name the abstract socket: {e}")))?;
    let l = UnixListener::bind_addr(&addr)
        .map_err(|e| StepError::Harness(format!("cannot bind the abstract socket: {e}")))?;
    let listener = Listener::start(l)?;
    Ok(Route {
        client: crate::steps::unix_client::ABSTRACT,
        vars: vec![("SOCK", name.into())],
        check: Box::new(move |_| Ok(seen(listener.finish()))),
        _dirs: Vec::new(),
    })
}

/// A FIFO a host process reads commands from.
fn fifo() -> Result<Route, StepError> {
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
        .map_err(|e| StepError::Harness(format!("cannot open the FIFO for reading: {e}")))?;
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

/// A System V message queue of the host.
#[allow(unsafe_code)]
fn sysv_queue() -> Result<Route, StepError> {
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
            // SAFETY: msqid_ds is plain integers, for which all zero bytes are valid.
            let mut ds: libc::msqid_ds = unsafe { std::mem::zeroed() };
            // SAFETY: IPC_STAT writes one msqid_ds into `ds`, valid for the call.
            if unsafe { libc::msgctl(queue.0, libc::IPC_STAT, &mut ds) } < 0 {
                return Err(StepError::Harness(format!(
                    "cannot read the message queue: {}",
                    errno()
                )));
            }
            Ok((ds.msg_qnum > 0)
                .then(|| format!("the host's message queue holds {} message(s)", ds.msg_qnum)))
        }),
        _dirs: Vec::new(),
    })
}

/// A System V shared memory segment of the host.
#[allow(unsafe_code)]
fn sysv_segment(msg: &str) -> Result<Route, StepError> {
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
            // SAFETY: shmat mapped the segment at `at`, at least `len` bytes long, and it
            // stays mapped until the shmdt below; the bytes are copied out before it.
            let bytes =
                unsafe { std::slice::from_raw_parts(at as *const u8, len.min(4096)) }.to_vec();
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

/// A POSIX message queue of the host.
#[allow(unsafe_code)]
fn posix_queue(unique: &str) -> Result<Route, StepError> {
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
            // SAFETY: mq_attr is plain integers, for which all zero bytes are valid.
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

/// A key in the caller's session keyring.
#[allow(unsafe_code)]
fn keyring(unique: &str) -> Result<Route, StepError> {
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

/// A tmux server of the person's, whose keystrokes run as the person.
fn tmux() -> Result<Route, StepError> {
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
                    return Err(StepError::harness(
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
