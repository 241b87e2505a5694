//! The arithmetic of the table: mean, deviation and median, a target's verdict, and the
//! seeded shuffle that orders each round.

/// A small deterministic shuffle (xorshift): a new order every round, no dependency.
pub(crate) fn shuffle<T>(items: &mut [T], seed: &mut u64) {
    for i in (1..items.len()).rev() {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        let j = usize::try_from(*seed % (i as u64 + 1)).unwrap_or(0);
        items.swap(i, j);
    }
}

/// Mean, standard deviation and median of `xs`.
pub(crate) fn stats(xs: &[f64]) -> (f64, f64, f64) {
    if xs.is_empty() {
        return (f64::NAN, f64::NAN, f64::NAN);
    }
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0).max(1.0);
    let mut sorted = xs.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    let median = if sorted.len().is_multiple_of(2) {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    } else {
        sorted[mid]
    };
    (mean, var.sqrt(), median)
}

/// Whether `ratio` meets `target` (at most it, or at least it), in the table's words.
pub(crate) fn verdict(ratio: f64, target: f64, at_most: bool) -> String {
    let met = if at_most {
        ratio <= target
    } else {
        ratio >= target
    };
    let sign = if at_most { "<=" } else { ">=" };
    if met {
        format!("{sign} {target:.2}: met")
    } else {
        format!(
            "{sign} {target:.2}: MISSED by {:.2}",
            (ratio - target).abs()
        )
    }
}
