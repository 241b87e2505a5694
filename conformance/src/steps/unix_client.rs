//! The one unix-socket client the steps' payloads run: connects to `$SOCK`, sends `$MSG` and
//! prints `connected`, or prints `refused` with the failing call and its reason. The `net` step
//! uses it for its unix targets and the `host-ipc` step for its socket routes. `perl`, because
//! it starts in about a millisecond without modules (`python3` takes several times that, more
//! through a version shim). On Linux the address is packed by hand (the family, 1, as a native
//! 16-bit number, then the name) and the constants are numbers (`AF_UNIX` and `SOCK_STREAM` are 1
//! on Linux and macOS): loading the `Socket` module would cost five times the rest of the
//! client's start. macOS's address starts with a length byte, so there `Socket` packs it.

/// Connects to the named unix socket at the path `$SOCK`.
pub(super) const NAMED: &str = r#"perl -e '
my $a = $^O eq "linux" ? pack("S a*", 1, $ENV{SOCK}) : do { require Socket; Socket::pack_sockaddr_un($ENV{SOCK}) };
socket(my $s, 1, 1, 0) or do { print "refused socket: $!\n"; exit };
if (connect($s, $a)) { syswrite($s, "$ENV{MSG}\n"); print "connected\n" }
else { print "refused connect: $!\n" }
'"#;

/// Connects to the abstract unix socket named `$SOCK` (given without its leading NUL, which the
/// address carries).
pub(super) const ABSTRACT: &str = r#"perl -e '
my $n = "\0" . $ENV{SOCK};
my $a = $^O eq "linux" ? pack("S a*", 1, $n) : do { require Socket; Socket::pack_sockaddr_un($n) };
socket(my $s, 1, 1, 0) or do { print "refused socket: $!\n"; exit };
if (connect($s, $a)) { syswrite($s, "$ENV{MSG}\n"); print "connected\n" }
else { print "refused connect: $!\n" }
'"#;
