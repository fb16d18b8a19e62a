//! The least and greatest of a column of floats, ignoring NaN (an unknown signal).
//!
//! `iter().fold(f64::INFINITY, f64::min)` is a chain of dependent compare-and-selects, a few
//! cycles per element whatever the CPU's width; at thousands of candidates and several such
//! folds per pick it was a visible share of the decision. Four independent accumulators let the
//! CPU run four compares at once. The result is the same: min and max are exact and independent
//! of order (a NaN never wins a comparison, so it is skipped).

const LANES: usize = 4;

/// `(least, greatest)` of the non-NaN values; `(+∞, −∞)` when there is none.
pub(crate) fn least_and_greatest(values: &[f64]) -> (f64, f64) {
    let mut lo = [f64::INFINITY; LANES];
    let mut hi = [f64::NEG_INFINITY; LANES];
    let mut chunks = values.chunks_exact(LANES);
    for chunk in &mut chunks {
        for ((l, h), &v) in lo.iter_mut().zip(hi.iter_mut()).zip(chunk) {
            if v < *l {
                *l = v;
            }
            if v > *h {
                *h = v;
            }
        }
    }
    for &v in chunks.remainder() {
        if v < lo[0] {
            lo[0] = v;
        }
        if v > hi[0] {
            hi[0] = v;
        }
    }
    (
        lo.iter().copied().fold(f64::INFINITY, f64::min),
        hi.iter().copied().fold(f64::NEG_INFINITY, f64::max),
    )
}

/// The least non-NaN value; `+∞` when there is none.
pub(crate) fn least(values: &[f64]) -> f64 {
    let mut lo = [f64::INFINITY; LANES];
    let mut chunks = values.chunks_exact(LANES);
    for chunk in &mut chunks {
        for (l, &v) in lo.iter_mut().zip(chunk) {
            if v < *l {
                *l = v;
            }
        }
    }
    for &v in chunks.remainder() {
        if v < lo[0] {
            lo[0] = v;
        }
    }
    lo.iter().copied().fold(f64::INFINITY, f64::min)
}

/// The greatest non-NaN value; `−∞` when there is none.
pub(crate) fn greatest(values: &[f64]) -> f64 {
    let mut hi = [f64::NEG_INFINITY; LANES];
    let mut chunks = values.chunks_exact(LANES);
    for chunk in &mut chunks {
        for (h, &v) in hi.iter_mut().zip(chunk) {
            if v > *h {
                *h = v;
            }
        }
    }
    for &v in chunks.remainder() {
        if v > hi[0] {
            hi[0] = v;
        }
    }
    hi.iter().copied().fold(f64::NEG_INFINITY, f64::max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn equal_to_the_plain_folds(
            values in prop::collection::vec(prop_oneof![Just(f64::NAN), -1e6f64..1e6], 0..40),
        ) {
            let min = values.iter().copied().fold(f64::INFINITY, f64::min);
            let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            prop_assert_eq!(least_and_greatest(&values), (min, max));
            prop_assert_eq!(least(&values), min);
            prop_assert_eq!(greatest(&values), max);
        }
    }

    #[test]
    fn nan_is_skipped_and_empty_is_infinite() {
        let v = [f64::NAN, 3.0, f64::NAN, -2.0, 7.0, f64::NAN];
        assert_eq!(least_and_greatest(&v), (-2.0, 7.0));
        assert_eq!(least_and_greatest(&[]), (f64::INFINITY, f64::NEG_INFINITY));
        assert_eq!(least(&[f64::NAN]), f64::INFINITY);
    }
}
