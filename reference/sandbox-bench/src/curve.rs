//! The concurrency curve: commands per second through the library at 1, 4, 16 and 64
//! concurrent commands, per backend, against the same payload unconfined.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use sandbox_local::Backend;

use crate::Args;
use crate::host::{Scratch, sibling};
use crate::rows::{library, unconfined_launch};
use crate::runner::{Runner, Spawn, payload};
use crate::stats::{shuffle, stats, verdict};

/// Concurrency levels of the curve.
const CONCURRENCY: [usize; 4] = [1, 4, 16, 64];
/// Targets: confined throughput at 16 concurrent commands at least this share of unconfined.
const THROUGHPUT_TARGET: f64 = 0.8;

/// Runs `total` commands through `once` with `workers` threads; commands per second.
fn throughput(
    workers: usize,
    total: usize,
    once: &(dyn Fn() -> Result<(), String> + Sync),
) -> Result<f64, String> {
    let next = AtomicUsize::new(0);
    let start = Instant::now();
    let failures: Vec<String> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                scope.spawn(|| {
                    while next.fetch_add(1, Ordering::Relaxed) < total {
                        once()?;
                    }
                    Ok::<(), String>(())
                })
            })
            .collect();
        handles
            .into_iter()
            .filter_map(|h| match h.join() {
                Ok(Ok(())) => None,
                Ok(Err(e)) => Some(e),
                Err(_) => Some("a worker panicked".to_owned()),
            })
            .collect()
    });
    match failures.into_iter().next() {
        Some(e) => Err(e),
        None => Ok(total as f64 / start.elapsed().as_secs_f64()),
    }
}

/// The concurrency curve: commands per second through the library per backend and unconfined,
/// interleaved per round. Returns the misses of the 16-concurrent target.
pub(crate) fn curve(args: &Args, s: &Scratch, seed: &mut u64) -> Vec<String> {
    let launcher = args
        .launcher
        .clone()
        .map_or_else(|| sibling("landlock-run", "landlock-run"), Ok);
    // The confined rows are compared with the same payload through the same spawn path
    // unconfined (`library none`); a bare `std::process::Command` spawn is shown beside it.
    let mut kinds: Vec<(&str, Result<Runner, String>)> = vec![
        ("spawn", Ok(Runner::Process(Spawn::new(payload(), &s.ws)))),
        ("library none", Ok(unconfined_launch(&s.ws))),
        (
            "library landlock",
            launcher
                .as_ref()
                .map_err(Clone::clone)
                .and_then(|l| library(Backend::Landlock, l, &s.ws)),
        ),
        (
            "library bwrap",
            launcher
                .as_ref()
                .map_err(Clone::clone)
                .and_then(|l| library(Backend::Bwrap, l, &s.ws)),
        ),
    ];
    let rounds = if args.quick { 1 } else { args.curve_rounds };
    let per_worker = if args.quick { 1 } else { args.per_worker };
    // results[kind][level] = per-round throughputs
    let mut results = vec![vec![Vec::new(); CONCURRENCY.len()]; kinds.len()];
    for _ in 0..rounds {
        let mut order: Vec<(usize, usize)> = (0..kinds.len())
            .flat_map(|k| (0..CONCURRENCY.len()).map(move |l| (k, l)))
            .collect();
        shuffle(&mut order, seed);
        for (k, l) in order {
            let Ok(runner) = &kinds[k].1 else { continue };
            let workers = CONCURRENCY[l];
            let total = if args.quick {
                workers
            } else {
                (workers * per_worker).max(16)
            };
            let once = |r: &Runner| r.once().map(|_| ());
            match throughput(workers, total, &|| once(runner)) {
                Ok(t) => results[k][l].push(t),
                Err(e) => kinds[k].1 = Err(format!("FAILED: {e}")),
            }
        }
    }
    println!();
    println!(
        "| concurrent commands | spawn cmd/s | library none cmd/s | library landlock cmd/s (x none) | library bwrap cmd/s (x none) |"
    );
    println!("|---:|---:|---:|---:|---:|");
    let mut misses = Vec::new();
    for (l, level) in CONCURRENCY.iter().enumerate() {
        let (spawn, spawn_sd, _) = stats(&results[0][l]);
        let (base, base_sd, _) = stats(&results[1][l]);
        let mut line =
            format!("| {level} | {spawn:.0} ± {spawn_sd:.0} | {base:.0} ± {base_sd:.0} |");
        for k in 2..kinds.len() {
            if let Err(why) = &kinds[k].1
                && results[k][l].is_empty()
            {
                line.push_str(&format!(" skipped: {why} |"));
                continue;
            }
            let (t, sd, _) = stats(&results[k][l]);
            let ratio = t / base;
            let mut cell = format!(" {t:.0} ± {sd:.0} ({ratio:.2})");
            if *level == 16 {
                let v = verdict(ratio, THROUGHPUT_TARGET, false);
                if v.contains("MISSED") {
                    misses.push(format!("{} at 16 concurrent: {v}", kinds[k].0));
                }
                cell.push_str(&format!(" {v}"));
            }
            line.push_str(&cell);
            line.push_str(" |");
        }
        println!("{line}");
    }
    misses
}
