//! Table tests of the policy home, written to kill the mutants `ci/mutants.sh` finds: the folds
//! (last knob event wins, a rejection permits no re-ask), the narration the model reads, the preset
//! table and resolve(). Each row asserts what a user or the model would notice.

use std::path::Path;

use rstest::rstest;
use sandbox::SandboxMode::{self, DangerFullAccess, ReadOnly, WorkspaceWrite};
use sandbox_policy::ApprovalPolicy::{self, Ask, Never};
use sandbox_policy::presets::{CUSTOM, Knobs, Preset, PresetError, PresetTable};
use sandbox_policy::prompt::{
    NEVER_STATEMENT, Source, approval_section, last_told, pending_notice,
};
use sandbox_policy::{
    Event, PolicyService, Session, effective_approval_policy, effective_sandbox_mode,
    rejected_escalation,
};

fn mode(mode: SandboxMode) -> Event {
    Event::SandboxMode { mode }
}

fn policy(policy: ApprovalPolicy) -> Event {
    Event::ApprovalPolicy { policy }
}

fn header(policy: ApprovalPolicy) -> Event {
    Event::RequestHeader {
        prompt: format!(
            "You are a coding agent.\n{}",
            approval_section(policy).unwrap_or("")
        ),
    }
}

fn asked(call_id: &str, tool: &str, subject: Option<&str>, mode: SandboxMode) -> Event {
    Event::ApprovalAsked {
        call_id: call_id.into(),
        tool: tool.into(),
        mode,
        reason: "needs to write".into(),
        subject: subject.map(str::to_owned),
    }
}

fn decided(call_id: &str, outcome: &str) -> Event {
    Event::ApprovalDecided {
        call_id: call_id.into(),
        outcome: outcome.into(),
    }
}

// The folds: the last knob event of its own kind wins; other events change nothing.

#[rstest]
#[case::no_events(vec![], None, None)]
#[case::unrelated_events(vec![Event::TurnStarted, header(Ask), Event::TurnEnded], None, None)]
#[case::one_switch_each(vec![mode(WorkspaceWrite), policy(Never)], Some(WorkspaceWrite), Some(Never))]
#[case::last_switch_wins(
    vec![mode(DangerFullAccess), policy(Never), mode(ReadOnly), Event::TurnEnded, policy(Ask)],
    Some(ReadOnly),
    Some(Ask)
)]
#[case::a_mode_switch_is_not_a_policy_switch(vec![mode(DangerFullAccess)], Some(DangerFullAccess), None)]
#[case::a_policy_switch_is_not_a_mode_switch(vec![policy(Never)], None, Some(Never))]
fn knob_folds(
    #[case] events: Vec<Event>,
    #[case] sandbox_mode: Option<SandboxMode>,
    #[case] approval: Option<ApprovalPolicy>,
) {
    assert_eq!(effective_sandbox_mode(&events), sandbox_mode);
    assert_eq!(effective_approval_policy(&events), approval);
}

#[rstest]
#[case::rejected(
    vec![asked("c1", "bash", Some("touch /etc/x"), DangerFullAccess), decided("c1", "rejected")],
    Some(DangerFullAccess)
)]
#[case::granted_may_be_asked_again(
    vec![asked("c1", "bash", Some("touch /etc/x"), WorkspaceWrite), decided("c1", "granted")],
    None
)]
#[case::cancelled_may_be_asked_again(
    vec![asked("c1", "bash", Some("touch /etc/x"), WorkspaceWrite), decided("c1", "cancelled")],
    None
)]
#[case::not_yet_decided(vec![asked("c1", "bash", Some("touch /etc/x"), WorkspaceWrite)], None)]
#[case::another_calls_rejection(
    vec![asked("c1", "bash", Some("touch /etc/x"), WorkspaceWrite), decided("c2", "rejected")],
    None
)]
#[case::another_tool(
    vec![asked("c1", "write", Some("touch /etc/x"), WorkspaceWrite), decided("c1", "rejected")],
    None
)]
#[case::another_subject(
    vec![asked("c1", "bash", Some("touch /etc/y"), WorkspaceWrite), decided("c1", "rejected")],
    None
)]
#[case::an_old_log_without_subject(
    vec![asked("c1", "bash", None, WorkspaceWrite), decided("c1", "rejected")],
    None
)]
#[case::a_rejection_logged_before_the_question_is_not_its_answer(
    vec![decided("c1", "rejected"), asked("c1", "bash", Some("touch /etc/x"), WorkspaceWrite)],
    None
)]
#[case::the_latest_rejected_question_names_the_mode(
    vec![
        asked("c1", "bash", Some("touch /etc/x"), WorkspaceWrite),
        decided("c1", "rejected"),
        asked("c2", "bash", Some("touch /etc/x"), DangerFullAccess),
        decided("c2", "rejected"),
        asked("c3", "bash", Some("touch /etc/x"), WorkspaceWrite),
        decided("c3", "granted"),
    ],
    Some(DangerFullAccess)
)]
fn a_rejection_permits_no_re_ask(
    #[case] events: Vec<Event>,
    #[case] rejected: Option<SandboxMode>,
) {
    assert_eq!(
        rejected_escalation(&events, "bash", "touch /etc/x"),
        rejected
    );
}

// Narration: only `never` is stated; a change is narrated once and attributed.

#[test]
fn only_never_is_stated_in_the_prompt() {
    assert_eq!(approval_section(Never), Some(NEVER_STATEMENT));
    assert_eq!(approval_section(Ask), None);
}

#[rstest]
#[case::no_header(vec![mode(ReadOnly), policy(Never)], None)]
#[case::told_ask(vec![header(Ask)], Some((0, Ask)))]
#[case::told_never(vec![Event::TurnStarted, header(Never), policy(Ask)], Some((1, Never)))]
#[case::the_last_header_counts(
    vec![header(Never), Event::TurnEnded, header(Ask), Event::TurnEnded],
    Some((2, Ask))
)]
fn what_the_model_was_last_told(
    #[case] events: Vec<Event>,
    #[case] told: Option<(usize, ApprovalPolicy)>,
) {
    assert_eq!(last_told(&events), told);
}

const USER_NEVER: &str = "The user changed the approval policy to \"never\": requests for wider sandbox permissions are now refused automatically and nobody is asked.";
const USER_ASK: &str = "The user changed the approval policy to \"ask\": a request for wider sandbox permissions after a denial is now put to the user again.";
const OPERATOR_NEVER: &str = "The operator's configuration changed the approval policy to \"never\": requests for wider sandbox permissions are now refused automatically and nobody is asked.";
const OPERATOR_ASK: &str = "The operator's configuration changed the approval policy to \"ask\": a request for wider sandbox permissions after a denial is now put to the user again.";

#[rstest]
#[case::nothing_changed(vec![header(Ask)], Ask, None)]
#[case::the_user_switched_to_never(
    vec![header(Ask), policy(Never)],
    Ask,
    Some((Never, Source::User, USER_NEVER))
)]
#[case::the_user_switched_to_ask(
    vec![header(Never), Event::TurnEnded, policy(Ask)],
    Never,
    Some((Ask, Source::User, USER_ASK))
)]
#[case::the_operator_changed_the_default_to_never(
    vec![header(Ask), Event::TurnEnded],
    Never,
    Some((Never, Source::Operator, OPERATOR_NEVER))
)]
#[case::the_operator_changed_the_default_to_ask(
    vec![Event::TurnStarted, header(Never)],
    Ask,
    Some((Ask, Source::Operator, OPERATOR_ASK))
)]
#[case::a_switch_before_the_last_header_was_already_told(
    vec![header(Ask), policy(Never), header(Never)],
    Ask,
    None
)]
#[case::a_switch_the_last_header_did_not_reflect_is_the_operators(
    vec![policy(Never), header(Ask)],
    Ask,
    Some((Never, Source::Operator, OPERATOR_NEVER))
)]
fn the_notice_owed_before_the_next_step(
    #[case] events: Vec<Event>,
    #[case] default: ApprovalPolicy,
    #[case] notice: Option<(ApprovalPolicy, Source, &str)>,
) {
    let got = pending_notice(&events, default);
    assert_eq!(
        got.as_ref().map(|n| (n.policy, n.source, n.text.as_str())),
        notice
    );
}

// Presets.

fn preset(id: &str, mode: SandboxMode, approval: ApprovalPolicy) -> Preset {
    Preset {
        id: id.into(),
        name: id.to_uppercase(),
        mode,
        approval,
        network: None,
    }
}

#[test]
fn the_standard_table_lists_its_presets_in_order() {
    let table = PresetTable::standard(ReadOnly, Ask).expect("table");
    let listed: Vec<_> = table
        .presets()
        .iter()
        .map(|p| (p.id.as_str(), p.name.as_str(), p.mode, p.approval))
        .collect();
    assert_eq!(
        listed,
        vec![
            ("read-only", "Read only", ReadOnly, Ask),
            ("workspace-write", "Workspace", WorkspaceWrite, Ask),
            ("full-access", "Full access", DangerFullAccess, Never),
        ]
    );
}

#[rstest]
#[case(ReadOnly, Ask, "read-only")]
#[case(WorkspaceWrite, Ask, "workspace-write")]
#[case(DangerFullAccess, Never, "full-access")]
#[case(ReadOnly, Never, CUSTOM)]
#[case(WorkspaceWrite, Never, CUSTOM)]
#[case(DangerFullAccess, Ask, CUSTOM)]
fn the_current_preset_needs_both_knobs_to_match(
    #[case] mode: SandboxMode,
    #[case] approval: ApprovalPolicy,
    #[case] id: &str,
) {
    let table = PresetTable::standard(ReadOnly, Ask).expect("table");
    assert_eq!(table.current(Knobs::new(mode, approval)), id);
}

#[rstest]
#[case::reserved(vec![preset(CUSTOM, ReadOnly, Ask)], Err(PresetError::ReservedId))]
#[case::reserved_after_a_good_one(
    vec![preset("a", ReadOnly, Ask), preset(CUSTOM, WorkspaceWrite, Ask)],
    Err(PresetError::ReservedId)
)]
#[case::duplicate_id(
    vec![preset("a", ReadOnly, Ask), preset("a", WorkspaceWrite, Ask)],
    Err(PresetError::DuplicateId("a".into()))
)]
#[case::duplicate_knobs(
    vec![preset("a", ReadOnly, Ask), preset("b", ReadOnly, Ask)],
    Err(PresetError::DuplicateKnobs("a".into(), "b".into()))
)]
#[case::same_mode_other_policy_is_fine(
    vec![preset("a", ReadOnly, Ask), preset("b", ReadOnly, Never), preset("c", WorkspaceWrite, Ask)],
    Ok(3)
)]
#[case::defaults_outside_the_table_load(
    vec![preset("a", ReadOnly, Never), preset("b", WorkspaceWrite, Ask)],
    Ok(2)
)]
fn a_preset_table_is_validated_at_load(
    #[case] presets: Vec<Preset>,
    #[case] expected: Result<usize, PresetError>,
) {
    let got = PresetTable::new(presets, ReadOnly, Ask).map(|t| t.presets().len());
    assert_eq!(got, expected);
}

#[rstest]
#[case::already_selected("read-only", ReadOnly, Ask, Ok(vec![]))]
#[case::mode_only("workspace-write", ReadOnly, Ask, Ok(vec![mode(WorkspaceWrite)]))]
#[case::policy_only("read-only", ReadOnly, Never, Ok(vec![policy(Ask)]))]
#[case::both_mode_first("full-access", ReadOnly, Ask, Ok(vec![mode(DangerFullAccess), policy(Never)]))]
#[case::back_from_custom("read-only", WorkspaceWrite, Never, Ok(vec![mode(ReadOnly), policy(Ask)]))]
#[case::custom(CUSTOM, ReadOnly, Ask, Err(PresetError::CustomSelected))]
#[case::unknown("turbo", ReadOnly, Ask, Err(PresetError::Unknown("turbo".into())))]
fn switching_writes_only_the_knobs_that_change(
    #[case] id: &str,
    #[case] current_mode: SandboxMode,
    #[case] current_approval: ApprovalPolicy,
    #[case] expected: Result<Vec<Event>, PresetError>,
) {
    let table = PresetTable::standard(ReadOnly, Ask).expect("table");
    assert_eq!(
        table.switch(id, Knobs::new(current_mode, current_approval)),
        expected
    );
}

#[test]
fn selecting_a_preset_goes_through_the_session_log() {
    let dir = tempfile::tempdir().expect("tempdir");
    let service = PolicyService::new(ReadOnly, dir.path()).expect("service");
    let table = PresetTable::standard(ReadOnly, Ask).expect("table");
    let session = Session::new("s", dir.path());
    let written = table
        .select("full-access", &session, &service)
        .expect("select");
    assert_eq!(written, vec![mode(DangerFullAccess), policy(Never)]);
    assert_eq!(session.events(), written);
    assert_eq!(service.effective_mode(Some(&session)), DangerFullAccess);
    assert_eq!(service.effective_approval(Some(&session)), Never);
    assert_eq!(
        table.current(Knobs::new(DangerFullAccess, Never)),
        "full-access"
    );
    // Selecting it again writes nothing; custom and unknown ids are refused with their words.
    assert_eq!(table.select("full-access", &session, &service), Ok(vec![]));
    assert_eq!(
        table.select(CUSTOM, &session, &service),
        Err(PresetError::CustomSelected.to_string())
    );
    assert_eq!(session.events().len(), 2);
}

// The service: defaults, a session's knobs, resolve().

#[test]
fn the_service_reports_its_defaults_and_a_sessions_overrides() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = std::fs::canonicalize(dir.path()).expect("canonical");
    let service = PolicyService::new(WorkspaceWrite, &root.join("."))
        .expect("service")
        .with_default_approval(Never);
    assert_eq!(service.default_mode(), WorkspaceWrite);
    assert_eq!(service.default_approval(), Never);
    assert_eq!(service.workspace_root(), root);
    assert_eq!(service.effective_mode(None), WorkspaceWrite);
    assert_eq!(service.effective_approval(None), Never);
    let session = Session::new("s1", &root);
    assert_eq!(session.id(), "s1");
    assert_eq!(session.cwd(), root);
    assert_eq!(service.effective_mode(Some(&session)), WorkspaceWrite);
    assert_eq!(service.effective_approval(Some(&session)), Never);
    session.set_sandbox_mode(ReadOnly).expect("append");
    session.set_approval_policy(Ask).expect("append");
    assert_eq!(session.events(), vec![mode(ReadOnly), policy(Ask)]);
    assert_eq!(session.with_events(<[Event]>::len), 2);
    assert_eq!(service.effective_mode(Some(&session)), ReadOnly);
    assert_eq!(service.effective_approval(Some(&session)), Ask);
}

#[test]
fn resolve_carries_the_pinned_workspace_and_the_temp_dir() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = std::fs::canonicalize(dir.path()).expect("canonical");
    let temp = root.join("tmp");
    std::fs::create_dir(&temp).expect("mkdir");
    let service = PolicyService::new(ReadOnly, &root)
        .expect("service")
        .with_temp_dir(Some(temp.clone()));
    let resolved = service.resolve(None, None).expect("resolve");
    // A call without a session or grant gets the same stamp.
    let default = service.default_stamp().expect("default stamp");
    assert_eq!(default, resolved);
    assert_eq!(default.policy(), &*resolved);
    assert_eq!(default.into_policy(), resolved.policy().clone());
    assert_eq!(resolved.mode, ReadOnly);
    assert_eq!(resolved.roots.workspace_root, root);
    assert_eq!(resolved.roots.temp_dir.as_deref(), Some(temp.as_path()));
    assert_eq!(
        resolved
            .roots
            .workspace_pin
            .as_ref()
            .map(|p| p.path.as_path()),
        Some(root.as_path())
    );
    assert_eq!(
        resolved
            .roots
            .temp_dir_pin
            .as_ref()
            .map(|p| p.path.as_path()),
        Some(temp.as_path())
    );
    // A session's cwd is pinned by the session.
    let session = Session::new("s", &temp);
    let resolved = service.resolve(Some(&session), None).expect("resolve");
    assert_eq!(resolved.roots.workspace_root, temp);
    assert_eq!(resolved.roots.workspace_pin.as_ref(), session.pin());
    assert!(session.pin().is_some());
}

#[rstest]
#[case::relative_even_when_it_exists(".", false)]
#[case::missing("/nonexistent/tmp", false)]
#[case::existing("", true)]
fn only_an_existing_absolute_temp_dir_is_pinned(#[case] temp: &str, #[case] pinned: bool) {
    let dir = tempfile::tempdir().expect("tempdir");
    let temp = if temp.is_empty() {
        dir.path().to_path_buf()
    } else {
        temp.into()
    };
    let service = PolicyService::new(ReadOnly, dir.path())
        .expect("service")
        .with_temp_dir(Some(temp));
    let resolved = service.resolve(None, None).expect("resolve");
    assert_eq!(resolved.roots.temp_dir_pin.is_some(), pinned);
}

#[test]
fn a_session_opened_in_a_missing_directory_pins_nothing() {
    let session = Session::new("s", Path::new("/nonexistent/session/cwd"));
    assert_eq!(session.pin(), None);
}

#[test]
fn a_durable_session_keeps_the_workspace_its_header_pinned() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = std::fs::canonicalize(dir.path()).expect("canonical");
    let (created, elsewhere) = (root.join("created"), root.join("elsewhere"));
    std::fs::create_dir(&created).expect("mkdir");
    std::fs::create_dir(&elsewhere).expect("mkdir");
    let log = root.join("s.jsonl");
    let pin = sandbox::PinnedDir::pin(&created).expect("pin");
    {
        let (s, _) = Session::open("s", &created, &log).expect("open");
        assert_eq!(s.header(), None, "no header recorded yet");
        s.append(Event::TurnStarted).expect("append");
        s.append(Event::SessionHeader {
            cwd: created.clone(),
            pin: pin.clone(),
        })
        .expect("append");
        assert_eq!(s.header(), Some((created.clone(), pin.clone())));
    }
    // Reopened under another cwd, the session is still where its header says.
    let (s, _) = Session::open("s", &elsewhere, &log).expect("reopen");
    assert_eq!(s.cwd(), created);
    assert_eq!(s.pin(), Some(&pin));
    assert_eq!(s.header(), Some((created.clone(), pin)));
    // A log without a header takes the cwd it is opened with.
    let (plain, _) = Session::open("p", &elsewhere, &root.join("p.jsonl")).expect("open");
    assert_eq!(plain.cwd(), elsewhere);
    assert_eq!(
        plain.pin().map(|p| p.path.as_path()),
        Some(elsewhere.as_path())
    );
}
