//! Replay of each kind of record (`Replay::apply` dispatches here), as
//! PostgreSQL writes one redo routine per record.

use super::*;

impl Replay {
    /// Replay of a `Create` record ending at `end`.
    pub(super) fn redo_create(&mut self, r: &Region, meta: Meta, end: u64) {
        self.install(r, &meta, end, Content::Empty, false);
        self.based.insert(end, end);
    }

    /// Replay of a `ContentBegin` record ending at `end`.
    pub(super) fn redo_content_begin(&mut self, r: &Region, ck: ContentKind, gen: u64, cut: u64, meta: Meta, end: u64) {
        if ck == ContentKind::Cut && self.waiting.get(&gen).is_none_or(|w| w.cut != cut) {
            // Contents for a filter replay has: its own are current
            // (its base of that cut replaces its older files once the
            // contents are replayed).
            self.compacted.insert(end, (gen, cut));
            return;
        }
        if ck == ContentKind::Publish {
            // Publishes are logged under the registry lock, one at a
            // time: one still unfinished was abandoned (its primary
            // stopped), and its memory is given back.
            self.builds.retain(|_, b| b.kind != ContentKind::Publish);
        }
        let gen = if ck == ContentKind::Publish { end } else { gen };
        let n = meta.word_count();
        let mut words = Vec::new();
        if n.saturating_mul(8) <= r.layout().data_bytes() && words.try_reserve_exact(n as usize).is_ok() {
            words.resize(n as usize, 0);
        }
        self.builds.insert(end, Build { kind: ck, gen, cut, meta, words, filled: 0 });
    }

    /// Replay of a `ContentChunk` record ending at `end`.
    pub(super) fn redo_content_chunk(&mut self, r: &Region, begin: u64, offset: u64, words: Vec<u64>, end: u64) {
        let Some(b) = self.builds.get_mut(&begin) else { return };
        let n = b.meta.word_count();
        // Contents of a cut skip runs of empty units; others are whole.
        let in_order = if b.kind == ContentKind::Cut { offset >= b.filled } else { offset == b.filled };
        if !in_order || offset + words.len() as u64 > n {
            let why = format!("contents chunk at word {offset} of {n} after {} words were received", b.filled);
            let gen = b.gen;
            self.builds.remove(&begin);
            self.refuse(r, Some(gen), end, why);
            return;
        }
        if !b.words.is_empty() {
            b.words[offset as usize..offset as usize + words.len()].copy_from_slice(&words);
        }
        b.filled = offset + words.len() as u64;
    }

    /// Replay of a `ContentEnd` record ending at `end`.
    pub(super) fn redo_content_end(&mut self, r: &Region, begin: u64, items: u64, end: u64) {
        if let Some((gen, cut)) = self.compacted.remove(&begin) {
            remove_before_base(gen, cut, end);
            return;
        }
        let Some(b) = self.builds.remove(&begin) else { return };
        if b.kind != ContentKind::Cut && b.filled != b.meta.word_count() {
            self.refuse(
                r,
                Some(b.gen),
                end,
                format!("contents end after {} of {} words", b.filled, b.meta.word_count()),
            );
            return;
        }
        let content = if b.words.is_empty() {
            Content::Lost(reason::NO_ROOM)
        } else {
            let mut at = 0usize;
            let counted: u64 = b
                .meta
                .tables()
                .iter()
                .map(|t| {
                    let m = t.params.bucket_count as usize;
                    at += m;
                    Geometry::new(&t.params).occupied_total(b.words[at - m..at].iter().copied())
                })
                .sum();
            if counted != items {
                self.refuse(
                    r,
                    Some(b.gen),
                    end,
                    format!("contents hold {counted} fingerprints, the record says {items}"),
                );
                return;
            }
            Content::Words(&b.words)
        };
        if b.kind == ContentKind::Cut {
            self.install_waiting(r, &b, content, end);
            return;
        }
        if b.kind == ContentKind::Image {
            if let Some((_, seen)) = &mut self.pass {
                seen.insert(b.gen);
            }
            // Contents rebuilt record by record in this replay are those
            // of the image already.
            if self.based.contains_key(&b.gen) && r.find_gen(b.gen).is_some_and(|i| i.usable()) {
                return;
            }
        }
        self.install(r, &b.meta, b.gen, content, b.kind == ContentKind::Image);
        self.based.insert(b.gen, end);
        self.refusals.retain(|_, (g, _)| *g != b.gen);
    }

    /// Replay of a `Placeholder` record ending at `end`.
    pub(super) fn redo_placeholder(&mut self, r: &Region, gen: u64, reason: u64, meta: Meta, end: u64) {
        if let Some((_, seen)) = &mut self.pass {
            seen.insert(gen);
        }
        self.install(r, &meta, gen, Content::Lost(reason), true);
        self.based.insert(gen, end);
    }

    /// Replay of an `InsertMany` record ending at `end`.
    pub(super) fn redo_insert_many(&mut self, r: &Region, gen: u64, hashes: Vec<u64>, end: u64) {
        // One pin for the batch, as the primary's.
        if let Some(stored) = self.write(r, gen, |c| hashes.iter().map(|&h| c.insert(h).is_ok()).collect::<Vec<bool>>())
        {
            for (at, _) in stored.iter().enumerate().filter(|(_, s)| !**s) {
                self.refusals.insert((end, at as u32), (gen, hashes[at]));
                set_reason(r, gen, reason::REPLAY_FULL);
            }
        }
    }

    /// Replay of a `RefusedMany` record.
    pub(super) fn redo_refused_many(&mut self, r: &Region, gen: u64, insert_end: u64, refused: Vec<(u32, u64)>) {
        for (at, hash) in refused {
            self.refused(r, gen, hash, (insert_end, at));
        }
    }

    /// Replay of a `Delete` record.
    pub(super) fn redo_delete(&mut self, r: &Region, gen: u64, hash: u64) {
        let d = self.write(r, gen, |c| c.delete(hash));
        self.deleted(r, gen, hash, d);
    }

    /// Replay of a `DeleteMany` record.
    pub(super) fn redo_delete_many(&mut self, r: &Region, gen: u64, hashes: Vec<u64>) {
        if let Some(done) = self.write(r, gen, |c| hashes.iter().map(|&h| c.delete(h)).collect::<Vec<Deleted>>()) {
            for (d, hash) in done.into_iter().zip(hashes) {
                self.deleted(r, gen, hash, Some(d));
            }
        }
    }

    /// Replay of a `Drop` record.
    pub(super) fn redo_drop(&mut self, r: &Region, gen: u64) {
        if let Some(info) = r.find_gen(gen) {
            drop_now(&info);
        }
        self.based.remove(&gen);
        self.waiting.remove(&gen);
        self.compacted.retain(|_, (g, _)| *g != gen);
        self.refusals.retain(|_, (g, _)| *g != gen);
    }

    /// Replay of a `Grant` record.
    pub(super) fn redo_grant(&mut self, r: &Region, gen: u64, readers: u64) {
        if let Some(info) = r.find_gen(gen) {
            with_registry_lock(|r, lk| {
                let _ = r.set_readers(lk, &info, readers);
            });
        }
    }

    /// Replay of a `Queue` record: bound filter `gen`'s account of its
    /// queued deletes grows (the queue itself is the primary's memory).
    pub(super) fn redo_queue(&mut self, r: &Region, gen: u64, add: &crate::region::wal::QueueCounts) {
        if let Some(info) = r.find_gen(gen).filter(|i| i.durable) {
            r.add_queue_counts(info.index, add);
        }
    }

    /// Replay of a `KeyType` record.
    pub(super) fn redo_key_type(&mut self, r: &Region, gen: u64, key: crate::filter::KeyType) {
        if let Some(info) = r.find_gen(gen) {
            with_registry_lock(|r, lk| {
                let _ = r.set_key(lk, &info, key);
            });
        }
    }

    /// Replay of a `Cut` record ending at `end`.
    pub(super) fn redo_cut(&mut self, r: &Region, gen: u64, base: bool, logged: bool, end: u64) {
        // Cuts are logged under the registry lock: no publish is in
        // progress, and one still unfinished was abandoned.
        self.builds.retain(|_, b| b.kind != ContentKind::Publish);
        // A filter's cuts are made one after another, each logging its
        // base's contents before the next: contents still awaited from
        // an earlier cut will not come (its primary stopped).
        self.give_up_waiting(gen);
        self.compacted.retain(|_, (g, _)| *g != gen);
        // This node's own copy goes to its files as of the cut, as
        // the primary's did, whatever follows. Its older files stay
        // until the logged base is replayed (`remove_before_base`).
        replay_cut(r, gen, base, end);
        if logged && self.may_be_incomplete(r, gen) {
            self.waiting.insert(gen, Waiting { cut: end, records: Vec::new(), kept: 0 });
        }
    }

    /// Replay of a `Pass` record.
    pub(super) fn redo_pass(&mut self, r: &Region, frozen: bool, began: u64, live: Vec<(u64, u64)>, end: u64) {
        if !self.passed {
            self.passed = true;
            if restored_with_gap() {
                self.reconcile(r, &live);
            }
        }
        replay_pass(r, frozen, began, &live, end);
    }

    /// Replay of a `Discard` record.
    pub(super) fn redo_discard(&mut self, r: &Region, gen: u64) {
        if let Some(info) = r.find_gen(gen) {
            drop_now(&info);
        }
        self.waiting.remove(&gen);
        replay_discard(gen);
    }

    /// Replay of a `PassDone` record.
    pub(super) fn redo_pass_done(&mut self, r: &Region, begin: u64) {
        let Some((b, seen)) = self.pass.take() else { return };
        if b != begin {
            return;
        }
        // Durable filters the pass did not mention were dropped before
        // it began (unless a record after its start made them, or files
        // that cover the pass restored them).
        for info in r.list_all() {
            let covered = r.durable_stats(info.index).stamp >= begin;
            if info.durable
                && !covered
                && !seen.contains(&info.gen)
                && self.based.get(&info.gen).is_none_or(|at| *at < begin)
            {
                drop_now(&info);
                self.based.remove(&info.gen);
            }
        }
    }
}

impl Replay {
    /// `HORIZON`: before a bound filter's deletes of keys whose row versions were
    /// deleted by transactions up to `xid`, a hot standby cancels (after
    /// `max_standby_streaming_delay`) its queries of database `db` whose
    /// snapshots may still see such a version, as replay of a heap page's pruning
    /// does; they could otherwise find a row whose key the filter no longer has.
    pub(super) fn redo_horizon(&self, db: u32, xid: u32) {
        // SAFETY: called by the startup process during replay; InHotStandby is a
        // plain read, and the resolution is PostgreSQL's own for pruned pages.
        unsafe {
            if pg_sys::standbyState >= pg_sys::HotStandbyState::STANDBY_SNAPSHOT_PENDING && xid != 0 {
                let node = pg_sys::RelFileNode {
                    spcNode: pg_sys::DEFAULTTABLESPACE_OID,
                    dbNode: pg_sys::Oid::from(db),
                    relNode: pg_sys::InvalidOid,
                };
                pg_sys::ResolveRecoveryConflictWithSnapshot(pg_sys::TransactionId::from(xid), node);
            }
        }
    }
}
