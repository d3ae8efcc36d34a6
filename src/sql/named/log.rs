//! Writing durable named filters' changes to PostgreSQL's WAL: the custom
//! resource manager's ID ([`RM_CUCKOO_ID`]), the functions that log, and the
//! commit that waits for the WAL flush. Replay is `replay`.
//!
//! # What is logged
//!
//! Registry changes are logged under the registry lock: a creation
//! (`CREATE`, before the new entry is linked, so nobody can use a filter whose
//! record does not exist yet; the record's end position becomes the filter's
//! *generation*), a publish (`CONTENT_BEGIN`, chunks, `CONTENT_END`, also
//! before linking; the generation is the end of `CONTENT_BEGIN`), a drop and a
//! grant (after they are applied: they cannot fail after that). Inserts and
//! deletes log one small record each, naming the generation and the key's
//! 64-bit hash, never the key; a batched call (0.8.0) one record per chunk of
//! at most 8,192 keys (`INSERT` and `DELETE` with several hashes, `REFUSED`
//! naming positions in its `INSERT`); lookups log nothing.
//!
//! # Ordering: why replay never loses an acknowledged key
//!
//! An insert logs `INSERT` *before* it changes the table, and a delete logs
//! `DELETE` only *after* it removed a copy; both while pinned (see
//! `region::epoch`). So if a delete removed the copy that an insert stored, the
//! insert's record precedes the delete's in the WAL, whatever the order in which
//! concurrent operations reached the table: in WAL order, every delete finds
//! the copy it removed on the primary, and the multiset of fingerprints (per
//! bucket pair) that replay produces is the primary's. An insert that finds the
//! filter full changed nothing on the primary; it then logs `REFUSED` naming its
//! `INSERT`, and replay takes back the copy it stored (or, if replay could not
//! store it either, forgets the failure). So does an insert-if-new that found
//! its key after logging the insert (it logs only after a lookup found the key
//! absent). A batch keeps the argument key by key: its `INSERT` is logged
//! before any of its inserts takes effect, its `DELETE` after all its deletes,
//! its `REFUSED` after its inserts. (A take-back replay cannot attribute to
//! one table of a filter that grew, as a delete, stays: a false positive.) If replay cannot store a key that the
//! primary stored (a nearly full table filled in another order), the filter is
//! marked as needing a reload: probes raise 55000 instead of answering without
//! the key. Records of an older generation (a publish replaced it) never touch
//! newer contents.
//!
//! A transaction whose only change is `cf_insert` must still make its commit
//! wait for the WAL flush and synchronous standbys, as a committed row's would.
//! `nextval` gets this by assigning the transaction an ID (so a commit record
//! is written and flushed); here a transaction callback does what
//! `RecordTransactionCommit` does for such a commit, for the last record the
//! transaction wrote (see [`at_commit`]): with `synchronous_commit` on (or
//! local, remote_write, remote_apply) it flushes up to it before the commit and
//! waits for synchronous standbys after it, with `off` it only tells the WAL
//! writer. No transaction ID is consumed, so a stream of inserts neither writes
//! commit records nor ages the XID horizon.
//!

use std::ffi::c_char;

use pgrx::pg_sys;
use pgrx::prelude::*;

use crate::region::wal::{ContentKind, Meta, Record, CHUNK_WORDS};
use crate::region::TableSpec;
use crate::region::{EntryInfo, NewFilter};

/// The resource manager ID. PostgreSQL reserves 128 (`RM_EXPERIMENTAL_ID`) for
/// extensions in development and hands out 129–255 through its wiki page
/// "CustomWALResourceManagers"; cuckoo uses 128 until it has an assigned ID.
/// Another extension that also uses 128 cannot be preloaded with cuckoo (the
/// server refuses to start, naming both).
pub const RM_CUCKOO_ID: u8 = pg_sys::RM_EXPERIMENTAL_ID as u8;

/// Writes one record; returns its end position, which the current
/// transaction's commit will flush (see [`at_commit`]).
pub fn log(rec: &Record) -> u64 {
    let (k, body) = rec.encode();
    // Nothing is logged that replay would refuse: a record replay cannot
    // apply would cost its filter on every node that replays it.
    if let Err(why) = Record::decode(k, &body) {
        pgrx::ereport!(
            PgLogLevel::ERROR,
            PgSqlErrorCode::ERRCODE_INTERNAL_ERROR,
            format!("cuckoo: refusing to log a {} record that replay could not apply: {why}", rec.kind_name())
        );
    }
    // SAFETY: the body outlives XLogInsert, which copies it; callers checked that
    // WAL may be written (not in recovery).
    let end = unsafe {
        pg_sys::XLogBeginInsert();
        if !body.is_empty() {
            pg_sys::XLogRegisterData(body.as_ptr() as *mut c_char, body.len() as i32);
        }
        pg_sys::XLogInsert(RM_CUCKOO_ID, k as u8)
    };
    // SAFETY: backend-local variables, set and read by this process only;
    // ProcLastRecPtr is the start of the record just inserted.
    unsafe {
        FLUSH_AT_COMMIT = FLUSH_AT_COMMIT.max(end);
        LOGGED_BYTES += end - pg_sys::ProcLastRecPtr;
    }
    end
}

/// Makes this transaction's commit flush the WAL as far as it reaches now: for
/// an answer that rests on another session's durable change (an
/// insert-if-new that found its key there, which logs nothing), so that the
/// change it saw is as durable as its own insert would have been. (That
/// change was logged before it took effect, hence before it was seen.)
pub fn flush_at_commit_to_now() {
    // SAFETY: a backend-local variable; GetXLogInsertRecPtr reads a shared
    // position under its spinlock.
    unsafe { FLUSH_AT_COMMIT = FLUSH_AT_COMMIT.max(pg_sys::GetXLogInsertRecPtr()) };
}

/// WAL bytes this process has logged through [`log`].
static mut LOGGED_BYTES: u64 = 0;

pub fn logged_bytes() -> u64 {
    // SAFETY: a backend-local variable.
    unsafe { LOGGED_BYTES }
}

/// The end of the last record this transaction logged (0: none).
static mut FLUSH_AT_COMMIT: u64 = 0;

/// Registers [`at_commit`] (from `_PG_init`).
pub fn register_commit_flush() {
    // SAFETY: called once per process from _PG_init.
    unsafe { pg_sys::RegisterXactCallback(Some(at_commit), std::ptr::null_mut()) };
}

/// Makes a committing transaction's cuckoo records as durable as its commit
/// makes a row, in the order `RecordTransactionCommit` uses: before the commit
/// (where an error still aborts cleanly) the WAL is flushed up to the last
/// record, or with `synchronous_commit = off` the WAL writer is told; after the
/// commit (interrupts held, as the wait requires) the session waits for
/// synchronous standbys to have flushed it. (Records without a commit record do
/// not make a standby report their apply, so under `remote_apply` the wait is
/// for the standby's flush.) A prepared transaction's PREPARE record follows
/// these records and its own wait covers them.
#[pg_guard]
unsafe extern "C-unwind" fn at_commit(event: pg_sys::XactEvent::Type, _arg: *mut std::ffi::c_void) {
    // SAFETY: backend-local state and PostgreSQL's own commit-path functions,
    // each at the point of the commit where PostgreSQL calls it.
    unsafe {
        let end = FLUSH_AT_COMMIT;
        if end == 0 {
            return;
        }
        let synchronous = pg_sys::synchronous_commit > pg_sys::SyncCommitLevel::SYNCHRONOUS_COMMIT_OFF as i32;
        match event {
            pg_sys::XactEvent::XACT_EVENT_PRE_COMMIT | pg_sys::XactEvent::XACT_EVENT_PRE_PREPARE => {
                if synchronous {
                    pg_sys::XLogFlush(end);
                } else {
                    pg_sys::XLogSetAsyncXactLSN(end);
                }
            }
            pg_sys::XactEvent::XACT_EVENT_COMMIT => {
                if synchronous {
                    pg_sys::SyncRepWaitForLSN(end, false);
                }
                FLUSH_AT_COMMIT = 0;
            }
            pg_sys::XactEvent::XACT_EVENT_ABORT | pg_sys::XactEvent::XACT_EVENT_PARALLEL_ABORT => {
                // After an abort the records stay (changes are not
                // transactional): the WAL writer is told to flush them, as
                // `RecordTransactionAbort` tells it of an abort record (a
                // transaction without an ID writes none, and its records
                // would otherwise reach the disk and standbys only with the
                // next flush of another process).
                pg_sys::XLogSetAsyncXactLSN(end);
                FLUSH_AT_COMMIT = 0;
            }
            pg_sys::XactEvent::XACT_EVENT_PREPARE => {
                FLUSH_AT_COMMIT = 0;
            }
            _ => {}
        }
    }
}

/// Writes a filter's contents (each table's words, table after table) in
/// chunks; returns the end of `CONTENT_BEGIN`.
pub fn log_content(ck: ContentKind, gen: u64, meta: &Meta, tables: &[&[u64]], items: u64) -> u64 {
    let begin = log(&Record::ContentBegin { kind: ck, gen, cut: 0, meta: meta.clone() });
    let mut at = 0u64;
    for words in tables {
        for chunk in words.chunks(CHUNK_WORDS) {
            log(&Record::ContentChunk { begin, offset: at, words: chunk.to_vec() });
            at += chunk.len() as u64;
        }
    }
    log(&Record::ContentEnd { begin, items });
    begin
}

/// A filter's metadata as logged, with its tables `tables` (for a placeholder,
/// table 0 as its entry records it).
pub fn meta_of(info: &EntryInfo, tables: &[TableSpec]) -> Meta {
    let spec = NewFilter {
        db: info.db,
        owner: info.owner,
        name: &info.name,
        capacity: tables[0].capacity,
        fpp: info.fpp,
        durable: true,
        key: info.key,
        growth: info.growth,
    };
    Meta::of(&spec, info.readers, tables)
}

/// A WAL position as PostgreSQL writes it (`16/B374D848`).
pub fn lsn(x: u64) -> String {
    format!("{:X}/{:X}", x >> 32, x as u32)
}
