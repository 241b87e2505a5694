//! The run's seed and each case's draws: one generator per case, seeded by the run's seed and the
//! trial's name, so a seed replays a run exactly.

use std::cell::RefCell;
use std::sync::OnceLock;

use super::{SeedError, odd};

/// The environment variable that fixes the run's seed (`certify --seed N` sets it too).
pub const SEED_VAR: &str = "CONFORMANCE_SEED";

/// The run's seed: [`SEED_VAR`] when set (a bad value is an error), else drawn once per process.
pub fn run_seed() -> Result<u64, SeedError> {
    static SEED: OnceLock<Result<u64, SeedError>> = OnceLock::new();
    SEED.get_or_init(|| match std::env::var(SEED_VAR) {
        Ok(text) => text.trim().parse().map_err(|source| SeedError {
            text: text.clone(),
            source,
        }),
        Err(_) => Ok(fastrand::u64(..)),
    })
    .clone()
}

thread_local! {
    /// The draws of the case running on this thread.
    static CASE_RNG: RefCell<Option<fastrand::Rng>> = const { RefCell::new(None) };
}

/// Runs `f` (one case) with the draws of trial `trial` in the run seeded `seed`: the same seed and
/// trial draw the same places and names, whatever else runs at the same time.
pub fn with_case<R>(seed: u64, trial: &str, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<fastrand::Rng>);
    impl Drop for Restore {
        fn drop(&mut self) {
            CASE_RNG.set(self.0.take());
        }
    }
    // FNV-1a: stable across builds and platforms, unlike the standard library's hasher.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ seed;
    for b in trial.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    let mut rng = fastrand::Rng::with_seed(h);
    let odd = odd::Odd::draw(&mut rng, seed);
    let _restore = Restore(CASE_RNG.replace(Some(rng)));
    let _odd = odd::enter(odd);
    f()
}

/// One draw from the case's generator (outside a case, from a fresh random one).
pub(super) fn draw<R>(f: impl FnOnce(&mut fastrand::Rng) -> R) -> R {
    CASE_RNG.with_borrow_mut(|slot| match slot {
        Some(rng) => f(rng),
        None => f(&mut fastrand::Rng::new()),
    })
}

pub(super) fn pick<'a>(rng: &mut fastrand::Rng, from: &[&'a str]) -> &'a str {
    from[rng.usize(..from.len())]
}

/// A run of `n` lowercase hex digits drawn from the case's generator.
pub fn draw_hex(n: usize) -> String {
    draw(|rng| {
        (0..n)
            .map(|_| char::from_digit(rng.u32(..16), 16).unwrap_or('0'))
            .collect()
    })
}

/// One of `from`, drawn from the case's generator.
pub fn draw_one<'a>(from: &[&'a str]) -> &'a str {
    draw(|rng| pick(rng, from))
}

/// A run of `n` lowercase letters and digits.
pub(super) fn token(rng: &mut fastrand::Rng, n: usize) -> String {
    (0..n)
        .map(|_| {
            let c = rng.usize(..36);
            char::from_digit(c as u32, 36).unwrap_or('x')
        })
        .collect()
}
