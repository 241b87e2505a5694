//! The `fence-race` and `world` steps, over the case's tool composition.
//!
//! `fence-race` calls the write tool again and again while a thread exchanges a directory in the
//! workspace (or the symlink the workspace is spelled through) with a symlink to the outside tree
//! (`renameat2(RENAME_EXCHANGE)`, atomic), so the
//! fence's check and the write see different trees. Nothing may appear outside, not even a
//! temporary file. Both the number of calls and the swapping thread are bounded.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;

use super::tool::{Rig, rig};
use crate::backends::Backend;
use crate::model::{FenceRaceStep, ToolSetup, WorldStep};

/// The most write calls one step may make.
const MAX_ITERATIONS: u32 = 2000;

/// The longest the swapping thread runs, whatever happens to the writes.
const SWAP_DEADLINE: Duration = Duration::from_secs(5);

/// The name the symlink waits under while the directory is in place (and vice versa).
fn swap_partner(swap: &Path) -> PathBuf {
    let mut name = swap.as_os_str().to_os_string();
    name.push(".swap");
    PathBuf::from(name)
}

pub(super) fn fence_race(
    backend: &Backend,
    setup: Option<&ToolSetup>,
    step: &FenceRaceStep,
    slot: &mut Option<Rig>,
) -> Result<(), String> {
    if !(1..=MAX_ITERATIONS).contains(&step.iterations) {
        return Err(format!(
            "iterations must be 1..={MAX_ITERATIONS}, not {}",
            step.iterations
        ));
    }
    let rig = rig(backend, setup, slot)?;
    let outside = rig.world().outside.clone();
    let swap = PathBuf::from(rig.expanded(&step.swap));
    let partner = swap_partner(&swap);
    let target = rig.expanded(&step.path);
    std::fs::create_dir_all(&swap).map_err(|e| format!("cannot make {}: {e}", swap.display()))?;
    std::os::unix::fs::symlink(&outside, &partner)
        .map_err(|e| format!("cannot make {}: {e}", partner.display()))?;
    let outside_before = entries(&outside)?;

    let stop = Arc::new(AtomicBool::new(false));
    let swaps = Arc::new(AtomicU64::new(0));
    let swapper = {
        let (stop, swaps, swap, partner) = (
            Arc::clone(&stop),
            Arc::clone(&swaps),
            swap.clone(),
            partner.clone(),
        );
        std::thread::spawn(move || -> Result<(), String> {
            let started = Instant::now();
            while !stop.load(Ordering::Relaxed) && started.elapsed() < SWAP_DEADLINE {
                nix::fcntl::renameat2(
                    nix::fcntl::AT_FDCWD,
                    swap.as_path(),
                    nix::fcntl::AT_FDCWD,
                    partner.as_path(),
                    nix::fcntl::RenameFlags::RENAME_EXCHANGE,
                )
                .map_err(|e| format!("renameat2 exchange failed: {e}"))?;
                swaps.fetch_add(1, Ordering::Relaxed);
            }
            Ok(())
        })
    };
    let mut codes: BTreeMap<String, u32> = BTreeMap::new();
    let started = Instant::now();
    for i in 0..step.iterations {
        let out = rig.call(
            "write",
            &json!({ "path": target, "content": format!("race {i}") }),
        );
        *codes.entry(out.code).or_default() += 1;
    }
    let took = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    let swapped = swapper
        .join()
        .map_err(|_| "the swapping thread panicked".to_owned())?;
    // Put things back where the tool expects them, whichever way the last exchange left them.
    if std::fs::read_link(&swap).is_ok_and(|target| target == outside) {
        let _ = nix::fcntl::renameat2(
            nix::fcntl::AT_FDCWD,
            swap.as_path(),
            nix::fcntl::AT_FDCWD,
            partner.as_path(),
            nix::fcntl::RenameFlags::RENAME_EXCHANGE,
        );
    }
    let summary = format!(
        "{} writes in {} ms against {} swaps, codes {codes:?}",
        step.iterations,
        took.as_millis(),
        swaps.load(Ordering::Relaxed)
    );
    swapped.map_err(|e| format!("{e}; {summary}"))?;
    let outside_after = entries(&outside)?;
    let new: Vec<&String> = outside_after.difference(&outside_before).collect();
    if !new.is_empty() {
        return Err(format!(
            "the race carried writes outside: new entries {new:?} in {}; {summary}",
            outside.display()
        ));
    }
    if !step.expect.codes.is_empty()
        && let Some(code) = codes.keys().find(|c| !step.expect.codes.contains(c))
    {
        return Err(format!(
            "a write returned {code}, expected one of {:?}; {summary}",
            step.expect.codes
        ));
    }
    Ok(())
}

/// The names in a directory.
fn entries(dir: &Path) -> Result<std::collections::BTreeSet<String>, String> {
    Ok(std::fs::read_dir(dir)
        .map_err(|e| format!("cannot list {}: {e}", dir.display()))?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect())
}

pub(super) fn world(
    backend: &Backend,
    setup: Option<&ToolSetup>,
    step: &WorldStep,
    slot: &mut Option<Rig>,
) -> Result<(), String> {
    let rig = rig(backend, setup, slot)?;
    let may_change: Vec<PathBuf> = step
        .may_change
        .iter()
        .map(|p| PathBuf::from(rig.expanded(p)))
        .collect();
    let diff = rig.diff(&may_change);
    if diff.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "the world changed outside what the case allows:\n  {}",
            diff.join("\n  ")
        ))
    }
}
