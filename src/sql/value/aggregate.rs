//! The aggregates `cf_agg` and `cf_union_agg`, with their support functions.
//!
//! `cf_agg` is sized from its distinct keys, so it cannot fill a filter while rows
//! arrive: its state (`internal`) collects the 64-bit key hashes in memory of the
//! aggregate context; the final function sorts and deduplicates them, sizes the
//! filter for their number and builds it in bucket order. The `CREATE AGGREGATE`
//! is written by hand in `sql/src/aggregates.sql` (pgrx 0.18 emits a wrong deserial
//! signature, pgrx issue 2351).
//!
//! Parallel plans: each process's partial state is serialized as its distinct
//! hashes, sorted in bucket order (`filter::build`): raw up to 2^24 of them,
//! Rice-coded beyond (about `66 − log2 n` bits per distinct key), however many rows
//! repeat them, so a worker that reads billions of rows over a hundred million
//! keys still fits a bytea. The
//! sorting happens in the workers; the leader merges the sorted runs (bucket order
//! does not depend on the table size, which only the merged count decides) and
//! builds. A serial and a parallel plan build byte-identical filters.
//!
//! The state also bounds its own memory by the distinct keys: once it holds 2^24
//! hashes and is full, it deduplicates in place before growing.
//!
//! `cf_union_agg` keeps a `cuckoofilter` as its state and unions each input into it.

use pgrx::pg_sys;
use pgrx::prelude::*;

use super::cache::call_cache;
use super::datatype::{bytea_datum, filter_arg_once, value_from_filter, value_from_tables, MAX_VALUE_BYTES};
use super::functions::{union_filters, union_key, value_max_buckets};
use crate::filter::KeyType;
use crate::filter::DEFAULT_SEED;
use crate::filter::{build_filter, check_run, encode_run, merge_dedup, run_hashes, sort_dedup_threads, BuildError};
use crate::filter::{shape_for, size_for_capacity, size_for_items, SizingError, DEFAULT_FPP};
use crate::sql::errors::{full_error, sizing_error};

/// `cuckoo.build_threads`: the most threads a build uses, the backend's own
/// included (`filter::sort_dedup_threads`).
pub static BUILD_THREADS: pgrx::GucSetting<i32> = pgrx::GucSetting::<i32>::new(2);

/// Registers `cuckoo.build_threads`.
pub fn init() {
    pgrx::GucRegistry::define_int_guc(
        c"cuckoo.build_threads",
        c"Most threads a cuckoofilter build (cf_agg, cf_sharded_agg) uses to sort its keys, the backend's own included; 1: the backend alone.",
        c"The threads work only on memory the build owns and never call into PostgreSQL; a cancel stops them within about 64k keys.",
        &BUILD_THREADS,
        1,
        64,
        pgrx::GucContext::Suset,
        pgrx::GucFlags::default(),
    );
}

/// The threads a build may use now: one in a parallel worker (the plan
/// already runs in parallel).
pub(super) fn build_threads() -> usize {
    // SAFETY: a read of a backend global set at process start.
    if unsafe { pg_sys::ParallelWorkerNumber } >= 0 {
        return 1;
    }
    BUILD_THREADS.get().clamp(1, 64) as usize
}

/// A state at least this large deduplicates before it grows.
pub(super) const DEDUP_FROM: usize = 1 << 24;
/// Partial states start with this tag (and version).
const PARTIAL_MAGIC: [u8; 8] = *b"CFAGGST1";
const PARTIAL_HEADER: usize = 24;

/// An encoded run received from another process's partial state, copied into
/// the aggregate context.
#[repr(C)]
#[derive(Clone, Copy)]
struct RunRef {
    data: *const u8,
    len: usize,
}

/// The `cf_agg` transition state, allocated in the aggregate memory context. The
/// hash array grows by doubling with `repalloc_huge`, so it is accounted to and
/// freed with that context, also when the query fails.
#[repr(C)]
struct AggState {
    len: usize,
    cap: usize,
    data: *mut u64,
    settings: Settings,
    /// The key type the hashes are of, once a row has said (`key_known`);
    /// states read from partial states carry none.
    key: KeyType,
    key_known: bool,
    /// Sorted distinct runs from partial states (combine).
    runs: *mut RunRef,
    nruns: usize,
    runs_cap: usize,
}

/// An aggregate's fpp and capacity, each 0 until a row names it; every row and
/// every partial state must then name the same.
#[repr(C)]
#[derive(Clone, Copy, Default, PartialEq)]
pub(super) struct Settings {
    pub(super) fpp: f64,
    /// The filter is sized for at least this many keys.
    pub(super) capacity: u64,
}

impl Settings {
    /// A row's capacity; `name` is the aggregate, for the error.
    fn set_capacity(&mut self, name: &str, capacity: i64) {
        if self.capacity == 0 {
            if capacity < 1 {
                sizing_error(SizingError::Capacity(format!("capacity must be at least 1, got {capacity}")));
            }
            self.capacity = capacity as u64;
        } else if self.capacity != capacity as u64 {
            ereport!(
                ERROR,
                PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
                format!("{name} needs the same capacity for every row, got {} and {capacity}", self.capacity)
            );
        }
    }

    /// A row's fpp; `name` is the aggregate, for the error.
    fn set_fpp(&mut self, name: &str, fpp: f64) {
        if self.fpp == 0.0 {
            if let Err(e) = shape_for(fpp) {
                sizing_error(e);
            }
            self.fpp = fpp;
        } else if self.fpp != fpp {
            ereport!(
                ERROR,
                PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
                format!("{name} needs the same fpp for every row, got {} and {fpp}", self.fpp)
            );
        }
    }

    /// Takes over what another state's rows named (a combine).
    pub(super) fn merge(&mut self, name: &str, other: Settings) {
        if other.fpp != 0.0 {
            self.set_fpp(name, other.fpp);
        }
        if other.capacity != 0 {
            self.set_capacity(name, other.capacity as i64);
        }
    }

    /// The fpp (argument 2) and capacity (argument 3) a transition function's
    /// row names, if it has them and they are not NULL.
    ///
    /// # Safety
    /// `fcinfo` is a valid frame whose arguments 2 and 3, when present, are
    /// float8 and bigint.
    pub(super) unsafe fn take_row(&mut self, name: &str, fcinfo: pg_sys::FunctionCallInfo) {
        // SAFETY: as documented.
        unsafe { self.take_args(name, fcinfo, 2) }
    }

    /// As [`Self::take_row`], with the fpp at argument `at` and the capacity
    /// after it.
    ///
    /// # Safety
    /// `fcinfo` is a valid frame whose arguments `at` and `at + 1`, when
    /// present, are float8 and bigint.
    pub(super) unsafe fn take_args(&mut self, name: &str, fcinfo: pg_sys::FunctionCallInfo, at: usize) {
        // SAFETY: as documented; NULLs are checked before the datums are read.
        unsafe {
            let nargs = (*fcinfo).nargs as usize;
            if nargs > at && !pgrx::fcinfo::pg_arg_is_null(fcinfo, at) {
                self.set_fpp(name, f64::from_bits(pgrx::fcinfo::pg_getarg_datum_raw(fcinfo, at).value() as u64));
            }
            if nargs > at + 1 && !pgrx::fcinfo::pg_arg_is_null(fcinfo, at + 1) {
                self.set_capacity(name, pgrx::fcinfo::pg_getarg_datum_raw(fcinfo, at + 1).value() as i64);
            }
        }
    }
}

impl AggState {
    unsafe fn new_in(cx: pg_sys::MemoryContext, cap: usize) -> *mut AggState {
        // SAFETY: allocations in a live memory context; the struct is fully written.
        unsafe {
            let cap = cap.max(64);
            let s = pg_sys::MemoryContextAlloc(cx, std::mem::size_of::<AggState>()) as *mut AggState;
            let data = pg_sys::MemoryContextAllocHuge(cx, cap * 8) as *mut u64;
            s.write(AggState {
                len: 0,
                cap,
                data,
                settings: Settings::default(),
                key: KeyType::NONE,
                key_known: false,
                runs: std::ptr::null_mut(),
                nruns: 0,
                runs_cap: 0,
            });
            s
        }
    }

    fn reserve(&mut self, extra: usize) {
        if self.len + extra > self.cap {
            let cap = (self.len + extra).next_power_of_two();
            // SAFETY: `data` is a chunk from MemoryContextAllocHuge; repalloc_huge
            // keeps it in the same context.
            self.data = unsafe { pg_sys::repalloc_huge(self.data as *mut std::ffi::c_void, cap * 8) as *mut u64 };
            self.cap = cap;
        }
    }

    #[inline]
    fn push(&mut self, h: u64) {
        if self.len == self.cap {
            self.make_room();
        }
        // SAFETY: make_room guarantees len < cap.
        unsafe { self.data.add(self.len).write(h) };
        self.len += 1;
    }

    /// Full: large states first drop repeated keys, and grow only if that freed
    /// less than half, so memory follows the distinct keys, not the rows.
    #[cold]
    fn make_room(&mut self) {
        if self.cap >= DEDUP_FROM {
            self.len = sort_dedup_threads(self.hashes(), build_threads());
            if self.len * 2 <= self.cap {
                return;
            }
        }
        self.reserve(1);
    }

    fn hashes(&mut self) -> &mut [u64] {
        // SAFETY: the first `len` elements are initialised.
        unsafe { std::slice::from_raw_parts_mut(self.data, self.len) }
    }

    fn runs(&self) -> &[RunRef] {
        if self.runs.is_null() {
            return &[];
        }
        // SAFETY: `runs` holds `nruns` initialised entries.
        unsafe { std::slice::from_raw_parts(self.runs, self.nruns) }
    }

    /// Appends a copy of an encoded run, in context `cx`.
    unsafe fn add_run(&mut self, cx: pg_sys::MemoryContext, bytes: &[u8]) {
        // SAFETY: allocations in the aggregate context; `runs` grows by copying.
        unsafe {
            if self.nruns == self.runs_cap {
                let cap = (self.runs_cap * 2).max(4);
                let n = pg_sys::MemoryContextAlloc(cx, cap * std::mem::size_of::<RunRef>()) as *mut RunRef;
                if self.nruns > 0 {
                    std::ptr::copy_nonoverlapping(self.runs, n, self.nruns);
                }
                self.runs = n;
                self.runs_cap = cap;
            }
            let data = pg_sys::MemoryContextAllocHuge(cx, bytes.len().max(1)) as *mut u8;
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), data, bytes.len());
            self.runs.add(self.nruns).write(RunRef { data, len: bytes.len() });
            self.nruns += 1;
        }
    }

    /// Every distinct hash of the state, in bucket order: this process's own
    /// (sorted and deduplicated in place; the set is unchanged, so the aggregate
    /// can go on or finish again) merged with the runs from partial states.
    fn distinct_hashes(&mut self, threads: usize) -> Distinct<'_> {
        let own = sort_dedup_threads(self.hashes(), threads);
        self.len = own;
        if self.nruns == 0 {
            // SAFETY: the first `len` elements are initialised.
            return Distinct::Own(unsafe { std::slice::from_raw_parts(self.data, self.len) });
        }
        let mut decoded = Vec::with_capacity(self.nruns);
        for r in self.runs() {
            // SAFETY: each run was copied into the aggregate context by add_run.
            let bytes = unsafe { std::slice::from_raw_parts(r.data, r.len) };
            decoded.push(run_hashes(bytes).unwrap_or_else(|e| malformed_partial(e.0)));
        }
        // SAFETY: the first `len` elements are initialised.
        let own = unsafe { std::slice::from_raw_parts(self.data, self.len) };
        let mut sources: Vec<&[u64]> = vec![own];
        sources.extend(decoded.iter().map(|d| &d[..]));
        let out = merge_dedup(&sources).unwrap_or_else(|e| malformed_partial(e.0));
        Distinct::Merged(out)
    }
}

enum Distinct<'a> {
    Own(&'a [u64]),
    Merged(Vec<u64>),
}

impl Distinct<'_> {
    fn as_slice(&self) -> &[u64] {
        match self {
            Distinct::Own(s) => s,
            Distinct::Merged(v) => v,
        }
    }
}

fn malformed_partial(why: &str) -> ! {
    ereport!(
        ERROR,
        PgSqlErrorCode::ERRCODE_INVALID_BINARY_REPRESENTATION,
        "malformed cf_agg partial state",
        why.to_string()
    );
}

/// The aggregate memory context, or an error if not called as an aggregate.
unsafe fn agg_context(fcinfo: pg_sys::FunctionCallInfo, name: &str) -> pg_sys::MemoryContext {
    let mut cx: pg_sys::MemoryContext = std::ptr::null_mut();
    // SAFETY: valid frame; AggCheckCallContext only inspects fcinfo->context.
    if unsafe { pg_sys::AggCheckCallContext(fcinfo, &mut cx) } == 0 {
        ereport!(
            ERROR,
            PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
            format!("{name} can only be called as part of an aggregate")
        );
    }
    cx
}

/// The aggregate memory context when called as an aggregate's support function.
pub(super) unsafe fn in_aggregate(fcinfo: pg_sys::FunctionCallInfo) -> Option<pg_sys::MemoryContext> {
    let mut cx: pg_sys::MemoryContext = std::ptr::null_mut();
    // SAFETY: valid frame; AggCheckCallContext only inspects fcinfo->context.
    (unsafe { pg_sys::AggCheckCallContext(fcinfo, &mut cx) } != 0).then_some(cx)
}

unsafe fn state_arg(fcinfo: pg_sys::FunctionCallInfo, n: usize) -> Option<&'static mut AggState> {
    // SAFETY: a non-null `internal` argument of these functions is always an
    // AggState made by this module.
    unsafe {
        if pgrx::fcinfo::pg_arg_is_null(fcinfo, n) {
            None
        } else {
            Some(&mut *pgrx::fcinfo::pg_getarg_datum_raw(fcinfo, n).cast_mut_ptr::<AggState>())
        }
    }
}

/// Builds the smallest filter that takes every distinct hash of the state,
/// recording the key type its rows were hashed as, or for a state that does
/// not know it (no rows, partial states) the aggregate call's.
///
/// # Safety
/// `fcinfo` is the frame of the final function.
unsafe fn build_from_state(fcinfo: pg_sys::FunctionCallInfo, state: Option<&mut AggState>) -> pg_sys::Datum {
    let settings = state.as_ref().map_or(Settings::default(), |s| s.settings);
    let key = match &state {
        Some(s) if s.key_known => s.key,
        // SAFETY: as documented.
        _ => unsafe { final_key_type(fcinfo) },
    };
    let distinct = state.map(|s| s.distinct_hashes(build_threads()));
    build_distinct(settings, distinct.as_ref().map_or(&[][..], |d| d.as_slice()), key)
}

/// The key type a final function records when no row said (no rows; states
/// combined from partial states): `cf_agg`'s for the call, the type of its
/// key as written ([`crate::sql::keys::agg_call_key_type`]), else the type
/// the final function's call expression gives its key (the aggregates pass
/// their arguments to it, FINALFUNC_EXTRA; a window whose aggregates
/// disagree), else none (a function called by an engine inside an
/// aggregate of its own, as Citus's coord_combine_agg calls it: cuckoo's
/// planner hook then records the key type through `cf_sharded_typed`).
///
/// The call site fixes it, so it is found once per call site (kept in
/// `fn_extra`; a parallel plan's finalize step asks for every group).
///
/// # Safety
/// `fcinfo` is a valid frame of an aggregate's final function, whose
/// `fn_extra` is this function's.
pub(super) unsafe fn final_key_type(fcinfo: pg_sys::FunctionCallInfo) -> KeyType {
    // SAFETY: catalog and call-expression lookups of a valid frame; fn_extra
    // is null or the KeyType this function allocated in fn_mcxt, which lives
    // as long as the FmgrInfo.
    unsafe {
        let flinfo = (*fcinfo).flinfo;
        if !(*flinfo).fn_extra.is_null() {
            return *((*flinfo).fn_extra as *const KeyType);
        }
        // A type that cannot be a key raises what a row of it raises (42883).
        let key = if let Some(t) = crate::sql::keys::agg_call_key_type(fcinfo) {
            crate::sql::keys::declared_key_type(t)
        } else {
            let t = pg_sys::get_fn_expr_argtype(flinfo, 1);
            if t != pg_sys::InvalidOid
                && pg_sys::get_typtype(t) != pg_sys::TYPTYPE_PSEUDO as std::ffi::c_char
                && !crate::sql::keys::is_sharded_state(t)
            {
                crate::sql::keys::declared_key_type(t)
            } else {
                KeyType::NONE
            }
        };
        let kept = pg_sys::MemoryContextAlloc((*flinfo).fn_mcxt, std::mem::size_of::<KeyType>()) as *mut KeyType;
        kept.write(key);
        (*flinfo).fn_extra = kept as *mut std::ffi::c_void;
        key
    }
}

/// Builds the filter of `hashes` (distinct, in bucket order) for the rows' fpp
/// (unset: the default) and at least their capacity (unset: sized for the keys).
pub(super) fn build_distinct(settings: Settings, hashes: &[u64], key: KeyType) -> pg_sys::Datum {
    // The key type comes from the executor (cf_agg) or from a state, which
    // any role can write: checked once, here, before it is recorded.
    if let Err(why) = crate::sql::keys::recorded_key_ok(key, true) {
        ereport!(ERROR, PgSqlErrorCode::ERRCODE_INVALID_BINARY_REPRESENTATION, "malformed cf_sharded_agg state", why);
    }
    let fpp = if settings.fpp == 0.0 { DEFAULT_FPP } else { settings.fpp };
    let capacity = settings.capacity;
    let n = hashes.len() as u64;
    // Keys that are all known pack to the shape's load; a named capacity plans
    // for keys inserted later, as cf_empty does.
    let max_buckets = value_max_buckets(fpp);
    let sized = if capacity > 0 {
        size_for_capacity(capacity.max(n), fpp, max_buckets)
    } else {
        size_for_items(n, fpp, max_buckets)
    };
    let mut s = match sized {
        Ok(s) => s,
        Err(SizingError::Capacity(why)) if capacity < n => {
            full_error("too many distinct keys for one cuckoofilter value", why)
        }
        Err(e) => sizing_error(e),
    };
    s.params.seed = DEFAULT_SEED;
    match build_filter(hashes, s.params, s.capacity, max_buckets) {
        Ok(f) => value_from_filter(&f, key).as_datum(),
        Err(BuildError::Full) => full_error(
            "too many distinct keys for one cuckoofilter value",
            format!("{n} distinct keys did not fit, even with the table grown {} times", crate::filter::MAX_BUILD_RETRIES),
        ),
        Err(BuildError::Inseparable(k)) => full_error(
            "the keys cannot be stored in a cuckoofilter value",
            format!("{k} of the {n} distinct key hashes share a bucket and a fingerprint at every size, more than a bucket pair holds (keys hashed here never do: the state was crafted)"),
        ),
    }
}

v1_functions! {
    /// `cf_agg_trans(internal, anyelement [, float8 [, bigint]]) -> internal`.
    fn cf_agg_trans(fcinfo) {
        // SAFETY: declared (internal, anyelement[, float8[, bigint]]) and non-strict, so each
        // argument is checked for NULL before it is read.
        unsafe {
            // A non-null internal state can only come from the executor, so the
            // (FFI) context check is needed only when the state is created.
            let state = match state_arg(fcinfo, 0) {
                Some(s) => s,
                None => &mut *AggState::new_in(agg_context(fcinfo, "cf_agg_trans"), 1024),
            };
            state.settings.take_row("cf_agg", fcinfo);
            // Keys hash as their own type (an enum by its label), which the
            // state records for the final function, also when a row's key is
            // NULL, and in a window, where no Aggref says it.
            let key = &mut call_cache(fcinfo).key;
            if !state.key_known {
                state.key = key.own_key(fcinfo, 1);
                state.key_known = true;
            }
            if !pgrx::fcinfo::pg_arg_is_null(fcinfo, 1) {
                let h = key.hash_arg_own(fcinfo, 1, DEFAULT_SEED);
                state.push(h);
            }
            pg_sys::Datum::from(state as *mut AggState)
        }
    }

    /// `cf_agg_combine(internal, internal) -> internal`: the hashes and runs of
    /// the second state join the first.
    fn cf_agg_combine(fcinfo) {
        // SAFETY: non-strict (internal, internal); NULLs are checked.
        unsafe {
            let cx = agg_context(fcinfo, "cf_agg_combine");
            match (state_arg(fcinfo, 0), state_arg(fcinfo, 1)) {
                (None, None) => pgrx::fcinfo::pg_return_null(fcinfo),
                (Some(a), None) => pg_sys::Datum::from(a as *mut AggState),
                (a, Some(b)) => {
                    let a = match a {
                        Some(a) => a,
                        // The first state must live in the aggregate context.
                        None => &mut *AggState::new_in(cx, b.len),
                    };
                    a.settings.merge("cf_agg", b.settings);
                    if !a.key_known && b.key_known {
                        a.key = b.key;
                        a.key_known = true;
                    }
                    a.reserve(b.len);
                    std::ptr::copy_nonoverlapping(b.data, a.data.add(a.len), b.len);
                    a.len += b.len;
                    for r in b.runs() {
                        a.add_run(cx, std::slice::from_raw_parts(r.data, r.len));
                    }
                    pg_sys::Datum::from(a as *mut AggState)
                }
            }
        }
    }

    /// `cf_agg_serial(internal) -> bytea`: "CFAGGST1", fpp (f64 LE), capacity
    /// (u64 LE), then the state's distinct hashes as one encoded run.
    fn cf_agg_serial(fcinfo) {
        // SAFETY: strict; arg 0 is our AggState.
        let s = unsafe {
            agg_context(fcinfo, "cf_agg_serial");
            state_arg(fcinfo, 0).expect("strict")
        };
        let Settings { fpp, capacity } = s.settings;
        // One thread: a partial state is serialized only in a parallel plan,
        // whose other processes are busy too.
        let distinct = s.distinct_hashes(1);
        let run = encode_run(distinct.as_slice());
        if (PARTIAL_HEADER + run.len()) as u64 > MAX_VALUE_BYTES - 8 {
            full_error(
                "cf_agg partial state too large",
                format!("{} distinct keys in one parallel worker take {} bytes", distinct.as_slice().len(), run.len()),
            );
        }
        let mut out = crate::filter::vec_with_capacity(PARTIAL_HEADER + run.len());
        out.extend_from_slice(&PARTIAL_MAGIC);
        out.extend_from_slice(&fpp.to_le_bytes());
        out.extend_from_slice(&capacity.to_le_bytes());
        out.extend_from_slice(&run);
        bytea_datum(&out)
    }

    /// `cf_agg_deserial(bytea, internal) -> internal`.
    fn cf_agg_deserial(fcinfo) {
        // SAFETY: strict; arg 0 is a bytea.
        unsafe {
            // Checked for misuse only; like PostgreSQL's own deserial functions this
            // builds the state in the current (short-lived) context, and the combine
            // function copies it into the aggregate context.
            agg_context(fcinfo, "cf_agg_deserial");
            let cx = pg_sys::CurrentMemoryContext;
            let raw = pg_sys::pg_detoast_datum(pgrx::fcinfo::pg_getarg_datum_raw(fcinfo, 0).cast_mut_ptr());
            let bytes = std::slice::from_raw_parts(
                pgrx::varlena::vardata_any(raw) as *const u8,
                pgrx::varlena::varsize_any_exhdr(raw),
            );
            if bytes.len() < PARTIAL_HEADER || bytes[..8] != PARTIAL_MAGIC {
                malformed_partial("bad header");
            }
            let word = |i: usize| u64::from_le_bytes(bytes[8 * i..8 * i + 8].try_into().unwrap());
            let run = &bytes[PARTIAL_HEADER..];
            // The run's header and length are checked now, its contents as it is
            // decoded for the merge.
            check_run(run).unwrap_or_else(|e| malformed_partial(e.0));
            let s = &mut *AggState::new_in(cx, 0);
            s.settings.merge("cf_agg", Settings { fpp: f64::from_bits(word(1)), capacity: word(2) });
            // The run stays in the deserialized bytea (this context) until the
            // combine function copies it.
            s.runs = pg_sys::palloc(std::mem::size_of::<RunRef>()) as *mut RunRef;
            s.runs.write(RunRef { data: run.as_ptr(), len: run.len() });
            s.nruns = 1;
            s.runs_cap = 1;
            pg_sys::Datum::from(s as *mut AggState)
        }
    }

    /// `cf_agg_final(internal [, anyelement [, float8 [, bigint]]]) ->
    /// cuckoofilter` (the aggregate's arguments, always NULL, name the key's
    /// type: FINALFUNC_EXTRA). It reorders and deduplicates the state's hashes
    /// in place; the set they describe is unchanged, so the aggregate can
    /// still be finalized again or advanced further.
    fn cf_agg_final(fcinfo) {
        // SAFETY: non-strict (internal, ...); NULL means no rows; the other
        // arguments are not read.
        unsafe {
            agg_context(fcinfo, "cf_agg_final");
            build_from_state(fcinfo, state_arg(fcinfo, 0))
        }
    }


    /// `cf_union_trans(cuckoofilter, cuckoofilter) -> cuckoofilter`: the transition
    /// and combine function of `cf_union_agg`; called directly it behaves like
    /// `cf_union`.
    fn cf_union_trans(fcinfo) {
        // SAFETY: strict; both arguments are cuckoofilters.
        unsafe {
            let state = filter_arg_once(fcinfo, 0);
            let input = filter_arg_once(fcinfo, 1);
            value_from_tables(&union_filters(&state, &input), union_key(&state, &input), None).as_datum()
        }
    }
}
