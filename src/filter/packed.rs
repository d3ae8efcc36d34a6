//! A set of distinct 64-bit keys in little space, for shipping partial
//! aggregate states between nodes: the keys sorted, and each one's distance
//! from the one before it Golomb-Rice coded.
//!
//! With `n` keys spread uniformly over 64 bits the mean gap is `μ = 2^64 / n`.
//! Each gap `g` (the first key itself, then `key − previous − 1`) is written as
//! `q = g >> k` in unary (`q` one bits, then a zero bit) followed by the low `k`
//! bits of `g`, with `k = ⌊log2(μ · ln 2)⌋` (the Rice parameter of a geometric
//! distribution with that mean, derived from `n` alone, so it is not stored).
//! That costs about `log2(μ) + 1.5` bits per key: `64 − log2(n) + 1.5`, against
//! 64 for the keys themselves.
//!
//! Bits are packed least significant first into bytes; the last byte is padded
//! with zero bits. A decoder is given `n` and checks everything a damaged or
//! hand-made input could get wrong: keys that are not increasing or overflow,
//! input that ends early, and bits left over at the end.

/// The Rice parameter for `n` keys spread over 64 bits.
pub fn rice_parameter(n: usize) -> u32 {
    if n <= 1 {
        return 63;
    }
    let mean = 18_446_744_073_709_551_616.0f64 / n as f64;
    ((mean * std::f64::consts::LN_2).log2().floor()).clamp(0.0, 63.0) as u32
}

struct BitWriter<'a> {
    out: &'a mut Vec<u8>,
    acc: u64,
    used: u32,
}

impl BitWriter<'_> {
    /// Appends the low `bits` bits of `v` (`bits` ≤ 64).
    #[inline]
    fn put(&mut self, v: u64, bits: u32) {
        if bits == 0 {
            return;
        }
        let v = if bits == 64 { v } else { v & ((1u64 << bits) - 1) };
        self.acc |= v << self.used;
        let total = self.used + bits;
        if total >= 64 {
            self.out.extend_from_slice(&self.acc.to_le_bytes());
            // The bits of `v` that did not fit (none when the word was empty).
            self.acc = if self.used == 0 { 0 } else { v >> (64 - self.used) };
            self.used = total - 64;
        } else {
            self.used = total;
        }
    }

    #[inline]
    fn unary(&mut self, mut q: u64) {
        while q >= 32 {
            self.put(u32::MAX as u64, 32);
            q -= 32;
        }
        self.put((1u64 << q) - 1, q as u32);
        self.put(0, 1);
    }

    fn finish(self) {
        let bytes = self.used.div_ceil(8) as usize;
        self.out.extend_from_slice(&self.acc.to_le_bytes()[..bytes]);
    }
}

/// Appends the Rice code of `keys` (strictly increasing) to `out`.
pub fn encode(keys: &[u64], out: &mut Vec<u8>) {
    debug_assert!(keys.windows(2).all(|w| w[0] < w[1]), "keys must be strictly increasing");
    let k = rice_parameter(keys.len());
    out.reserve(keys.len() * (k as usize + 3) / 8 + 8);
    let mut w = BitWriter { out, acc: 0, used: 0 };
    let mut next = 0u64; // the smallest value the next key may have
    for &key in keys {
        let g = key - next;
        w.unary(g >> k);
        w.put(g, k);
        next = key.wrapping_add(1);
    }
    w.finish();
}

/// The number of bytes [`encode`] writes for `keys`.
pub fn encoded_len(keys: &[u64]) -> usize {
    let k = rice_parameter(keys.len()) as u64;
    let mut bits = 0u64;
    let mut next = 0u64;
    for &key in keys {
        bits += ((key - next) >> k) + 1 + k;
        next = key.wrapping_add(1);
    }
    bits.div_ceil(8) as usize
}

struct BitReader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl BitReader<'_> {
    fn remaining(&self) -> usize {
        self.bytes.len() * 8 - self.pos
    }

    /// The next `bits` bits (`bits` ≤ 56), or None past the end.
    #[inline]
    fn get(&mut self, bits: u32) -> Option<u64> {
        if bits == 0 {
            return Some(0);
        }
        if self.remaining() < bits as usize {
            return None;
        }
        let byte = self.pos / 8;
        let mut word = [0u8; 8];
        let take = (self.bytes.len() - byte).min(8);
        word[..take].copy_from_slice(&self.bytes[byte..byte + take]);
        let v = (u64::from_le_bytes(word) >> (self.pos % 8)) & ((1u64 << bits) - 1);
        self.pos += bits as usize;
        Some(v)
    }

    /// The next `bits` bits (`bits` ≤ 64).
    #[inline]
    fn get_wide(&mut self, bits: u32) -> Option<u64> {
        if bits <= 56 {
            return self.get(bits);
        }
        let lo = self.get(32)?;
        let hi = self.get(bits - 32)?;
        Some(lo | hi << 32)
    }

    /// A unary count: one bits up to the next zero bit.
    #[inline]
    fn unary(&mut self) -> Option<u64> {
        let mut q = 0u64;
        loop {
            let chunk = self.remaining().min(56) as u32;
            if chunk == 0 {
                return None;
            }
            let start = self.pos;
            let v = self.get(chunk)?;
            let ones = v.trailing_ones();
            if ones < chunk {
                self.pos = start + ones as usize + 1;
                return Some(q + ones as u64);
            }
            q += chunk as u64;
        }
    }
}

/// Whether `n` keys could be coded in `len` bytes: each takes at least its
/// `k` low bits and the unary count's closing bit. A decoder checks this
/// before it sizes anything by `n`, which comes from the input.
pub fn fits(n: usize, len: usize) -> bool {
    (n as u128) * (rice_parameter(n) as u128 + 1) <= (len as u128) * 8
}

/// Decodes the keys written by [`encode`] into `out` (as many as it holds):
/// the whole of `bytes`, no more and no less.
pub fn decode_into(bytes: &[u8], out: &mut [u64]) -> Result<(), String> {
    let n = out.len();
    if !fits(n, bytes.len()) {
        return Err(format!("{n} keys cannot fit in {} bytes", bytes.len()));
    }
    let k = rice_parameter(n);
    let mut r = BitReader { bytes, pos: 0 };
    let mut next = 0u64;
    for (i, slot) in out.iter_mut().enumerate() {
        super::host::check_every(i);
        if i > 0 && next == 0 {
            return Err("keys beyond the largest 64-bit value".into());
        }
        let q = r.unary().ok_or("the input ends inside a key")?;
        let low = r.get_wide(k).ok_or("the input ends inside a key")?;
        let g = q.checked_mul(1u64 << k).and_then(|hi| hi.checked_add(low)).ok_or("a gap beyond 64 bits")?;
        let key = next.checked_add(g).ok_or("a key beyond 64 bits")?;
        *slot = key;
        next = key.wrapping_add(1);
    }
    if r.remaining() >= 8 || r.get(r.remaining() as u32) != Some(0) {
        return Err("bytes left over after the last key".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// As [`decode_into`], into a new vector of `n` keys.
    fn decode(bytes: &[u8], n: usize) -> Result<Vec<u64>, String> {
        if !fits(n, bytes.len()) {
            return Err(format!("{n} keys cannot fit in {} bytes", bytes.len()));
        }
        let mut keys = vec![0u64; n];
        decode_into(bytes, &mut keys)?;
        Ok(keys)
    }

    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            crate::filter::hash::mix64(self.0)
        }
    }

    fn set(n: usize, seed: u64) -> Vec<u64> {
        let mut rng = Rng(seed);
        let mut v: Vec<u64> = (0..n).map(|_| rng.next()).collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    #[test]
    fn round_trips_at_every_size() {
        for n in [0usize, 1, 2, 3, 7, 100, 1000, 31_250, 200_000] {
            let keys = set(n, n as u64 + 1);
            let mut out = Vec::new();
            encode(&keys, &mut out);
            assert_eq!(out.len(), encoded_len(&keys), "n {n}");
            assert!(fits(keys.len(), out.len()), "n {n}: a real coding must pass the bound decoders check first");
            assert_eq!(decode(&out, keys.len()).unwrap(), keys, "n {n}");
        }
    }

    #[test]
    fn extremes_round_trip() {
        for keys in [
            vec![0u64],
            vec![u64::MAX],
            vec![0, 1, 2, u64::MAX - 1, u64::MAX],
            vec![0, u64::MAX],
            (0..100).collect::<Vec<u64>>(),
        ] {
            let mut out = Vec::new();
            encode(&keys, &mut out);
            assert_eq!(decode(&out, keys.len()).unwrap(), keys);
        }
    }

    #[test]
    fn costs_about_64_minus_log2_n_plus_1_5_bits_per_key() {
        for n in [1000usize, 31_250, 1_000_000] {
            let keys = set(n, 7);
            let bits = encoded_len(&keys) as f64 * 8.0 / keys.len() as f64;
            let bound = 64.0 - (keys.len() as f64).log2() + 2.0;
            assert!(bits <= bound, "n {n}: {bits:.2} bits per key, bound {bound:.2}");
            assert!(bits >= bound - 1.5, "n {n}: {bits:.2} bits per key is below the entropy");
        }
    }

    #[test]
    fn damaged_inputs_are_refused() {
        let keys = set(1000, 3);
        let mut out = Vec::new();
        encode(&keys, &mut out);
        // Cut short, one byte more, a count that does not match.
        assert!(decode(&out[..out.len() - 1], keys.len()).is_err());
        let mut longer = out.clone();
        longer.push(0);
        assert!(decode(&longer, keys.len()).is_err());
        assert!(decode(&out, keys.len() + 1).is_err());
        assert!(decode(&out, usize::MAX).is_err());
        // A count the input cannot hold is refused before anything is sized by
        // it: 400M keys in 50 MB would need 3.2 GB.
        assert!(!fits(400_000_000, 50_000_000));
        assert!(decode(&vec![0u8; 1000], 8000).is_err());
        // Padding bits that are not zero.
        let padded_set = (2..40).map(|n| set(n, 9)).find(|s| {
            let k = rice_parameter(s.len()) as u64;
            let mut next = 0u64;
            let bits: u64 = s
                .iter()
                .map(|&x| {
                    let b = ((x - next) >> k) + 1 + k;
                    next = x + 1;
                    b
                })
                .sum();
            !bits.is_multiple_of(8)
        });
        let padded_set = padded_set.expect("some set ends inside a byte");
        let mut padded = Vec::new();
        encode(&padded_set, &mut padded);
        assert_eq!(decode(&padded, padded_set.len()).unwrap(), padded_set);
        *padded.last_mut().unwrap() |= 0x80;
        assert!(decode(&padded, padded_set.len()).is_err());
        // All ones: a unary count that never ends, or keys past 2^64.
        assert!(decode(&[0xff; 64], 3).is_err());
        // Every random input either fails or decodes to increasing keys.
        let mut rng = Rng(11);
        for _ in 0..2000 {
            let len = (rng.next() % 40) as usize;
            let bytes: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
            let n = (rng.next() % 12) as usize;
            if let Ok(k) = decode(&bytes, n) {
                assert_eq!(k.len(), n);
                assert!(k.windows(2).all(|w| w[0] < w[1]));
            }
        }
    }
}
