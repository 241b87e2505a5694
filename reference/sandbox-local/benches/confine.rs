//! Per-command overhead of confinement: confine + spawn + wait of `bash -c true` on each backend,
//! reported as ratios against baselines measured in the same run:
//!
//! - `unconfined`: `bash -c true` spawned directly;
//! - `exec-trampoline`: `/usr/bin/env bash -c true`, a minimal exec trampoline (the Landlock
//!   path's fair baseline: the launcher is one exec in front of the payload);
//! - `bare-bwrap`: bwrap with the same hardened profile spawned directly (the bwrap path's
//!   baseline: no probing, status channel or classification);
//! - `bare-bwrap-plain`: the same without the isolation flags (user and PID namespaces, new
//!   session, dropped capabilities), which shows what hardening itself costs.
//!
//! Run: `cargo build --release -p landlock-run && cargo bench -p sandbox-local --bench confine`.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use criterion::Criterion;
use sandbox::{ConfinedMode, ProviderPolicy, SandboxProvider};
use sandbox_local::launch::{self, LaunchOptions};
use sandbox_local::profile::{self, WritableSet};
use sandbox_local::{Backend, LocalConfig, LocalProvider};

/// Total time and iterations per benchmark, as criterion ran them.
static TOTALS: Mutex<BTreeMap<&'static str, (Duration, u64)>> = Mutex::new(BTreeMap::new());

fn record(name: &'static str, iters: u64, elapsed: Duration) {
    if let Ok(mut totals) = TOTALS.lock() {
        let entry = totals.entry(name).or_default();
        entry.0 += elapsed;
        entry.1 += iters;
    }
}

fn timed(c: &mut Criterion, name: &'static str, mut once: impl FnMut()) {
    c.bench_function(name, |b| {
        b.iter_custom(|iters| {
            let start = Instant::now();
            for _ in 0..iters {
                once();
            }
            let elapsed = start.elapsed();
            record(name, iters, elapsed);
            elapsed
        })
    });
}

fn spawn(program: &str, args: &[OsString]) {
    let status = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    assert!(status.is_ok_and(|s| s.success()), "{program} failed");
}

fn payload() -> Vec<OsString> {
    vec!["bash".into(), "-c".into(), "true".into()]
}

fn confined_run(c: &mut Criterion, name: &'static str, backend: Backend) -> bool {
    let provider = LocalProvider::new(LocalConfig::only(backend));
    if let Err(why) = provider.selection() {
        eprintln!("{name}: not measured: {why}");
        return false;
    }
    let workspace = std::env::temp_dir();
    let policy = ProviderPolicy::new(ConfinedMode::WorkspaceWrite, &workspace);
    let options = LaunchOptions::in_dir(&workspace);
    timed(c, name, || {
        let launch = provider.confine(&payload(), &policy).expect("confine");
        let done = launch::run(&launch, &options);
        assert_eq!(done.exit_code(), Some(0), "{:?}", done.classification);
    });
    true
}

fn main() {
    let mut c = Criterion::default()
        .sample_size(60)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
        .configure_from_args();

    timed(&mut c, "unconfined", || spawn("bash", &payload()[1..]));
    timed(&mut c, "exec-trampoline", || {
        spawn("/usr/bin/env", &payload())
    });
    let landlock = confined_run(&mut c, "landlock", Backend::Landlock);
    let bwrap = which_bwrap().is_some();
    if let Some(bwrap_path) = which_bwrap() {
        let roots = sandbox::writable_roots(&ProviderPolicy::new(
            ConfinedMode::WorkspaceWrite,
            std::env::temp_dir(),
        ))
        .expect("roots");
        let set = WritableSet::from_roots(roots, &std::env::temp_dir());
        let mut args = profile::bwrap_args(&set, sandbox::NetworkMode::Enabled, None);
        args.extend(payload());
        timed(&mut c, "bare-bwrap", || spawn(&bwrap_path, &args));
        let plain = plain_bwrap(&args);
        timed(&mut c, "bare-bwrap-plain", || spawn(&bwrap_path, &plain));
        confined_run(&mut c, "bwrap", Backend::Bwrap);
    }
    c.final_summary();
    report(landlock, bwrap);
}

/// The hardened bwrap argv without its isolation flags (`--die-with-parent` stays, as before).
fn plain_bwrap(hardened: &[OsString]) -> Vec<OsString> {
    let mut plain = Vec::with_capacity(hardened.len());
    let mut it = hardened.iter();
    while let Some(arg) = it.next() {
        match arg.to_str() {
            Some("--unshare-user" | "--disable-userns" | "--unshare-pid" | "--new-session") => {}
            Some("--cap-drop") => {
                it.next();
            }
            _ => plain.push(arg.clone()),
        }
    }
    plain
}

fn which_bwrap() -> Option<String> {
    ["/usr/bin/bwrap", "/usr/local/bin/bwrap"]
        .into_iter()
        .find(|p| std::path::Path::new(p).is_file())
        .map(str::to_owned)
}

fn report(landlock: bool, bwrap: bool) {
    let Ok(totals) = TOTALS.lock() else { return };
    let mean = |name: &str| {
        totals
            .get(name)
            .filter(|(_, n)| *n > 0)
            .map(|(t, n)| t.as_secs_f64() * 1e3 / *n as f64)
    };
    let Some(base) = mean("unconfined") else {
        return;
    };
    println!("\nper-command cost of `bash -c true` (mean over every iteration criterion ran)");
    println!("{:<18}{:>10}{:>14}", "path", "ms", "x unconfined");
    for name in [
        "unconfined",
        "exec-trampoline",
        "landlock",
        "bare-bwrap-plain",
        "bare-bwrap",
        "bwrap",
    ] {
        if let Some(ms) = mean(name) {
            println!("{name:<18}{ms:>10.3}{:>14.2}", ms / base);
        }
    }
    if landlock && let (Some(l), Some(t)) = (mean("landlock"), mean("exec-trampoline")) {
        println!("landlock / exec-trampoline = {:.2} (target <= 1.20)", l / t);
    }
    if bwrap && let (Some(w), Some(b)) = (mean("bwrap"), mean("bare-bwrap")) {
        println!("bwrap / bare-bwrap         = {:.2} (target <= 1.10)", w / b);
    }
    if bwrap && let (Some(h), Some(p)) = (mean("bare-bwrap"), mean("bare-bwrap-plain")) {
        println!(
            "hardened / plain bare bwrap = {:.2} (what isolation costs)",
            h / p
        );
    }
}
