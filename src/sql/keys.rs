//! Hashing a key of any SQL type to the 64-bit hash the filter core uses.
//!
//! - `int2`, `int4`, `int8` (and domains over them): xxh3 of the value as 8
//!   little-endian bytes of an `int8`, so equal values match across widths, as in
//!   PostgreSQL's integer hash family.
//! - `text`, `varchar` and `bytea`: xxh3 of the bytes. `uuid`: xxh3 of its 16 bytes.
//! - Every other type with a default hash operator class: the type's own 64-bit
//!   extended hash function with seed 0, whose result is then hashed like an
//!   `int8`. Equal values under the type's equality therefore match, as in a hash
//!   join.
//! - Keys under a nondeterministic collation are refused: their equality is not
//!   byte equality, and a filter cannot record which collation built it, so a probe
//!   under another collation could miss a key that is present.

use pgrx::pg_sys;
use pgrx::prelude::*;

use crate::filter::hash::{hash_bytes, hash_i64};

const UNSET: u8 = 0;
const INT2: u8 = 1;
const INT4: u8 = 2;
const INT8: u8 = 3;
const BYTES: u8 = 4;
const UUID: u8 = 5;
const EXTENDED: u8 = 6;

/// Why a type cannot be a filter key.
pub enum KeyTypeError {
    Nondeterministic,
    NoHash,
}

/// Whether keys of type `typid` hash natively (integers, text, bytea, uuid and
/// domains over them) rather than through the type's extended hash function.
pub fn native_key_type(typid: pg_sys::Oid) -> bool {
    // SAFETY: a catalog lookup of a type id.
    kind_of(unsafe { pg_sys::getBaseType(typid) }) != EXTENDED
}

/// How keys whose base type is `base` hash.
fn kind_of(base: pg_sys::Oid) -> u8 {
    match base {
        pg_sys::INT2OID => INT2,
        pg_sys::INT4OID => INT4,
        pg_sys::INT8OID => INT8,
        pg_sys::TEXTOID | pg_sys::VARCHAROID | pg_sys::BYTEAOID => BYTES,
        pg_sys::UUIDOID => UUID,
        _ => EXTENDED,
    }
}

/// How this call site hashes its key argument; lives in `fn_extra` and is valid
/// all-zero (unset). Resolved on the first call only: a call site's argument types
/// are fixed by its expression, and looking them up costs more than the probe.
#[repr(C)]
pub struct KeyHasher {
    typid: pg_sys::Oid,
    collation: pg_sys::Oid,
    kind: u8,
    extended: pg_sys::FmgrInfo,
}

impl KeyHasher {
    /// # Safety
    /// `fcinfo` must be a valid call frame; `flinfo.fn_mcxt` must outlive `self`.
    unsafe fn resolve(&mut self, fcinfo: pg_sys::FunctionCallInfo, argno: usize) {
        // SAFETY: valid frame (caller); catalog lookups may raise ERROR, which
        // unwinds through pg_guard.
        unsafe {
            let flinfo = (*fcinfo).flinfo;
            let mut typid = pg_sys::get_fn_expr_argtype(flinfo, argno as i32);
            if typid == pg_sys::InvalidOid {
                // Called without a call expression (an engine invoking the
                // function itself, as Citus invokes aggregate transition
                // functions): the declared type, unless it is polymorphic.
                let mut types: *mut pg_sys::Oid = std::ptr::null_mut();
                let mut nargs = 0;
                pg_sys::get_func_signature((*flinfo).fn_oid, &mut types, &mut nargs);
                if (argno as i32) < nargs {
                    let declared = *types.add(argno);
                    if pg_sys::get_typtype(declared) != pg_sys::TYPTYPE_PSEUDO as std::ffi::c_char {
                        typid = declared;
                    }
                }
            }
            if typid == pg_sys::InvalidOid {
                ereport!(
                    ERROR,
                    PgSqlErrorCode::ERRCODE_INDETERMINATE_DATATYPE,
                    "could not determine the type of the key argument"
                );
            }
            self.resolve_type(typid, pgrx::fcinfo::pg_get_collation(fcinfo), (*flinfo).fn_mcxt);
        }
    }

    /// Resolves how keys of type `typid` under `collation` hash; raises the
    /// errors a probe of such a key raises.
    ///
    /// # Safety
    /// `mcxt` must outlive `self`.
    pub unsafe fn resolve_type(&mut self, typid: pg_sys::Oid, collation: pg_sys::Oid, mcxt: pg_sys::MemoryContext) {
        // SAFETY: catalog lookups may raise ERROR, which unwinds through pg_guard.
        unsafe {
            if let Err(e) = self.try_resolve_type(typid, collation, mcxt) {
                match e {
                    KeyTypeError::Nondeterministic => {
                        ereport!(
                            ERROR,
                            PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
                            "cuckoo filter keys cannot use a nondeterministic collation",
                            "Filters compare keys byte for byte; normalize both sides instead, for example with lower(), or use COLLATE \"C\"."
                        );
                    }
                    KeyTypeError::NoHash => {
                        let name = std::ffi::CStr::from_ptr(pg_sys::format_type_be(typid)).to_string_lossy();
                        ereport!(
                            ERROR,
                            PgSqlErrorCode::ERRCODE_UNDEFINED_FUNCTION,
                            format!("type {name} has no default hash operator class, so it cannot be a cuckoo filter key")
                        );
                    }
                }
            }
        }
    }

    /// As `resolve_type`, but says why a type cannot be a key instead of
    /// raising (the planner's estimates must not fail where the query would).
    ///
    /// # Safety
    /// `mcxt` must outlive `self`.
    pub unsafe fn try_resolve_type(&mut self, typid: pg_sys::Oid, collation: pg_sys::Oid, mcxt: pg_sys::MemoryContext) -> Result<(), KeyTypeError> {
        // SAFETY: catalog lookups of an existing type.
        unsafe {
            let base = pg_sys::getBaseType(typid);
            let mut collation = collation;
            if collation != pg_sys::InvalidOid
                && pg_sys::type_is_collatable(base)
                && !pg_sys::get_collation_isdeterministic(collation)
            {
                return Err(KeyTypeError::Nondeterministic);
            }
            let kind = kind_of(base);
            if kind == EXTENDED {
                let entry = pg_sys::lookup_type_cache(base, pg_sys::TYPECACHE_HASH_EXTENDED_PROC as i32);
                let proc_oid = (*entry).hash_extended_proc;
                if proc_oid == pg_sys::InvalidOid {
                    return Err(KeyTypeError::NoHash);
                }
                pg_sys::fmgr_info_cxt(proc_oid, &mut self.extended, mcxt);
                if collation == pg_sys::InvalidOid && pg_sys::type_is_collatable(base) {
                    collation = pg_sys::DEFAULT_COLLATION_OID;
                }
            }
            self.typid = typid;
            self.collation = collation;
            self.kind = kind;
            Ok(())
        }
    }

    /// Whether the hasher is resolved for keys of type `typid`.
    pub fn resolved_for(&self, typid: pg_sys::Oid) -> bool {
        self.kind != UNSET && self.typid == typid
    }

    /// The 64-bit hash of non-null argument `argno` under `seed`.
    ///
    /// # Safety
    /// `fcinfo` must be a valid call frame whose argument `argno` is non-null and
    /// polymorphic (its type resolvable with `get_fn_expr_argtype`).
    #[inline]
    pub unsafe fn hash_arg(&mut self, fcinfo: pg_sys::FunctionCallInfo, argno: usize, seed: u64) -> u64 {
        // SAFETY: as documented.
        unsafe {
            if self.kind == UNSET {
                self.resolve(fcinfo, argno);
            }
            self.hash_datum(pgrx::fcinfo::pg_getarg_datum_raw(fcinfo, argno), seed)
        }
    }

    /// The 64-bit hash of a non-null key datum under `seed`.
    ///
    /// # Safety
    /// The hasher is resolved, and `datum` is a non-null value of its type.
    #[inline]
    pub unsafe fn hash_datum(&mut self, datum: pg_sys::Datum, seed: u64) -> u64 {
        // SAFETY: each branch reads the datum in the representation its resolved
        // type guarantees.
        unsafe {
            match self.kind {
                INT2 => hash_i64(seed, datum.value() as i16 as i64),
                INT4 => hash_i64(seed, datum.value() as i32 as i64),
                INT8 => hash_i64(seed, datum.value() as i64),
                BYTES => {
                    let raw = datum.cast_mut_ptr::<pg_sys::varlena>();
                    // Plain inline values (the common case) are read without an FFI call.
                    let inline = pgrx::varlena::varatt_is_4b_u(raw)
                        || (pgrx::varlena::varatt_is_1b(raw) && !pgrx::varlena::varatt_is_1b_e(raw));
                    let v = if inline { raw } else { pg_sys::pg_detoast_datum_packed(raw) };
                    let bytes = std::slice::from_raw_parts(
                        pgrx::varlena::vardata_any(v) as *const u8,
                        pgrx::varlena::varsize_any_exhdr(v),
                    );
                    let h = hash_bytes(seed, bytes);
                    if v != raw {
                        pg_sys::pfree(v as *mut std::ffi::c_void);
                    }
                    h
                }
                UUID => hash_bytes(seed, std::slice::from_raw_parts(datum.cast_mut_ptr::<u8>(), 16)),
                _ => {
                    let h = pg_sys::FunctionCall2Coll(&mut self.extended, self.collation, datum, pg_sys::Datum::from(0i64));
                    hash_i64(seed, h.value() as i64)
                }
            }
        }
    }
}
