//! The launcher's command-line contract, shared by the launcher binary and the provider that maps
//! sandbox modes onto its flags. The strings here are what the provider's runner-failure dialect
//! matches, so they live once, next to the program that prints them.

/// Exit code of every launcher failure; the payload was never exec'd.
pub const FAILURE_EXIT_CODE: i32 = 125;

/// Prefix of every line the launcher itself prints on stderr.
pub const DIAGNOSTIC_PREFIX: &str = "landlock-run: ";

/// The one informational line the launcher prints when the kernel's Landlock ABI cannot govern
/// every promised file effect. Benign: it never proves a launcher failure by itself.
pub const PARTIAL_NOTICE: &str = "landlock-run: notice: partial enforcement: this kernel's Landlock ABI cannot govern every file effect";
