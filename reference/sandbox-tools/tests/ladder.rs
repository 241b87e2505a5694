//! The escalation ladder's order under combined faults: when several things are wrong with an
//! escalated call, which refusal the model gets is a fixed rule (the first failing rung), and no
//! rung that refuses asks anyone or runs anything.

use sandbox::SandboxMode;
use sandbox_policy::{ApprovalPolicy, Event, PolicyService, Session};
use sandbox_tools::approval::{Decision, ScriptedApprover};
use sandbox_tools::escalation::{Ask, Asker, EscalationFields, approve};
use sandbox_tools::tool::Tool;

/// One combination of faults.
struct Faults {
    /// The session's mode (the call's effective mode).
    mode: SandboxMode,
    /// The mode asked for.
    asked: SandboxMode,
    approval_service: bool,
    agent: bool,
    never: bool,
    /// The same subject was rejected earlier in the session.
    rejected_before: bool,
}

fn ladder(f: &Faults) -> (&'static str, usize) {
    let dir = tempfile::tempdir().expect("tempdir");
    let policy = PolicyService::new(SandboxMode::ReadOnly, dir.path()).expect("policy");
    let session = Session::new("s", dir.path());
    session.set_sandbox_mode(f.mode).expect("mode");
    if f.never {
        session
            .set_approval_policy(ApprovalPolicy::Never)
            .expect("never");
    }
    if f.rejected_before {
        for event in [
            Event::ApprovalAsked {
                call_id: "earlier".into(),
                tool: "bash".into(),
                mode: SandboxMode::DangerFullAccess,
                reason: "r".into(),
                subject: Some("printf x > f".into()),
            },
            Event::ApprovalDecided {
                call_id: "earlier".into(),
                outcome: "rejected".into(),
            },
        ] {
            session.append(event).expect("append");
        }
    }
    let approver = ScriptedApprover::new([Decision::AllowedOnce]);
    let asker = Asker {
        policy: &policy,
        session: Some(&session),
        approval: f.approval_service.then_some(&approver as _),
        agent: f.agent.then_some("agent"),
        call_id: "c",
        tool: Tool::Bash,
        subject: "printf x > f",
    };
    let ask = Ask {
        mode: f.asked,
        justification: "needed".into(),
    };
    let code = match approve(&ask, &asker) {
        Ok(_) => "GRANTED",
        Err(r) => r.code,
    };
    (code, approver.asked().len())
}

#[test]
fn the_first_failing_rung_decides_and_nobody_is_asked() {
    use SandboxMode::*;
    let all_bad = Faults {
        mode: WorkspaceWrite,
        asked: WorkspaceWrite,
        approval_service: false,
        agent: false,
        never: true,
        rejected_before: true,
    };
    // Each row fixes one more rung than the row before; the code is the next rung's.
    let rows: [(Faults, &str); 6] = [
        (Faults { ..all_bad }, "ESCALATION_NOT_WIDER"),
        (
            Faults {
                asked: DangerFullAccess,
                ..all_bad
            },
            "ESCALATION_NO_APPROVAL_SERVICE",
        ),
        (
            Faults {
                asked: DangerFullAccess,
                approval_service: true,
                ..all_bad
            },
            "ESCALATION_NO_AGENT",
        ),
        (
            Faults {
                asked: DangerFullAccess,
                approval_service: true,
                agent: true,
                ..all_bad
            },
            "ESCALATION_ALREADY_REJECTED",
        ),
        (
            Faults {
                asked: DangerFullAccess,
                approval_service: true,
                agent: true,
                rejected_before: false,
                ..all_bad
            },
            "ESCALATION_POLICY_NEVER",
        ),
        (
            Faults {
                asked: DangerFullAccess,
                approval_service: true,
                agent: true,
                rejected_before: false,
                never: false,
                ..all_bad
            },
            "GRANTED",
        ),
    ];
    for (i, (faults, expected)) in rows.iter().enumerate() {
        let (code, asked) = ladder(faults);
        assert_eq!(code, *expected, "row {i}");
        assert_eq!(asked, usize::from(*expected == "GRANTED"), "row {i}: asked");
    }
}

#[test]
fn malformed_fields_are_refused_before_anything_else_in_a_fixed_order() {
    let fields = |p: Option<&str>, j: Option<&str>| {
        EscalationFields::new(p.map(str::to_owned), j.map(str::to_owned))
    };
    let code = |f: EscalationFields, advertised: bool| match f.validate(advertised) {
        Ok(Some(_)) => "ASK",
        Ok(None) => "NONE",
        Err(r) => r.code,
    };
    // Pairing beats advertising beats the vocabulary beats the justification.
    assert_eq!(
        code(fields(Some("nope"), None), false),
        "ESCALATION_BAD_PAIRING"
    );
    assert_eq!(
        code(fields(Some("nope"), Some(" ")), false),
        "ESCALATION_NOT_ADVERTISED"
    );
    assert_eq!(
        code(fields(Some("nope"), Some(" ")), true),
        "ESCALATION_UNKNOWN_MODE"
    );
    assert_eq!(
        code(fields(Some("read-only"), Some("j")), true),
        "ESCALATION_UNKNOWN_MODE"
    );
    assert_eq!(
        code(fields(Some("workspace-write"), Some(" ")), true),
        "ESCALATION_EMPTY_JUSTIFICATION"
    );
    assert_eq!(
        code(fields(Some("workspace-write"), Some("j")), true),
        "ASK"
    );
    assert_eq!(code(fields(None, None), false), "NONE");
}
