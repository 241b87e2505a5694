//! The signals that stop a run: the first winds it down and cleans up, a second ends it at once.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use conformance::certify;

/// Turns the first SIGINT, SIGTERM or SIGHUP into `stop` (the run winds down and cleans up);
/// a second one removes the worlds done so far and exits at once. The signals are blocked here,
/// before any thread starts, so every thread inherits the mask and one waits for them (a child
/// process starts with an empty mask: the standard library resets it).
pub(crate) fn stop_on_signals(stop: Arc<AtomicBool>) {
    use nix::sys::signal::{SigSet, Signal};
    let mut set = SigSet::empty();
    for signal in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        set.add(signal);
    }
    if let Err(e) = set.thread_block() {
        eprintln!("certify: cannot wait for signals ({e}): Ctrl-C stops the run uncleaned");
        return;
    }
    std::thread::spawn(move || {
        while let Ok(signal) = set.wait() {
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
