//! Batched calls: `cf_contains(f, keys anyarray) -> boolean[]` for values and
//! named filters; `cf_insert`, `cf_delete` and `cf_insert_new` of an array
//! into a named filter (`boolean[]`); `cf_insert` and `cf_delete` of an array
//! into a value (one copy of the value for all keys). The keys are hashed
//! first, then looked up together by the core's prefetching lookups
//! (`Dense::contains_many`, `Table::contains_many`), which keep many cache
//! misses in flight instead of one, or changed in chunks of `MANY_MAX` keys,
//! each chunk of a durable filter logged as one WAL record (and one more for
//! the keys it refused).
//!
//! The answer has the shape of the keys (dimensions and lower bounds); a NULL key
//! gets a NULL answer; an empty array gives an empty array.

use pgrx::pg_sys;

use super::errors::{full_error, no_equal_key_error};
use super::keys::KeyHasher;
use super::named::call::named_call;
use super::named::functions::fix_key_type;
use super::named::log::{flush_at_commit_to_now, log};
use super::value::cache::call_cache;
use super::value::cache::probe_many_arg;
use super::value::datatype::palloc_slice;
use super::value::datatype::{filter_arg_once, value_from_tables};
use crate::filter::v3;
use crate::filter::Deleted;
use crate::filter::Full;
use crate::filter::KeyType;
use crate::region::wal::Record;
use crate::region::Tally;

/// An array's dimensions (`ndim` of them), followed by its lower bounds: what
/// PostgreSQL's ARR_DIMS gives.
///
/// # Safety
/// `arr` is an in-memory (detoasted) array.
pub(super) unsafe fn array_dims(arr: *mut pg_sys::ArrayType) -> *mut i32 {
    // SAFETY: the dimensions follow the fixed array header.
    unsafe { (arr as *mut u8).add(std::mem::size_of::<pg_sys::ArrayType>()) as *mut i32 }
}

/// The keys of an array argument, deconstructed.
struct Keys {
    elems: *mut pg_sys::Datum,
    nulls: *mut bool,
    n: usize,
    ndim: i32,
    dims: [i32; 6],
    lbs: [i32; 6],
    elem_type: pg_sys::Oid,
    /// Keys with no equal among the filter's keys (null until one is found).
    absent: std::cell::Cell<*mut bool>,
}

impl Keys {
    /// Deconstructs array argument `argno` (in the current memory context).
    ///
    /// # Safety
    /// `fcinfo` is a valid frame whose argument `argno` is a non-null array.
    unsafe fn from_arg(fcinfo: pg_sys::FunctionCallInfo, argno: usize) -> Keys {
        // SAFETY: as documented; the detoasted array lives in the current context
        // for the rest of the call.
        unsafe {
            let raw = pgrx::fcinfo::pg_getarg_datum_raw(fcinfo, argno).cast_mut_ptr::<pg_sys::varlena>();
            let arr = pg_sys::pg_detoast_datum(raw) as *mut pg_sys::ArrayType;
            let ndim = (*arr).ndim;
            let elem_type = (*arr).elemtype;
            let mut dims = [0i32; 6];
            let mut lbs = [0i32; 6];
            if ndim > 0 {
                let d = array_dims(arr);
                for i in 0..ndim as usize {
                    dims[i] = *d.add(i);
                    lbs[i] = *d.add(ndim as usize + i);
                }
            }
            let (mut len, mut byval, mut align) = (0i16, false, 0 as std::ffi::c_char);
            pg_sys::get_typlenbyvalalign(elem_type, &mut len, &mut byval, &mut align);
            let mut elems = std::ptr::null_mut();
            let mut nulls = std::ptr::null_mut();
            let mut n = 0;
            pg_sys::deconstruct_array(arr, elem_type, len as i32, byval, align, &mut elems, &mut nulls, &mut n);
            Keys {
                elems,
                nulls,
                n: n as usize,
                ndim,
                dims,
                lbs,
                elem_type,
                absent: std::cell::Cell::new(std::ptr::null_mut()),
            }
        }
    }

    /// The keys of array argument 1, with the call's collation and the memory
    /// context the call site's hasher lives in.
    ///
    /// # Safety
    /// As [`Keys::from_arg`].
    unsafe fn arg(fcinfo: pg_sys::FunctionCallInfo) -> (Keys, pg_sys::Oid, pg_sys::MemoryContext) {
        // SAFETY: as documented; flinfo is valid in a call frame.
        unsafe { (Keys::from_arg(fcinfo, 1), pgrx::fcinfo::pg_get_collation(fcinfo), (*(*fcinfo).flinfo).fn_mcxt) }
    }

    fn is_null(&self, i: usize) -> bool {
        // SAFETY: `nulls` holds `n` flags (deconstruct_array always returns them
        // when asked).
        !self.nulls.is_null() && unsafe { *self.nulls.add(i) }
    }

    /// The hashes of the non-null keys under `seed` for a filter that records
    /// `key`, in order; a key with no equal among the filter's keys gets none
    /// and is marked absent. Resolves and prepares the hasher for the element
    /// type first (a call site's element type is fixed, but checked anyway).
    ///
    /// # Safety
    /// `mcxt` outlives `hasher`.
    unsafe fn hashes<'a>(
        &self,
        hasher: &mut KeyHasher,
        seed: u64,
        key: KeyType,
        collation: pg_sys::Oid,
        mcxt: pg_sys::MemoryContext,
    ) -> &'a [u64] {
        // SAFETY: each non-null element is a datum of `elem_type`.
        unsafe {
            if !hasher.resolved_for(self.elem_type) {
                hasher.resolve_type(self.elem_type, collation, mcxt);
            }
            if !hasher.prepared_for(key) {
                hasher.prepare(key, mcxt);
            }
            let out = palloc_slice::<u64>(self.n);
            let mut len = 0;
            for i in 0..self.n {
                crate::filter::check_every(i);
                if !self.is_null(i) {
                    match hasher.hash_datum_for(*self.elems.add(i), seed) {
                        Some(h) => {
                            out[len] = h;
                            len += 1;
                        }
                        None => {
                            if self.absent.get().is_null() {
                                self.absent.set(palloc_slice::<bool>(self.n).as_mut_ptr());
                            }
                            *self.absent.get().add(i) = true;
                        }
                    }
                }
            }
            &out[..len]
        }
    }

    /// Whether some non-null key has no equal among the filter's keys (after
    /// [`Keys::hashes`]).
    fn any_absent(&self) -> bool {
        !self.absent.get().is_null()
    }

    fn is_absent(&self, i: usize) -> bool {
        // SAFETY: `absent`, when set, holds `n` flags.
        !self.absent.get().is_null() && unsafe { *self.absent.get().add(i) }
    }

    /// A boolean array shaped like the keys: the answers in order for the
    /// non-null keys, NULL for the null ones.
    fn answer(&self, answers: &[bool]) -> pg_sys::Datum {
        // SAFETY: arrays built in the current memory context from `n` datums and
        // flags; dims and lower bounds are those of a valid array.
        unsafe {
            if self.ndim == 0 || self.n == 0 {
                return pg_sys::Datum::from(pg_sys::construct_empty_array(pg_sys::BOOLOID));
            }
            let datums = palloc_slice::<pg_sys::Datum>(self.n);
            let nulls = palloc_slice::<bool>(self.n);
            let mut next = answers.iter();
            for i in 0..self.n {
                if self.is_null(i) {
                    nulls[i] = true;
                } else if self.is_absent(i) {
                    datums[i] = pg_sys::Datum::from(false);
                } else {
                    datums[i] = pg_sys::Datum::from(*next.next().expect("one answer per non-null key"));
                }
            }
            let mut dims = self.dims;
            let mut lbs = self.lbs;
            pg_sys::Datum::from(pg_sys::construct_md_array(
                datums.as_mut_ptr(),
                nulls.as_mut_ptr(),
                self.ndim,
                dims.as_mut_ptr(),
                lbs.as_mut_ptr(),
                pg_sys::BOOLOID,
                1,
                true,
                b'c' as std::ffi::c_char,
            ))
        }
    }
}

v1_functions! {
    /// `cf_contains(cuckoofilter, anyarray) -> boolean[]`.
    fn cf_contains_value_many(fcinfo) {
        // SAFETY: strict; arg 0 is a cuckoofilter, arg 1 an array.
        unsafe {
            let (keys, collation, mcxt) = Keys::arg(fcinfo);
            let answers = probe_many_arg(fcinfo, 0, |hasher, seed, key| keys.hashes(hasher, seed, key, collation, mcxt));
            keys.answer(answers)
        }
    }

    /// `cf_contains(name text, anyarray) -> boolean[]`.
    fn cf_contains_named_many(fcinfo) {
        // SAFETY: strict; arg 0 is text, arg 1 an array.
        unsafe {
            let (keys, collation, mcxt) = Keys::arg(fcinfo);
            let answers = named_call(fcinfo, false).lookup_many(fcinfo, |hasher, seed, key| keys.hashes(hasher, seed, key, collation, mcxt));
            keys.answer(answers)
        }
    }
}

/// The record that logs a batch's inserts or deletes (the one-key record for
/// one key, as a single call logs it).
pub(crate) fn batch_record(gen: u64, hs: &[u64], insert: bool) -> Record {
    match (hs, insert) {
        ([h], true) => Record::Insert { gen, hash: *h },
        ([h], false) => Record::Delete { gen, hash: *h },
        (_, true) => Record::InsertMany { gen, hashes: hs.to_vec() },
        (_, false) => Record::DeleteMany { gen, hashes: hs.to_vec() },
    }
}

/// Logs the refusals of the inserts logged at `insert_end` (positions in that
/// record).
pub(crate) fn log_refused(gen: u64, insert_end: u64, refused: Vec<(u32, u64)>) {
    if refused.is_empty() {
        return;
    }
    log(&Record::RefusedMany { gen, insert_end, refused });
}

/// Inserts (or, `new`, inserts if new) the keys of array argument 1 into the
/// named filter of argument 0.
///
/// # Safety
/// `fcinfo` is a valid frame with non-null text and array arguments.
unsafe fn insert_named_many(fcinfo: pg_sys::FunctionCallInfo, new: bool) -> pg_sys::Datum {
    // SAFETY: as documented.
    unsafe {
        let (keys, collation, mcxt) = Keys::arg(fcinfo);
        let call = named_call(fcinfo, true);
        if let Some(name) = call.pending_name(fcinfo) {
            // As the one-key insert: only a key that is there (not NULL) fixes
            // the type, and only one that can be a key (the type's checks
            // raise their errors first, before the filter records it).
            if (0..keys.n).any(|i| !keys.is_null(i)) {
                // All-zero is an unset hasher (`KeyHasher`); its resolution
                // lives in the current memory context, for this call only.
                let mut check: KeyHasher = std::mem::zeroed();
                check.resolve_type(keys.elem_type, collation, pg_sys::CurrentMemoryContext);
                fix_key_type(&name, crate::sql::keys::key_type_of(keys.elem_type));
                call.forget();
            }
        }
        let hashes = |hasher: &mut KeyHasher, seed, key| {
            let hs = keys.hashes(hasher, seed, key, collation, mcxt);
            if keys.any_absent() {
                no_equal_key_error();
            }
            hs
        };
        let answers = call.write_many(fcinfo, hashes, |c, hs, out, r, index, slot, gen| {
            let mut t = Tally::default();
            // Durable: the keys to add are logged before any takes effect;
            // those that changed nothing after (see `named::log`). Keys that
            // an insert-if-new finds there already are not logged at all.
            let mut todo: Vec<usize> = crate::filter::vec_with_capacity(hs.len());
            todo.extend(0..hs.len());
            if new && gen != 0 {
                let mut there = crate::filter::vec_filled(hs.len(), false);
                c.contains_many(hs, &mut there);
                todo.retain(|&i| !there[i]);
                t.looked += (hs.len() - todo.len()) as u64;
                if todo.len() < hs.len() {
                    flush_at_commit_to_now();
                }
            }
            let picked: Vec<u64>;
            let logged: &[u64] = if todo.len() == hs.len() {
                hs
            } else {
                picked = todo.iter().map(|&i| hs[i]).collect();
                &picked
            };
            let insert_end = (gen != 0 && !logged.is_empty()).then(|| log(&batch_record(gen, logged, true)));
            let mut done = crate::filter::vec_filled(logged.len(), Err(Full));
            c.insert_many(logged, new, &mut done, &mut t.op);
            let mut refused = Vec::new();
            for (at, (&i, d)) in todo.iter().zip(&done).enumerate() {
                let ok = *d == Ok(true);
                match d {
                    Ok(true) => t.stored += 1,
                    Ok(false) => t.looked += 1,
                    Err(Full) => {
                        t.refused += 1;
                        // If a cap kept it from growing, the call fails after.
                        c.tables.note_full();
                    }
                }
                out[i] = ok;
                if !ok {
                    refused.push((at as u32, hs[i]));
                }
            }
            if let Some(end) = insert_end {
                log_refused(gen, end, refused);
            }
            r.count_many(index, slot, &t);
        });
        keys.answer(answers)
    }
}

v1_functions! {
    /// `cf_insert(name text, keys anyarray) -> boolean[]`: `cf_insert` of each
    /// element; false for a key the full filter refused.
    fn cf_insert_named_many(fcinfo) {
        // SAFETY: strict; arg 0 is text, arg 1 an array.
        unsafe { insert_named_many(fcinfo, false) }
    }

    /// `cf_insert_new(name text, keys anyarray) -> boolean[]`: `cf_insert_new`
    /// of each element in order (a key that occurs twice is new only once).
    fn cf_insert_new_named_many(fcinfo) {
        // SAFETY: strict; arg 0 is text, arg 1 an array.
        unsafe { insert_named_many(fcinfo, true) }
    }

    /// `cf_delete(name text, keys anyarray) -> boolean[]`: `cf_delete` of each
    /// element in order; a durable filter logs the removed keys after they
    /// are gone, one record per chunk.
    fn cf_delete_named_many(fcinfo) {
        // SAFETY: strict; arg 0 is text, arg 1 an array.
        unsafe {
            let (keys, collation, mcxt) = Keys::arg(fcinfo);
            let hashes = |hasher: &mut KeyHasher, seed, key| keys.hashes(hasher, seed, key, collation, mcxt);
            let answers = named_call(fcinfo, true).write_many(fcinfo, hashes, |c, hs, out, r, index, slot, gen| {
                let mut removed = Vec::new();
                for (&h, o) in hs.iter().zip(out.iter_mut()) {
                    *o = c.delete(h) == Deleted::Removed;
                    if *o {
                        removed.push(h);
                    }
                }
                if gen != 0 && !removed.is_empty() {
                    log(&batch_record(gen, &removed, false));
                }
                r.count_many(index, slot, &Tally { deleted: removed.len() as u64, ..Tally::default() });
            });
            keys.answer(answers)
        }
    }

    /// `cf_insert(cuckoofilter, keys anyarray) -> cuckoofilter`: the value with
    /// every non-null element added, in one copy of it.
    fn cf_insert_value_many(fcinfo) {
        // SAFETY: strict; arg 0 is a cuckoofilter, arg 1 an array.
        unsafe {
            let v = filter_arg_once(fcinfo, 0);
            let (keys, collation, mcxt) = Keys::arg(fcinfo);
            let hs = keys.hashes(&mut call_cache(fcinfo).key, v.seed(), v.key_type(), collation, mcxt);
            if keys.any_absent() {
                no_equal_key_error();
            }
            let mut tables = v.copy_tables();
            let growth = v.growth();
            for (i, &h) in hs.iter().enumerate() {
                crate::filter::check_every(i);
                if v3::insert(&mut tables, growth, h, crate::sql::value::datatype::MAX_MADE_BODY_BYTES).is_err() {
                    let slots: u64 = tables.iter().map(|t| t.table().params().slot_count()).sum();
                    let items: u64 = tables.iter().map(|t| t.table().item_count()).sum();
                    full_error("cuckoo filter is full", format!("it holds {items} items in {slots} slots, with {} of the array's keys still to add", hs.len() - i));
                }
            }
            value_from_tables(&tables, v.key_type(), growth).as_datum()
        }
    }

    /// `cf_delete(cuckoofilter, keys anyarray) -> cuckoofilter`: the value with
    /// one copy of each non-null element's fingerprint removed (where there is
    /// one).
    fn cf_delete_value_many(fcinfo) {
        // SAFETY: strict; arg 0 is a cuckoofilter, arg 1 an array.
        unsafe {
            let v = filter_arg_once(fcinfo, 0);
            let (keys, collation, mcxt) = Keys::arg(fcinfo);
            // A key with no equal among the filter's keys was never inserted.
            let hs = keys.hashes(&mut call_cache(fcinfo).key, v.seed(), v.key_type(), collation, mcxt);
            let tables = v.copy_tables();
            for &h in hs {
                v3::delete(&tables, h);
            }
            value_from_tables(&tables, v.key_type(), v.growth()).as_datum()
        }
    }
}
