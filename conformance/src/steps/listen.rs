//! The harness's listeners outside the sandbox (the `net` step's and the `host-ipc` step's): a
//! thread that accepts until told to stop, records what each connection sends, and then takes
//! what is still queued, so a connection made before the stop is never lost to a thread that was
//! not scheduled in time (a loaded host).

use std::io::{ErrorKind, Read};
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What one listener saw: the bytes of each connection it accepted (or each datagram).
pub(super) type Record = Arc<Mutex<Vec<Vec<u8>>>>;

/// How long a listener reads one accepted connection.
pub(super) const READ_TIMEOUT: Duration = Duration::from_millis(500);

/// The most bytes kept of one connection.
const READ_MOST: usize = 64 * 1024;

/// The most queued connections (or datagrams) one listener takes once told to stop: a payload's
/// leftover flooding it cannot keep the step from ending.
pub(super) const DRAIN_MOST: usize = 64;

/// Accepts on a non-blocking listener until `stop`, then what is still queued, reading each
/// connection (bounded in time and size) into `record`; `prepare` readies an accepted stream
/// for blocking reads with [`READ_TIMEOUT`].
pub(super) fn serve<S: Read + Send + 'static>(
    mut accept: impl FnMut() -> std::io::Result<S> + Send + 'static,
    prepare: impl Fn(&S) -> std::io::Result<()> + Send + 'static,
    stop: Arc<AtomicBool>,
    record: Record,
) -> JoinHandle<()> {
    std::thread::spawn(move || {
        let take = |mut stream: S| {
            let mut bytes = Vec::new();
            if prepare(&stream).is_ok() {
                let mut buf = [0u8; 4096];
                let deadline = Instant::now() + READ_TIMEOUT;
                while Instant::now() < deadline && bytes.len() < READ_MOST {
                    match stream.read(&mut buf) {
                        Ok(0) => break,
                        Ok(n) => bytes.extend_from_slice(&buf[..n]),
                        Err(e) if e.kind() == ErrorKind::Interrupted => {}
                        Err(_) => break,
                    }
                }
            }
            record.lock().unwrap_or_else(|p| p.into_inner()).push(bytes);
        };
        while !stop.load(Ordering::Relaxed) {
            match accept() {
                Ok(stream) => take(stream),
                Err(_) => std::thread::sleep(Duration::from_millis(5)),
            }
        }
        for _ in 0..DRAIN_MOST {
            match accept() {
                Ok(stream) => take(stream),
                Err(_) => break,
            }
        }
    })
}

/// [`serve`] on a unix socket listener (named or abstract), made non-blocking here.
pub(super) fn serve_unix(
    listener: UnixListener,
    stop: Arc<AtomicBool>,
    record: Record,
) -> std::io::Result<JoinHandle<()>> {
    listener.set_nonblocking(true)?;
    Ok(serve(
        move || listener.accept().map(|(s, _)| s),
        |s: &UnixStream| {
            s.set_nonblocking(false)?;
            s.set_read_timeout(Some(READ_TIMEOUT))
        },
        stop,
        record,
    ))
}
