//! What a backend's own answers said about each enforcement class over a whole run, so the
//! report states the weakest enforcement the backend reported, not what it claimed at the start.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::sync::{Arc, Mutex};

use sandbox::{
    ClassEnforcements, ClassReport, ConfinedArgv, EnforcementClass, ProviderPolicy,
    SandboxEnforcement, SandboxProvider, SandboxUnavailable,
};

/// How many distinct ungoverned names a class keeps in the report (launches name world paths,
/// one per case).
const SHOWN_GAPS: usize = 8;

/// The weakest report seen per class, over every launch whose policy restricted that class.
#[derive(Debug, Default)]
pub struct ClassesSeen(Mutex<BTreeMap<EnforcementClass, ClassReport>>);

impl ClassesSeen {
    /// Records what `launch` reports for each class its request restricted: `files` always,
    /// `network` when the policy restricts it, `protected` and `host-ipc` when the launch reports
    /// the class (its policy named protected paths; host IPC is closed in every confined mode, but
    /// a backend of an older protocol does not report it). A class the request left open says
    /// nothing about the backend.
    pub fn record(&self, launch: &ConfinedArgv, policy: &ProviderPolicy) {
        let mut restricted = EnforcementClass::restricted_by(policy.network);
        for class in [EnforcementClass::Protected, EnforcementClass::HostIpc] {
            if launch.classes.iter().any(|(c, _)| c == class) {
                restricted.push(class);
            }
        }
        let Ok(mut seen) = self.0.lock() else { return };
        for class in restricted {
            let report = launch.class_report(class);
            seen.entry(class)
                .and_modify(|weakest| *weakest = weaker(weakest, &report))
                .or_insert(report);
        }
    }

    /// The weakest report per class seen so far, every gap named (what a `gap:` expectation is
    /// judged against); empty when the backend was never asked.
    pub fn weakest_in_full(&self) -> ClassEnforcements {
        let Ok(seen) = self.0.lock() else {
            return ClassEnforcements::default();
        };
        seen.iter()
            .fold(ClassEnforcements::default(), |all, (c, r)| {
                all.with(*c, r.clone())
            })
    }

    /// The weakest report per class seen so far, as a report shows it (at most a few gaps named,
    /// then how many more); empty when the backend was never asked.
    pub fn weakest(&self) -> ClassEnforcements {
        let Ok(seen) = self.0.lock() else {
            return ClassEnforcements::default();
        };
        seen.iter()
            .fold(ClassEnforcements::default(), |all, (c, r)| {
                let mut r = r.clone();
                if r.ungoverned.len() > SHOWN_GAPS {
                    let more = r.ungoverned.len() - SHOWN_GAPS;
                    r.ungoverned.truncate(SHOWN_GAPS);
                    r.ungoverned.push(format!("... and {more} more"));
                }
                all.with(*c, r)
            })
    }

    /// The weakest enforcement of any class asked for, when any was.
    pub fn overall(&self) -> Option<SandboxEnforcement> {
        let seen = self.0.lock().ok()?;
        seen.values()
            .map(|r| r.enforcement)
            .min()
            .map(sandbox::ClassEnforcement::overall)
    }
}

/// The weaker of two reports of one class; equally strong ones keep every ungoverned name of
/// both.
fn weaker(a: &ClassReport, b: &ClassReport) -> ClassReport {
    match a.enforcement.cmp(&b.enforcement) {
        std::cmp::Ordering::Less => a.clone(),
        std::cmp::Ordering::Greater => b.clone(),
        std::cmp::Ordering::Equal => {
            let mut merged = a.clone();
            for gap in &b.ungoverned {
                if !merged.ungoverned.contains(gap) {
                    merged.ungoverned.push(gap.clone());
                }
            }
            merged
        }
    }
}

/// A provider that passes every request through and records what each answer reports.
pub struct Observed {
    inner: Arc<dyn SandboxProvider>,
    seen: Arc<ClassesSeen>,
}

impl Observed {
    /// `inner`, recording into `seen`.
    pub fn new(inner: Arc<dyn SandboxProvider>, seen: Arc<ClassesSeen>) -> Observed {
        Observed { inner, seen }
    }
}

impl SandboxProvider for Observed {
    fn confine(
        &self,
        argv: &[OsString],
        policy: &ProviderPolicy,
    ) -> Result<ConfinedArgv, SandboxUnavailable> {
        let answer = self.inner.confine(argv, policy);
        if let Ok(launch) = &answer {
            self.seen.record(launch, policy);
        }
        answer
    }

    fn call_guard(&self, policy: &ProviderPolicy) -> Option<Box<dyn sandbox::CallGuard>> {
        self.inner.call_guard(policy)
    }

    fn temp_area_at_tmp(&self, policy: &ProviderPolicy) -> bool {
        self.inner.temp_area_at_tmp(policy)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sandbox::{ClassEnforcement, ConfinedMode, NetworkMode};

    fn launch(classes: ClassEnforcements) -> ConfinedArgv {
        ConfinedArgv {
            argv: vec!["true".into()],
            backend: "x".into(),
            enforcement: SandboxEnforcement::Full,
            classes,
            denial_signatures: Vec::new(),
            runner_failure_rules: Vec::new(),
            status_channel: None,
            fds: Default::default(),
        }
    }

    #[test]
    fn the_weakest_answer_of_a_restricted_class_wins_and_open_classes_say_nothing() {
        let seen = ClassesSeen::default();
        let mut restricted = ProviderPolicy::new(ConfinedMode::WorkspaceWrite, "/w");
        restricted.network = NetworkMode::Restricted;
        let mut open = restricted.clone();
        open.network = NetworkMode::Enabled;
        let full = ClassEnforcements::default()
            .with(EnforcementClass::Files, ClassReport::full())
            .with(EnforcementClass::Network, ClassReport::full());
        seen.record(&launch(full), &restricted);
        // Network enabled: its `not-governed` is the policy's choice, not a gap.
        seen.record(
            &launch(
                ClassEnforcements::default()
                    .with(
                        EnforcementClass::Files,
                        ClassReport::with_gaps(["metadata"]),
                    )
                    .with(EnforcementClass::Network, ClassReport::not_governed()),
            ),
            &open,
        );
        let weakest = seen.weakest();
        assert_eq!(
            weakest.get(EnforcementClass::Files).enforcement,
            ClassEnforcement::Partial
        );
        assert_eq!(
            weakest.get(EnforcementClass::Files).ungoverned,
            ["metadata"]
        );
        assert_eq!(
            weakest.get(EnforcementClass::Network).enforcement,
            ClassEnforcement::Full
        );
        assert_eq!(seen.overall(), Some(SandboxEnforcement::Partial));
    }

    #[test]
    fn host_ipc_is_recorded_whenever_a_launch_reports_it() {
        let seen = ClassesSeen::default();
        let policy = ProviderPolicy::new(ConfinedMode::ReadOnly, "/w");
        seen.record(
            &launch(
                ClassEnforcements::default()
                    .with(EnforcementClass::Files, ClassReport::full())
                    .with(EnforcementClass::HostIpc, ClassReport::full()),
            ),
            &policy,
        );
        seen.record(
            &launch(
                ClassEnforcements::default()
                    .with(EnforcementClass::Files, ClassReport::full())
                    .with(EnforcementClass::HostIpc, ClassReport::with_gaps(["fifos"])),
            ),
            &policy,
        );
        let ipc = seen.weakest().get(EnforcementClass::HostIpc);
        assert_eq!(ipc.enforcement, ClassEnforcement::Partial);
        assert_eq!(ipc.ungoverned, ["fifos"]);
    }

    #[test]
    fn a_launch_without_classes_states_files_through_its_overall_word() {
        let seen = ClassesSeen::default();
        let mut partial = launch(ClassEnforcements::default());
        partial.enforcement = SandboxEnforcement::Partial;
        seen.record(&partial, &ProviderPolicy::new(ConfinedMode::ReadOnly, "/w"));
        assert_eq!(seen.overall(), Some(SandboxEnforcement::Partial));
        assert!(
            seen.weakest()
                .iter()
                .all(|(c, _)| c == EnforcementClass::Files)
        );
    }
}
