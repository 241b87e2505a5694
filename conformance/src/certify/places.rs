//! The run-level check of the host's shared places: as root on Linux, the whole run (every
//! backend's adapter, runner and payload, and the harness's own processes) sees the host's
//! `/tmp`, `/dev/shm` and `/var/tmp` through overlays of its own
//! ([`crate::leftovers::RUN_PLACES`]), so whatever is in them once every case is over is what
//! the run made and left, whatever else ran on the host meanwhile: a staging directory a call no
//! case looked at left behind. Each entry fails the run. Whoever runs it, the places as the host
//! has them (`/run`, and `/tmp`, `/dev/shm` and `/var/tmp` outside the overlays) are watched
//! from the harness's own namespace ([`crate::leftovers::watched`]): what appeared or changed
//! there during the run that others could use fails it too: as a user (no mount namespace, so
//! the run's own entries cannot be told from what the rest of the host makes meanwhile) that is
//! all that can be judged there, and as root it is what a runner wrote past the overlays. The
//! host's settings that name a program the host runs ([`crate::leftovers::settings`], reported
//! apart as `changed_host_settings`) and the directories above the run's worlds
//! ([`crate::leftovers::above`]) are read when it starts and when it is over: a changed setting,
//! or a directory whose owner, mode or ACL changed, fails it too.

use super::Report;
use crate::leftovers::Leftover;
use crate::leftovers::settings::SettingChange;

/// What the run-level check of the shared places found.
pub struct RunPlaces {
    /// How the run saw the shared places privately, and what it left there.
    pub private: Private,
    /// What it left or changed that others could use in the shared places as the host has
    /// them, and the directories above its worlds it changed, each named as the host names it.
    pub outside: Vec<Leftover>,
    /// The host settings it changed (a user's runner through a set-id helper may too).
    pub settings: Vec<SettingChange>,
}

/// How a run saw `/tmp`, `/dev/shm` and `/var/tmp` privately.
pub enum Private {
    /// Through overlays of its own: all it left there is known.
    Checked {
        /// What it left there.
        left: Vec<Leftover>,
        /// Processes still in the run's mount namespace at its end (killed then).
        stayed: Vec<String>,
    },
    /// As root, the overlays could not be made: the run went on without them, and what it left
    /// there that only its owner can use is unchecked.
    Failed {
        /// Why the overlays could not be made.
        why: String,
    },
    /// Not on this host (they need a mount namespace of the run's own), and why.
    NotPlanned {
        /// Why the shared places could not be seen privately.
        why: String,
    },
}

/// The `not_planned` entry of a run that could not see the shared places privately.
pub const NOT_PLANNED: &str = "run: the host's shared places";

/// Runs `body` (everything of a run that starts processes: its backends and its cases) with the
/// host's shared places private to it where this host allows, and says what it left there.
pub fn in_run_places<T: Send>(body: impl FnOnce() -> T + Send) -> (T, RunPlaces) {
    // The looks from outside the run, whoever runs it, once now and once it is over: the
    // harness's own namespace (what the run mounts in its namespace hides nothing from them).
    let above = crate::leftovers::above::Above::now();
    let settings = crate::leftovers::settings::Settings::now();
    let watched = crate::leftovers::watched::Look::now();
    let root = cfg!(target_os = "linux") && nix::unistd::geteuid().is_root();
    let (result, private) = if root {
        privately(body)
    } else {
        (body(), Private::NotPlanned { why: String::new() })
    };
    // Its worlds gone: with no other run of the harness by this user beside it, what this user
    // made in the temporary places is the run's, judged whole.
    let alone = crate::world::alone();
    let after = crate::leftovers::watched::Look::now();
    let after = if alone {
        after.judging_this_users_entries()
    } else {
        after
    };
    let private = match private {
        Private::NotPlanned { .. } => Private::NotPlanned {
            why: format!(
                "what the whole run left in {} that only its owner can use is checked as root on \
                 Linux only (it needs a mount namespace of the run's own); what others could use \
                 there and in {} is checked as the host has them{}",
                crate::leftovers::RUN_PLACES.join(", "),
                crate::leftovers::WATCHED.join(", "),
                if alone {
                    ""
                } else {
                    ", though not inside what this user made there: another run of the harness \
                     by this user was under way at its end, and its worlds cannot be told from \
                     this run's"
                }
            ),
        },
        other => other,
    };
    let mut outside = after.left_since(&watched);
    outside.extend(crate::leftovers::above::Above::now().changed_since(&above));
    let settings = crate::leftovers::settings::Settings::now().changed_since(&settings);
    let found = RunPlaces {
        private,
        outside,
        settings,
    };
    (result, found)
}

/// Runs `body` once: on a thread of its own inside the private places (the thread stays in the
/// run's namespace, and this one never enters it), or, when they could not be made before it
/// ran, here.
fn privately<T: Send>(body: impl FnOnce() -> T + Send) -> (T, Private) {
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
    let private = match private {
        Ok(private) => Private::Checked {
            left: private.left,
            stayed: private.stayed,
        },
        Err(e) => Private::Failed { why: e.to_string() },
    };
    (result, private)
}

impl RunPlaces {
    /// Puts what was found into `report` (entries left and processes still running fail it; a
    /// check that could not be made as root is a problem of the run) and its verdict again.
    /// What lies in a state directory one of the run's backends declared is not the run's
    /// leftover ([`crate::leftovers::excuse_state`]), nor is anything in the harness's and the
    /// reference backends' own cache ([`crate::suite::own_state`]).
    pub fn apply(self, report: &mut Report) {
        let mut left = self.outside;
        match self.private {
            Private::Checked {
                left: mut private,
                stayed,
            } => {
                report.left_behind.splice(0..0, stayed);
                left.append(&mut private);
            }
            Private::Failed { why } => {
                report.suite_problems.push(format!(
                    "the run could not see the host's shared places privately, so what it left \
                     in /tmp, /var/tmp and /dev/shm that only its owner can use is unchecked: \
                     {why}"
                ));
            }
            Private::NotPlanned { why } => {
                report.not_planned.push((NOT_PLANNED.to_owned(), why));
            }
        }
        left.sort_by(|a, b| a.path.cmp(&b.path));
        left.dedup();
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
        report.changed_host_settings = self.settings.iter().map(ToString::to_string).collect();
        report.verdict = report.verdict();
    }
}
