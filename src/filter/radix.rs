//! Radix sort of 64-bit hashes by some of their bits: the bulk build sorts
//! keys into bucket order with it (`build`), and the table's exclusive bulk
//! insert sorts the keys left for their other bucket (`table`).

/// Radix digits of at most 11 bits keep the scatter targets (2048 cache lines)
/// within L2.
pub const MAX_DIGIT_BITS: u32 = 11;

/// Bits needed to write every index below `m` (0 for `m ≤ 1`).
pub fn index_bits(m: u64) -> u32 {
    if m <= 1 {
        0
    } else {
        64 - (m - 1).leading_zeros()
    }
}

/// Radix sort of `items` by the low `bits` bits of `key(item)`: one scatter on the
/// high digit into memory-sized partitions, then each partition (small enough for
/// the cache) sorted on the remaining low bits, in cache. Stable.
pub fn sort_by_key_bits(items: &mut [u64], bits: u32, key: impl Fn(u64) -> u64) {
    let n = items.len();
    if bits == 0 || n < 2 {
        return;
    }
    let key = |h: u64| key(h) & (u64::MAX >> (64 - bits));
    let high_bits = bits.min(MAX_DIGIT_BITS);
    let low_bits = bits - high_bits;
    let high = |h: u64| (key(h) >> low_bits) as usize;
    let mut starts = vec![0usize; (1 << high_bits) + 1];
    for &h in items.iter() {
        starts[high(h) + 1] += 1;
    }
    for i in 1..starts.len() {
        starts[i] += starts[i - 1];
    }
    let mut scratch: Vec<u64> = super::host::vec_with_capacity(n);
    let mut next = starts.clone();
    // SAFETY: the prefix sums give each high digit a disjoint range of indices below
    // `n` whose sizes equal the digit counts, so every slot of `scratch` is written
    // exactly once before `set_len`.
    unsafe {
        let dst = scratch.as_mut_ptr();
        for &h in items.iter() {
            let d = high(h);
            dst.add(next[d]).write(h);
            next[d] += 1;
        }
        scratch.set_len(n);
    }
    if low_bits == 0 {
        items.copy_from_slice(&scratch);
        return;
    }
    // Each partition back into `items`, by the low bits (LSD passes in cache).
    let low_mask = (1u64 << low_bits) - 1;
    for p in 0..(1usize << high_bits) {
        let (a, b) = (starts[p], starts[p + 1]);
        if b - a > super::host::CHECK_EVERY || p % 64 == 63 {
            super::host::check_interrupts();
        }
        lsd_sort_into(&mut scratch[a..b], &mut items[a..b], low_bits, |h| key(h) & low_mask);
    }
}

/// LSD radix sort of `src` by the low `bits` bits of `key`, ending in `dst` (same
/// length; both buffers are overwritten, each pass writing a whole permutation
/// of the items). Stable; allocates nothing.
pub fn lsd_sort_into(src: &mut [u64], dst: &mut [u64], bits: u32, key: impl Fn(u64) -> u64) {
    let passes = bits.div_ceil(MAX_DIGIT_BITS);
    let digit_bits = bits.div_ceil(passes);
    let radix = 1usize << digit_bits;
    // On the stack: the threads of a threaded sort call this, and they may
    // not allocate (`threads`).
    let mut counts_buf = [0usize; 1 << MAX_DIGIT_BITS];
    let counts = &mut counts_buf[..radix];
    // An odd number of passes ends in `dst`; with an even number, start by moving
    // the data there so that the last pass does.
    let (mut from, mut to) = if passes % 2 == 1 {
        (src, dst)
    } else {
        dst.copy_from_slice(src);
        (dst, src)
    };
    for p in 0..passes {
        let shift = p * digit_bits;
        let digit = |h: u64| (key(h) >> shift) as usize & (radix - 1);
        counts.fill(0);
        for &h in from.iter() {
            counts[digit(h)] += 1;
        }
        let mut sum = 0;
        for c in counts.iter_mut() {
            (*c, sum) = (sum, sum + *c);
        }
        for &h in from.iter() {
            let d = digit(h);
            to[counts[d]] = h;
            counts[d] += 1;
        }
        std::mem::swap(&mut from, &mut to);
    }
}
