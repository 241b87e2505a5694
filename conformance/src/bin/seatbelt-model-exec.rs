//! `seatbelt-model-exec -p PROFILE [-D NAME=VALUE]... COMMAND...`: a stand-in for macOS's
//! `sandbox-exec` on Linux that judges the command's file, socket and IPC calls through the SBPL
//! model. **A fake** for the `seatbelt-model` backend of the conformance suite, never a sandbox
//! (see `conformance::seatbelt_model::exec`).

fn main() {
    #[cfg(target_os = "linux")]
    conformance::seatbelt_model::exec::main();
    #[cfg(not(target_os = "linux"))]
    {
        eprintln!(
            "sandbox-exec: seatbelt-model-exec runs on Linux only (seccomp user notification)"
        );
        std::process::exit(125);
    }
}
