//! Tests of the checkpoint files: chains, truncations and flipped bytes refused, removal.

use super::*;
use crate::filter::{Mapping, Params};

fn meta() -> Meta {
    let params =
        Params { fingerprint_bits: 12, slots_per_bucket: 4, bucket_count: 300, seed: 7, mapping: Mapping::Fastrange };
    Meta {
        db: 5,
        owner: 10,
        readers: 0,
        capacity: 1000,
        fpp: 0.002,
        params,
        name: "f".into(),
        key: crate::filter::KeyType::NONE,
        growth: None,
        more: Vec::new(),
        queue: crate::region::record::QueueCounts::default(),
    }
}

fn tmpdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("cuckoo-files-test-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn write(dir: &Path, kind: Kind, stamp: u64, prev: u64, units: &[(u32, u64)]) -> u64 {
    let h = Header {
        name: Name { gen: 0xAB, stamp, kind },
        prev,
        reason: 0,
        has_contents: true,
        meta: meta(),
        units: units.len() as u64,
    };
    let mut w = FileWriter::create(dir, &h).unwrap();
    for &(u, fill) in units {
        w.unit(u, &vec![fill; UNIT_WORDS as usize]).unwrap();
    }
    w.finish().unwrap()
}

#[test]
fn headers_keep_a_key_type_and_queue_counts() {
    for with_queue in [false, true] {
        headers_keep(with_queue);
    }
}

fn headers_keep(with_queue: bool) {
    let dir = tmpdir(if with_queue { "queue" } else { "key" });
    let key = crate::filter::KeyType { kind: crate::filter::KeyKind::Builtin, oid: 20 };
    let queue = if with_queue {
        crate::region::record::QueueCounts { queued: 5, settled: 2, dropped: 1, refused: 9 }
    } else {
        crate::region::record::QueueCounts::default()
    };
    let typed = Meta { key, queue, ..meta() };
    let h = Header {
        name: Name { gen: 0xAC, stamp: 10, kind: Kind::Base },
        prev: 0,
        reason: 0,
        has_contents: true,
        meta: typed.clone(),
        units: 1,
    };
    let mut w = FileWriter::create(&dir, &h).unwrap();
    w.unit(0, &vec![7u64; UNIT_WORDS as usize]).unwrap();
    w.finish().unwrap();
    let names = list(&dir).unwrap().remove(&0xAC).unwrap();
    assert_eq!(read_header(&dir.join(names[0].file_name())).unwrap().meta, typed);
    let c = chain(&dir, &names).unwrap();
    assert_eq!(c.last.meta.key, key);
    assert_eq!(c.last.meta.queue, queue);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn chains_load_in_order_and_damage_is_refused() {
    let dir = tmpdir("chain");
    write(&dir, Kind::Base, 10, 0, &[(0, 1), (1, 1), (2, 1)]);
    write(&dir, Kind::Delta, 20, 10, &[(1, 2)]);
    write(&dir, Kind::Delta, 30, 20, &[(2, 3), (0, 3)]);
    let names = list(&dir).unwrap().remove(&0xAB).unwrap();
    assert_eq!(names.len(), 3);
    let c = chain(&dir, &names).unwrap();
    assert_eq!((c.files.len(), c.last.name.stamp, c.unreachable), (3, 30, 0));
    let mut words = vec![9u64; 300];
    load(&dir, &c, &mut words).unwrap();
    assert!(words[..128].iter().all(|&w| w == 3));
    assert!(words[128..256].iter().all(|&w| w == 2));
    assert!(words[256..].iter().all(|&w| w == 3));
    // A missing middle delta: the chain stops before it; the later file is
    // unreachable, not an error.
    std::fs::rename(dir.join(names[1].file_name()), dir.join("elsewhere")).unwrap();
    let names2 = list(&dir).unwrap().remove(&0xAB).unwrap();
    let c2 = chain(&dir, &names2).unwrap();
    assert_eq!((c2.last.name.stamp, c2.unreachable), (10, 1));
    std::fs::rename(dir.join("elsewhere"), dir.join(names[1].file_name())).unwrap();
    // Every truncation and most byte flips of any file are refused.
    for n in &names {
        let p = dir.join(n.file_name());
        let good = std::fs::read(&p).unwrap();
        for cut in (0..good.len()).step_by(97) {
            std::fs::write(&p, &good[..cut]).unwrap();
            assert!(chain(&dir, &names).is_err(), "{} cut at {cut} accepted", n.file_name());
        }
        for i in (0..good.len()).step_by(89) {
            let mut b = good.clone();
            b[i] ^= 0x04;
            std::fs::write(&p, &b).unwrap();
            assert!(chain(&dir, &names).is_err(), "{} flipped at {i} accepted", n.file_name());
            // The header has its own checksum: past it, the file still
            // says which filter it belonged to.
            if i > 120 {
                assert_eq!(read_header(&p).unwrap().meta, meta());
            }
        }
        std::fs::write(&p, &good).unwrap();
    }
    assert!(chain(&dir, &names).is_ok());
    // A newer base supersedes; removing older files keeps it loadable.
    write(&dir, Kind::Base, 40, 0, &[(1, 4)]);
    let names = list(&dir).unwrap().remove(&0xAB).unwrap();
    let c = chain(&dir, &names).unwrap();
    assert_eq!((c.files.len(), c.last.name.stamp), (1, 40));
    assert_eq!(remove(&dir, 0xAB, 40).unwrap(), 3);
    load(&dir, &chain(&dir, &list(&dir).unwrap()[&0xAB]).unwrap(), &mut words).unwrap();
    assert!(words[..128].iter().all(|&w| w == 0) && words[128..256].iter().all(|&w| w == 4));
    // An unfinished write leaves only a temporary file, which is ignored.
    let h = Header {
        name: Name { gen: 0xAB, stamp: 50, kind: Kind::Delta },
        prev: 40,
        reason: 0,
        has_contents: true,
        meta: meta(),
        units: 1,
    };
    let w = FileWriter::create(&dir, &h).unwrap();
    drop(w);
    assert_eq!(list(&dir).unwrap()[&0xAB].len(), 1);
    assert_eq!(remove_temporary(&dir).unwrap(), 1);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn coverage_round_trips_and_damage_is_refused() {
    let dir = tmpdir("coverage");
    assert_eq!(read_coverage(&dir).unwrap(), None);
    let c = Coverage {
        stamp: 0x1234_5678,
        frozen: true,
        entries: vec![
            CoverEntry { gen: 0xAB, tip: 0x1000, confirmed: 0x900, reason: 0, meta: meta() },
            CoverEntry { gen: 0xAC, tip: 0, confirmed: 0, reason: 5, meta: Meta { name: "g".into(), ..meta() } },
        ],
    };
    write_coverage(&dir, &c).unwrap();
    assert_eq!(read_coverage(&dir).unwrap(), Some(c.clone()));
    assert_eq!(foreign(&dir).unwrap(), Vec::<String>::new());
    let p = dir.join(COVERAGE);
    let good = std::fs::read(&p).unwrap();
    for i in 0..good.len() {
        let mut b = good.clone();
        b[i] ^= 0x10;
        std::fs::write(&p, &b).unwrap();
        assert!(read_coverage(&dir).is_err(), "flipped at {i} accepted");
    }
    for cut in 0..good.len() {
        std::fs::write(&p, &good[..cut]).unwrap();
        assert!(read_coverage(&dir).is_err(), "cut at {cut} accepted");
    }
    std::fs::write(dir.join("stray.bin"), b"x").unwrap();
    assert_eq!(foreign(&dir).unwrap(), vec!["stray.bin".to_string()]);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn names_round_trip() {
    let n = Name { gen: 0x1_0000_00A8, stamp: u64::MAX - 1, kind: Kind::Delta };
    assert_eq!(Name::parse(&n.file_name()), Some(n));
    assert_eq!(Name::parse("0000000000000001.0000000000000002.base.tmp"), None);
    assert_eq!(Name::parse("x.y.base"), None);
}
