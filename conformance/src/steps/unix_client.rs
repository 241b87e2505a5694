//! The one unix-socket client the steps' payloads run: connects to `$SOCK`, sends `$MSG` and
//! prints `connected`, or prints `refused` with the failing call and its reason. The `net` step
//! uses it for its unix targets and the `host-ipc` step for its socket routes. `perl`, because
//! it starts in about a millisecond without modules (`python3` takes several times that, more
//! through a version shim). On Linux the address is packed by hand (the family, 1, as a native
//! 16-bit number, then the name) and the constants are numbers (`AF_UNIX` and `SOCK_STREAM` are 1
//! on Linux and macOS): loading the `Socket` module would cost five times the rest of the
//! client's start. macOS's address starts with a length byte, so there `Socket` packs it.

/// The client for the socket whose name is the Perl expression `$name` (a string literal).
macro_rules! client {
    ($name:literal) => {
        concat!(
            r#"perl -e '
my $n = "#,
            $name,
            r#";
my $a = $^O eq "linux" ? pack("S a*", 1, $n) : do { require Socket; Socket::pack_sockaddr_un($n) };
socket(my $s, 1, 1, 0) or do { print "refused socket: $!\n"; exit };
if (connect($s, $a)) { syswrite($s, "$ENV{MSG}\n"); print "connected\n" }
else { print "refused connect: $!\n" }
'"#
        )
    };
}

/// Connects to the named unix socket at the path `$SOCK`.
pub(super) const NAMED: &str = client!(r#"$ENV{SOCK}"#);

/// Connects to the abstract unix socket named `$SOCK` (given without its leading NUL, which the
/// address carries).
pub(super) const ABSTRACT: &str = client!(r#""\0" . $ENV{SOCK}"#);

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use std::io::BufRead;
    use std::os::linux::net::SocketAddrExt;
    use std::os::unix::net::{SocketAddr, UnixListener};

    use super::{ABSTRACT, NAMED};

    /// Runs `client` as the steps run it (a bash script) with `$SOCK` and `$MSG` set; its stdout.
    fn run(client: &str, sock: &str) -> String {
        let out = std::process::Command::new("bash")
            .args(["-c", client])
            .env("SOCK", sock)
            .env("MSG", "hello")
            .output()
            .expect("bash");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The line the client sent on the connection `listener` queued.
    fn received(listener: &UnixListener) -> String {
        let (conn, _) = listener.accept().expect("the client's connection");
        let mut line = String::new();
        std::io::BufReader::new(conn)
            .read_line(&mut line)
            .expect("read");
        line
    }

    /// `refused connect:` with a reason (the C library's words, in the host's language).
    fn refused(said: &str) -> bool {
        said.strip_prefix("refused connect: ")
            .is_some_and(|why| why.trim().len() > 1 && why.ends_with('\n'))
    }

    /// Unconfined, the client reaches a listening socket, named or abstract, and delivers its
    /// line; where nothing listens it says `refused` with the kernel's reason. A client that never
    /// connects would pass every confined case, whose unix targets must all stay unreachable.
    #[test]
    fn the_client_reaches_a_listening_socket_and_names_the_reason_when_it_cannot() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("listening");
        let named = UnixListener::bind(&path).expect("bind a named socket");
        let sock = path.to_str().expect("a UTF-8 scratch path");
        assert_eq!(run(NAMED, sock), "connected\n");
        assert_eq!(received(&named), "hello\n");
        let absent = dir.path().join("absent");
        let said = run(NAMED, absent.to_str().expect("UTF-8"));
        assert!(refused(&said), "{said}");

        let name = format!("unix-client-test-{}", std::process::id());
        let addr = SocketAddr::from_abstract_name(name.as_bytes()).expect("an abstract name");
        let abstract_listener = UnixListener::bind_addr(&addr).expect("bind an abstract socket");
        assert_eq!(run(ABSTRACT, &name), "connected\n");
        assert_eq!(received(&abstract_listener), "hello\n");
        let said = run(ABSTRACT, &format!("{name}-absent"));
        assert!(refused(&said), "{said}");
    }
}
