//! The model's own semantics, pinned: each fact is a profile, a request, the verdict Seatbelt
//! gives, and where that is documented or relied on. A change to the model that breaks one of
//! these is a change of what the suite believes about macOS, and must say why.

use std::collections::BTreeMap;

use super::{Action, ModelError, Profile, Request, Vnode};

/// Codex CLI's base policy, `codex-rs/core/src/seatbelt_base_policy.sbpl` (openai/codex).
const CODEX_BASE: &str = "openai/codex codex-rs/core/src/seatbelt_base_policy.sbpl";
/// sandbox-runtime's profile generator, `src/sandbox/macos-sandbox-utils.ts`
/// (anthropic-experimental/sandbox-runtime).
const SRT: &str = "anthropic-experimental/sandbox-runtime src/sandbox/macos-sandbox-utils.ts";
/// Apple's sandbox-exec(1) manual: `-D key=value` sets a parameter `(param "key")` reads.
const MAN_SANDBOX_EXEC: &str = "sandbox-exec(1), macOS: -p profile-string, -D key=value";
/// Apple's operation table as compiled into libsandbox (listed by `sandbox-exec` errors and in
/// Blazakis, "The Apple Sandbox", Black Hat DC 2011; fG!, "Apple's Sandbox Guide v1.0", 2011):
/// `file-write-*` is one family, `file-link` an operation of its own.
const APPLE_OPS: &str = "Apple's SBPL operation table (Blazakis 2011; fG! Sandbox Guide 2011)";

struct Fact {
    profile: &'static str,
    params: &'static [(&'static str, &'static str)],
    request: fn() -> Request,
    verdict: Action,
    why: &'static str,
    source: &'static str,
}

const FACTS: &[Fact] = &[
    Fact {
        profile: "(deny default) (allow file-write* (subpath \"/w\")) (deny file-write* (subpath \"/w/.git/hooks\"))",
        params: &[],
        request: || Request::path("file-write-create", "/w/.git/hooks/pre-commit"),
        verdict: Action::Deny,
        why: "the last matching rule wins: a deny after a broader allow takes the path back",
        source: SRT,
    },
    Fact {
        profile: "(deny default) (deny file-write* (subpath \"/w/.git/hooks\")) (allow file-write* (subpath \"/w\"))",
        params: &[],
        request: || Request::path("file-write-create", "/w/.git/hooks/pre-commit"),
        verdict: Action::Allow,
        why: "the last matching rule wins: an allow after the deny reopens it (rule order matters)",
        source: SRT,
    },
    Fact {
        profile: "(deny default) (allow file-read*)",
        params: &[],
        request: || Request::op("job-creation"),
        verdict: Action::Deny,
        why: "(deny default) refuses every operation no rule names",
        source: CODEX_BASE,
    },
    Fact {
        profile: "(deny default) (allow file-write* (subpath \"/w\"))",
        params: &[],
        request: || Request::path("file-write-setugid", "/w/x"),
        verdict: Action::Allow,
        why: "file-write* covers every file-write-... operation, file-write-setugid included",
        source: APPLE_OPS,
    },
    Fact {
        profile: "(deny default) (allow file-write* (subpath \"/w\"))",
        params: &[],
        request: || Request::path("file-link", "/w/x"),
        verdict: Action::Deny,
        why: "file-link is not a file-write-... operation: file-write* does not grant hard links",
        source: APPLE_OPS,
    },
    Fact {
        profile: "(deny default) (allow file-read*)",
        params: &[],
        request: || Request::path("file-write-data", "/etc/x"),
        verdict: Action::Deny,
        why: "file-read* covers reads only",
        source: CODEX_BASE,
    },
    Fact {
        profile: "(deny default) (allow process-info* (target same-sandbox))",
        params: &[],
        request: || Request {
            same_sandbox: Some(false),
            ..Request::op("process-info-pidinfo")
        },
        verdict: Action::Deny,
        why: "process-info* covers process-info-pidinfo; (target same-sandbox) only this sandbox's processes",
        source: CODEX_BASE,
    },
    Fact {
        profile: "(deny default) (allow file-write* (subpath \"/w\"))",
        params: &[],
        request: || Request::path("file-write-data", "/w"),
        verdict: Action::Allow,
        why: "subpath matches the directory itself",
        source: SRT,
    },
    Fact {
        profile: "(deny default) (allow file-write* (subpath \"/w\"))",
        params: &[],
        request: || Request::path("file-write-data", "/wx/y"),
        verdict: Action::Deny,
        why: "subpath matches whole components only (/wx is not beneath /w)",
        source: SRT,
    },
    Fact {
        profile: "(deny default) (allow file-write* (prefix \"/w\"))",
        params: &[],
        request: || Request::path("file-write-data", "/wx/y"),
        verdict: Action::Allow,
        why: "prefix matches bytes, not components",
        source: APPLE_OPS,
    },
    Fact {
        profile: "(deny default) (allow file-write* (literal \"/w/x\"))",
        params: &[],
        request: || Request::path("file-write-data", "/w/x/y"),
        verdict: Action::Deny,
        why: "literal matches the exact path only",
        source: CODEX_BASE,
    },
    Fact {
        profile: "(deny default) (allow file-write-data (regex #\"^/dev/ttys[0-9]+\"))",
        params: &[],
        request: || Request::path("file-write-data", "/dev/TTYS003"),
        verdict: Action::Deny,
        why: "regex is case-sensitive (the profile folds case itself where it must)",
        source: CODEX_BASE,
    },
    Fact {
        profile: "(deny default) (allow file-write-data (regex #\"/ttys\"))",
        params: &[],
        request: || Request::path("file-write-data", "/dev/ttys003"),
        verdict: Action::Allow,
        why: "regex is anchored only as written (no ^: a match anywhere)",
        source: SRT,
    },
    Fact {
        profile: "(deny default) (allow file-write* (subpath (param \"ROOT\")))",
        params: &[("ROOT", "/w \"q\"")],
        request: || Request::path("file-write-data", "/w \"q\"/x"),
        verdict: Action::Allow,
        why: "(param NAME) is the -D NAME=VALUE string, taken as is (no SBPL quoting)",
        source: MAN_SANDBOX_EXEC,
    },
    Fact {
        profile: "(deny default) (allow file-write-data (require-all (literal \"/dev/null\") (vnode-type CHARACTER-DEVICE)))",
        params: &[],
        request: || Request {
            vnode: Some(Vnode::Regular),
            ..Request::path("file-write-data", "/dev/null")
        },
        verdict: Action::Deny,
        why: "require-all needs every filter (a regular file at /dev/null is not the device)",
        source: CODEX_BASE,
    },
    Fact {
        profile: "(deny default) (allow file-write-data (literal \"/a\") (literal \"/b\"))",
        params: &[],
        request: || Request::path("file-write-data", "/b"),
        verdict: Action::Allow,
        why: "several filters in one rule: any of them",
        source: CODEX_BASE,
    },
    Fact {
        profile: "(deny default) (allow mach-lookup (global-name \"com.apple.system.opendirectoryd.libinfo\"))",
        params: &[],
        request: || Request {
            global_name: Some("com.apple.pasteboard.1".into()),
            ..Request::op("mach-lookup")
        },
        verdict: Action::Deny,
        why: "mach-lookup by global-name: only the services named",
        source: CODEX_BASE,
    },
    Fact {
        profile: "(deny default) (allow network*)",
        params: &[],
        request: || Request::path("network-outbound", "/private/tmp/tmux-501/default"),
        verdict: Action::Allow,
        why: "network* covers network-outbound, unix sockets by path included",
        source: SRT,
    },
];

fn params(list: &[(&str, &str)]) -> BTreeMap<String, Vec<u8>> {
    list.iter()
        .map(|(k, v)| ((*k).to_owned(), v.as_bytes().to_vec()))
        .collect()
}

#[test]
fn every_fact_holds_in_the_model() {
    for (i, fact) in FACTS.iter().enumerate() {
        let profile = Profile::compile(fact.profile, &params(fact.params))
            .unwrap_or_else(|e| panic!("fact {i} ({}): {e}", fact.why));
        let request = (fact.request)();
        assert_eq!(
            profile.decide(&request),
            fact.verdict,
            "fact {i}: {} ({}) for {request:?}",
            fact.why,
            fact.source
        );
    }
}

#[test]
fn the_model_refuses_what_it_cannot_judge() {
    let none = BTreeMap::new();
    for (text, want) in [
        ("(deny default) (allow file-writ*)", "operation file-writ*"),
        (
            "(deny default) (allow file-read* (glob \"/x\"))",
            "filter glob",
        ),
        ("(define x 1)", "form"),
        (
            "(deny default) (allow network-outbound (remote ip \"localhost:80\"))",
            "remote",
        ),
    ] {
        let err = Profile::compile(text, &none).expect_err(text);
        assert!(err.to_string().contains(want), "{text}: {err}");
    }
    let unbound = Profile::compile("(allow file-read* (subpath (param \"X\")))", &none);
    assert!(matches!(unbound, Err(ModelError::Unbound(name)) if name == "X"));
}
