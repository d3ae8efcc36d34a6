//! Batched probes: `cf_contains(f, keys anyarray) -> boolean[]` for values and
//! named filters. The keys are hashed first, then looked up together by the
//! core's prefetching lookups (`Dense::contains_many`, `Table::contains_many`),
//! which keep many cache misses in flight instead of one.
//!
//! The answer has the shape of the keys (dimensions and lower bounds); a NULL key
//! gets a NULL answer; an empty array gives an empty array.

use pgrx::pg_sys;

use super::value::datatype::palloc_slice;
use super::value::cache::probe_many_arg;
use super::keys::KeyHasher;
use crate::filter::dense::KeyType;
use super::named::call::named_call;

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
            Keys { elems, nulls, n: n as usize, ndim, dims, lbs, elem_type, absent: std::cell::Cell::new(std::ptr::null_mut()) }
        }
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
    unsafe fn hashes<'a>(&self, hasher: &mut KeyHasher, seed: u64, key: KeyType, collation: pg_sys::Oid, mcxt: pg_sys::MemoryContext) -> &'a [u64] {
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
                if i % 65536 == 65535 {
                    pg_sys::check_for_interrupts!();
                }
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
            let keys = Keys::from_arg(fcinfo, 1);
            let collation = pgrx::fcinfo::pg_get_collation(fcinfo);
            let mcxt = (*(*fcinfo).flinfo).fn_mcxt;
            let answers = probe_many_arg(fcinfo, 0, |hasher, seed, key| keys.hashes(hasher, seed, key, collation, mcxt));
            keys.answer(answers)
        }
    }

    /// `cf_contains(name text, anyarray) -> boolean[]`.
    fn cf_contains_named_many(fcinfo) {
        // SAFETY: strict; arg 0 is text, arg 1 an array.
        unsafe {
            let keys = Keys::from_arg(fcinfo, 1);
            let collation = pgrx::fcinfo::pg_get_collation(fcinfo);
            let mcxt = (*(*fcinfo).flinfo).fn_mcxt;
            let answers = named_call(fcinfo, false).lookup_many(fcinfo, |hasher, seed, key| keys.hashes(hasher, seed, key, collation, mcxt));
            keys.answer(answers)
        }
    }
}
