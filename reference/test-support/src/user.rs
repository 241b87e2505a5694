//! Who the tests run as: as root, some promises have a root variant (capabilities, a payload run
//! as another user), and CI runs both ways.

/// The test process's effective uid.
pub fn euid() -> u32 {
    nix::unistd::geteuid().as_raw()
}

/// True when the test process runs as root (effective uid 0).
pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}
