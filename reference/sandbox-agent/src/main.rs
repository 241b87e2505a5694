//! `sandbox-agent`: the reference ACP agent over stdio (the command line is
//! [`sandbox_agent::cli`]).

use std::process::ExitCode;

fn main() -> ExitCode {
    sandbox_agent::cli::main_with_args(std::env::args_os())
}
