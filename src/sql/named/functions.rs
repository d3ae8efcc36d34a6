//! The SQL functions over filter names: `cf_contains`, `cf_insert` and
//! `cf_delete` by name, `cf_create`, `cf_drop`, `cf_publish`, `cf_snapshot` and
//! the lookup grant. Their SQL declarations are in `sql/src/named.sql`.

use pgrx::pg_sys;
use pgrx::prelude::*;

use super::attach::{my_slot, region, session_limits, with_registry_lock};
use super::call::{
    database_exists, db, named_call, new_owner, pin_current, prepare_write, require_access, text_arg, wait_durable_open,
};
use super::citus;
use super::errors::{fail, not_found, refuse_if_bound, region_error};
use super::log::{flush_at_commit_to_now, log, log_content};
use super::reload::needs_reload;
use crate::filter::v2::DenseHeader;
use crate::filter::v3::MAX_EXPANSION;
use crate::filter::OpStats;
use crate::filter::{size_for_capacity, SizingError};
use crate::filter::{Chain, Deleted, Growth, MAX_TABLES};
use crate::filter::{KeyKind, KeyType};
use crate::region::wal::{ContentKind, Meta, Record};
use crate::region::RegionTables;
use crate::region::{published_fpp, DurableGate, READERS_NONE, READERS_PUBLIC};
use crate::region::{word_offsets, TableSpec};
use crate::region::{EntryInfo, Locked, NewFilter, Region, RegionError};
use crate::sql::errors::sizing_error;
use crate::sql::value::datatype::{filter_arg_once, value_from_headers, value_from_words};

/// Bucket words allocated in the current memory context (freed with it, also on
/// error).
struct PgWords {
    ptr: *mut u64,
    len: usize,
}

impl PgWords {
    fn new(len: usize) -> PgWords {
        // SAFETY: a huge allocation of `len` words in the current context.
        let ptr = unsafe { pg_sys::MemoryContextAllocHuge(pg_sys::CurrentMemoryContext, len.max(1) * 8) as *mut u64 };
        PgWords { ptr, len }
    }

    /// # Safety
    /// No other reference to the words may exist while the slice is used.
    unsafe fn as_mut_slice<'a>(&self) -> &'a mut [u64] {
        // SAFETY: `len` words allocated in `new`, 8-aligned (MAXALIGN).
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

/// An insert of a key with no equal among the filter's keys: 22003.
fn no_equal_key() -> bool {
    crate::sql::errors::no_equal_key_error()
}

v1_functions! {
    /// `cf_contains(name text, key anyelement) -> boolean`.
    fn cf_contains_named(fcinfo) {
        // SAFETY: strict; arg 0 text, arg 1 anyelement.
        unsafe {
            let found = named_call(fcinfo, false).run(fcinfo, || false, |t, h, r, index, slot, _| {
                let mut st = OpStats::default();
                let found = t.contains_counted(h, &mut st);
                r.count_lookup(index, slot, &st);
                found
            });
            pg_sys::Datum::from(found)
        }
    }

    /// `cf_insert(name text, key anyelement) -> boolean`: false when full.
    fn cf_insert_named(fcinfo) {
        // SAFETY: strict; arg 0 text, arg 1 anyelement.
        unsafe {
            let call = named_call(fcinfo, true);
            if let Some((name, key)) = call.pending_key(fcinfo) {
                fix_key_type(&name, key);
                call.forget();
            }
            let ok = call.run(fcinfo, no_equal_key, |t, h, r, index, slot, gen| {
                // Durable: logged before it takes effect, and if the filter is
                // full, the refusal too (see `log`).
                let logged = (gen != 0).then(|| log(&Record::Insert { gen, hash: h }));
                let mut st = OpStats::default();
                let ok = t.insert_counted(h, &mut st).is_ok();
                if !ok {
                    // Full: if a cap kept it from growing, the call fails after.
                    t.tables.note_full();
                }
                if let (false, Some(insert_end)) = (ok, logged) {
                    log(&Record::Refused { gen, hash: h, insert_end });
                }
                r.count_insert(index, slot, ok, &st);
                ok
            });
            pg_sys::Datum::from(ok)
        }
    }

    /// `cf_insert_new(name text, key anynonarray) -> boolean`: stores the key
    /// and returns true if the filter says it is definitely absent; false
    /// (storing nothing) if it may be present, or if the filter is full
    /// (counted in `failed_inserts`). Of concurrent calls for the same absent
    /// key exactly one returns true (`Chain::insert_new_counted`).
    fn cf_insert_new_named(fcinfo) {
        // SAFETY: strict; arg 0 text, arg 1 the key.
        unsafe {
            let call = named_call(fcinfo, true);
            if let Some((name, key)) = call.pending_key(fcinfo) {
                fix_key_type(&name, key);
                call.forget();
            }
            let added = call.run(fcinfo, no_equal_key, insert_new_one);
            pg_sys::Datum::from(added)
        }
    }

    /// `cf_count(name text, key anynonarray) -> integer`: the copies of the
    /// key's fingerprint (`Chain::copies`).
    fn cf_count_named(fcinfo) {
        // SAFETY: strict; arg 0 text, arg 1 the key.
        unsafe {
            let n = named_call(fcinfo, false).run(fcinfo, || 0, |t, h, r, index, slot, _| {
                r.count_lookup(index, slot, &OpStats::default());
                t.copies(h)
            });
            pg_sys::Datum::from(n.min(i32::MAX as u64) as i32)
        }
    }

    /// `cf_delete(name text, key anyelement) -> boolean`: false when no copy of
    /// the key's fingerprint was removed: none is stored, or (a filter that
    /// grew) several tables hold it and the copy may be another key's
    /// (`Deleted::Ambiguous`: the key stays, a false positive).
    fn cf_delete_named(fcinfo) {
        // SAFETY: strict; arg 0 text, arg 1 anyelement.
        unsafe {
            let ok = named_call(fcinfo, true).run(fcinfo, || false, |t, h, r, index, slot, gen| {
                let ok = t.delete(h) == Deleted::Removed;
                if ok {
                    // Durable: logged after the copy is gone (see `log`).
                    if gen != 0 {
                        log(&Record::Delete { gen, hash: h });
                    }
                    r.count_delete(index, slot);
                }
                ok
            });
            pg_sys::Datum::from(ok)
        }
    }

    /// `cf_create(name text, capacity bigint, fpp float8, durable boolean,
    /// key_type regtype, expansion integer) -> void`.
    fn cf_create(fcinfo) {
        // Declared non-strict for its optional key type (0.6.0): NULL in any
        // other argument gives NULL, as a strict function does.
        // SAFETY: a valid frame; arguments checked for NULL before they are read.
        unsafe {
            // Every argument but key_type (argument 4) may not be NULL.
            let nargs = (*fcinfo).nargs as usize;
            if (0..nargs).filter(|&n| n != 4).any(|n| pgrx::fcinfo::pg_arg_is_null(fcinfo, n)) {
                return pgrx::fcinfo::pg_return_null(fcinfo);
            }
        }
        // `key_type regtype`: the type of the keys (NULL: recorded by none).
        // SAFETY: a fifth argument, when passed and not NULL, is a regtype.
        let key = unsafe {
            if (*fcinfo).nargs > 4 && !pgrx::fcinfo::pg_arg_is_null(fcinfo, 4) {
                crate::sql::keys::declared_key_type(pg_sys::Oid::from(pgrx::fcinfo::pg_getarg_datum_raw(fcinfo, 4).value() as u32))
            } else {
                // Fixed by the first insert.
                KeyType { kind: KeyKind::Pending, oid: 0 }
            }
        };
        // `expansion integer` (0.7.0): how much larger each table added when
        // the filter is full is; 0 keeps a fixed size, as every filter had
        // before (and as calls through older declarations get).
        // SAFETY: a sixth argument, when passed, is a non-null int4.
        let expansion = unsafe { if (*fcinfo).nargs > 5 { pgrx::fcinfo::pg_getarg_datum_raw(fcinfo, 5).value() as i32 } else { 0 } };
        if !(0..=MAX_EXPANSION as i32).contains(&expansion) {
            sizing_error(SizingError::Capacity(format!("expansion must be between 0 (a fixed size) and {MAX_EXPANSION}, got {expansion}")));
        }
        // SAFETY: non-null text, int8, float8, and bool unless called through
        // the 0.2.0 declaration (three arguments: not durable, as then).
        let (name, capacity, fpp, durable) = unsafe {
            (
                text_arg(fcinfo, 0),
                pgrx::fcinfo::pg_getarg_datum_raw(fcinfo, 1).value() as i64,
                f64::from_bits(pgrx::fcinfo::pg_getarg_datum_raw(fcinfo, 2).value() as u64),
                bool_arg(fcinfo, 3),
            )
        };
        if capacity < 1 {
            sizing_error(SizingError::Capacity(format!("capacity must be at least 1, got {capacity}")));
        }
        let growth = (expansion > 0).then_some(Growth { fpp, expansion: expansion as u32 });
        let sized = match growth {
            Some(g) => g.first(capacity as u64, crate::filter::MAX_BUCKET_COUNT),
            None => size_for_capacity(capacity as u64, fpp, crate::filter::MAX_BUCKET_COUNT),
        }
        .unwrap_or_else(|e| sizing_error(e));
        let tables = [TableSpec { params: sized.params, capacity: sized.capacity }];
        refuse_if_bound(name);
        prepare_write(durable, c"cf_create()");
        citus::check_task_write(name);
        citus::check_change(name);
        let spec = NewFilter { db: db(), owner: new_owner(), name, capacity: sized.capacity, fpp, durable, key, growth };
        let bytes = Region::bytes_for_tables(&tables, durable);
        let limits = session_limits();
        purge_dropped_databases();
        registry_change(name, |_| {}, |r, lk, found| {
            durable_open(r, durable)?;
            if found.is_none() {
                r.admit(lk, &limits, spec.owner, spec.db, bytes, None)?;
            }
            r.create(lk, &spec, &tables, None, &mut |_, _| {
                if !durable {
                    return 0;
                }
                log(&Record::Create(Meta::of(&spec, READERS_NONE, &tables)))
            })
        });
        pg_sys::Datum::from(0)
    }

    /// `cf_drop(name text) -> boolean`: false if there is no such filter.
    fn cf_drop(fcinfo) {
        // SAFETY: strict; text.
        let name = unsafe { text_arg(fcinfo, 0) };
        citus::check_task_write(name);
        let dropped = registry_change(
            name,
            |found| {
                if let Some(info) = found {
                    require_access(info, true);
                    prepare_write(info.durable, c"cf_drop()");
                }
            },
            |r, lk, found| match found {
                Some(info) => {
                    durable_open(r, info.durable)?;
                    r.drop_filter(lk, info)?;
                    if info.durable {
                        log(&Record::Drop { gen: info.gen });
                    }
                    Ok(true)
                }
                None => Ok(false),
            },
        );
        pg_sys::Datum::from(dropped)
    }

    /// `cf_publish(name text, f cuckoofilter, durable boolean) -> void`: creates
    /// the filter as a copy of `f`, or replaces its contents in one step. A
    /// value of several tables gives a filter of those tables (and one that
    /// grows, if the value does: a snapshot of a filter that grows).
    fn cf_publish(fcinfo) {
        // SAFETY: strict; text, cuckoofilter (validated when read), and bool
        // unless called through the 0.2.0 declaration.
        let (name, v, durable) = unsafe { (text_arg(fcinfo, 0), filter_arg_once(fcinfo, 1), bool_arg(fcinfo, 2)) };
        refuse_if_bound(name);
        prepare_write(durable, c"cf_publish()");
        citus::check_task_write(name);
        citus::check_change(name);
        let headers = v.tables();
        if headers.len() > MAX_TABLES {
            fail(
                PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
                format!("cuckoo filter value has {} tables; a named filter holds at most {MAX_TABLES}", headers.len()),
                Some("Union fewer filters of different shapes into the value, or build one filter from the keys with cf_agg."),
            );
        }
        let tables: Vec<TableSpec> = headers.iter().map(|h| TableSpec { params: h.params, capacity: h.capacity }).collect();
        let growth = v.growth();
        let capacity = tables[0].capacity;
        // The rate a filter that grows keeps; else the tables' bound at their
        // capacity.
        let fpp = growth.map_or_else(|| tables.iter().map(|t| published_fpp(&t.params, t.capacity)).sum::<f64>().min(1.0), |g| g.fpp);
        // Nothing larger than the region is expanded (a dense value's words
        // take up to eight times its size).
        let bytes = Region::bytes_for_tables(&tables, durable);
        let room = region().layout().data_bytes();
        if bytes > room {
            fail(
                PgSqlErrorCode::ERRCODE_OUT_OF_MEMORY,
                format!("not enough cuckoo shared memory for filter \"{name}\": it needs {bytes} bytes, the whole region holds {room} bytes of filters"),
                Some("Publish a smaller value, or raise cuckoo.shared_memory (takes effect at restart)."),
            );
        }
        // The value's buckets expanded into bucket words before the registry lock
        // is taken (decoding a large value takes a while), then copied under it;
        // in this call's memory context (freed with it, also on error).
        let counts: Vec<usize> = tables.iter().map(|t| t.params.bucket_count as usize).collect();
        let offsets = word_offsets(counts.iter().map(|&m| m as u64));
        let buffer = PgWords::new(counts.iter().sum());
        // SAFETY: the fresh buffer is ours alone.
        let all = unsafe { buffer.as_mut_slice() };
        for (i, (&at, &m)) in offsets.iter().zip(&counts).enumerate() {
            let mut words = v.table_words(i);
            for chunk in all[at..at + m].chunks_mut(1 << 20) {
                pgrx::check_for_interrupts!();
                for (o, w) in chunk.iter_mut().zip(&mut words) {
                    *o = w;
                }
            }
        }
        let all: &[u64] = all;
        let contents = |i: usize, out: &mut [u64]| out.copy_from_slice(&all[offsets[i]..offsets[i] + counts[i]]);
        let publisher = new_owner();
        let limits = session_limits();
        purge_dropped_databases();
        registry_change(
            name,
            |found| {
                if let Some(info) = found {
                    require_access(info, true);
                    prepare_write(info.durable, c"cf_publish()");
                }
            },
            |r, lk, found| {
                // A filter replaced by its owner, or by a member of its owning
                // role, keeps its owner and grant; replaced by anyone else (a
                // superuser: no one else passes the check above) it becomes
                // the publisher's, with no grant (issue 30: a name claimed
                // first keeps nothing of what is published under it).
                // SAFETY: a catalog lookup of role membership.
                let kept = found.filter(|i| i.owner == publisher || unsafe { pg_sys::is_member_of_role_nosuper(pg_sys::Oid::from(publisher), pg_sys::Oid::from(i.owner)) });
                let (owner, readers) = kept.map_or((publisher, READERS_NONE), |i| (i.owner, i.readers));
                let spec = NewFilter { db: db(), owner, name, capacity, fpp, durable, key: v.key_type(), growth };
                durable_open(r, durable || found.is_some_and(|i| i.durable))?;
                // New contents count against the caps of the filter's owner
                // after the publish and of the database, the old released.
                r.admit(lk, &limits, spec.owner, spec.db, bytes, found)?;
                // A durable publish logs the contents before they are linked;
                // the generation is the end of their first record.
                let mut stamp = |words: &[&[u64]], items: u64| {
                    if !durable {
                        return 0;
                    }
                    log_content(ContentKind::Publish, 0, &Meta::of(&spec, readers, &tables), words, items)
                };
                match found {
                    Some(info) => {
                        let made = r.replace(lk, info, &tables, &contents, capacity, fpp, durable, spec.key, growth, (owner, readers), &mut stamp)?;
                        if info.durable && !durable {
                            // No longer durable: replay forgets it.
                            log(&Record::Drop { gen: info.gen });
                        }
                        Ok(made)
                    }
                    None => r.create(lk, &spec, &tables, Some(&contents), &mut stamp),
                }
            },
        );
        pg_sys::Datum::from(0)
    }

    /// `cf_snapshot(name text) -> cuckoofilter`: a copy that holds every key
    /// stored throughout the call, compacted into a dense value (of format 3
    /// for a filter of several tables or one that grows).
    fn cf_snapshot(fcinfo) {
        // SAFETY: strict; text.
        let name = unsafe { text_arg(fcinfo, 0) };
        // SAFETY: this call's frame.
        let pin = unsafe { super::pin::pin_of(fcinfo) };
        let r = region();
        // The filter last checked: one that replaces it under the name
        // before it is pinned is checked in turn.
        let mut checked = None;
        loop {
            let Some(info) = r.find(db(), name) else {
                citus::check_task(name, None, false, pin);
                not_found(name)
            };
            require_access(&info, false);
            if checked != Some((info.index, info.seq)) {
                // On a Citus cluster: whether this node's filter is the one meant.
                citus::check_task(name, Some(&info), false, pin);
                checked = Some((info.index, info.seq));
            }
            if !info.usable() {
                needs_reload(&info);
            }
            let (handles, shapes) = {
                let Some(_pin) = pin_current(r, info.index, info.seq) else { continue };
                let Some(tables) = r.tables(&info) else { needs_reload(&info) };
                (tables.handles(), tables.shapes())
            };
            let params: Vec<crate::filter::Params> = shapes.iter().map(|s| s.params).collect();
            crate::sql::value::datatype::check_tables_value_size(&params);
            let total: u64 = params.iter().map(|p| p.bucket_count).sum();
            // The copy of the words, in this call's memory context.
            let words = PgWords::new(total as usize);
            // SAFETY: the fresh buffer is ours alone.
            let out = unsafe { words.as_mut_slice() };
            let slot = my_slot();
            let copied = {
                let Some(_pin) = pin_current(r, info.index, info.seq) else { continue };
                // Other processes stay pinned for one call's computation; this
                // allows seconds.
                r.snapshot(&info, slot, &handles, out, 1 << 22)
            };
            match copied {
                Ok(Some(infos)) => {
                    let key = info.key.for_value();
                    let headers: Vec<DenseHeader> = infos.iter().map(|t| DenseHeader { params: t.params, items: t.items, capacity: t.capacity.clamp(1, t.params.slot_count()), key }).collect();
                    let offsets = word_offsets(params.iter().map(|p| p.bucket_count));
                    if headers.len() == 1 && info.growth.is_none() {
                        return value_from_words(&headers[0], out.iter().copied()).as_datum();
                    }
                    let out: &[u64] = out;
                    return value_from_headers(&headers, info.growth, |i| out[offsets[i]..offsets[i] + params[i].bucket_count as usize].iter().copied()).as_datum();
                }
                // A table was added meanwhile: size the copy again.
                Ok(None) => continue,
                Err(_) => fail(
                    PgSqlErrorCode::ERRCODE_LOCK_NOT_AVAILABLE,
                    format!("could not snapshot cuckoo filter \"{name}\": other sessions stayed inside filter operations"),
                    None,
                ),
            }
        }
    }

    /// `cf_grant_lookup(name text, role text) -> void`: lets `role` (and its
    /// members), or everyone for `public`, look the filter up and snapshot it.
    fn cf_grant_lookup(fcinfo) {
        // SAFETY: strict; text, text.
        let (name, role) = unsafe { (text_arg(fcinfo, 0), text_arg(fcinfo, 1)) };
        // Exactly "public", as PostgreSQL's own functions take it: a role may be
        // called "Public".
        let readers = if role == "public" {
            READERS_PUBLIC
        } else {
            let c = std::ffi::CString::new(role).unwrap_or_else(|_| error!("role name contains a NUL byte"));
            // SAFETY: valid C string; raises 42704 for an unknown role.
            unsafe { pg_sys::get_role_oid(c.as_ptr(), false).to_u32() as u64 }
        };
        set_readers(name, readers);
        pg_sys::Datum::from(0)
    }

    /// `cf_revoke_lookup(name text) -> void`: back to owner members only.
    fn cf_revoke_lookup(fcinfo) {
        // SAFETY: strict; text.
        let name = unsafe { text_arg(fcinfo, 0) };
        set_readers(name, READERS_NONE);
        pg_sys::Datum::from(0)
    }
}

/// One `cf_insert_new`: a durable filter's insert is logged only if the key
/// looked absent first (a key already there costs no WAL), before it takes
/// effect, and its refusal after, as `cf_insert`'s.
fn insert_new_one(t: &Chain<'_, RegionTables<'_>>, h: u64, r: &Region, index: usize, slot: usize, gen: u64) -> bool {
    let mut st = OpStats::default();
    if gen != 0 && t.contains_counted(h, &mut st) {
        r.count_lookup(index, slot, &st);
        flush_at_commit_to_now();
        return false;
    }
    let logged = (gen != 0).then(|| log(&Record::Insert { gen, hash: h }));
    let added = t.insert_new_counted(h, &mut st);
    if let (true, Some(insert_end)) = (added != Ok(true), logged) {
        log(&Record::Refused { gen, hash: h, insert_end });
    }
    match added {
        Ok(true) => r.count_insert(index, slot, true, &st),
        Ok(false) => r.count_lookup(index, slot, &st),
        Err(_) => {
            t.tables.note_full();
            r.count_insert(index, slot, false, &st)
        }
    }
    added == Ok(true)
}

/// The first insert into filter `name`, whose key type is pending, fixes it
/// to `key` (unless another insert fixed it first).
pub(crate) fn fix_key_type(name: &str, key: KeyType) {
    registry_change(
        name,
        |found| match found {
            Some(info) => {
                require_access(info, true);
                prepare_write(info.durable, c"cf_insert() on a durable filter");
            }
            None => not_found(name),
        },
        |r, lk, found| {
            let info = found.expect("checked before the lock");
            if info.key.kind != KeyKind::Pending {
                return Ok(());
            }
            durable_open(r, info.durable)?;
            r.set_key(lk, info, key)?;
            if info.durable {
                log(&Record::KeyType { gen: info.gen, key });
            }
            Ok(())
        },
    );
}

fn set_readers(name: &str, readers: u64) {
    registry_change(
        name,
        |found| match found {
            Some(info) => {
                require_access(info, true);
                prepare_write(info.durable, c"cf_grant_lookup() or cf_revoke_lookup()");
            }
            None => not_found(name),
        },
        |r, lk, found| {
            let info = found.expect("checked before the lock");
            durable_open(r, info.durable)?;
            r.set_readers(lk, info, readers)?;
            if info.durable {
                log(&Record::Grant { gen: info.gen, readers });
            }
            Ok(())
        },
    );
}

/// Under the registry lock: a change to a durable filter needs durable changes
/// to be open (the caller waits outside the lock and tries again).
fn durable_open(r: &Region, durable: bool) -> Result<(), RegionError> {
    if durable && r.durable_state() != DurableGate::Open {
        Err(RegionError::Closed)
    } else {
        Ok(())
    }
}

/// Boolean argument `n`, or false if the function was declared with fewer
/// arguments (an older extension version's declaration).
///
/// # Safety
/// `fcinfo` is a valid frame; argument `n`, if passed, is a non-null bool.
unsafe fn bool_arg(fcinfo: pg_sys::FunctionCallInfo, n: usize) -> bool {
    // SAFETY: as documented.
    unsafe { ((*fcinfo).nargs as usize) > n && pgrx::fcinfo::pg_getarg_datum_raw(fcinfo, n).value() != 0 }
}

/// Changes the registry for filter `name`: looks it up and runs `check` (which
/// may read catalogs and raise errors) *before* taking the registry lock, since a
/// catalog lock wait under an LWLock could deadlock where PostgreSQL cannot see
/// it; then, under the lock, applies `change` if the entry is still the one
/// checked, and starts over if not. Space or records still held by copies that
/// running statements read are waited for outside the lock (up to about a second,
/// cancellable) before the error is reported.
fn registry_change<T>(
    name: &str,
    check: impl Fn(Option<&EntryInfo>),
    change: impl Fn(&Region, &Locked, Option<&EntryInfo>) -> Result<T, RegionError>,
) -> T {
    let r = region();
    let mut waits = 0;
    loop {
        let before = r.find(db(), name);
        check(before.as_ref());
        let key = before.as_ref().map(|i| (i.index, i.seq));
        let attempt = with_registry_lock(|r, lk| {
            let now = r.find(db(), name);
            (now.as_ref().map(|i| (i.index, i.seq)) == key).then(|| change(r, lk, now.as_ref()))
        });
        match attempt {
            None => continue,
            Some(Ok(v)) => return v,
            Some(Err(RegionError::Closed)) => {
                wait_durable_open(r);
                continue;
            }
            Some(Err(e)) => {
                let releasing = match e {
                    RegionError::Busy => true,
                    RegionError::NoSpace { requested, free, pending, .. } => pending > 0 && free + pending >= requested,
                    _ => false,
                };
                if releasing && waits < 1000 {
                    waits += 1;
                    pgrx::check_for_interrupts!();
                    // SAFETY: a plain sleep, with no lock held.
                    unsafe { pg_sys::pg_usleep(1000) };
                    continue;
                }
                region_error(name, e)
            }
        }
    }
}

/// Drops the filters of databases that no longer exist (a filter cannot be
/// reached from another database, so nothing else would ever free them). Runs
/// before creating or publishing; the catalog is read outside the lock.
fn purge_dropped_databases() {
    let r = region();
    let mut dbs: Vec<u32> = r.list_all().iter().map(|i| i.db).collect();
    dbs.sort_unstable();
    dbs.dedup();
    for db in dbs {
        if !database_exists(db) {
            with_registry_lock(|r, lk| {
                for info in r.list(db) {
                    // A durable one is dropped only while its drop can be logged
                    // (else a later purge does it).
                    if info.durable && r.durable_state() != DurableGate::Open {
                        continue;
                    }
                    if r.drop_filter(lk, &info).is_ok() && info.durable {
                        log(&Record::Drop { gen: info.gen });
                    }
                }
            });
        }
    }
}
