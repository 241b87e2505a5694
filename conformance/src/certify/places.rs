//! The run-level check of the host's shared places: as root on Linux, the whole run (every
//! backend's adapter, runner and payload, and the harness's own processes) sees the host's
//! `/tmp`, `/dev/shm` and `/var/tmp` through overlays of its own
//! ([`crate::leftovers::RUN_PLACES`]), so whatever is in
//! them once every case is over is what the run made and left, whatever else ran on the host
//! meanwhile: a staging directory a call no case looked at left behind. Each entry fails the
//! run. `/run` it watches instead ([`crate::leftovers::watched`]): what appeared or changed
//! there during the run that others could use fails it too, and so does a kernel setting that
//! names a program the kernel runs as root ([`crate::leftovers::settings`]), reported apart
//! (`changed_host_settings`). Both looks are taken from the harness's own namespace, so they
//! count even when the private places could not be made. As a user (no mount namespace) the
//! run cannot look at the shared places and says so. Whoever runs it, the host's settings and
//! the directories above the run's worlds ([`crate::leftovers::above`]) are read when it starts
//! and when it is over: a changed setting, or a directory whose owner, mode or ACL changed,
//! fails it too.

use super::Report;

/// What the run-level check of the shared places found.
pub enum RunPlaces {
    /// The run saw the places privately.
    Checked {
        /// What it left there, and what it left or changed in the watched places, each named
        /// as the host would name it.
        left: Vec<crate::leftovers::Leftover>,
        /// Processes still in the run's mount namespace at its end (killed then).
        stayed: Vec<String>,
        /// The kernel settings it changed.
        settings: Vec<crate::leftovers::settings::SettingChange>,
    },
    /// As root, the private places could not be made: the run went on without them. The
    /// watched places and the kernel settings, looked at from outside the run, were still
    /// checked.
    Failed {
        /// Why the private places could not be made.
        why: String,
        /// What it left or changed in the watched places.
        watched: Vec<crate::leftovers::Leftover>,
        /// The kernel settings it changed.
        settings: Vec<crate::leftovers::settings::SettingChange>,
    },
    /// The shared places not checked on this host, and why; the directories above the run's
    /// worlds were.
    NotPlanned {
        /// Why the shared places could not be looked at.
        why: String,
        /// The directories above the worlds the run changed.
        above: Vec<crate::leftovers::Leftover>,
        /// The host settings it changed (a user's runner through a set-id helper may).
        settings: Vec<crate::leftovers::settings::SettingChange>,
    },
}

/// The `not_planned` entry of a run that could not look at the shared places.
pub const NOT_PLANNED: &str = "run: the host's shared places";

/// Runs `body` (everything of a run that starts processes: its backends and its cases) with the
/// host's shared places private to it where this host allows, and says what it left there.
pub fn in_run_places<T: Send>(body: impl FnOnce() -> T + Send) -> (T, RunPlaces) {
    // The directories above the worlds, whoever runs it: a user's runner may change its own.
    let above = crate::leftovers::above::Above::now();
    let settings = crate::leftovers::settings::Settings::now();
    if !(cfg!(target_os = "linux") && nix::unistd::geteuid().is_root()) {
        let result = body();
        return (
            result,
            RunPlaces::NotPlanned {
                above: crate::leftovers::above::Above::now().changed_since(&above),
                settings: crate::leftovers::settings::Settings::now().changed_since(&settings),
                why: format!(
                    "what the whole run left in {} (and what others could use in {}) is checked \
                     as root on Linux only (it needs a mount namespace of the run's own)",
                    crate::leftovers::RUN_PLACES.join(", "),
                    crate::leftovers::WATCHED.join(", ")
                ),
            },
        );
    }
    // What the run cannot make private it watches from here, the harness's own namespace (what
    // the run mounts in its namespace hides nothing from this look): once now, once it is over.
    let watched = crate::leftovers::watched::Look::now();
    // The body runs once: on a thread of its own inside the private places (the thread stays
    // in the run's namespace, and this one never enters it), or, when they could not be made
    // before it ran, here.
    let once = std::sync::Mutex::new(Some(body));
    let out = std::sync::Mutex::new(None);
    let run = || {
        let body = once.lock().ok().and_then(|mut b| b.take());
        if let Some(body) = body {
            let result = body();
            if let Ok(mut out) = out.lock() {
                *out = Some(result);
            }
        }
    };
    let found = std::thread::scope(|scope| {
        scope
            .spawn(|| crate::leftovers::with_private_places(crate::leftovers::Scope::Run, run))
            .join()
    });
    let private = match found {
        Ok(private) => private,
        Err(panic) => std::panic::resume_unwind(panic),
    };
    let result = out.into_inner().ok().flatten();
    let body = once.into_inner().ok().flatten();
    let result = match (result, body) {
        (Some(result), _) => result,
        (None, Some(body)) => body(),
        // `run` keeps what the body returns as soon as it returns; a panic never gets here.
        (None, None) => unreachable!("the run's body ran and returned nothing"),
    };
    // The second looks, once the body ran wherever it ran: what the watch and the settings
    // found counts even when the private places could not be made.
    let mut watched = crate::leftovers::watched::Look::now().left_since(&watched);
    watched.extend(crate::leftovers::above::Above::now().changed_since(&above));
    let settings = crate::leftovers::settings::Settings::now().changed_since(&settings);
    let found = match private {
        Ok(private) => {
            let mut left = private.left;
            left.append(&mut watched);
            left.sort_by(|a, b| a.path.cmp(&b.path));
            RunPlaces::Checked {
                left,
                stayed: private.stayed,
                settings,
            }
        }
        Err(e) => RunPlaces::Failed {
            why: e.to_string(),
            watched,
            settings,
        },
    };
    (result, found)
}

impl RunPlaces {
    /// Puts what was found into `report` (entries left and processes still running fail it; a
    /// check that could not be made as root is a problem of the run) and its verdict again.
    /// What lies in a state directory one of the run's backends declared is not the run's
    /// leftover ([`crate::leftovers::excuse_state`]), nor is anything in the harness's and the
    /// reference backends' own cache ([`crate::suite::own_state`]).
    pub fn apply(self, report: &mut Report) {
        let (left, settings) = match self {
            RunPlaces::Checked {
                left,
                stayed,
                settings,
            } => {
                report.left_behind.splice(0..0, stayed);
                (left, settings)
            }
            RunPlaces::Failed {
                why,
                watched,
                settings,
            } => {
                report.suite_problems.push(format!(
                    "the run could not see the host's shared places privately, so what it left \
                     in /tmp, /var/tmp and /dev/shm is unchecked: {why}"
                ));
                (watched, settings)
            }
            RunPlaces::NotPlanned {
                why,
                above,
                settings,
            } => {
                report.not_planned.push((NOT_PLANNED.to_owned(), why));
                (above, settings)
            }
        };
        let state: Vec<std::path::PathBuf> = report
            .backends
            .iter()
            .filter_map(|b| b.declared.as_ref())
            .flat_map(|d| d.state.iter().map(|s| s.path.clone()))
            .collect();
        // The harness's own cache is its business: it also tidies what concurrent runs of this
        // user left there (a dead run's temp areas), which the overlay shows as host entries
        // removed.
        let own = crate::suite::own_state();
        let left: Vec<crate::leftovers::Leftover> = left
            .into_iter()
            .filter(|e| !own.iter().any(|dir| e.path.starts_with(dir)))
            .collect();
        report.left_in_shared_places = crate::leftovers::excuse_state(left, &state)
            .iter()
            .map(ToString::to_string)
            .collect();
        report.changed_host_settings = settings.iter().map(ToString::to_string).collect();
        report.verdict = report.verdict();
    }
}
