//! `landlock-run`: the Landlock launcher (Linux only). Everything is in the library
//! ([`landlock_run::run`]); on other targets it says so and exits non-zero.

fn main() -> std::process::ExitCode {
    landlock_run::run()
}
