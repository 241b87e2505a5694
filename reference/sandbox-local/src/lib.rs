//! The local sandbox provider: per-platform runners (bwrap and the Landlock launcher on Linux,
//! Seatbelt on macOS) and the dialects each one speaks on stderr.

pub mod dialect;
