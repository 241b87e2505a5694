//! `sandboxctl`: the thin binary of [`sandbox_cli`] (its crate docs say what each subcommand
//! does).

use std::process::ExitCode;

fn main() -> ExitCode {
    sandbox_cli::main_with_args(std::env::args_os())
}
