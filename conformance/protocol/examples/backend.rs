//! A whole external backend in Rust, certified by the suite: the protocol's typed messages
//! (`sandbox-protocol`) over the reference library's Landlock backend (`sandbox-local` and its
//! launcher, `landlock-run`). It reads one [`sandbox_protocol::Request`] per line on stdin and answers one
//! [`sandbox_protocol::Response`] per line on stdout; it never runs the payload itself.
//!
//! Why Landlock and not the reference bwrap backend: bwrap's argv binds descriptors the provider
//! opened and pinned (`--bind-fd N`), and an answer over the protocol carries an argv, not
//! descriptors, so the harness's spawn would not have them. The launcher's argv stands alone
//! once the provider is told not to stage new git directories while the call runs (that hands
//! the launcher a directory by descriptor too): git's surface is then checked after the call
//! alone, by the settle the harness asks for.
//!
//! Certify it as a backend author would (the suite's own test does exactly this,
//! `the_worked_example_in_rust_is_certified` in `conformance/tests/certify.rs`):
//!
//! ```sh
//! cargo build --workspace
//! target/debug/certify -- target/debug/rust-example-backend
//! ```
//!
//! (`cargo run -p sandbox-protocol --example backend` runs the same program.)

use std::process::ExitCode;

use sandbox::SandboxEnforcement;
use sandbox_local::{Backend, LocalConfig, LocalProvider};
use sandbox_protocol::{Differences, Handshake, Implementation, WireCapability};

/// The name it is certified under (trial names carry it).
const NAME: &str = "rust-example";

fn main() -> ExitCode {
    // One provider for the whole run: it probes the launcher once, on first use.
    let provider = LocalProvider::new(LocalConfig {
        prevent_while_running: false,
        ..LocalConfig::only(Backend::Landlock)
    });
    let handshake = || hello(&provider);
    // The protocol crate's loop: every request answered, each confine by the provider (or
    // `unavailable` with its words), each call's check after the call kept until `settle`.
    match sandbox_protocol::serve(
        Ok(&provider),
        &handshake,
        std::io::stdin().lock(),
        std::io::stdout(),
    ) {
        Ok(()) => ExitCode::SUCCESS,
        Err(_) => ExitCode::from(1),
    }
}

/// The handshake: what this backend can do on this host. Its writable set is the reference one,
/// so it declares no differences.
fn hello(provider: &LocalProvider) -> Handshake {
    let (capabilities, enforcement) = match provider.selection() {
        // The launcher reports whether the payload ran on a status descriptor of its own.
        Ok(selection) => (
            vec![WireCapability::Confine, WireCapability::StatusChannel],
            selection.enforcement(),
        ),
        // No usable Landlock here: every confine is answered `unavailable`.
        Err(_) => (Vec::new(), SandboxEnforcement::Full),
    };
    Handshake {
        implementation: Implementation {
            name: NAME.into(),
            version: env!("CARGO_PKG_VERSION").into(),
        },
        capabilities,
        enforcement,
        differences: Differences::default(),
    }
}
