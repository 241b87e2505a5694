//! Capped output capture: the kept head of each stream, the count of what was dropped, the scan
//! of stderr's dropped part for a denial line, and the reads that feed them.

use std::io::Read;
use std::os::fd::{AsFd, OwnedFd};
use std::time::Duration;

use nix::fcntl::OFlag;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use sandbox::ProcessOutcome;

use super::EVIDENCE_MAX;

/// `outcome` with `line` appended to its stderr as a line of its own (what the classifier reads
/// when the denial line lies in the dropped part).
pub(super) fn with_evidence(outcome: &ProcessOutcome, line: &[u8]) -> ProcessOutcome {
    let joined = |stderr: &Vec<u8>| {
        let mut all = Vec::with_capacity(stderr.len() + line.len() + 1);
        all.extend_from_slice(stderr);
        all.push(b'\n');
        all.extend_from_slice(line);
        all
    };
    match outcome {
        ProcessOutcome::Exited { code, stderr } => ProcessOutcome::Exited {
            code: *code,
            stderr: joined(stderr),
        },
        ProcessOutcome::Signaled { signal, stderr } => ProcessOutcome::Signaled {
            signal: *signal,
            stderr: joined(stderr),
        },
        ProcessOutcome::SpawnFailed(f) => ProcessOutcome::SpawnFailed(f.clone()),
    }
}

/// What is kept of one stream: its head up to the cap, and how many bytes were dropped after it.
pub(super) struct Capture {
    pub(super) kept: Vec<u8>,
    cap: usize,
    pub(super) dropped: u64,
    scan: Option<DenialScan>,
}

impl Capture {
    pub(super) fn new(cap: usize, scan: Option<DenialScan>) -> Capture {
        Capture {
            kept: Vec::new(),
            cap,
            dropped: 0,
            scan,
        }
    }

    /// Keeps what fits under the cap; counts (and scans) the rest.
    fn push(&mut self, bytes: &[u8]) {
        let room = self.cap.saturating_sub(self.kept.len()).min(bytes.len());
        let (keep, rest) = bytes.split_at(room);
        self.kept.extend_from_slice(keep);
        if rest.is_empty() {
            return;
        }
        if let Some(scan) = &mut self.scan {
            if self.dropped == 0 {
                // The first dropped bytes continue the last kept line.
                let start = self
                    .kept
                    .iter()
                    .rposition(|b| *b == b'\n')
                    .map_or(0, |i| i + 1);
                scan.seed(&self.kept[start..]);
            }
            scan.feed(rest);
        }
        self.dropped += rest.len() as u64;
    }

    /// The denial line found in the dropped part, if any.
    pub(super) fn evidence(&self) -> Option<Vec<u8>> {
        self.scan.as_ref().and_then(|s| s.found.clone())
    }
}

/// Looks for the first line of the dropped part of stderr that carries a denial signature
/// (ASCII case-insensitive, as the classifier folds the ASCII signatures it is given), keeping
/// only the current line's last bytes: bounded memory, whatever the payload prints. Signatures
/// hold no newline, so a match in the stream always lies within one line.
pub(super) struct DenialScan {
    /// The signatures, ASCII-lowercased; empty ones never match.
    signatures: Vec<Vec<u8>>,
    /// The longest signature.
    reach: usize,
    /// The current line's last bytes before the next chunk (at most `EVIDENCE_MAX`).
    tail: Vec<u8>,
    /// Scratch: `tail` followed by the chunk being scanned.
    window: Vec<u8>,
    /// The evidence line once a signature was seen.
    found: Option<Vec<u8>>,
    /// The evidence line is complete (its newline came, or it is `EVIDENCE_MAX` long).
    complete: bool,
}

impl DenialScan {
    pub(super) fn new(signatures: &[String]) -> DenialScan {
        let signatures: Vec<Vec<u8>> = signatures
            .iter()
            .filter(|s| !s.is_empty())
            .map(|s| s.as_bytes().to_ascii_lowercase())
            .collect();
        DenialScan {
            reach: signatures.iter().map(Vec::len).max().unwrap_or(0),
            signatures,
            tail: Vec::new(),
            window: Vec::new(),
            found: None,
            complete: false,
        }
    }

    /// The start of the current line (kept bytes the dropped ones continue).
    fn seed(&mut self, line: &[u8]) {
        let from = line.len().saturating_sub(EVIDENCE_MAX);
        self.tail = line[from..].to_vec();
    }

    fn feed(&mut self, bytes: &[u8]) {
        if self.signatures.is_empty() || self.complete {
            return;
        }
        if let Some(found) = &mut self.found {
            // The rest of the evidence line, up to its newline or the bound.
            let end = bytes.iter().position(|b| *b == b'\n');
            let piece = &bytes[..end.unwrap_or(bytes.len())];
            let room = EVIDENCE_MAX.saturating_sub(found.len()).min(piece.len());
            found.extend_from_slice(&piece[..room]);
            self.complete = end.is_some() || found.len() >= EVIDENCE_MAX;
            return;
        }
        let mut window = std::mem::take(&mut self.window);
        window.clear();
        window.extend_from_slice(&self.tail);
        window.extend_from_slice(bytes);
        // Only a match that ends in the new bytes is new.
        let from = self.tail.len().saturating_sub(self.reach.saturating_sub(1));
        let hit = self
            .signatures
            .iter()
            .filter_map(|sig| find_ignoring_ascii_case(&window[from..], sig))
            .min()
            .map(|at| at + from);
        if let Some(at) = hit {
            let line_start = window[..at]
                .iter()
                .rposition(|b| *b == b'\n')
                .map_or(0, |i| i + 1);
            let start = line_start.max(at.saturating_sub(EVIDENCE_MAX / 2));
            let newline = window[at..]
                .iter()
                .position(|b| *b == b'\n')
                .map(|i| at + i);
            let end = newline.unwrap_or(window.len()).min(start + EVIDENCE_MAX);
            let evidence = window[start..end].to_vec();
            self.complete = newline.is_some() || evidence.len() >= EVIDENCE_MAX;
            self.found = Some(evidence);
            self.tail = Vec::new();
        } else {
            // Keep the current line's last bytes for a match that straddles the next chunk.
            let line_start = window
                .iter()
                .rposition(|b| *b == b'\n')
                .map_or(0, |i| i + 1);
            let keep_from = line_start.max(window.len().saturating_sub(EVIDENCE_MAX));
            self.tail.clear();
            self.tail.extend_from_slice(&window[keep_from..]);
        }
        self.window = window;
    }
}

/// The first position of `needle` (ASCII-lowercased) in `hay`, ignoring ASCII case; no
/// allocation (it runs once per line of a flood).
fn find_ignoring_ascii_case(hay: &[u8], needle: &[u8]) -> Option<usize> {
    let (&first, rest) = needle.split_first()?;
    let last_start = hay.len().checked_sub(needle.len())?;
    let mut at = 0;
    while at <= last_start {
        let offset = hay[at..=last_start]
            .iter()
            .position(|b| b.to_ascii_lowercase() == first)?;
        at += offset;
        if hay[at + 1..at + needle.len()].eq_ignore_ascii_case(rest) {
            return Some(at);
        }
        at += 1;
    }
    None
}

/// The most bytes read from one pipe per [`read_ready`], so a payload that writes without pause
/// cannot keep the supervisor from its deadline and cancel checks.
const READ_BUDGET: usize = 1024 * 1024;

/// Waits up to `slice` for output, then reads what is ready (at most [`READ_BUDGET`] a pipe); a
/// pipe at EOF is closed.
pub(super) fn read_ready(pipes: &mut [(Option<OwnedFd>, Capture); 2], slice: Duration) {
    let timeout = PollTimeout::try_from(slice).unwrap_or(PollTimeout::MAX);
    let ready: Vec<bool> = {
        let mut fds: Vec<PollFd> = pipes
            .iter()
            .filter_map(|(fd, _)| fd.as_ref())
            .map(|fd| PollFd::new(fd.as_fd(), PollFlags::POLLIN))
            .collect();
        let _ = poll(&mut fds, timeout);
        fds.iter()
            .map(|f| f.revents().is_some_and(|r| !r.is_empty()))
            .collect()
    };
    let mut ready = ready.into_iter();
    for (fd, buf) in pipes.iter_mut() {
        let Some(open) = fd.as_ref() else { continue };
        if !ready.next().unwrap_or(false) {
            continue;
        }
        let mut chunk = [0u8; 65536];
        let mut budget = READ_BUDGET;
        while budget > 0 {
            match nix::unistd::read(open, &mut chunk) {
                Ok(0) => {
                    *fd = None;
                    break;
                }
                Ok(n) => {
                    buf.push(&chunk[..n]);
                    budget = budget.saturating_sub(n);
                }
                Err(nix::errno::Errno::EINTR) => {}
                Err(nix::errno::Errno::EAGAIN) => break,
                Err(_) => {
                    *fd = None;
                    break;
                }
            }
        }
    }
}

/// Reads what is in the status pipe without waiting for writers that may still hold it.
pub(super) fn drain(fd: OwnedFd) -> Vec<u8> {
    let _ = nix::fcntl::fcntl(&fd, nix::fcntl::FcntlArg::F_SETFL(OFlag::O_NONBLOCK));
    let mut file = std::fs::File::from(fd);
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match file.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
        }
    }
    out
}
