//! The signals that stop a run: the first winds it down and cleans up, a second ends it at once.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use conformance::certify;

/// Turns the first SIGINT, SIGTERM or SIGHUP into `stop` (the run winds down and cleans up);
/// a second one removes the worlds done so far and exits at once. They are caught by handlers
/// (`signal-hook`'s self-pipe), not by blocking them and waiting: a blocked mask is inherited by
/// every process certify starts (the standard library does not reset it), and an adapter, an
/// agent or a runner started with SIGTERM blocked cannot be stopped by it. The mask the
/// supervisor started this process with (it blocks them to wait for them) is emptied first,
/// before any other thread starts.
pub(crate) fn stop_on_signals(stop: Arc<AtomicBool>) {
    use nix::sys::signal::SigSet;
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let mut signals = match signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP]) {
        Ok(signals) => signals,
        Err(e) => {
            eprintln!("certify: cannot catch signals ({e}): Ctrl-C stops the run uncleaned");
            return;
        }
    };
    if let Err(e) = SigSet::empty().thread_set_mask() {
        eprintln!("certify: cannot empty its signal mask ({e}): what it starts inherits it");
    }
    std::thread::spawn(move || {
        for number in signals.forever() {
            let signal = nix::sys::signal::Signal::try_from(number)
                .map_or_else(|_| format!("signal {number}"), |s| s.to_string());
            if stop.swap(true, Ordering::SeqCst) {
                conformance::world::sweep_so_far();
                eprintln!("certify: {signal} again: stopped at once");
                std::process::exit(i32::from(certify::exit::STOPPED));
            }
            eprintln!(
                "certify: {signal}: starting no more cases; the ones under way end and the run's \
                 worlds are removed (again to stop at once)"
            );
        }
    });
}
