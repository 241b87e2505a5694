//! `--net restricted` on the real kernel against listeners on the host: no stream or packet
//! protocol but UDP (reported ungoverned) gets past it. Landlock's rights are TCP's alone, so the
//! launcher's guard refuses the rest: an MPTCP socket (which connected to a host TCP listener
//! while plain TCP got `EACCES`), SCTP, raw and ICMP sockets, other families, and `listen()` on an
//! unbound socket (it binds an ephemeral port without the `bind` hook, and the host can connect
//! in). The enabled runs prove the client itself: the same MPTCP connect reaches the listener
//! there. Root and unprivileged.
#![cfg(target_os = "linux")]

mod common;

use std::io::ErrorKind;
use std::net::TcpListener;

use common::*;

/// What the payload tries, one line each (`NAME ok` or `NAME refused ERRNO`), in Python: the
/// listener's port is `$PORT` (IPv4) and `$PORT6` (IPv6).
const PROBES: &str = r#"
import errno, os, socket
def attempt(name, make, act=None):
    try:
        s = make()
        if act: act(s)
        print(name, "ok", flush=True)
    except OSError as e:
        print(name, "refused", errno.errorcode.get(e.errno, e.errno), flush=True)
IPPROTO_MPTCP = 262
port, port6 = int(os.environ["PORT"]), int(os.environ["PORT6"])
attempt("mptcp4", lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM, IPPROTO_MPTCP),
        lambda s: (s.connect(("127.0.0.1", port)), s.sendall(b"mptcp4\n")))
attempt("mptcp6", lambda: socket.socket(socket.AF_INET6, socket.SOCK_STREAM, IPPROTO_MPTCP),
        lambda s: (s.connect(("::1", port6)), s.sendall(b"mptcp6\n")))
attempt("tcp4", lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM | socket.SOCK_CLOEXEC),
        lambda s: s.connect(("127.0.0.1", port)))
attempt("listen", lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM), lambda s: s.listen(1))
attempt("sctp", lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_SCTP))
attempt("sctp_seqpacket", lambda: socket.socket(socket.AF_INET6, socket.SOCK_SEQPACKET, 132))
attempt("raw", lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP))
attempt("ping", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP))
attempt("packet", lambda: socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, 0))
attempt("udp", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM | socket.SOCK_NONBLOCK))
attempt("socketpair", lambda: socket.socketpair())
"#;

/// A loopback listener on each address family, nonblocking: after the payload has ended, a
/// connection it made is in the accept queue, so an empty queue means none was made (no waiting).
struct Listeners {
    v4: TcpListener,
    v6: TcpListener,
}

impl Listeners {
    fn new() -> Listeners {
        let v4 = TcpListener::bind("127.0.0.1:0").expect("listen on 127.0.0.1");
        let v6 = TcpListener::bind("[::1]:0").expect("listen on ::1");
        for l in [&v4, &v6] {
            l.set_nonblocking(true).expect("nonblocking");
        }
        Listeners { v4, v6 }
    }

    fn env(&self) -> [(&'static str, String); 2] {
        [
            (
                "PORT",
                self.v4.local_addr().expect("addr").port().to_string(),
            ),
            (
                "PORT6",
                self.v6.local_addr().expect("addr").port().to_string(),
            ),
        ]
    }

    /// How many connections each listener has waiting.
    fn reached(&self) -> (usize, usize) {
        let count = |l: &TcpListener| {
            let mut n = 0;
            loop {
                match l.accept() {
                    Ok(_) => n += 1,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => return n,
                    Err(e) => panic!("accept: {e}"),
                }
            }
        };
        (count(&self.v4), count(&self.v6))
    }
}

fn run(who: Who, net: &str, listeners: &Listeners) -> String {
    let out = launcher(who)
        .args([
            "--ro",
            "/",
            "--rw",
            "/dev/null",
            "--net",
            net,
            "--",
            "python3",
            "-c",
            PROBES,
        ])
        .envs(listeners.env())
        .output()
        .expect("spawn launcher");
    assert!(out.status.success(), "{who:?} {net}: {}", stderr(&out));
    stdout(&out)
}

fn line<'a>(out: &'a str, name: &str) -> &'a str {
    out.lines()
        .find(|l| l.split(' ').next() == Some(name))
        .unwrap_or_else(|| panic!("no line for {name} in:\n{out}"))
}

#[test]
fn no_stream_or_packet_protocol_but_udp_gets_past_a_restricted_network() {
    for who in identities() {
        let listeners = Listeners::new();
        let out = run(who, "restricted", &listeners);
        for name in [
            "mptcp4",
            "mptcp6",
            "tcp4",
            "listen",
            "sctp",
            "sctp_seqpacket",
            "raw",
            "ping",
            "packet",
        ] {
            assert!(
                line(&out, name).starts_with(&format!("{name} refused")),
                "{who:?}: {name} got past the restricted network:\n{out}"
            );
        }
        assert_eq!(
            listeners.reached(),
            (0, 0),
            "{who:?}: a host listener saw a connection:\n{out}"
        );
        // What stays: UDP (reported ungoverned) and the payload's own socket pairs.
        assert_eq!(line(&out, "udp"), "udp ok", "{who:?}:\n{out}");
        assert_eq!(line(&out, "socketpair"), "socketpair ok", "{who:?}:\n{out}");
    }
}

#[test]
fn the_same_mptcp_connect_reaches_the_host_with_the_network_enabled() {
    for who in identities() {
        let listeners = Listeners::new();
        let out = run(who, "enabled", &listeners);
        assert_eq!(line(&out, "mptcp4"), "mptcp4 ok", "{who:?}:\n{out}");
        assert_eq!(line(&out, "mptcp6"), "mptcp6 ok", "{who:?}:\n{out}");
        assert_eq!(line(&out, "listen"), "listen ok", "{who:?}:\n{out}");
        let (v4, v6) = listeners.reached();
        assert!(v4 >= 2 && v6 >= 1, "{who:?}: reached {v4} and {v6}:\n{out}");
    }
}
