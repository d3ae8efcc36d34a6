//! The key type a filter records, and how each type's keys hash.

use pgrx::pg_sys;

use crate::filter::{hash_bytes, hash_i64};
use crate::filter::{KeyKind, KeyType};

/// How a type's values hash (all-zero memory is `Unset`).
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum HashKind {
    Unset = 0,
    Int2,
    Int4,
    Int8,
    Bytes,
    Uuid,
    /// By the type's extended hash function.
    Extended,
    /// An enum of a filter that records it: hashed as the bytes of its label.
    Label,
}

/// Types below this OID are built in: the same in every cluster.
pub(super) const FIRST_NORMAL_OID: u32 = 16384;

/// The key type a filter built over keys of type `typid` records: a domain
/// records its base type, `varchar` records `text`; enums are hashed by label.
pub fn key_type_of(typid: pg_sys::Oid) -> KeyType {
    // SAFETY: catalog lookups of a type id.
    unsafe {
        let mut base = pg_sys::getBaseType(typid);
        // varchar keys are text keys (they hash alike and read alike): one
        // filter whichever of the two built it (cf_sharded_agg has a text
        // variant that varchar keys resolve to).
        if base == pg_sys::VARCHAROID {
            base = pg_sys::TEXTOID;
        }
        let oid = base.to_u32();
        if pg_sys::get_typtype(base) == pg_sys::TYPTYPE_ENUM as std::ffi::c_char {
            KeyType { kind: KeyKind::Enum, oid }
        } else if oid < FIRST_NORMAL_OID {
            KeyType { kind: KeyKind::Builtin, oid }
        } else {
            KeyType { kind: KeyKind::Local, oid }
        }
    }
}

/// Whether `oid` is a built-in type that can be a key (it exists and hashes):
/// what a value that records it as a built-in key type must name.
pub fn builtin_key_type_ok(oid: u32) -> bool {
    if oid >= FIRST_NORMAL_OID {
        return false;
    }
    let t = pg_sys::Oid::from(oid);
    // SAFETY: a catalog lookup; get_typtype returns 0 for an OID that is no type.
    let exists = unsafe { pg_sys::get_typtype(t) != 0 };
    exists && hashes_as_key(t)
}

/// Whether keys of type `t` (which exists) can be hashed: natively, or by its
/// extended hash function.
pub(super) fn hashes_as_key(t: pg_sys::Oid) -> bool {
    // SAFETY: a type-cache lookup of a type that exists.
    kind_of(t) != HashKind::Extended
        || unsafe {
            (*pg_sys::lookup_type_cache(t, pg_sys::TYPECACHE_HASH_EXTENDED_PROC as i32)).hash_extended_proc
                != pg_sys::InvalidOid
        }
}

/// Whether a value or state made here may record `key`: nothing, a pending
/// type, a built-in type that can be a key (what input requires of a value),
/// or (`local`: a state, whose types are resolved on this node) an enum or
/// type of this database of the recorded kind that can be a key. Says why
/// not.
pub fn recorded_key_ok(key: KeyType, local: bool) -> Result<(), String> {
    match key.kind {
        KeyKind::None | KeyKind::Pending => Ok(()),
        KeyKind::Builtin if builtin_key_type_ok(key.oid) => Ok(()),
        KeyKind::Builtin => Err(format!("key type OID {} is not a built-in type with a hash function", key.oid)),
        KeyKind::Enum | KeyKind::Local if !local => Ok(()),
        KeyKind::Enum | KeyKind::Local => {
            let t = pg_sys::Oid::from(key.oid);
            // SAFETY: catalog lookups; get_typtype returns 0 for no type.
            let exists = unsafe { pg_sys::get_typtype(t) != 0 };
            if !exists || key_type_of(t) != key {
                return Err(format!("key type OID {} is not a type of this database of the kind recorded", key.oid));
            }
            if key.kind == KeyKind::Local && !hashes_as_key(t) {
                return Err(format!("key type {} has no extended hash function", type_name(t)));
            }
            Ok(())
        }
    }
}

/// A type's name for messages.
pub(crate) fn type_name(typid: pg_sys::Oid) -> String {
    // SAFETY: format_type_be returns a palloc'd string for any OID.
    unsafe { std::ffi::CStr::from_ptr(pg_sys::format_type_be(typid)).to_string_lossy().into_owned() }
}

/// Why an argument cannot be hashed as a key of a filter's recorded key type.
pub enum PrepareError {
    /// Its type cannot be compared with the key type.
    Mismatch,
    /// The filter's keys are enum labels, and it is neither an enum nor text.
    NotLabels,
    /// The recorded type does not exist here (a value from another database).
    NoSuchType,
    /// The recorded type has no hash function here.
    NoHash,
    /// The caller may not use the key type, whose input function or a cast
    /// to which the probe would call (42501).
    NoUsage(pg_sys::Oid),
    /// The caller may not execute the cast function to the key type (42501).
    NoExecute(pg_sys::Oid),
}

/// Why a type cannot be a filter key.
pub enum KeyTypeError {
    Nondeterministic,
    NoHash,
}

/// Whether keys of type `typid` hash natively (integers, text, bytea, uuid and
/// domains over them) rather than through the type's extended hash function.
pub fn native_key_type(typid: pg_sys::Oid) -> bool {
    // SAFETY: a catalog lookup of a type id.
    kind_of(unsafe { pg_sys::getBaseType(typid) }) != HashKind::Extended
}

/// How keys whose base type is `base` hash.
pub(super) fn kind_of(base: pg_sys::Oid) -> HashKind {
    match base {
        pg_sys::INT2OID => HashKind::Int2,
        pg_sys::INT4OID => HashKind::Int4,
        pg_sys::INT8OID => HashKind::Int8,
        pg_sys::TEXTOID | pg_sys::VARCHAROID | pg_sys::BYTEAOID => HashKind::Bytes,
        pg_sys::UUIDOID => HashKind::Uuid,
        _ => HashKind::Extended,
    }
}

/// Whether the default hash operator classes of `a` and `b` are of one family
/// (PostgreSQL then guarantees that equal values hash alike across them).
pub(super) unsafe fn same_hash_family(a: pg_sys::Oid, b: pg_sys::Oid) -> bool {
    // SAFETY: catalog lookups.
    unsafe {
        let (ca, cb) =
            (pg_sys::GetDefaultOpClass(a, pg_sys::HASH_AM_OID), pg_sys::GetDefaultOpClass(b, pg_sys::HASH_AM_OID));
        ca != pg_sys::InvalidOid
            && cb != pg_sys::InvalidOid
            && pg_sys::get_opclass_family(ca) == pg_sys::get_opclass_family(cb)
    }
}

/// The integer a `numeric`'s text denotes, if it is a whole number that fits an
/// `int8` (`42`, `-7.000`); None otherwise (`42.5`, `NaN`, `1e30`'s digits).
pub(super) fn whole_number(text: &[u8]) -> Option<i64> {
    let s = std::str::from_utf8(text).ok()?;
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    if !frac.bytes().all(|b| b == b'0') {
        return None;
    }
    let digits = int.strip_prefix('-').unwrap_or(int);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    int.parse::<i64>().ok()
}

/// The hash of a non-null datum of a type that hashes as `kind`.
///
/// # Safety
/// `datum` is a non-null value of such a type; for `EXTENDED`, `extended` is its
/// extended hash function.
#[inline]
pub(super) unsafe fn hash_by(
    kind: HashKind,
    extended: &mut pg_sys::FmgrInfo,
    collation: pg_sys::Oid,
    datum: pg_sys::Datum,
    seed: u64,
) -> u64 {
    // SAFETY: each branch reads the datum in the representation its type guarantees.
    unsafe {
        match kind {
            HashKind::Int2 => hash_i64(seed, datum.value() as i16 as i64),
            HashKind::Int4 => hash_i64(seed, datum.value() as i32 as i64),
            HashKind::Int8 => hash_i64(seed, datum.value() as i64),
            HashKind::Bytes => {
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
            HashKind::Uuid => hash_bytes(seed, std::slice::from_raw_parts(datum.cast_mut_ptr::<u8>(), 16)),
            HashKind::Extended => {
                let h = pg_sys::FunctionCall2Coll(extended, collation, datum, pg_sys::Datum::from(0i64));
                hash_i64(seed, h.value() as i64)
            }
            // Labels are hashed by `hash_target`, and nothing hashes by an
            // unset hasher (its callers set it up first).
            HashKind::Unset | HashKind::Label => unreachable!("cuckoo: a key hashed as {kind:?}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::whole_number;

    #[test]
    fn whole_numbers_are_read_exactly() {
        assert_eq!(whole_number(b"42"), Some(42));
        assert_eq!(whole_number(b"-7.000"), Some(-7));
        assert_eq!(whole_number(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(whole_number(b"-9223372036854775808"), Some(i64::MIN));
        for no in [&b"42.5"[..], b"9223372036854775808", b"NaN", b"Infinity", b"-", b"", b"4a", b"1.0001"] {
            assert_eq!(whole_number(no), None, "{}", String::from_utf8_lossy(no));
        }
    }
}
