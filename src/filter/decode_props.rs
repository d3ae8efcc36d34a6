//! Property tests of the decoders that read what any role can send: a
//! value's bytes (formats 1, 2 and 3), a partial state's sorted runs and a
//! `cf_sharded_state`'s packed keys. Whatever the bytes, a decoder answers
//! (accepts or refuses) without panicking, and what it accepts reads back the
//! same when encoded again; valid encodings are always accepted and decode to
//! what was encoded. Inputs are either arbitrary bytes or valid encodings with
//! a few bytes overwritten, cut short or extended (the mutations the SQL
//! fuzzer in tests/security applies too).

use proptest::prelude::*;

use super::build::{check_run, encode_run, run_hashes, sort_dedup};
use super::dense::{self, Dense, V2_HEADER_BYTES};
use super::hash::hash_i64;
use super::key_type::KeyType;
use super::layout::{self, DEFAULT_SEED};
use super::multi;
use super::packed;
use super::sizing::size_for_items;
use super::OwnedFilter;

/// A valid format-2 encoding of a filter of `keys` at rate `fpp`.
fn value_bytes(keys: &[i64], fpp: f64) -> Vec<u8> {
    let s = size_for_items(keys.len().max(1) as u64, fpp, u64::MAX).unwrap();
    let f = OwnedFilter::with_capacity(s.params, s.capacity);
    for &k in keys {
        let _ = f.table().insert(hash_i64(DEFAULT_SEED, k));
    }
    dense::encode(&multi::header_of(&f, KeyType::NONE), f.words())
}

/// What the extension's input does with a value's bytes, without PostgreSQL:
/// parse the header and validate every bucket. Returns the encoding again
/// when accepted (format 2: the tables' words re-encoded).
fn read_value(bytes: &[u8]) -> Option<Vec<u8>> {
    match layout::format_version(bytes).ok()? {
        1 => {
            let (params, _items) = layout::parse_v1(bytes).ok()?;
            let _ = params;
            Some(bytes.to_vec())
        }
        2 => {
            let h = dense::parse_v2(bytes).ok()?;
            let d = Dense::new(&h.params, &bytes[V2_HEADER_BYTES..]);
            d.validate(h.items).ok()?;
            Some(dense::encode(&h, d.words()))
        }
        3 => {
            let h = multi::parse_v3(bytes).ok()?;
            multi::validate_v3(bytes, &h).ok()?;
            for t in multi::tables(bytes, &h) {
                let _ = t.contains(12345);
            }
            Some(bytes.to_vec())
        }
        _ => None,
    }
}

#[derive(Debug, Clone)]
enum Mutation {
    Set(usize, u8),
    Word(usize, u64),
    Truncate(usize),
    Extend(Vec<u8>),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let boundary =
        prop_oneof![Just(0u64), Just(1), Just(u32::MAX as u64), Just(i64::MAX as u64), Just(u64::MAX), any::<u64>()];
    prop_oneof![
        (any::<usize>(), prop_oneof![Just(0u8), Just(0xff), Just(0x7f), Just(0x80), any::<u8>()])
            .prop_map(|(i, b)| Mutation::Set(i, b)),
        (any::<usize>(), boundary).prop_map(|(i, w)| Mutation::Word(i, w)),
        any::<usize>().prop_map(Mutation::Truncate),
        proptest::collection::vec(any::<u8>(), 1..32).prop_map(Mutation::Extend),
    ]
}

fn mutate(mut b: Vec<u8>, ms: &[Mutation]) -> Vec<u8> {
    for m in ms {
        match m {
            Mutation::Set(i, x) if !b.is_empty() => {
                let n = b.len();
                b[i % n] = *x;
            }
            Mutation::Word(i, w) if b.len() >= 8 => {
                let at = (i % (b.len() / 8)) * 8;
                b[at..at + 8].copy_from_slice(&w.to_le_bytes());
            }
            Mutation::Truncate(i) if !b.is_empty() => {
                let n = b.len();
                b.truncate(i % n);
            }
            Mutation::Extend(more) => b.extend_from_slice(more),
            _ => {}
        }
    }
    b
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic_a_value_decoder(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = read_value(&bytes);
        // The magic and version of this release in front of arbitrary bytes.
        for v in [1u8, 2, 3] {
            let mut b = b"CKOF".to_vec();
            b.push(v);
            b.extend_from_slice(&bytes);
            let _ = read_value(&b);
        }
    }

    #[test]
    fn a_valid_value_reads_back_the_same(keys in proptest::collection::vec(any::<i64>(), 0..300), fpp in prop_oneof![Just(0.5), Just(0.01), Just(1e-6)]) {
        let b = value_bytes(&keys, fpp);
        prop_assert_eq!(read_value(&b), Some(b.clone()));
    }

    #[test]
    fn a_mutated_value_is_refused_or_reads_back_the_same(keys in proptest::collection::vec(any::<i64>(), 0..200), ms in proptest::collection::vec(mutation(), 1..4)) {
        let b = mutate(value_bytes(&keys, 0.01), &ms);
        if let Some(again) = read_value(&b) {
            // Accepted: encoding what was read gives the same bytes, so what
            // input accepts, output writes back unchanged.
            prop_assert_eq!(again, b);
        }
    }

    #[test]
    fn runs_round_trip_and_mutated_runs_never_panic(mut hs in proptest::collection::vec(any::<u64>(), 0..400), ms in proptest::collection::vec(mutation(), 1..4)) {
        let n = sort_dedup(&mut hs);
        hs.truncate(n);
        let run = encode_run(&hs);
        prop_assert_eq!(check_run(&run), Ok(n as u64));
        prop_assert_eq!(run_hashes(&run).unwrap().into_owned(), hs.clone());
        let rice = super::build::encode_rice(&hs);
        prop_assert_eq!(run_hashes(&rice).unwrap().into_owned(), hs);
        for b in [mutate(run, &ms), mutate(rice, &ms)] {
            if check_run(&b).is_ok() {
                let _ = run_hashes(&b);
            }
        }
    }

    #[test]
    fn packed_keys_round_trip_and_mutated_ones_never_panic(mut keys in proptest::collection::vec(any::<u64>(), 0..400), ms in proptest::collection::vec(mutation(), 1..4), claimed in prop_oneof![Just(0usize), Just(1), Just(1000), Just(usize::MAX), any::<usize>()]) {
        keys.sort_unstable();
        keys.dedup();
        let mut b = Vec::new();
        packed::encode(&keys, &mut b);
        let mut out = vec![0u64; keys.len()];
        prop_assert!(packed::decode_into(&b, &mut out).is_ok());
        prop_assert_eq!(&out, &keys);
        let m = mutate(b, &ms);
        // A decoder sizes nothing by a claimed count it has not checked
        // against the input's length.
        let n = if packed::fits(claimed, m.len()) { claimed.min(1 << 16) } else { keys.len() };
        let mut out = vec![0u64; n];
        if packed::decode_into(&m, &mut out).is_ok() {
            prop_assert!(out.windows(2).all(|w| w[0] < w[1]));
        }
    }
}
