//! The one unix-socket client the steps' payloads run: connects to `$SOCK`, sends `$MSG` and
//! prints `connected`, or prints `refused` with the failing call and its reason. The `net` step
//! uses it for its unix targets and the `host-ipc` step for its socket routes. `perl`, because
//! its `Socket` module starts in a few milliseconds, a tenth of `python3`'s (more through a
//! version shim).

/// Connects to the named unix socket at the path `$SOCK`.
pub(super) const NAMED: &str = r#"perl -MSocket=:all -e '
socket(my $s, AF_UNIX, SOCK_STREAM, 0) or do { print "refused socket: $!\n"; exit };
if (connect($s, pack_sockaddr_un($ENV{SOCK}))) { syswrite($s, "$ENV{MSG}\n"); print "connected\n" }
else { print "refused connect: $!\n" }
'"#;

/// Connects to the abstract unix socket named `$SOCK` (without its leading NUL, which Perl's
/// `pack_sockaddr_un` keeps).
pub(super) const ABSTRACT: &str = r#"perl -MSocket=:all -e '
socket(my $s, AF_UNIX, SOCK_STREAM, 0) or do { print "refused socket: $!\n"; exit };
if (connect($s, pack_sockaddr_un("\0" . $ENV{SOCK}))) { syswrite($s, "$ENV{MSG}\n"); print "connected\n" }
else { print "refused connect: $!\n" }
'"#;
