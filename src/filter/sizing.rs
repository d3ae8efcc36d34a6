//! Choosing a filter's shape from (capacity, target false-positive rate).
//!
//! A shape is `b` slots per bucket of `f`-bit fingerprints, planned to be filled
//! to load `α`. Its false-positive rate at that load is at most
//! `2·b·α / (2^f − 1)` (a probe compares its fingerprint with the `2·b·α` stored
//! ones of its two buckets on average). A named filter keeps a bucket in one 64-bit
//! word with a migration counter of at least 16 bits, so `b·f ≤ 48`: 4 slots of up
//! to 12 bits, 3 of up to 16, 2 of up to 24. Values use the same shapes (so that a
//! value can be published and a named filter snapshotted) packed densely: `b·f`
//! bits per bucket, or `4·f − 4` for 4 slots, whose fingerprints are stored
//! semi-sorted (see `dense.rs`).
//!
//! For a requested rate `ε`, every shape gets the highest load that keeps its bound
//! at or under `FPP_MARGIN · ε` (and under the load its inserts reliably reach), and
//! the shape with the fewest value bits per item wins. The bucket count is then
//! the smallest that holds the capacity at that load: any count, not a power of two.
//!
//! Two ways to size:
//! - [`size_for_items`]: for keys that are all known (`cf_agg` without a capacity),
//!   at the shape's load exactly; the bulk build grows the table slightly in the
//!   rare case it does not fit.
//! - [`size_for_capacity`]: for keys that will arrive one by one (`cf_create`,
//!   `cf_empty`, `cf_agg` with a capacity). The load at which the first insert
//!   fails scatters more in small tables (measured, `table::tests`), so the planned
//!   load is lowered by `c_b / √slots`: nothing for large tables (0.0003 at 10M
//!   keys), enough that a table of a few dozen slots takes its capacity.

use super::layout::{Mapping, Params, DEFAULT_SEED, MAX_BUCKET_COUNT};

/// Documented default for `cf_agg` and `cf_create`: 0.2%.
pub const DEFAULT_FPP: f64 = 0.002;

/// The planned bound stays this far under the rate asked for, so that the rate a
/// user measures (which scatters around the bound) stays under it too.
pub const FPP_MARGIN: f64 = 0.97;

/// The highest planned load for `b` slots per bucket: the fill level inserts reach
/// reliably, with a margin (measured by `table::tests::load_before_first_failure`
/// over many table sizes).
pub fn max_load(slots: u8) -> f64 {
    match slots {
        4 => 0.955,
        3 => 0.93,
        2 => 0.85,
        _ => 0.45,
    }
}

/// `c_b`: how far under `max_load` a table of `s` slots plans, `c_b / √s` (fitted
/// to the 0.5% quantile of the first failure's load over table sizes).
fn small_table_margin(slots: u8) -> f64 {
    match slots {
        4 => 0.8,
        3 => 0.9,
        _ => 1.3,
    }
}

/// The load a table of `slots` slots plans for with `shape`, for keys that arrive
/// one at a time.
pub fn planned_load(shape: &Shape, slots: u64) -> f64 {
    (shape.load - small_table_margin(shape.slots) / (slots as f64).sqrt()).max(shape.load / 4.0)
}

/// Upper bound on the false-positive rate of a filter at load `load`.
pub fn fpp_bound(slots: u8, fingerprint_bits: u8, load: f64) -> f64 {
    2.0 * slots as f64 * load / (((1u64 << fingerprint_bits) - 1) as f64)
}

/// Bits a value spends per slot in its dense layout.
pub fn value_bits_per_slot(slots: u8, fingerprint_bits: u8) -> u32 {
    if slots == 4 {
        fingerprint_bits as u32 - 1
    } else {
        fingerprint_bits as u32
    }
}

/// A filter shape: slots per bucket, fingerprint bits, planned load.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Shape {
    pub slots: u8,
    pub bits: u8,
    pub load: f64,
}

impl Shape {
    pub fn value_bits_per_item(&self) -> f64 {
        value_bits_per_slot(self.slots, self.bits) as f64 / self.load
    }
}

/// Every shape a named filter's 64-bit bucket words can hold.
fn shapes() -> impl Iterator<Item = (u8, u8)> {
    [4u8, 3, 2].into_iter().flat_map(|b| (super::layout::MIN_FINGERPRINT_BITS..=(48 / b)).map(move |f| (b, f)))
}

/// The smallest rate a shape reaches at its full planned load.
pub fn min_fpp() -> f64 {
    fpp_bound(2, 24, max_load(2)) / FPP_MARGIN
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

/// The shape with the fewest value bits per item whose bound at its planned load
/// is at most `FPP_MARGIN · fpp`.
pub fn shape_for(fpp: f64) -> Result<Shape, SizingError> {
    if !(fpp > 0.0 && fpp < 1.0) {
        return Err(SizingError::Fpp(format!("fpp must be between 0 and 1 (exclusive), got {fpp}")));
    }
    if fpp < min_fpp() {
        return Err(SizingError::Fpp(format!("fpp must be at least {:.1e}, got {fpp}", min_fpp())));
    }
    let mut best: Option<Shape> = None;
    for (b, f) in shapes() {
        let load = max_load(b).min(FPP_MARGIN * fpp * ((1u64 << f) - 1) as f64 / (2.0 * b as f64));
        if load < max_load(b) / 2.0 {
            continue;
        }
        let s = Shape { slots: b, bits: f, load };
        if best.is_none_or(|bst| s.value_bits_per_item() < bst.value_bits_per_item()) {
            best = Some(s);
        }
    }
    best.ok_or_else(|| SizingError::Fpp(format!("fpp must be at least {:.1e}, got {fpp}", min_fpp())))
}

/// A sized filter: its parameters and the capacity it was planned for.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sized {
    pub params: Params,
    pub capacity: u64,
    pub shape: Shape,
}

fn params_with(shape: &Shape, bucket_count: u64) -> Params {
    Params {
        fingerprint_bits: shape.bits,
        slots_per_bucket: shape.slots,
        bucket_count,
        seed: DEFAULT_SEED,
        mapping: Mapping::Fastrange,
    }
}

fn check_capacity(capacity: u64, fpp: f64, shape: &Shape, max_buckets: u64) -> Result<(), SizingError> {
    if capacity == 0 {
        return Err(SizingError::Capacity("capacity must be at least 1".into()));
    }
    let max_capacity =
        (max_buckets.min(MAX_BUCKET_COUNT) as f64 * shape.slots as f64 * shape.load * 0.99).floor() as u64;
    if capacity > max_capacity {
        return Err(SizingError::Capacity(format!(
            "capacity {capacity} is larger than the maximum {max_capacity} for fpp {fpp}"
        )));
    }
    Ok(())
}

/// For `n` keys that are all known: the bucket count that holds them at the
/// shape's load.
pub fn size_for_items(n: u64, fpp: f64, max_buckets: u64) -> Result<Sized, SizingError> {
    let shape = shape_for(fpp)?;
    let n = n.max(1);
    check_capacity(n, fpp, &shape, max_buckets)?;
    let m = ((n as f64 / (shape.slots as f64 * shape.load)).ceil() as u64).max(1);
    let capacity = ((m * shape.slots as u64) as f64 * shape.load).floor() as u64;
    Ok(Sized { params: params_with(&shape, m), capacity: capacity.max(n), shape })
}

/// For `capacity` keys that will be inserted one at a time: the smallest bucket
/// count whose planned load ([`planned_load`]) takes them.
pub fn size_for_capacity(capacity: u64, fpp: f64, max_buckets: u64) -> Result<Sized, SizingError> {
    size_shape_for_capacity(capacity, shape_for(fpp)?, fpp, max_buckets)
}

/// [`size_for_capacity`] with a given shape (`fpp` only names the rate in messages).
fn size_shape_for_capacity(capacity: u64, shape: Shape, fpp: f64, max_buckets: u64) -> Result<Sized, SizingError> {
    check_capacity(capacity, fpp, &shape, max_buckets)?;
    let holds =
        |m: u64| ((m * shape.slots as u64) as f64 * planned_load(&shape, m * shape.slots as u64)).floor() as u64;
    // Start at the plain count and step up: the margin is a few buckets for
    // small tables and a few hundredths of a percent for large ones.
    let mut m = ((capacity as f64 / (shape.slots as f64 * shape.load)).ceil() as u64).max(1);
    while holds(m) < capacity {
        let short = capacity - holds(m);
        m += (short as f64 / (shape.slots as f64 * shape.load)).ceil().max(1.0) as u64;
    }
    // Stepping by the shortfall can overshoot by a bucket or two: step back.
    while m > 1 && holds(m - 1) >= capacity {
        m -= 1;
    }
    if m > max_buckets.min(MAX_BUCKET_COUNT) {
        return Err(SizingError::Capacity(format!(
            "capacity {capacity} needs more than {max_buckets} buckets for fpp {fpp}"
        )));
    }
    Ok(Sized { params: params_with(&shape, m), capacity: holds(m), shape })
}

/// # Filters that grow
///
/// A named filter created with an expansion `s > 0` is a chain of tables
/// (`chain.rs`): when the newest holds its capacity, a table `s` times its
/// capacity is added, and lookups ask every table. A key absent from all of them
/// is a false positive if any table says "maybe", so the chain's rate is at most
/// the sum of its tables' bounds. Each new table may spend half of what the
/// tables before it left of `FPP_MARGIN · fpp` ([`growth_budget`]): the sum stays
/// under the rate however many tables are added (the geometric tightening of
/// scalable Bloom filters). Within its budget a table takes the shape that stores
/// the most keys per 64-bit bucket word (`b·α`, the bytes of a named filter),
/// and among those the longest fingerprint, which spends the least of the budget
/// and so leaves the most for the tables after it ([`growth_shape`]). At the
/// default rate that is 3 slots of 16 bits at load 0.93 (bound 8.5e-5) for
/// the first twenty tables or so: 23 bits per key in shared memory where a
/// filter of fixed size takes 17, the price of not knowing the size.
pub fn growth_budget(fpp: f64, spent: f64) -> f64 {
    (FPP_MARGIN * fpp - spent) / 2.0
}

/// The shape of a table of a filter that grows, whose bound may be at most
/// `budget` (already including the margin); `None` if no shape reaches it at
/// half its maximum load.
pub fn growth_shape(budget: f64) -> Option<Shape> {
    let mut best: Option<Shape> = None;
    for (b, f) in shapes() {
        let load = max_load(b).min(budget * ((1u64 << f) - 1) as f64 / (2.0 * b as f64));
        if load.is_nan() || load < max_load(b) / 2.0 {
            continue;
        }
        let s = Shape { slots: b, bits: f, load };
        let keys_per_word = |s: &Shape| s.slots as f64 * s.load;
        if best.is_none_or(|bst| {
            keys_per_word(&s) > keys_per_word(&bst) + 1e-12
                || (keys_per_word(&s) > keys_per_word(&bst) - 1e-12 && s.bits > bst.bits)
        }) {
            best = Some(s);
        }
    }
    best
}

/// Table `capacity` of a filter that grows at rate `fpp`, after tables whose
/// bounds add up to `spent`.
pub fn size_growth_table(capacity: u64, fpp: f64, spent: f64, max_buckets: u64) -> Result<Sized, SizingError> {
    if !(fpp > 0.0 && fpp < 1.0) {
        return Err(SizingError::Fpp(format!("fpp must be between 0 and 1 (exclusive), got {fpp}")));
    }
    let budget = growth_budget(fpp, spent);
    let shape = growth_shape(budget).ok_or_else(|| {
        SizingError::Fpp(format!(
            "fpp {fpp} is too small for a filter that grows (at least {:.1e}; expansion => 0 makes a filter of fixed size)",
            2.0 * fpp_bound(2, 24, max_load(2) / 2.0) / FPP_MARGIN
        ))
    })?;
    size_shape_for_capacity(capacity, shape, fpp, max_buckets)
}

/// A table's bound at the capacity it was sized for: what it adds to the rate of
/// a chain once it is full.
pub fn table_bound(p: &Params, capacity: u64) -> f64 {
    expected_fpp(p, capacity.max(1))
}

/// The capacity of a filter whose plan is not recorded (format 1, tests): its slots
/// at the shape's maximum load.
pub fn planned_capacity(p: &Params) -> u64 {
    ((p.slot_count() as f64 * max_load(p.slots_per_bucket)).floor() as u64).max(1)
}

/// The false-positive bound at the filter's current load.
pub fn expected_fpp(p: &Params, items: u64) -> f64 {
    fpp_bound(p.slots_per_bucket, p.fingerprint_bits, items as f64 / p.slot_count() as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_four_slots_of_twelve_bits_at_full_load() {
        let s = shape_for(DEFAULT_FPP).unwrap();
        assert_eq!((s.slots, s.bits, s.load), (4, 12, max_load(4)));
        let sz = size_for_items(1000, DEFAULT_FPP, u64::MAX).unwrap();
        // 1000 / (4 * 0.955) = 261.8 buckets -> 262, any count.
        assert_eq!(sz.params.bucket_count, 262);
        assert!(sz.capacity >= 1000);
        // One at a time: 0.8 / sqrt(1048 slots) = 2.5% lower.
        let sz = size_for_capacity(1000, DEFAULT_FPP, u64::MAX).unwrap();
        assert_eq!(sz.params.bucket_count, 269);
        assert!(sz.capacity >= 1000);
    }

    #[test]
    fn the_rate_asked_for_picks_the_fingerprint() {
        // Smaller rates, longer fingerprints; the bound always honours the rate.
        let mut last_bits = 0.0;
        for fpp in [0.2, 0.05, 0.01, 0.005, 0.002, 0.0018, 0.001, 0.0005, 0.0001, 1e-5, 1e-6] {
            let s = shape_for(fpp).unwrap();
            assert!(fpp_bound(s.slots, s.bits, s.load) <= fpp * FPP_MARGIN * (1.0 + 1e-12), "{fpp}: {s:?}");
            let bits = s.value_bits_per_item();
            assert!(bits > last_bits, "{fpp}: {bits} bits/item is not more than {last_bits}");
            last_bits = bits;
        }
        assert!(shape_for(0.01).unwrap().value_bits_per_item() < shape_for(0.001).unwrap().value_bits_per_item());
    }

    #[test]
    fn value_space_meets_the_targets() {
        let ideal = |fpp: f64| ((1.0 / fpp).log2() + 3.0) / 0.955;
        assert!(shape_for(0.0018).unwrap().value_bits_per_item() <= 12.6);
        assert!(shape_for(0.01).unwrap().value_bits_per_item() <= 1.10 * ideal(0.01));
        assert!(shape_for(0.0001).unwrap().value_bits_per_item() <= 1.10 * ideal(0.0001));
    }

    #[test]
    fn growth_keeps_the_rate_over_any_number_of_tables() {
        for fpp in [0.2, 0.05, 0.01, DEFAULT_FPP, 0.0005, 0.0001] {
            let mut spent = 0.0;
            let mut cap = 1000u64;
            for i in 0..64 {
                let s = size_growth_table(cap, fpp, spent, u64::MAX).unwrap();
                let bound = table_bound(&s.params, s.capacity);
                assert!(bound <= growth_budget(fpp, spent) * (1.0 + 1e-9), "{fpp} table {i}");
                spent += bound;
                assert!(spent <= fpp * FPP_MARGIN, "{fpp}: {i} tables spend {spent}");
                cap = (cap * 2).min(1 << 28);
            }
        }
        // The default rate: 3 slots of 16 bits at full load for a score of tables.
        let mut spent = 0.0;
        for i in 0..20 {
            let s = size_growth_table(1000 << i.min(18), DEFAULT_FPP, spent, u64::MAX).unwrap();
            assert_eq!((s.shape.slots, s.shape.bits, s.shape.load), (3, 16, max_load(3)), "table {i}");
            spent += table_bound(&s.params, s.capacity);
        }
        // A looser rate starts with the shape of a fixed filter's words.
        let s = size_growth_table(1000, 0.05, 0.0, u64::MAX).unwrap();
        assert_eq!((s.shape.slots, s.shape.bits), (4, 12));
        assert!(matches!(size_growth_table(1000, 1e-7, 0.0, u64::MAX), Err(SizingError::Fpp(_))));
    }

    #[test]
    fn rejects_absurd_parameters() {
        for bad in [0.0, 1.0, -0.5, f64::NAN, f64::INFINITY, 1e-9] {
            assert!(matches!(size_for_capacity(10, bad, u64::MAX), Err(SizingError::Fpp(_))), "{bad}");
            assert!(matches!(size_for_items(10, bad, u64::MAX), Err(SizingError::Fpp(_))), "{bad}");
        }
        assert!(matches!(size_for_capacity(0, 0.01, u64::MAX), Err(SizingError::Capacity(_))));
        for f in [size_for_capacity, size_for_items] {
            assert!(matches!(f(u64::MAX, 0.01, u64::MAX), Err(SizingError::Capacity(_))));
            assert!(matches!(f(1_000_001, 0.01, 1000), Err(SizingError::Capacity(_))));
            assert!(matches!(f(1 << 40, 0.01, u64::MAX), Err(SizingError::Capacity(_))));
        }
    }

    #[test]
    fn no_waste_cliff_across_capacities() {
        // Exact bucket counts: the load is within a bucket of the plan for every
        // count, so bits per item never jump; the capacity-sized plan approaches
        // the shape's load smoothly as tables grow.
        for fpp in [0.01, DEFAULT_FPP, 0.0001] {
            let shape = shape_for(fpp).unwrap();
            let mut last_load = 0.0;
            for n in (1..3000u64).chain((0..300).map(|i| 3000 + i * 33_331)) {
                let s = size_for_items(n, fpp, u64::MAX).unwrap();
                let slots = s.params.slot_count();
                let load = n as f64 / slots as f64;
                assert!(load <= shape.load + 1e-12, "{n}: load {load}");
                assert!(
                    slots < shape.slots as u64 || (slots - shape.slots as u64) as f64 * shape.load < n as f64,
                    "{n}: one bucket too many"
                );
                let c = size_for_capacity(n, fpp, u64::MAX).unwrap();
                let cslots = c.params.slot_count();
                assert!(c.capacity >= n);
                assert!(n as f64 / cslots as f64 <= planned_load(&shape, cslots) + 1e-12);
                // One bucket fewer would not hold the capacity.
                let fewer = cslots - shape.slots as u64;
                assert!(fewer == 0 || ((fewer as f64) * planned_load(&shape, fewer)).floor() < n as f64, "{n}");
                if n > 1000 {
                    let l = n as f64 / cslots as f64;
                    // Falls by at most the one-bucket granularity.
                    assert!(
                        l > last_load - shape.slots as f64 / n as f64,
                        "{n}: planned load fell from {last_load} to {l}"
                    );
                    last_load = l;
                }
            }
            assert!(last_load > shape.load - 0.001, "large tables plan at the shape's load");
        }
    }
}
