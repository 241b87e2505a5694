//! The folds and resolve() on a long session: 100,000 events, the knob event at the very start so
//! the reverse scan must walk all of them, plus loading the same log from disk.
//! Run: `cargo bench -p sandbox-policy --bench fold`.

use std::hint::black_box;
use std::path::Path;

use criterion::{Criterion, criterion_group, criterion_main};
use sandbox::SandboxMode;
use sandbox_policy::{Event, PolicyService, Session, effective_sandbox_mode};

const EVENTS: usize = 100_000;

fn long_session(dir: &Path) -> Session {
    let s = Session::new("long", dir);
    s.set_sandbox_mode(SandboxMode::WorkspaceWrite)
        .expect("append");
    for i in 0..EVENTS - 1 {
        let e = if i % 2 == 0 {
            Event::TurnStarted
        } else {
            Event::TurnEnded
        };
        s.append(e).expect("append");
    }
    s
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let session = long_session(dir.path());
    let events = session.events();
    let service = PolicyService::new(SandboxMode::ReadOnly, dir.path()).expect("service");
    c.bench_function("fold 100k events (worst case)", |b| {
        b.iter(|| effective_sandbox_mode(black_box(&events)))
    });
    c.bench_function("resolve on a 100k-event session", |b| {
        b.iter(|| service.resolve(Some(black_box(&session)), None))
    });
    let path = dir.path().join("long.jsonl");
    let text: String = events
        .iter()
        .map(|e| serde_json::to_string(e).expect("json") + "\n")
        .collect();
    std::fs::write(&path, text).expect("write");
    c.bench_function("load a 100k-event log", |b| {
        b.iter(|| Session::open("long", dir.path(), black_box(&path)).expect("open"))
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20);
    targets = bench
}
criterion_main!(benches);
