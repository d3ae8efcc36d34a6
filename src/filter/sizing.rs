//! Choosing a filter's shape from (capacity, target false-positive rate).
//!
//! A bucket is always one 64-bit word with at least a 16-bit migration counter, so
//! 48 bits are left for fingerprints and memory per slot is fixed by the slot count:
//! 4 slots of 12 bits, 3 of 16 or 2 of 24. Sizing takes the densest shape whose
//! false-positive bound at its maximum load meets the target, then the smallest
//! power-of-two bucket count that keeps the load at or under that maximum.

use super::layout::{Params, DEFAULT_SEED};

/// Documented default for `cf_agg` and `cf_create`: 0.2%. The default shape (4 slots
/// of 12 bits) guarantees a bound of 0.186% even at 95% load.
pub const DEFAULT_FPP: f64 = 0.002;

/// (slots per bucket, fingerprint bits, maximum planned load). The loads are the
/// fill levels the breadth-first insert reaches reliably (measured by
/// `table::tests::load_before_first_failure`), with a margin.
pub const SHAPES: [(u8, u8, f64); 3] = [(4, 12, 0.95), (3, 16, 0.90), (2, 24, 0.80)];

/// Upper bound on the false-positive rate of a filter at load `load`: a probe
/// compares its fingerprint with at most `2·b·load` stored ones, each matching with
/// probability `1/(2^f − 1)`.
pub fn fpp_bound(slots: u8, fingerprint_bits: u8, load: f64) -> f64 {
    2.0 * slots as f64 * load / (((1u64 << fingerprint_bits) - 1) as f64)
}

pub fn min_fpp() -> f64 {
    let (b, f, load) = SHAPES[SHAPES.len() - 1];
    fpp_bound(b, f, load)
}

#[derive(Debug, Clone, PartialEq)]
pub enum SizingError {
    Capacity(String),
    Fpp(String),
}

impl std::fmt::Display for SizingError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SizingError::Capacity(m) | SizingError::Fpp(m) => write!(f, "{m}"),
        }
    }
}

/// The parameters for `capacity` items at false-positive rate `fpp`, with at most
/// `2^max_log2` buckets.
pub fn size_for(capacity: u64, fpp: f64, max_log2: u8) -> Result<Params, SizingError> {
    if !(fpp > 0.0 && fpp < 1.0) {
        return Err(SizingError::Fpp(format!("fpp must be between 0 and 1 (exclusive), got {fpp}")));
    }
    let Some(&(slots, bits, load)) = SHAPES.iter().find(|(b, f, l)| fpp_bound(*b, *f, *l) <= fpp) else {
        return Err(SizingError::Fpp(format!("fpp must be at least {:.1e}, got {fpp}", min_fpp())));
    };
    if capacity == 0 {
        return Err(SizingError::Capacity("capacity must be at least 1".into()));
    }
    let max_capacity = ((1u64 << max_log2) as f64 * slots as f64 * load).floor() as u64;
    if capacity > max_capacity {
        return Err(SizingError::Capacity(format!(
            "capacity {capacity} is larger than the maximum {max_capacity} for fpp {fpp}"
        )));
    }
    let buckets = (capacity as f64 / (slots as f64 * load)).ceil() as u64;
    let log2 = buckets.max(1).next_power_of_two().trailing_zeros() as u8;
    Ok(Params { fingerprint_bits: bits, slots_per_bucket: slots, bucket_count_log2: log2, seed: DEFAULT_SEED })
}

/// The capacity a filter was planned for: its slots at the shape's maximum load.
pub fn planned_capacity(p: &Params) -> u64 {
    let load = SHAPES
        .iter()
        .find(|(b, f, _)| *b == p.slots_per_bucket && *f == p.fingerprint_bits)
        .map(|s| s.2)
        .unwrap_or(0.95);
    (p.slot_count() as f64 * load).floor() as u64
}

/// The false-positive bound at the filter's current load.
pub fn expected_fpp(p: &Params, items: u64) -> f64 {
    fpp_bound(p.slots_per_bucket, p.fingerprint_bits, items as f64 / p.slot_count() as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_four_slots_of_twelve_bits() {
        let p = size_for(1000, DEFAULT_FPP, 26).unwrap();
        assert_eq!((p.slots_per_bucket, p.fingerprint_bits), (4, 12));
        assert!(fpp_bound(4, 12, 0.95) <= DEFAULT_FPP);
        // 1000 / (4 * 0.95) = 263.2 buckets -> 512
        assert_eq!(p.bucket_count_log2, 9);
    }

    #[test]
    fn smaller_fpp_takes_fewer_longer_slots() {
        assert_eq!(size_for(10, 1e-4, 26).unwrap().slots_per_bucket, 3);
        assert_eq!(size_for(10, 1e-6, 26).unwrap().slots_per_bucket, 2);
        assert!(matches!(size_for(10, 1e-9, 26), Err(SizingError::Fpp(_))));
    }

    #[test]
    fn rejects_absurd_parameters() {
        for bad in [0.0, 1.0, -0.5, f64::NAN, f64::INFINITY] {
            assert!(matches!(size_for(10, bad, 26), Err(SizingError::Fpp(_))), "{bad}");
        }
        assert!(matches!(size_for(0, 0.01, 26), Err(SizingError::Capacity(_))));
        assert!(matches!(size_for(u64::MAX, 0.01, 26), Err(SizingError::Capacity(_))));
        assert!(size_for(planned_capacity(&size_for(1 << 20, 0.01, 26).unwrap()), 0.01, 26).is_ok());
    }

    #[test]
    fn load_stays_at_or_under_the_shape_maximum() {
        for cap in [1u64, 2, 3, 4, 5, 100, 3800, 3801, 1_000_000] {
            let p = size_for(cap, DEFAULT_FPP, 26).unwrap();
            assert!(cap as f64 / p.slot_count() as f64 <= 0.95, "{cap}");
            assert!(planned_capacity(&p) >= cap);
        }
    }
}
