//! The published protocol schemas are exactly what the Rust types say. After a deliberate protocol
//! change regenerate them with `CONFORMANCE_WRITE_SCHEMA=1 cargo test -p conformance --test
//! protocol_schema` and review the diff (CI never writes them).

use std::path::Path;

use conformance::protocol::{Request, Response, schemas};

#[test]
fn published_schemas_match_the_types() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("protocol");
    let write = std::env::var_os("CONFORMANCE_WRITE_SCHEMA").is_some();
    for (file, schema) in schemas() {
        let text = serde_json::to_string_pretty(&schema).expect("schema") + "\n";
        let path = dir.join(file);
        if write {
            std::fs::write(&path, &text).expect("write schema");
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == text,
            "{} is stale; regenerate it with CONFORMANCE_WRITE_SCHEMA=1 and review the diff",
            path.display()
        );
    }
}

#[test]
fn the_documented_transcript_parses_in_both_directions() {
    let requests = [
        r#"{"type":"hello","protocol":1,"suite":"0.1.0"}"#,
        r#"{"type":"hello","protocol":2,"supported":[1,2],"suite":"0.1.0"}"#,
        r#"{"type":"confine","id":1,"argv":["bash","-c","true"],"policy":{"mode":"workspace-write","workspace_root":"/work/p","temp_dir":"/tmp"}}"#,
        r#"{"type":"confine","id":1,"argv":["bash","-c","true"],"cwd":"/work/p/src","policy":{"mode":"workspace-write","workspace_root":"/work/p","temp_dir":"/tmp"}}"#,
        r#"{"type":"shutdown"}"#,
    ];
    for r in requests {
        serde_json::from_str::<Request>(r).unwrap_or_else(|e| panic!("{r}: {e}"));
    }
    let responses = [
        r#"{"type":"hello","protocol":1,"implementation":{"name":"my-backend","version":"1.0"},"capabilities":["confine","status-channel"],"enforcement":"full"}"#,
        r#"{"type":"hello","protocol":2,"implementation":{"name":"my-backend","version":"1.0"},"capabilities":["confine"],"enforcement":"full","differences":{"extra_writable":[{"path":"/tmp/claude","modes":["read-only","workspace-write"],"reason":"its own temp dir"}],"protected":[{"path":".git","kind":"directory"},{"path":".bashrc","kind":"file"}]}}"#,
        r#"{"type":"confined","id":1,"argv":["/usr/bin/bwrap","--ro-bind","/","/","--","bash","-c","true"],"enforcement":"full","denial_signatures":["Read-only file system"],"runner_failure_rules":[{"allowed_exit_codes":[1],"fatal_signatures":["bwrap: "]}],"status_channel":{"fd":3,"format":"bwrap-json"}}"#,
        r#"{"type":"unavailable","id":2,"code":"SANDBOX_UNAVAILABLE","detail":"bwrap: Creating new namespace failed: Operation not permitted"}"#,
        r#"{"type":"error","code":"PROTOCOL_VERSION","message":"this backend speaks protocol 1"}"#,
    ];
    for r in responses {
        serde_json::from_str::<Response>(r).unwrap_or_else(|e| panic!("{r}: {e}"));
    }
    assert!(serde_json::from_str::<Response>(r#"{"type":"hello","protocol":1}"#).is_err());
    // A declared difference is closed too: a misspelled key is an error, not an empty list.
    assert!(
        serde_json::from_str::<Response>(
            r#"{"type":"hello","protocol":2,"implementation":{"name":"b","version":"1"},"capabilities":[],"enforcement":"full","differences":{"protect":[]}}"#
        )
        .is_err()
    );
}
