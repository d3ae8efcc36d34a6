//! `cf_sharded_agg`: `cf_agg`'s filter through a `bytea` state that engines
//! which cannot move `internal` states between nodes (Citus) can ship and
//! combine, with its transition, combine and final functions. The result is
//! byte for byte `cf_agg`'s; the sizing, settings and build are `aggregate`'s.
//! (About 800 lines: the state's format, its checks and the four aggregate
//! support functions are one format, kept together.)

use std::ffi::CStr;

use pgrx::pg_sys;
use pgrx::prelude::*;

use super::aggregate::{build_distinct, final_key_type, in_aggregate, Settings, DEDUP_FROM};
use super::cache::call_cache;
use super::datatype::MAX_VALUE_BYTES;
use crate::filter::sort_dedup_threads;
use crate::filter::DEFAULT_SEED;
use crate::filter::{shape_for, SizingError};
use crate::filter::{KeyKind, KeyType};
use crate::sql::errors::{full_error, sizing_error};

/// 22023: states (or rows) of two key types in one `cf_sharded_agg`.
fn key_types_differ() -> ! {
    ereport!(
        ERROR,
        PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
        "cf_sharded_agg states of different key types cannot be combined",
        "Aggregate keys of one type, and update every node to the same cuckoo release."
    );
}

/// `cf_sharded_agg`'s state: a `bytea` that engines which cannot move
/// `internal` states between nodes (Citus) can ship and combine. It holds the
/// key hashes, appended in place: "CFS2", fpp (f64), capacity (u64), the
/// number of hashes used (u64), the key type (kind u8, 3 zero bytes, OID u32;
/// see `filter::KeyType`), all little-endian, then room for hashes (the
/// rest of the value, 8 bytes each, 8-aligned in an 8-aligned value).
/// Deduplication and the build wait for the final function, as in `cf_agg`, so
/// the result is the same filter. 0.5.0's states ("CFS1", no key type, 28 bytes
/// of header) are still read: their keys hash as a filter that records none.
const SHARDED_MAGIC: [u8; 4] = *b"CFS2";
const SHARDED_HEADER: usize = 36;
const SHARDED_MAGIC_V1: [u8; 4] = *b"CFS1";
/// Room for hashes in a new state: a group of few keys stays small (the
/// state grows by doubling).
const FIRST_ROOM: usize = 16;
const SHARDED_HEADER_V1: usize = 28;

/// A checked view of a `cf_sharded_agg` state (a 4-byte-header varlena).
struct Sharded {
    ptr: *mut pg_sys::varlena,
}

impl Sharded {
    /// Checks a state datum; a state that is not a plain 4-byte-header varlena
    /// is copied into the current context first (so `in_place` is false).
    ///
    /// # Safety
    /// `d` is a non-null bytea datum.
    unsafe fn from_datum(d: pg_sys::Datum) -> (Sharded, bool) {
        // SAFETY: as documented; a copy is a 4-byte-header varlena.
        unsafe {
            let raw = d.cast_mut_ptr::<pg_sys::varlena>();
            let plain = pgrx::varlena::varatt_is_4b_u(raw) && (raw as usize).is_multiple_of(8);
            let ptr = if plain { raw } else { pg_sys::pg_detoast_datum_copy(raw) };
            let s = Sharded { ptr };
            let len = pgrx::varlena::varsize_4b(ptr) - pg_sys::VARHDRSZ;
            let header = match len.checked_sub(0).filter(|&l| l >= 4).map(|_| &s.bytes()[..4]) {
                Some(m) if m == SHARDED_MAGIC => SHARDED_HEADER,
                Some(m) if m == SHARDED_MAGIC_V1 => SHARDED_HEADER_V1,
                _ => 0,
            };
            let key_ok = header != SHARDED_HEADER
                || len < SHARDED_HEADER
                || {
                    let b = s.bytes();
                    let oid = u32::from_le_bytes(b[32..36].try_into().unwrap());
                    b[29..32] == [0, 0, 0]
                        && matches!(KeyKind::from_byte(b[28]), Some(k) if k != KeyKind::Pending && (k == KeyKind::None) == (oid == 0))
                };
            if header == 0 || len < header || !(len - header).is_multiple_of(8) || !key_ok || s.used() > s.room() {
                ereport!(
                    ERROR,
                    PgSqlErrorCode::ERRCODE_INVALID_BINARY_REPRESENTATION,
                    "malformed cf_sharded_agg state",
                    "A cf_sharded_agg state is made by its transition or combine function."
                );
            }
            let Settings { fpp, capacity } = s.settings();
            if fpp != 0.0 {
                if let Err(e) = shape_for(fpp) {
                    sizing_error(e);
                }
            }
            if capacity > i64::MAX as u64 {
                sizing_error(SizingError::Capacity(format!("capacity {capacity} is out of range")));
            }
            (s, plain)
        }
    }

    /// A new state with room for `room` hashes, in context `cx`.
    fn new_in(cx: pg_sys::MemoryContext, room: usize, settings: Settings, key: KeyType) -> Sharded {
        let len = pg_sys::VARHDRSZ + SHARDED_HEADER + 8 * room;
        if len as u64 > MAX_VALUE_BYTES {
            full_error(
                "too many distinct keys for a cf_sharded_agg state",
                format!("{room} key hashes do not fit a 1 GB state; use cf_agg, or shard further"),
            );
        }
        // SAFETY: a fresh allocation of `len` bytes, zeroed (the state is
        // returned whole, room included: no byte of it may be what the memory
        // held before), header written below.
        unsafe {
            let flags = (pg_sys::MCXT_ALLOC_HUGE | pg_sys::MCXT_ALLOC_ZERO) as i32;
            let ptr = pg_sys::MemoryContextAllocExtended(cx, len, flags) as *mut pg_sys::varlena;
            pgrx::varlena::set_varsize_4b(ptr, len as i32);
            let s = Sharded { ptr };
            let b = s.bytes_mut();
            b[..4].copy_from_slice(&SHARDED_MAGIC);
            s.set_settings(settings);
            s.set_used(0);
            s.set_key_type(key);
            s
        }
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: a 4-byte-header varlena of VARSIZE bytes.
        unsafe {
            std::slice::from_raw_parts(
                pgrx::varlena::vardata_4b(self.ptr) as *const u8,
                pgrx::varlena::varsize_4b(self.ptr) - pg_sys::VARHDRSZ,
            )
        }
    }

    #[allow(clippy::mut_from_ref)]
    fn bytes_mut(&self) -> &mut [u8] {
        // SAFETY: as `bytes`; states are only changed by this module, one call at a time.
        unsafe {
            std::slice::from_raw_parts_mut(
                pgrx::varlena::vardata_4b(self.ptr) as *mut u8,
                pgrx::varlena::varsize_4b(self.ptr) - pg_sys::VARHDRSZ,
            )
        }
    }

    /// The header field at byte `at`.
    fn field(&self, at: usize) -> u64 {
        u64::from_le_bytes(self.bytes()[at..at + 8].try_into().unwrap())
    }

    fn settings(&self) -> Settings {
        Settings { fpp: f64::from_bits(self.field(4)), capacity: self.field(12) }
    }

    fn used(&self) -> usize {
        self.field(20) as usize
    }

    /// The header's length: 0.5.0's states have a shorter one.
    fn header(&self) -> usize {
        if self.bytes()[..4] == SHARDED_MAGIC_V1 {
            SHARDED_HEADER_V1
        } else {
            SHARDED_HEADER
        }
    }

    /// The key type its hashes are of (0.5.0's states: none).
    fn key_type(&self) -> KeyType {
        if self.header() == SHARDED_HEADER_V1 {
            return KeyType::NONE;
        }
        let b = self.bytes();
        // Checked when the state was read (`Sharded::from_datum`), or written
        // by set_key_type.
        let kind = KeyKind::from_byte(b[28]).expect("a key kind checked when the state was read");
        KeyType { kind, oid: u32::from_le_bytes(b[32..36].try_into().unwrap()) }
    }

    fn set_key_type(&self, key: KeyType) {
        let b = self.bytes_mut();
        b[28] = key.kind as u8;
        b[29..32].fill(0);
        b[32..36].copy_from_slice(&key.oid.to_le_bytes());
    }

    fn room(&self) -> usize {
        (self.bytes().len() - self.header()) / 8
    }

    fn set_used(&self, n: usize) {
        self.bytes_mut()[20..28].copy_from_slice(&(n as u64).to_le_bytes());
    }

    fn set_settings(&self, settings: Settings) {
        let b = self.bytes_mut();
        b[4..12].copy_from_slice(&settings.fpp.to_le_bytes());
        b[12..20].copy_from_slice(&settings.capacity.to_le_bytes());
    }

    /// The state's distinct hashes, in bucket order (a copy).
    fn distinct_hashes(&self) -> Vec<u64> {
        let mut hs = crate::filter::vec_with_capacity::<u64>(self.used());
        hs.extend(self.slots()[..self.used()].iter().map(|&h| u64::from_le(h)));
        let n = sort_dedup_threads(&mut hs, super::aggregate::build_threads());
        hs.truncate(n);
        hs
    }

    /// The hash slots, each stored little-endian (`to_le`/`from_le`), so a
    /// state means the same on every machine.
    #[allow(clippy::mut_from_ref)]
    fn slots(&self) -> &mut [u64] {
        // SAFETY: `room` 8-byte slots follow the header inside the value: the
        // value is 8-aligned (a palloc'd copy, or checked in `from_datum`) and
        // the slots start 4 + 28 = 32 bytes in.
        unsafe {
            std::slice::from_raw_parts_mut(self.bytes_mut().as_mut_ptr().add(self.header()) as *mut u64, self.room())
        }
    }

    fn datum(&self) -> pg_sys::Datum {
        pg_sys::Datum::from(self.ptr)
    }

    /// A copy with room for at least `room` hashes, in the current memory
    /// context (the executor copies a new state into the aggregate context and
    /// frees the old one).
    fn grown(&self, room: usize) -> Sharded {
        // SAFETY: CurrentMemoryContext is valid in a function call.
        let g = Sharded::new_in(
            unsafe { pg_sys::CurrentMemoryContext },
            room.max(self.used()),
            self.settings(),
            self.key_type(),
        );
        g.slots()[..self.used()].copy_from_slice(&self.slots()[..self.used()]);
        g.set_used(self.used());
        g
    }

    /// Room for `extra` more hashes: a large state first drops repeated keys in
    /// place (as `cf_agg`'s does), and grows, doubling, only if that freed too
    /// little.
    fn make_room(self, extra: usize) -> Sharded {
        if self.room() >= DEDUP_FROM {
            let hs = self.distinct_hashes();
            for (slot, &h) in self.slots().iter_mut().zip(&hs) {
                *slot = h.to_le();
            }
            self.set_used(hs.len());
            if hs.len() + extra <= self.room() / 2 {
                return self;
            }
        }
        if self.used() + extra <= self.room() {
            return self;
        }
        let room = (self.used() + extra).next_power_of_two().max(2 * self.room());
        let max_room = ((MAX_VALUE_BYTES as usize) - pg_sys::VARHDRSZ - SHARDED_HEADER) / 8;
        self.grown(room.min(max_room.max(self.used() + extra)))
    }
}

v1_functions! {
    /// `cf_sharded_trans(bytea, anyelement [, float8 [, bigint]]) -> bytea`:
    /// appends the key's hash to the state, in place while it has room.
    fn cf_sharded_trans(fcinfo) {
        // SAFETY: declared (bytea, anyelement[, float8[, bigint]]) and non-strict,
        // so each argument is checked for NULL before it is read.
        unsafe {
            // In an aggregate the state is the executor's, changed in place; called
            // any other way (an engine driving the functions itself), the input is
            // left alone and a new state returned.
            let cx = in_aggregate(fcinfo);
            let mut state = if pgrx::fcinfo::pg_arg_is_null(fcinfo, 0) {
                // In the current context: the executor copies a new state into
                // the aggregate context.
                Sharded::new_in(pg_sys::CurrentMemoryContext, FIRST_ROOM, Settings::default(), KeyType::NONE)
            } else {
                let (s, plain) = Sharded::from_datum(pgrx::fcinfo::pg_getarg_datum_raw(fcinfo, 0));
                if plain && cx.is_some() { s } else { s.grown(s.room().max(FIRST_ROOM)) }
            };
            // Checked as cf_agg checks them.
            let mut settings = state.settings();
            settings.take_row("cf_sharded_agg", fcinfo);
            if settings != state.settings() {
                state.set_settings(settings);
            }
            let v1 = state.header() == SHARDED_HEADER_V1;
            if pgrx::fcinfo::pg_arg_is_null(fcinfo, 1) {
                // A NULL key still names the key type, as cf_agg's rows do: a
                // group of NULL keys records it.
                if !v1 && state.used() == 0 && !state.key_type().is_recorded() {
                    let own = match declared_hasher(fcinfo) {
                        Some(d) => d.own_key_type(),
                        None => call_cache(fcinfo).key.own_key(fcinfo, 1),
                    };
                    state.set_key_type(own);
                }
            } else {
                // Hashed for a filter of the key's own type (a text key made
                // by an implicit cast: the type it was cast from), which the
                // state records (a 0.5.0 state goes on as one that records
                // none).
                let h = if v1 {
                    call_cache(fcinfo).key.hash_arg(fcinfo, 1, DEFAULT_SEED)
                } else {
                    let (h, own) = match declared_hasher(fcinfo) {
                        Some(d) => (d.hash_own(pgrx::fcinfo::pg_getarg_datum_raw(fcinfo, 1), DEFAULT_SEED), d.own_key_type()),
                        None => {
                            let cache = call_cache(fcinfo);
                            (cache.key.hash_arg_own(fcinfo, 1, DEFAULT_SEED), cache.key.own_key_type())
                        }
                    };
                    if state.key_type() != own {
                        if state.used() > 0 {
                            key_types_differ();
                        }
                        state.set_key_type(own);
                    }
                    h
                };
                if state.used() == state.room() {
                    state = state.make_room(1);
                }
                let n = state.used();
                state.slots()[n] = h.to_le();
                state.set_used(n + 1);
            }
            state.datum()
        }
    }

    /// `cf_sharded_combine(bytea, bytea) -> bytea`: the hashes of the second
    /// state join the first.
    fn cf_sharded_combine(fcinfo) {
        // SAFETY: non-strict (bytea, bytea); NULLs are checked.
        unsafe {
            let in_agg = in_aggregate(fcinfo).is_some();
            let arg = |n| (!pgrx::fcinfo::pg_arg_is_null(fcinfo, n)).then(|| Sharded::from_datum(pgrx::fcinfo::pg_getarg_datum_raw(fcinfo, n)));
            match (arg(0), arg(1)) {
                (None, None) => pgrx::fcinfo::pg_return_null(fcinfo),
                (Some((a, _)), None) => a.datum(),
                // Copied into the aggregate context by the executor.
                (None, Some((b, _))) => b.datum(),
                (Some((a, in_place)), Some((b, _))) => {
                    let mut settings = a.settings();
                    settings.merge("cf_sharded_agg", b.settings());
                    // Hashes of one key type only; an empty state takes the
                    // other's (of two empty ones, the one that records a type).
                    let key = match (a.key_type(), b.key_type()) {
                        (x, y) if x == y => x,
                        (x, y) if a.used() == 0 && b.used() == 0 => if x.is_recorded() { x } else { y },
                        (x, _) if b.used() == 0 => x,
                        (_, y) if a.used() == 0 => y,
                        _ => key_types_differ(),
                    };
                    if a.header() == SHARDED_HEADER_V1 && key.is_recorded() {
                        key_types_differ();
                    }
                    let mut a = if in_place && in_agg { a } else { a.grown(a.used() + b.used()) };
                    if a.room() - a.used() < b.used() {
                        a = a.make_room(b.used());
                    }
                    a.set_settings(settings);
                    if a.header() == SHARDED_HEADER {
                        a.set_key_type(key);
                    }
                    let n = a.used();
                    a.slots()[n..n + b.used()].copy_from_slice(&b.slots()[..b.used()]);
                    a.set_used(n + b.used());
                    a.datum()
                }
            }
        }
    }

    /// `cf_sharded_final(bytea) -> cuckoofilter`, also
    /// `cf_sharded_state_final(cf_sharded_state [, anyelement [, float8 [,
    /// bigint]]])` (the aggregate's arguments, always NULL, name the key's
    /// type: FINALFUNC_EXTRA): the filter `cf_agg` builds from the same keys,
    /// fpp and capacity.
    fn cf_sharded_final(fcinfo) {
        // SAFETY: non-strict; NULL means no rows; arguments after the state
        // are not read.
        unsafe {
            if pgrx::fcinfo::pg_arg_is_null(fcinfo, 0) {
                // No rows: the key type cf_agg records for the call.
                return build_distinct(Settings::default(), &[], final_key_type(fcinfo));
            }
            let (s, _) = Sharded::from_datum(pgrx::fcinfo::pg_getarg_datum_raw(fcinfo, 0));
            let mut key = s.key_type();
            if !key.is_recorded() && s.used() == 0 && s.header() == SHARDED_HEADER {
                // A state of no keys that names no type (combined from states
                // that did not): as for no rows.
                key = final_key_type(fcinfo);
            }
            build_distinct(s.settings(), &s.distinct_hashes(), key)
        }
    }

    /// `cf_sharded_typed(cuckoofilter, anyelement) -> cuckoofilter`: the
    /// filter, recording the type of its second argument (a NULL of the key
    /// type) as its key type when it holds no keys and records none, as
    /// `cf_agg` over no rows records it. Cuckoo's planner hook wraps each
    /// `cf_sharded_agg` call in it on Citus, whose coordinator calls the final
    /// function with no rows inside an aggregate of its own, where the key's
    /// type is not in sight. Any other value is returned as it is.
    fn cf_sharded_typed(fcinfo) {
        // SAFETY: not strict (the second argument is NULL); the first is
        // checked for NULL before it is read as a cuckoofilter.
        unsafe {
            if pgrx::fcinfo::pg_arg_is_null(fcinfo, 0) {
                return pgrx::fcinfo::pg_return_null(fcinfo);
            }
            let f = super::datatype::filter_arg_once(fcinfo, 0);
            let Some(t) = fn_arg_type(fcinfo, 1) else { return f.as_datum() };
            if f.format_version() != crate::filter::FORMAT_V2 || f.key_type().is_recorded() || f.item_count() > 0 {
                return f.as_datum();
            }
            let mut h = f.v2_header();
            h.key = crate::sql::keys::declared_key_type(t);
            super::datatype::value_from_words(&h, f.table_words(0)).as_datum()
        }
    }
}

// The type `cf_sharded_state`: the state above under its own type (0.9.0), so
// that what crosses the network between nodes is its dense text form instead
// of a bytea's hex: an engine that ships partial states (Citus) sends the
// state type's output and reads it back with its input function.
//
// Compact form (also the binary send/receive form): "CS", version 1, a flags
// byte (bit 0: an fpp follows, bit 1: a capacity follows, bit 2: a 0.5.0
// state, whose keys hash as a filter that records no key type), the fpp (f64,
// little-endian), the capacity (LEB128), the key type kind (u8) and OID
// (LEB128; for an enum or a type made by CREATE TYPE, whose OID differs from
// node to node, its qualified name instead: length and UTF-8), the number of distinct hashes (LEB128), then the hashes in bucket
// order, Rice-coded (`filter::packed`). Text form: "cs1:" and the compact form
// in base64. One key: 28 characters; n keys spread evenly: about
// (64 − log2 n + 1.5) / 6 characters each.

const COMPACT_MAGIC: [u8; 3] = [b'C', b'S', 1];
const TEXT_PREFIX: &str = "cs1:";
const FLAG_FPP: u8 = 1;
const FLAG_CAPACITY: u8 = 2;
const FLAG_V1: u8 = 4;

/// Room for a key type's qualified name (two identifiers, quoted).
const TYPE_NAME_ROOM: usize = 2 * 64 + 8;

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn get_varint(b: &[u8], at: &mut usize) -> Result<u64, String> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *b.get(*at).ok_or("the input ends inside a number")?;
        *at += 1;
        if shift == 63 && byte > 1 {
            return Err("a number beyond 64 bits".into());
        }
        v |= ((byte & 0x7f) as u64) << shift;
        if byte & 0x80 == 0 {
            if byte == 0 && shift > 0 {
                return Err("a number with a needless byte".into());
            }
            return Ok(v);
        }
    }
    Err("a number beyond 64 bits".into())
}

impl Sharded {
    /// The compact form: settings, key type and the distinct hashes.
    fn compact(&self) -> Vec<u8> {
        let Settings { fpp, capacity } = self.settings();
        let key = self.key_type();
        let mut keys = self.distinct_hashes();
        for k in keys.iter_mut() {
            *k = crate::filter::bucket_order_key(*k);
        }
        let mut out = crate::filter::vec_with_capacity::<u8>(
            64 + TYPE_NAME_ROOM + crate::filter::packed_keys::encoded_len(&keys),
        );
        out.extend_from_slice(&COMPACT_MAGIC);
        let v1 = self.header() == SHARDED_HEADER_V1;
        out.push(
            if fpp != 0.0 { FLAG_FPP } else { 0 }
                | if capacity != 0 { FLAG_CAPACITY } else { 0 }
                | if v1 { FLAG_V1 } else { 0 },
        );
        if fpp != 0.0 {
            out.extend_from_slice(&fpp.to_le_bytes());
        }
        if capacity != 0 {
            put_varint(&mut out, capacity);
        }
        out.push(key.kind as u8);
        if local_oid(key.kind as u8) {
            // Its OID means nothing on another node: its name instead.
            // SAFETY: a type OID recorded from a key; an unknown one gives "???".
            let name = unsafe { CStr::from_ptr(pg_sys::format_type_be_qualified(pg_sys::Oid::from(key.oid))) }
                .to_bytes()
                .to_vec();
            put_varint(&mut out, name.len() as u64);
            out.extend_from_slice(&name);
        } else {
            put_varint(&mut out, key.oid as u64);
        }
        put_varint(&mut out, keys.len() as u64);
        crate::filter::packed_keys::encode(&keys, &mut out);
        out
    }

    /// A state from its compact form (checked as a state datum is), in the
    /// current memory context.
    fn from_compact(b: &[u8]) -> Result<Sharded, String> {
        if b.len() < 4 || b[..3] != COMPACT_MAGIC {
            return Err("it does not start as a cf_sharded_state of this release".into());
        }
        let flags = b[3];
        if flags & !(FLAG_FPP | FLAG_CAPACITY | FLAG_V1) != 0 {
            return Err(format!("unknown flags {flags:#x}"));
        }
        let mut at = 4;
        let mut settings = Settings::default();
        if flags & FLAG_FPP != 0 {
            let f = b.get(at..at + 8).ok_or("the input ends inside the fpp")?;
            settings.fpp = f64::from_le_bytes(f.try_into().unwrap());
            at += 8;
            if settings.fpp == 0.0 || shape_for(settings.fpp).is_err() {
                return Err(format!("fpp {} is out of range", settings.fpp));
            }
        }
        if flags & FLAG_CAPACITY != 0 {
            settings.capacity = get_varint(b, &mut at)?;
            if settings.capacity == 0 || settings.capacity > i64::MAX as u64 {
                return Err(format!("capacity {} is out of range", settings.capacity));
            }
        }
        let kind = *b.get(at).ok_or("the input ends before the key type")?;
        at += 1;
        let key = if local_oid(kind) {
            let len = usize::try_from(get_varint(b, &mut at)?).unwrap_or(usize::MAX);
            let name = b.get(at..at.saturating_add(len)).ok_or("the input ends inside the key type's name")?;
            at += len;
            type_named(kind, name)?
        } else {
            let oid =
                u32::try_from(get_varint(b, &mut at)?).map_err(|_| "a key type OID beyond 32 bits".to_string())?;
            KeyType::from_parts(kind, oid).map_err(|e| e.to_string())?
        };
        // A built-in key type must be one that can be a key (a value that
        // named another would be refused when read back); a local one was
        // resolved by name above.
        crate::sql::keys::recorded_key_ok(key, false)?;
        if flags & FLAG_V1 != 0 && key.is_recorded() {
            return Err("a 0.5.0 state with a key type".into());
        }
        // The count comes from the input: checked against what the input can
        // hold before it sizes the state (allocated where PostgreSQL reports
        // running out of memory as an error).
        let n = usize::try_from(get_varint(b, &mut at)?).unwrap_or(usize::MAX);
        if !crate::filter::packed_keys::fits(n, b.len() - at) {
            return Err(format!("{n} hashes cannot fit in {} bytes", b.len() - at));
        }
        // SAFETY: CurrentMemoryContext is valid in a function call.
        let s = Sharded::new_in(unsafe { pg_sys::CurrentMemoryContext }, n.max(1), settings, key);
        let slots = &mut s.slots()[..n];
        crate::filter::packed_keys::decode_into(&b[at..], slots).map_err(|e| format!("bad hashes: {e}"))?;
        for slot in slots.iter_mut() {
            *slot = slot.rotate_right(32).to_le();
        }
        s.set_used(n);
        if flags & FLAG_V1 != 0 {
            // The shorter header of 0.5.0's states: the same value, read as
            // one (its slots start 8 bytes earlier).
            let b = s.bytes_mut();
            b.copy_within(SHARDED_HEADER..SHARDED_HEADER + 8 * n, SHARDED_HEADER_V1);
            b[..4].copy_from_slice(&SHARDED_MAGIC_V1);
            // SAFETY: the value is ours; it shrinks by the 8 header bytes 0.5.0 lacked.
            unsafe {
                pgrx::varlena::set_varsize_4b(s.ptr, (pg_sys::VARHDRSZ + SHARDED_HEADER_V1 + 8 * n.max(1)) as i32)
            };
        }
        Ok(s)
    }
}

/// Whether key types of this kind are recorded by an OID of this database
/// only (an enum, a type made by CREATE TYPE).
fn local_oid(kind: u8) -> bool {
    matches!(KeyKind::from_byte(kind), Some(KeyKind::Enum | KeyKind::Local))
}

/// The key type a state names as `name` (qualified, as `format_type` writes
/// it), which must exist here and be of the same kind.
fn type_named(kind: u8, name: &[u8]) -> Result<KeyType, String> {
    let name = std::str::from_utf8(name).map_err(|_| "a key type name that is not UTF-8".to_string())?;
    let c = std::ffi::CString::new(name).map_err(|_| "a key type name with a NUL".to_string())?;
    // A state's name is `schema.type`, each part an identifier as
    // quote_identifier writes it; anything else is refused here, before
    // parseTypeString (which raises a syntax error of its own).
    if let Some(element) = name.strip_suffix("[]").filter(|e| qualified_identifier(e)) {
        // An array of a type made by CREATE TYPE or CREATE DOMAIN: its
        // states are not combined across nodes (an enum's elements hash by
        // their OIDs, which differ from node to node, so no filter built
        // from them could be cf_agg's).
        return Err(format!(
            "its key type {name} is an array of {element}, a type made by CREATE TYPE or CREATE DOMAIN, whose hashes may differ from node to node: cf_sharded_agg does not combine such states (use cf_agg)"
        ));
    }
    if !qualified_identifier(name) {
        return Err(format!("its key type name {name:?} is not a qualified type name"));
    }
    // SAFETY: parseTypeString reads the string; missing_ok reports an unknown
    // type as InvalidOid; a syntax error it still raises (a reserved word
    // left unquoted) is caught and reported as this input's. Any other error
    // (a cancel, memory) goes on as it is.
    let parsed = pgrx::PgTryBuilder::new(|| unsafe {
        let (mut typid, mut typmod) = (pg_sys::InvalidOid, 0i32);
        pg_sys::parseTypeString(c.as_ptr(), &mut typid, &mut typmod, true);
        Some(typid)
    })
    .catch_when(PgSqlErrorCode::ERRCODE_SYNTAX_ERROR, |_| None)
    .catch_when(PgSqlErrorCode::ERRCODE_INVALID_NAME, |_| None)
    .catch_when(PgSqlErrorCode::ERRCODE_UNDEFINED_OBJECT, |_| None)
    .catch_when(PgSqlErrorCode::ERRCODE_INVALID_SCHEMA_NAME, |_| None)
    .execute();
    let Some(typid) = parsed else { return Err(format!("its key type name {name:?} does not parse as a type name")) };
    if typid == pg_sys::InvalidOid {
        return Err(format!("its key type {name} does not exist here: create it as on the node that made the state"));
    }
    let key = crate::sql::keys::key_type_of(typid);
    if key.kind as u8 != kind {
        return Err(format!("its key type {name} is not of the kind it was where the state was made"));
    }
    Ok(key)
}

/// Whether `name` is `a.b` with each part an identifier as
/// `quote_identifier` writes one: lower-case letters, digits, `_` and `$`
/// (not first), or anything in double quotes with `""` for a quote.
fn qualified_identifier(name: &str) -> bool {
    let b = name.as_bytes();
    let mut i = 0;
    for part in 0..2 {
        if part == 1 {
            if b.get(i) != Some(&b'.') {
                return false;
            }
            i += 1;
        }
        match b.get(i) {
            Some(b'"') => {
                i += 1;
                loop {
                    match b.get(i) {
                        None => return false,
                        Some(b'"') if b.get(i + 1) == Some(&b'"') => i += 2,
                        Some(b'"') => {
                            i += 1;
                            break;
                        }
                        Some(_) => i += 1,
                    }
                }
            }
            Some(c) if c.is_ascii_lowercase() || *c == b'_' || *c >= 0x80 => {
                while matches!(b.get(i), Some(c) if c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'_' || *c == b'$' || *c >= 0x80)
                {
                    i += 1;
                }
            }
            _ => return false,
        }
    }
    i == b.len()
}

/// 22P02 (text) or 22P03 (binary): not a `cf_sharded_state`.
fn bad_state(binary: bool, why: impl std::fmt::Display) -> ! {
    ereport!(
        ERROR,
        if binary {
            PgSqlErrorCode::ERRCODE_INVALID_BINARY_REPRESENTATION
        } else {
            PgSqlErrorCode::ERRCODE_INVALID_TEXT_REPRESENTATION
        },
        if binary {
            "invalid binary form of type cf_sharded_state"
        } else {
            "invalid input syntax for type cf_sharded_state"
        },
        why.to_string()
    );
}

v1_functions! {
    /// `cf_sharded_state_in(cstring)`: "cs1:" and base64 of the compact form.
    fn cf_sharded_state_in(fcinfo) {
        // SAFETY: an input function's argument 0 is a non-null C string.
        let text = unsafe { std::ffi::CStr::from_ptr(pgrx::fcinfo::pg_getarg_datum_raw(fcinfo, 0).cast_mut_ptr::<std::ffi::c_char>()) };
        let Some(body) = text.to_bytes().strip_prefix(TEXT_PREFIX.as_bytes()) else { bad_state(false, format!("it must start with \"{TEXT_PREFIX}\"")) };
        if body.len() > 4 * (MAX_VALUE_BYTES as usize).div_ceil(3) {
            bad_state(false, "longer than any cf_sharded_state");
        }
        let bytes = super::datatype::base64_palloc(body).unwrap_or_else(|e| bad_state(false, format!("bad base64: {e}")));
        Sharded::from_compact(bytes).unwrap_or_else(|e| bad_state(false, e)).datum()
    }

    fn cf_sharded_state_out(fcinfo) {
        // SAFETY: strict; argument 0 is a cf_sharded_state (checked by from_datum).
        let (s, _) = unsafe { Sharded::from_datum(pgrx::fcinfo::pg_getarg_datum_raw(fcinfo, 0)) };
        super::datatype::prefixed_base64(TEXT_PREFIX, &s.compact())
    }

    /// `cf_sharded_state_recv(internal)`: the compact form, exactly.
    fn cf_sharded_state_recv(fcinfo) {
        // SAFETY: argument 0 of a receive function is a StringInfo.
        let bytes = unsafe { super::datatype::recv_bytes(fcinfo) };
        Sharded::from_compact(bytes).unwrap_or_else(|e| bad_state(true, e)).datum()
    }

    fn cf_sharded_state_send(fcinfo) {
        // SAFETY: strict; argument 0 is a cf_sharded_state.
        let (s, _) = unsafe { Sharded::from_datum(pgrx::fcinfo::pg_getarg_datum_raw(fcinfo, 0)) };
        super::datatype::bytea_datum(&s.compact())
    }

    /// `cf_sharded_key(anyelement [, float8 [, bigint]]) -> cf_sharded_state`:
    /// the state of one key (none for NULL) and the row's fpp and capacity, as
    /// `cf_sharded_agg`'s transition function would make it. `cf_sharded_agg`
    /// of these states is `cf_sharded_agg` of the keys; on Citus a key of a
    /// type without its own `cf_sharded_agg` is aggregated this way.
    fn cf_sharded_key(fcinfo) {
        // SAFETY: declared (anyelement[, float8[, bigint]]), not strict: NULLs
        // are checked before arguments are read.
        unsafe {
            let state = Sharded::new_in(pg_sys::CurrentMemoryContext, 1, Settings::default(), KeyType::NONE);
            let mut settings = Settings::default();
            settings.take_args("cf_sharded_agg", fcinfo, 1);
            state.set_settings(settings);
            if !pgrx::fcinfo::pg_arg_is_null(fcinfo, 0) {
                let cache = call_cache(fcinfo);
                let h = cache.key.hash_arg_own(fcinfo, 0, DEFAULT_SEED);
                state.set_key_type(cache.key.own_key_type());
                state.slots()[0] = h.to_le();
                state.set_used(1);
            } else if let Some(t) = fn_arg_type(fcinfo, 0) {
                // A NULL key still names its type, as cf_agg's rows do.
                state.set_key_type(crate::sql::keys::key_type_of(t));
            }
            state.datum()
        }
    }
}

/// The hashers of transition functions called without a call expression:
/// each one's OID, the call's collation, and the hasher, kept in
/// TopMemoryContext (a few: one query may aggregate keys of several types).
static mut DECLARED: Vec<(pg_sys::Oid, pg_sys::Oid, crate::sql::keys::KeyHasher)> = Vec::new();
const DECLARED_MAX: usize = 8;

/// For a transition function called without a call expression (Citus calls
/// it through a fresh FmgrInfo for every row, so `fn_extra` caches nothing):
/// the hasher of its declared key type, resolved once per backend. None when
/// there is a call expression (the call site's cache serves), or when the
/// declaration is polymorphic.
///
/// # Safety
/// `fcinfo` is a valid frame.
unsafe fn declared_hasher<'a>(fcinfo: pg_sys::FunctionCallInfo) -> Option<&'a mut crate::sql::keys::KeyHasher> {
    // SAFETY: backends are single-threaded; DECLARED is only touched here.
    unsafe {
        let flinfo = (*fcinfo).flinfo;
        if !(*flinfo).fn_expr.is_null() {
            return None;
        }
        let (oid, coll) = ((*flinfo).fn_oid, pgrx::fcinfo::pg_get_collation(fcinfo));
        let all = &mut *std::ptr::addr_of_mut!(DECLARED);
        let at = match all.iter().position(|(o, c, _)| *o == oid && *c == coll) {
            Some(at) => at,
            None => {
                let h = crate::sql::keys::KeyHasher::for_declared(oid, 1, coll, pg_sys::TopMemoryContext)?;
                if all.len() == DECLARED_MAX {
                    // Its allocations stay in TopMemoryContext: a few bytes,
                    // at most once per function seen beyond the first eight.
                    all.remove(0);
                }
                all.push((oid, coll, h));
                all.len() - 1
            }
        };
        Some(&mut all[at].2)
    }
}

/// The type of argument `n` as the call expression says, if there is one.
///
/// # Safety
/// `fcinfo` is a valid frame.
unsafe fn fn_arg_type(fcinfo: pg_sys::FunctionCallInfo, n: usize) -> Option<pg_sys::Oid> {
    // SAFETY: get_fn_expr_argtype reads the call expression, or returns
    // InvalidOid when there is none.
    let t = unsafe { pg_sys::get_fn_expr_argtype((*fcinfo).flinfo, n as i32) };
    (t != pg_sys::InvalidOid).then_some(t)
}

#[cfg(feature = "pg_test")]
mod pg_tests;
