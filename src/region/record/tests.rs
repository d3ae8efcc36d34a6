//! Tests of the WAL records: round trips, every truncation refused.

use super::*;

fn meta() -> Meta {
    Meta {
        db: 5,
        owner: 10,
        readers: 0,
        capacity: 1000,
        fpp: 0.002,
        params: Params {
            fingerprint_bits: 12,
            slots_per_bucket: 4,
            bucket_count: 300,
            seed: 7,
            mapping: Mapping::Fastrange,
        },
        name: "f".into(),
        key: KeyType::NONE,
        growth: None,
        more: Vec::new(),
        queue: QueueCounts::default(),
    }
}

fn queued() -> QueueCounts {
    QueueCounts { queued: 10, settled: 7, dropped: 1, refused: u64::MAX }
}

fn grown() -> Meta {
    let p =
        Params { fingerprint_bits: 16, slots_per_bucket: 3, bucket_count: 700, seed: 7, mapping: Mapping::Fastrange };
    Meta {
        growth: Some(Growth { fpp: 0.002, expansion: 2 }),
        more: vec![
            TableSpec { params: p, capacity: 1900 },
            TableSpec { params: Params { bucket_count: 1400, ..p }, capacity: 3800 },
        ],
        ..meta()
    }
}

fn all() -> Vec<Record> {
    vec![
        Record::Create(meta()),
        Record::Create(Meta { key: KeyType { kind: crate::filter::KeyKind::Builtin, oid: 20 }, ..meta() }),
        Record::ContentBegin { kind: ContentKind::Image, gen: 99, cut: 0, meta: meta() },
        Record::ContentBegin {
            kind: ContentKind::Publish,
            gen: 99,
            cut: 0,
            meta: Meta { key: KeyType { kind: crate::filter::KeyKind::Enum, oid: 16_400 }, ..meta() },
        },
        Record::ContentBegin { kind: ContentKind::Cut, gen: 99, cut: 120, meta: meta() },
        Record::ContentChunk { begin: 3, offset: 8, words: vec![1, 2, 3] },
        Record::ContentEnd { begin: 3, items: 17 },
        Record::Insert { gen: 1, hash: 2 },
        Record::Refused { gen: 1, hash: 2, insert_end: 3 },
        Record::Delete { gen: 1, hash: 2 },
        Record::InsertMany { gen: 1, hashes: vec![2, 3, u64::MAX] },
        Record::DeleteMany { gen: 1, hashes: vec![2, 3] },
        Record::RefusedMany { gen: 1, insert_end: 9, refused: vec![(0, 2), (7, u64::MAX)] },
        Record::RefusedMany { gen: 1, insert_end: 9, refused: vec![(3, 2)] },
        Record::InsertMany { gen: 1, hashes: (0..MANY_MAX as u64).collect() },
        Record::Drop { gen: 1 },
        Record::Grant { gen: 1, readers: u64::MAX },
        Record::PassBegin,
        Record::PassDone { begin: 4, filters: 2 },
        Record::Placeholder { gen: 4, reason: 2, meta: meta() },
        Record::Cut { gen: 4, base: true, logged: true },
        Record::Cut { gen: 4, base: true, logged: false },
        Record::Cut { gen: 4, base: false, logged: false },
        Record::Discard { gen: 4 },
        Record::KeyType { gen: 4, key: KeyType { kind: crate::filter::KeyKind::Builtin, oid: 25 } },
        Record::Pass { frozen: false, began: 3, live: vec![] },
        Record::Pass { frozen: true, began: 8, live: vec![(4, 9), (u64::MAX, 0)] },
        Record::Horizon { gen: 4, db: 5, xid: u32::MAX },
        Record::Create(Meta { fpp: 1.0, ..meta() }),
        Record::Create(Meta { key: KeyType { kind: crate::filter::KeyKind::Pending, oid: 0 }, ..meta() }),
        Record::Create(grown()),
        Record::Create(Meta { key: KeyType { kind: crate::filter::KeyKind::Builtin, oid: 20 }, ..grown() }),
        Record::Create(Meta { growth: Some(Growth { fpp: 0.01, expansion: 4 }), ..meta() }),
        Record::ContentBegin { kind: ContentKind::Cut, gen: 99, cut: 120, meta: Meta { growth: None, ..grown() } },
        Record::Queue { gen: 4, add: queued() },
        Record::Queue { gen: 4, add: QueueCounts { settled: 3, ..QueueCounts::default() } },
        Record::Create(Meta { queue: queued(), ..meta() }),
        Record::ContentBegin { kind: ContentKind::Cut, gen: 99, cut: 120, meta: Meta { queue: queued(), ..grown() } },
        Record::Placeholder {
            gen: 4,
            reason: 2,
            meta: Meta { queue: queued(), key: KeyType { kind: crate::filter::KeyKind::Builtin, oid: 20 }, ..meta() },
        },
    ]
}

#[test]
fn records_round_trip() {
    for r in all() {
        let (k, body) = r.encode();
        assert_eq!(Record::decode(k, &body).unwrap(), r);
    }
}

#[test]
fn truncated_extended_or_mislabelled_records_are_refused() {
    for r in all() {
        let (k, body) = r.encode();
        for cut in 0..body.len() {
            // A chunk, or a batch's list of hashes or refusals, may be cut
            // at an element's boundary and stay a valid (shorter) record.
            if let Ok(d) = Record::decode(k, &body[..cut]) {
                let (start, size) = match d {
                    Record::ContentChunk { .. } => (16, 8),
                    Record::Insert { .. }
                    | Record::Delete { .. }
                    | Record::InsertMany { .. }
                    | Record::DeleteMany { .. } => (8, 8),
                    Record::RefusedMany { .. } => (16, 12),
                    // The length tells a single refusal (24 bytes) from a
                    // batch's (16 + 12 per refusal).
                    Record::Refused { .. } if cut == 24 && matches!(r, Record::RefusedMany { .. }) => continue,
                    _ => panic!("{r:?} cut at {cut} decoded as {d:?}"),
                };
                assert!(
                    matches!(
                        r,
                        Record::ContentChunk { .. }
                            | Record::InsertMany { .. }
                            | Record::DeleteMany { .. }
                            | Record::RefusedMany { .. }
                    ),
                    "{r:?} cut at {cut} decoded as {d:?}"
                );
                assert!(cut > start && (cut - start) % size == 0, "{r:?} cut at {cut} decoded as {d:?}");
            }
        }
        let mut longer = body.clone();
        longer.push(0);
        assert!(Record::decode(k, &longer).is_err(), "{r:?} with a byte too many");
    }
    assert!(Record::decode(Kind::Ext, &[]).is_err());
    assert!(Record::decode(Kind::Ext, &[9]).is_err());
    let (k, mut body) = Record::Create(meta()).encode();
    body[49] = 0; // slots per bucket
    assert!(Record::decode(k, &body).unwrap_err().contains("parameters"));
}

#[test]
fn metadata_without_a_key_type_is_written_as_before() {
    // 0.5.0's CREATE of `meta()`: the name length byte has no flag, nothing
    // follows the name.
    let (k, body) = Record::Create(meta()).encode();
    assert_eq!(body[body.len() - 2], 1, "name length");
    assert_eq!(&body[body.len() - 1..], b"f");
    assert_eq!(Record::decode(k, &body).unwrap(), Record::Create(meta()));
    // With a key type: flagged, and kind and OID after the name.
    let typed = Meta { key: KeyType { kind: crate::filter::KeyKind::Builtin, oid: 25 }, ..meta() };
    let (k, mut body) = Record::Create(typed).encode();
    assert_eq!(body[body.len() - 7], 0x81);
    // A flagged key type that is not valid is refused.
    let at = body.len() - 4;
    body[at..].copy_from_slice(&0u32.to_le_bytes());
    assert!(Record::decode(k, &body).unwrap_err().contains("key type"));
}

#[test]
fn queue_counts_follow_the_tables_only_when_not_zero() {
    // A filter of one table with no account: no chain part (as 0.6.0 wrote).
    let (_, plain) = Record::Create(meta()).encode();
    // With an account: the chain part's fixed start (no growth), a count of
    // tables flagged, then the four counts.
    let (k, body) = Record::Create(Meta { queue: queued(), ..meta() }).encode();
    assert_eq!(body.len(), plain.len() + CHAIN_FIXED_BYTES + QUEUE_BYTES);
    assert_eq!(body[plain.len() - 2], 1 | CHAIN_FOLLOWS, "name length byte");
    assert_eq!(body[plain.len() + CHAIN_FIXED_BYTES - 1], QUEUE_FOLLOWS, "no tables, counts follow");
    assert_eq!(Record::decode(k, &body).unwrap(), Record::Create(Meta { queue: queued(), ..meta() }));
    // A chain part with nothing in it is still refused.
    let mut empty = body[..plain.len() + CHAIN_FIXED_BYTES].to_vec();
    *empty.last_mut().unwrap() = 0;
    assert!(Record::decode(k, &empty).unwrap_err().contains("empty chain"));
    // What is outstanding never goes below zero.
    assert_eq!(QueueCounts { settled: 12, ..queued() }.outstanding(), 0);
    assert_eq!(queued().outstanding(), 3);
    assert_eq!(QueueCounts::from_words(queued().words()), queued());
}
