//! Filters that grow in the region, and the caps on what each owner and
//! database may take.

use super::*;

#[test]
fn a_filter_grows_in_the_region_and_its_tables_go_with_it() {
    use crate::filter::Growth;
    let (m, r) = region(32 << 20);
    let lk = lock();
    let free_before = r.free_bytes();
    let growth = Growth { fpp: DEFAULT_FPP, expansion: 2 };
    let first = growth.first(1000, u64::MAX).unwrap();
    for durable in [false, true] {
        let name = if durable { "durable" } else { "plain" };
        let info = r
            .create(
                &lk,
                &NewFilter { growth: Some(growth), durable, ..spec(1, name) },
                &[TableSpec { params: first.params, capacity: first.capacity }],
                None,
                &mut |_, _| 0,
            )
            .unwrap();
        let threads: Vec<_> = (0..2u64)
            .map(|t| {
                let (info, _m) = (info.clone(), m.clone());
                std::thread::spawn(move || {
                    let _region_memory = &_m;
                    for k in 0..100_000u64 {
                        let _pin = r.pin_writer(1 + t as usize).unwrap();
                        let tables = r.tables(&info).unwrap();
                        tables
                            .chain()
                            .insert(hash_i64(DEFAULT_SEED, (2 * k + t) as i64))
                            .expect("a filter that grows has room");
                    }
                })
            })
            .collect();
        threads.into_iter().for_each(|h| h.join().unwrap());
        let tables = r.tables(&info).unwrap();
        let shapes = tables.shapes();
        assert!(shapes.len() >= 7, "{} tables", shapes.len());
        assert_eq!(shapes.iter().map(|s| s.items).sum::<u64>(), 200_000);
        assert!((0..200_000).all(|k| tables.chain().contains(hash_i64(DEFAULT_SEED, k))));
        let bound: f64 = shapes.iter().map(|s| crate::filter::table_bound(&s.params, s.capacity)).sum();
        assert!(bound <= DEFAULT_FPP);
        if durable {
            // Units over every table, numbered table after table; every one
            // of them was written to.
            let units = tables.units().unwrap();
            let total: u64 = shapes.iter().map(|s| crate::region::durable::unit_count(s.params.bucket_count)).sum();
            assert_eq!(units.count(), total);
            assert!(units.any_changed());
            let marked = units.mark(false);
            assert!(marked.len() as u64 > total / 2);
            let mut buf = vec![0u64; UNIT_WORDS as usize];
            for &u in &marked {
                units.take(u, &mut buf);
            }
        }
        r.check().unwrap();
        assert_eq!(tables.blocks() * BLOCK_BYTES, free_before - r.free_bytes());
        // The entry's count of its tables agrees, the races lost by one
        // thread's table (given back) included.
        assert_eq!(r.charged_bytes(&info), tables.blocks() * BLOCK_BYTES);
        assert_eq!(r.usage(10, 1, None).0, Usage { filters: 1, bytes: tables.blocks() * BLOCK_BYTES });
        r.drop_filter(&lk, &info).unwrap();
        r.reclaim(&lk);
        r.check().unwrap();
        assert_eq!(r.free_bytes(), free_before, "a table was not freed with its filter");
    }
}

/// When the region has no room for the next table, inserts report the filter
/// full and everything stored stays found.
#[test]
fn a_filter_without_room_to_grow_is_full_and_keeps_its_keys() {
    use crate::filter::Growth;
    let (_m, r) = region(2 << 20);
    let lk = lock();
    let growth = Growth { fpp: DEFAULT_FPP, expansion: 2 };
    let first = growth.first(1000, u64::MAX).unwrap();
    let info = r
        .create(
            &lk,
            &NewFilter { growth: Some(growth), ..spec(1, "g") },
            &[TableSpec { params: first.params, capacity: first.capacity }],
            None,
            &mut |_, _| 0,
        )
        .unwrap();
    let tables = r.tables(&info).unwrap();
    let mut stored = 0i64;
    while tables.chain().insert(hash_i64(DEFAULT_SEED, stored)).is_ok() {
        stored += 1;
    }
    assert!(stored > 10_000);
    assert!((0..stored).all(|k| tables.chain().contains(hash_i64(DEFAULT_SEED, k))));
    assert_eq!(tables.chain().item_count(), stored as u64);
    r.check().unwrap();
    // Further inserts (some fit where a key's buckets have room) lose nothing.
    let more = (1..=1000i64).filter(|k| tables.chain().insert(hash_i64(DEFAULT_SEED, -k)).is_ok()).count() as u64;
    assert!(more < 1000);
    assert!((0..stored).all(|k| tables.chain().contains(hash_i64(DEFAULT_SEED, k))));
    assert_eq!(tables.chain().item_count(), stored as u64 + more);
    r.check().unwrap();
}

fn owned(db: u32, owner: u32, name: &str) -> NewFilter<'_> {
    NewFilter { owner, ..spec(db, name) }
}

/// Usage is counted per owner over every database and per database over
/// every owner, every table of a filter included; a drop releases it, a
/// publish replaces it.
#[test]
fn usage_counts_every_table_by_owner_and_database() {
    let (_m, r) = region(8 << 20);
    let lk = lock();
    let a = r.create(&lk, &owned(1, 10, "a"), &one(1000), None, &mut |_, _| 0).unwrap();
    // A filter of two tables (a published value of a filter that grew).
    let two = [TableSpec { params: params(1000), capacity: 1000 }, TableSpec { params: params(8000), capacity: 8000 }];
    let b = r.create(&lk, &owned(2, 10, "b"), &two, None, &mut |_, _| 0).unwrap();
    r.create(&lk, &owned(1, 11, "c"), &one(4000), None, &mut |_, _| 0).unwrap();
    let (a_bytes, b_bytes, c_bytes) = (
        Region::bytes_for_tables(&one(1000), false),
        Region::bytes_for_tables(&two, false),
        Region::bytes_for_tables(&one(4000), false),
    );
    assert!(b_bytes > a_bytes + BLOCK_BYTES);
    assert_eq!(r.charged_bytes(&a), a_bytes);
    assert_eq!(r.charged_bytes(&b), b_bytes);
    // Role 10 over both databases; database 1 over both roles.
    assert_eq!(
        r.usage(10, 1, None),
        (Usage { filters: 2, bytes: a_bytes + b_bytes }, Usage { filters: 2, bytes: a_bytes + c_bytes })
    );
    assert_eq!(
        r.usage(10, 1, Some(a.index)),
        (Usage { filters: 1, bytes: b_bytes }, Usage { filters: 1, bytes: c_bytes })
    );
    assert_eq!(r.usage(12, 3, None), (Usage::default(), Usage::default()));
    assert_eq!(
        r.usage_rows(),
        vec![
            UsageRow { owner: 10, db: 1, usage: Usage { filters: 1, bytes: a_bytes } },
            UsageRow { owner: 10, db: 2, usage: Usage { filters: 1, bytes: b_bytes } },
            UsageRow { owner: 11, db: 1, usage: Usage { filters: 1, bytes: c_bytes } },
        ]
    );
    // A publish over b with one table: b's two tables are released.
    let b2 = r
        .replace(
            &lk,
            &b,
            &one(1000),
            &|_, w: &mut [u64]| w.fill(0),
            1000,
            DEFAULT_FPP,
            false,
            KeyType::NONE,
            None,
            (b.owner, b.readers),
            &mut |_, _| 0,
        )
        .unwrap();
    assert_eq!(r.charged_bytes(&b2), a_bytes);
    assert_eq!(r.usage(10, 2, None).0, Usage { filters: 2, bytes: 2 * a_bytes });
    // A dropped filter is charged to nobody (its blocks may still be read).
    r.drop_filter(&lk, &a).unwrap();
    assert_eq!(r.usage(10, 1, None), (Usage { filters: 1, bytes: a_bytes }, Usage { filters: 1, bytes: c_bytes }));
    // A placeholder (contents lost) is a filter without bytes.
    let p = r.create_placeholder(&lk, &owned(1, 10, "p"), &params(1000), 9, 2).unwrap();
    assert_eq!(r.charged_bytes(&p), 0);
    assert_eq!(r.usage(10, 1, None).0, Usage { filters: 2, bytes: a_bytes });
    r.check().unwrap();
}

/// Creation and replacement under the lock keep exactly to the caps; a
/// second owner and another database are not affected; with no caps
/// nothing is refused.
#[test]
fn admit_keeps_to_the_caps_of_owner_and_database() {
    let (_m, r) = region(8 << 20);
    let lk = lock();
    let bytes = Region::bytes_for_tables(&one(1000), false);
    let mut n = 0;
    let mut make = |db: u32, owner: u32, limits: &Limits| {
        n += 1;
        let name = format!("f{n}");
        r.admit(&lk, limits, owner, db, bytes, None)?;
        r.create(&lk, &owned(db, owner, &name), &one(1000), None, &mut |_, _| 0)
    };
    let two = Limits { role_filters: Some(2), ..Limits::default() };
    make(1, 10, &two).unwrap();
    make(2, 10, &two).unwrap();
    // The third filter of role 10, in any database, is refused.
    assert_eq!(
        make(3, 10, &two),
        Err(RegionError::OverLimit(LimitHit {
            kind: LimitKind::RoleFilters,
            owner: 10,
            db: 3,
            used: 2,
            requested: 1,
            cap: 2,
            replacing: false
        }))
    );
    make(1, 11, &two).unwrap();
    // Database 1 holds two filters (of two roles).
    let db_two = Limits { database_filters: Some(2), ..Limits::default() };
    assert!(matches!(
        make(1, 12, &db_two),
        Err(RegionError::OverLimit(LimitHit { kind: LimitKind::DatabaseFilters, used: 2, .. }))
    ));
    make(4, 12, &db_two).unwrap();
    // Bytes: role 12 has one filter; room for exactly one more.
    let cap = Limits { role_bytes: Some(2 * bytes), ..Limits::default() };
    make(5, 12, &cap).unwrap();
    assert_eq!(
        make(5, 12, &cap),
        Err(RegionError::OverLimit(LimitHit {
            kind: LimitKind::RoleBytes,
            owner: 12,
            db: 5,
            used: 2 * bytes,
            requested: bytes,
            cap: 2 * bytes,
            replacing: false
        }))
    );
    let db_cap = Limits { database_bytes: Some(3 * bytes - 1), ..Limits::default() };
    assert!(
        matches!(make(1, 13, &db_cap), Err(RegionError::OverLimit(LimitHit { kind: LimitKind::DatabaseBytes, used, .. })) if used == 2 * bytes)
    );
    make(1, 13, &Limits::default()).unwrap();
    // Replacing: the new size counts, the old is released.
    let f = r.find(5, "f7").unwrap();
    let bigger = Region::bytes_for_tables(&one(50_000), false);
    assert!(r.admit(&lk, &cap, 12, 5, bytes, Some(&f)).is_ok());
    assert_eq!(
        r.admit(&lk, &cap, 12, 5, bigger, Some(&f)),
        Err(RegionError::OverLimit(LimitHit {
            kind: LimitKind::RoleBytes,
            owner: 12,
            db: 5,
            used: bytes,
            requested: bigger,
            cap: 2 * bytes,
            replacing: true
        }))
    );
    // An owner over a cap lowered since may still shrink a filter, not grow it.
    let lowered = Limits { role_bytes: Some(bytes), ..Limits::default() };
    let g = r
        .replace(
            &lk,
            &f,
            &one(50_000),
            &|_, w: &mut [u64]| w.fill(0),
            50_000,
            DEFAULT_FPP,
            false,
            KeyType::NONE,
            None,
            (f.owner, f.readers),
            &mut |_, _| 0,
        )
        .unwrap();
    assert!(r.admit(&lk, &lowered, 12, 5, bytes, Some(&g)).is_ok());
    assert!(r.admit(&lk, &lowered, 12, 5, bigger + BLOCK_BYTES, Some(&g)).is_err());
    // Contents that pass to another owner are a new filter of that owner's:
    // its filter cap counts them, and nothing it held is released.
    let one_each = Limits { role_filters: Some(0), ..Limits::default() };
    assert!(r.admit(&lk, &one_each, 12, 5, bytes, Some(&g)).is_ok());
    assert!(matches!(
        r.admit(&lk, &one_each, 99, 5, bytes, Some(&g)),
        Err(RegionError::OverLimit(LimitHit { kind: LimitKind::RoleFilters, owner: 99, .. }))
    ));
    let small = Limits { role_bytes: Some(bytes - 1), ..Limits::default() };
    assert!(matches!(
        r.admit(&lk, &small, 99, 5, bytes, Some(&g)),
        Err(RegionError::OverLimit(LimitHit { kind: LimitKind::RoleBytes, owner: 99, .. }))
    ));
    // The replace itself gives the contents, owner and grant at once.
    let h = r
        .replace(
            &lk,
            &g,
            &one(1000),
            &|_, w: &mut [u64]| w.fill(0),
            1000,
            DEFAULT_FPP,
            false,
            KeyType::NONE,
            None,
            (99, READERS_NONE),
            &mut |_, _| 0,
        )
        .unwrap();
    assert_eq!((h.owner, h.readers, h.index), (99, READERS_NONE, g.index));
    assert_eq!(r.usage(99, 5, None).0.filters, 1);
    // No caps: nothing refused.
    assert!(r.admit(&lk, &Limits::default(), 12, 5, u64::MAX / 2, None).is_ok());
    r.check().unwrap();
}

/// Growth keeps to a byte cap set on the tables: the insert that would need
/// a table past it finds the filter full (and says which cap), every key
/// stored before stays found; a refusal is remembered (no registry scan per
/// insert) until the caps or the registry change; a higher cap lets it grow
/// again.
#[test]
fn growth_keeps_to_a_byte_cap_and_keeps_its_keys() {
    use crate::filter::Growth;
    let (_m, r) = region(16 << 20);
    let lk = lock();
    let growth = Growth { fpp: DEFAULT_FPP, expansion: 2 };
    let first = growth.first(1000, u64::MAX).unwrap();
    let new = |name| NewFilter { growth: Some(growth), ..spec(1, name) };
    let info = r
        .create(&lk, &new("g"), &[TableSpec { params: first.params, capacity: first.capacity }], None, &mut |_, _| 0)
        .unwrap();
    // Another filter of the same owner in another database counts too.
    r.create(&lk, &owned(2, 10, "other"), &one(1000), None, &mut |_, _| 0).unwrap();
    let start = r.usage(10, 1, None).0.bytes;
    let cap = start + 3 * BLOCK_BYTES;
    let tables = r.tables(&info).unwrap();
    let limits = Limits { role_bytes: Some(cap), ..Limits::default() };
    tables.set_limits(limits);
    let mut stored = 0i64;
    loop {
        match tables.chain().insert(hash_i64(DEFAULT_SEED, stored)) {
            Ok(_) => stored += 1,
            Err(_) => {
                tables.note_full();
                break;
            }
        }
    }
    let hit = tables.refused_by_cap().expect("refused by the cap");
    assert_eq!((hit.kind, hit.owner, hit.db, hit.cap), (LimitKind::RoleBytes, 10, 1, cap));
    assert!(hit.used + hit.requested > cap);
    assert!(r.usage(10, 1, None).0.bytes <= cap, "the cap was passed");
    assert_eq!(r.charged_bytes(&info), tables.blocks() * BLOCK_BYTES);
    assert!((0..stored).all(|k| tables.chain().contains(hash_i64(DEFAULT_SEED, k))));
    // Refused again while nothing changes (the refusal is remembered, the
    // registry not read again); each set of the caps starts the report anew.
    tables.set_limits(limits);
    assert_eq!(tables.refused_by_cap(), None);
    let mut k = -1;
    while tables.chain().insert(hash_i64(DEFAULT_SEED, k)).is_ok() {
        k -= 1;
    }
    tables.note_full();
    assert_eq!(tables.refused_by_cap(), Some(hit));
    // A higher cap: it grows again, and everything stays found.
    tables.set_limits(Limits { role_bytes: Some(cap + (8 << 20)), ..Limits::default() });
    let more = stored + 20_000;
    for k in stored..more {
        tables.chain().insert(hash_i64(DEFAULT_SEED, k)).expect("room under the higher cap");
    }
    assert_eq!(tables.refused_by_cap(), None);
    assert!((0..more).all(|k| tables.chain().contains(hash_i64(DEFAULT_SEED, k))));
    assert_eq!(r.charged_bytes(&info), tables.blocks() * BLOCK_BYTES);
    // Dropping another filter of the owner (a registry change) makes room
    // under the first cap again for a table of that size.
    let info2 = r
        .create(&lk, &new("h"), &[TableSpec { params: first.params, capacity: first.capacity }], None, &mut |_, _| 0)
        .unwrap();
    let t2 = r.tables(&info2).unwrap();
    let used = r.usage(10, 1, None).0.bytes;
    t2.set_limits(Limits { database_bytes: Some(used), ..Limits::default() });
    let mut k = 0i64;
    while t2.chain().insert(hash_i64(DEFAULT_SEED, 1 << 40 | k)).is_ok() {
        k += 1;
    }
    t2.note_full();
    assert_eq!(t2.refused_by_cap().map(|h| h.kind), Some(LimitKind::DatabaseBytes));
    r.drop_filter(&lk, &r.find(2, "other").unwrap()).unwrap();
    r.drop_filter(&lk, &info).unwrap();
    t2.set_limits(Limits { database_bytes: Some(used), ..Limits::default() });
    assert!(t2.chain().insert(hash_i64(DEFAULT_SEED, 1 << 40 | k)).is_ok());
    assert!(t2.handles().len() >= 2);
    r.reclaim(&lk);
    r.check().unwrap();
}

/// Recovery and replay set no caps: growth is never refused for them.
#[test]
fn tables_without_caps_grow_as_before() {
    use crate::filter::Growth;
    let (_m, r) = region(8 << 20);
    let lk = lock();
    let growth = Growth { fpp: DEFAULT_FPP, expansion: 2 };
    let first = growth.first(1000, u64::MAX).unwrap();
    let info = r
        .create(
            &lk,
            &NewFilter { growth: Some(growth), ..spec(1, "g") },
            &[TableSpec { params: first.params, capacity: first.capacity }],
            None,
            &mut |_, _| 0,
        )
        .unwrap();
    let tables = r.tables(&info).unwrap();
    for k in 0..50_000 {
        tables.chain().insert(hash_i64(DEFAULT_SEED, k)).unwrap();
    }
    assert!(tables.handles().len() >= 4);
    assert_eq!(r.charged_bytes(&info), tables.blocks() * BLOCK_BYTES);
}
