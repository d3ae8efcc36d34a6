//! A call site's key hasher: how an argument becomes the 64-bit hash of the
//! filter's key (see the module above).

use pgrx::pg_sys;
use pgrx::prelude::*;

use super::call::*;
use super::types::*;
use crate::filter::{hash_bytes, hash_i64};
use crate::filter::{KeyKind, KeyType};

/// How a prepared hasher turns an argument into the filter's key (all-zero
/// memory is `Direct`).
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Convert {
    /// The argument hashes as its own type does (the same type, the same hash
    /// family, or a filter that records no key type).
    Direct = 0,
    /// Text read with the key type's input function.
    Input,
    /// A `numeric`, `float4` or `float8` into an integer filter: only a whole
    /// number in range has an equal key.
    ToInteger,
    /// Converted by the implicit cast to the key type (`int4` into `numeric`,
    /// `name` into `text`, `date` into `timestamp`).
    Cast,
    /// A cast that only relabels (the same bytes).
    Relabel,
}

/// The key type a filter declared for keys of type `typid` records; raises
/// the error a key of that type raises if it cannot be a key (42883).
pub fn declared_key_type(typid: pg_sys::Oid) -> KeyType {
    // SAFETY: a zeroed hasher is the valid unresolved state; resolving reads
    // the catalog and raises for a type without a hash function.
    unsafe {
        let mut probe: KeyHasher = std::mem::zeroed();
        probe.resolve_type(typid, pg_sys::InvalidOid, pg_sys::CurrentMemoryContext);
    }
    key_type_of(typid)
}

/// How this call site hashes its key argument; lives in `fn_extra` and is valid
/// all-zero (unset). Resolved on the first call only: a call site's argument types
/// are fixed by its expression, and looking them up costs more than the probe.
#[repr(C)]
pub struct KeyHasher {
    // What every probe reads comes first (one cache line).
    typid: pg_sys::Oid,
    collation: pg_sys::Oid,
    kind: HashKind,
    /// The key type of the filter the hasher was last prepared for, and how an
    /// argument becomes such a key (`mode`), hashed as `target` says.
    prepared: bool,
    mode: Convert,
    key: KeyType,
    extended: pg_sys::FmgrInfo,
    target: Target,
    /// The input function (`INPUT`) or cast function (`CAST`).
    convert: pg_sys::FmgrInfo,
    ioparam: pg_sys::Oid,
    /// A `text` key that the call made by an implicit cast from another type
    /// (a `char(n)`, `name` or `citext` key given to a `text` overload): that
    /// type, so that a filter recording no key type hashes the key as that
    /// type does, as before the `text` overloads existed.
    origin: pg_sys::Oid,
}

/// How keys of a filter's key type hash (all-zero: unused).
#[repr(C)]
pub(super) struct Target {
    kind: HashKind,
    collation: pg_sys::Oid,
    extended: pg_sys::FmgrInfo,
    output: pg_sys::FmgrInfo,
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
            if typid == pg_sys::TEXTOID {
                self.origin = implicit_cast_source((*flinfo).fn_expr, argno);
                if self.origin == pg_sys::InvalidOid && argno == 1 {
                    // An aggregate's transition function sees its key as the
                    // declaration's type (its call expression holds
                    // parameters): the aggregate call says what was cast.
                    if let Some(written) = agg_call_key_type(fcinfo) {
                        if !hashes_as_text(written) {
                            self.origin = written;
                        }
                    }
                }
            }
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
                            format!(
                                "type {name} has no default hash operator class, so it cannot be a cuckoo filter key"
                            )
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
    pub unsafe fn try_resolve_type(
        &mut self,
        typid: pg_sys::Oid,
        collation: pg_sys::Oid,
        mcxt: pg_sys::MemoryContext,
    ) -> Result<(), KeyTypeError> {
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
            if kind == HashKind::Extended {
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
            self.prepared = false;
            self.origin = pg_sys::InvalidOid;
            Ok(())
        }
    }

    /// Whether the hasher is prepared for a filter that records `key`.
    pub fn prepared_for(&self, key: KeyType) -> bool {
        self.prepared && self.key == key
    }

    /// Whether the hasher is resolved for keys of type `typid`.
    pub fn resolved_for(&self, typid: pg_sys::Oid) -> bool {
        self.kind != HashKind::Unset && self.typid == typid
    }

    /// The 64-bit hash of non-null argument `argno` under `seed`, for a filter
    /// that records no key type (keys hash as their own type does).
    ///
    /// # Safety
    /// `fcinfo` must be a valid call frame whose argument `argno` is non-null and
    /// polymorphic (its type resolvable with `get_fn_expr_argtype`).
    #[inline]
    pub unsafe fn hash_arg(&mut self, fcinfo: pg_sys::FunctionCallInfo, argno: usize, seed: u64) -> u64 {
        // SAFETY: as documented.
        unsafe {
            if self.kind == HashKind::Unset {
                self.resolve(fcinfo, argno);
            }
            self.hash_datum(pgrx::fcinfo::pg_getarg_datum_raw(fcinfo, argno), seed)
        }
    }

    /// The hash of non-null argument `argno` as a key of a filter that records
    /// `key`; None when the argument has no equal among such keys (42.5 for an
    /// integer filter). Raises 42804 when the argument's type cannot be compared
    /// with the key type, and the input function's error for text it cannot read.
    ///
    /// # Safety
    /// As [`Self::hash_arg`].
    #[inline]
    pub unsafe fn hash_arg_for(
        &mut self,
        fcinfo: pg_sys::FunctionCallInfo,
        argno: usize,
        seed: u64,
        key: KeyType,
    ) -> Option<u64> {
        // SAFETY: as documented.
        unsafe {
            if self.kind == HashKind::Unset {
                self.resolve(fcinfo, argno);
            }
            if !self.prepared || self.key != key {
                self.prepare(key, (*(*fcinfo).flinfo).fn_mcxt);
            }
            let datum = pgrx::fcinfo::pg_getarg_datum_raw(fcinfo, argno);
            // The common case inline: the key's own type (or family) hashes it.
            if self.mode == Convert::Direct {
                return Some(self.hash_datum(datum, seed));
            }
            self.hash_datum_for(datum, seed)
        }
    }

    /// The hash of non-null argument `argno` as a key of a filter of its own
    /// type ([`key_type_of`]; an enum hashes by its label; a `text` key made
    /// by an implicit cast, read back as the type it was cast from, as
    /// [`Self::arg_key_type`] says).
    ///
    /// # Safety
    /// As [`Self::hash_arg`].
    #[inline]
    pub unsafe fn hash_arg_own(&mut self, fcinfo: pg_sys::FunctionCallInfo, argno: usize, seed: u64) -> u64 {
        // SAFETY: as documented.
        unsafe { self.hash_arg_self(fcinfo, argno, seed, |h| key_type_of(h.own_type())) }
    }

    /// The type keys of the hasher's argument are of: its own, or for a
    /// `text` key made by an implicit cast, the type it was cast from.
    fn own_type(&self) -> pg_sys::Oid {
        if self.origin != pg_sys::InvalidOid {
            self.origin
        } else {
            self.typid
        }
    }

    /// The key type argument `argno` gives a filter of its own: its type's, or
    /// for a `text` key made by an implicit cast, the type it was cast from.
    ///
    /// # Safety
    /// As [`Self::hash_arg`].
    pub unsafe fn arg_key_type(&mut self, fcinfo: pg_sys::FunctionCallInfo, argno: usize) -> KeyType {
        // SAFETY: as documented.
        unsafe {
            if self.kind == HashKind::Unset {
                self.resolve(fcinfo, argno);
            }
            key_type_of(self.own_type())
        }
    }

    /// The key type the hasher is prepared for.
    pub fn own_key_type(&self) -> KeyType {
        self.key
    }

    /// The key type of a filter of argument `argno`'s own type, as
    /// [`Self::hash_arg_own`] hashes for it, whether or not the argument is
    /// NULL: prepared once per call site, so a transition function can ask
    /// for every group's first row.
    ///
    /// # Safety
    /// As [`Self::hash_arg`], but the argument may be NULL.
    pub unsafe fn own_key(&mut self, fcinfo: pg_sys::FunctionCallInfo, argno: usize) -> KeyType {
        // SAFETY: as documented; resolving and preparing read the call
        // expression and the catalog, not the argument.
        unsafe {
            if self.kind == HashKind::Unset {
                self.resolve(fcinfo, argno);
            }
            if !self.prepared {
                self.prepare(key_type_of(self.own_type()), (*(*fcinfo).flinfo).fn_mcxt);
            }
            self.key
        }
    }

    /// The hash of non-null argument `argno` for a filter of its own type, as
    /// `own` chooses that filter's key type once per call site (resolving
    /// clears it: a call site's argument type is fixed).
    ///
    /// # Safety
    /// As [`Self::hash_arg`].
    #[inline]
    unsafe fn hash_arg_self(
        &mut self,
        fcinfo: pg_sys::FunctionCallInfo,
        argno: usize,
        seed: u64,
        own: impl FnOnce(&Self) -> KeyType,
    ) -> u64 {
        // SAFETY: as documented; a key of its own key type always has a hash.
        unsafe {
            if self.kind == HashKind::Unset {
                self.resolve(fcinfo, argno);
            }
            if !self.prepared {
                let key = own(self);
                self.prepare(key, (*(*fcinfo).flinfo).fn_mcxt);
            }
            let datum = pgrx::fcinfo::pg_getarg_datum_raw(fcinfo, argno);
            if self.mode == Convert::Direct {
                return self.hash_datum(datum, seed);
            }
            self.hash_datum_for(datum, seed).expect("a key of its own key type")
        }
    }

    /// A hasher for argument `argno` of function `fn_oid` as declared (not
    /// polymorphic), prepared for a filter of that type's own, with everything
    /// it keeps in `mcxt`: for callers that call the function without a call
    /// expression and a fresh `fn_extra` every time (Citus's aggregate
    /// transitions), so that they resolve it once instead of per row.
    ///
    /// # Safety
    /// `mcxt` must outlive the hasher.
    pub unsafe fn for_declared(
        fn_oid: pg_sys::Oid,
        argno: usize,
        collation: pg_sys::Oid,
        mcxt: pg_sys::MemoryContext,
    ) -> Option<KeyHasher> {
        // SAFETY: catalog lookups of a function and its argument type; errors
        // raised unwind through pg_guard.
        unsafe {
            let mut types: *mut pg_sys::Oid = std::ptr::null_mut();
            let mut nargs = 0;
            pg_sys::get_func_signature(fn_oid, &mut types, &mut nargs);
            if argno as i32 >= nargs {
                return None;
            }
            let typid = *types.add(argno);
            if pg_sys::get_typtype(typid) == pg_sys::TYPTYPE_PSEUDO as std::ffi::c_char {
                return None;
            }
            let mut h: KeyHasher = std::mem::zeroed();
            h.resolve_type(typid, collation, mcxt);
            let own = key_type_of(h.typid);
            h.prepare(own, mcxt);
            Some(h)
        }
    }

    /// The hash of a key of the hasher's own type, prepared by
    /// [`Self::for_declared`].
    ///
    /// # Safety
    /// `datum` is a non-null value of the hasher's type.
    pub unsafe fn hash_own(&mut self, datum: pg_sys::Datum, seed: u64) -> u64 {
        // SAFETY: as documented.
        unsafe {
            if self.mode == Convert::Direct {
                return self.hash_datum(datum, seed);
            }
            self.hash_datum_for(datum, seed).expect("a key of its own key type")
        }
    }

    /// Prepares the hasher (resolved for its argument type) for a filter that
    /// records `key`; raises the error that says why an argument of its type
    /// cannot be compared with such keys.
    ///
    /// # Safety
    /// The hasher is resolved; `mcxt` must outlive `self`.
    pub unsafe fn prepare(&mut self, key: KeyType, mcxt: pg_sys::MemoryContext) {
        // SAFETY: as documented.
        if let Err(e) = unsafe { self.try_prepare(key, mcxt) } {
            let k = pg_sys::Oid::from(key.oid);
            match e {
                PrepareError::Mismatch => type_mismatch(k, self.typid),
                PrepareError::NotLabels => {
                    ereport!(
                        ERROR,
                        PgSqlErrorCode::ERRCODE_DATATYPE_MISMATCH,
                        format!("cuckoo filter keys are enum labels, not {}", type_name(self.typid)),
                        "Probe with a value of the enum type or with a label as text."
                    );
                }
                PrepareError::NoSuchType => {
                    ereport!(
                        ERROR,
                        PgSqlErrorCode::ERRCODE_UNDEFINED_OBJECT,
                        format!("the cuckoo filter's key type (OID {}) does not exist in this database", key.oid),
                        "The value was built in another database over a type of that database; rebuild it here."
                    );
                }
                PrepareError::NoUsage(t) => {
                    ereport!(
                        ERROR,
                        PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
                        format!("permission denied for type {}", type_name(t)),
                        "The cuckoo filter's keys are of this type; probing it with text reads the text as that type, which needs USAGE on it."
                    );
                }
                PrepareError::NoExecute(f) => {
                    // SAFETY: get_func_name returns a palloc'd name or NULL.
                    let name = unsafe {
                        let p = pg_sys::get_func_name(f);
                        if p.is_null() {
                            format!("OID {f:?}")
                        } else {
                            std::ffi::CStr::from_ptr(p).to_string_lossy().into_owned()
                        }
                    };
                    ereport!(
                        ERROR,
                        PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
                        format!("permission denied for function {name}"),
                        format!(
                            "The probe casts its key to the cuckoo filter's key type {} with this function.",
                            type_name(k)
                        )
                    );
                }
                PrepareError::NoHash => {
                    ereport!(
                        ERROR,
                        PgSqlErrorCode::ERRCODE_DATA_CORRUPTED,
                        format!("the cuckoo filter's key type {} has no hash function", type_name(k))
                    );
                }
            }
        }
    }

    /// As [`Self::prepare`], but says why instead of raising (the planner must
    /// not fail where the query would not). Reads the catalog only.
    ///
    /// # Safety
    /// As [`Self::prepare`].
    pub unsafe fn try_prepare(&mut self, key: KeyType, mcxt: pg_sys::MemoryContext) -> Result<(), PrepareError> {
        // SAFETY: catalog lookups of types that exist (checked first).
        unsafe {
            self.prepared = false;
            self.key = key;
            self.mode = Convert::Direct;
            // A pending key type belongs to an empty filter: nothing to match.
            if !key.is_recorded() || key.kind == KeyKind::Pending {
                if self.origin != pg_sys::InvalidOid {
                    // Read back as the original type and hashed as it hashes.
                    let o = self.origin;
                    self.set_target(o, self.collation, mcxt)?;
                    self.read_text_as(o, mcxt);
                    self.mode = Convert::Input;
                }
                self.prepared = true;
                return Ok(());
            }
            let k = pg_sys::Oid::from(key.oid);
            let t = pg_sys::getBaseType(self.typid);
            if key.kind == KeyKind::Enum {
                // Keys are labels, hashed as text: an enum probe by its label
                // (whatever the type's OID, which a restore into another
                // database changes), a text probe as it is (a text that is no
                // label has no equal).
                if pg_sys::get_typtype(t) == pg_sys::TYPTYPE_ENUM as std::ffi::c_char {
                    output_function(t, &mut self.target.output, mcxt);
                    self.target.kind = HashKind::Label;
                    self.mode = Convert::Relabel;
                } else if t == pg_sys::TEXTOID || t == pg_sys::VARCHAROID {
                    self.mode = Convert::Direct;
                } else {
                    return Err(PrepareError::NotLabels);
                }
                self.prepared = true;
                return Ok(());
            }
            if pg_sys::get_typtype(k) == 0 {
                return Err(PrepareError::NoSuchType);
            }
            let collation =
                if pg_sys::type_is_collatable(k) { pg_sys::DEFAULT_COLLATION_OID } else { pg_sys::InvalidOid };
            self.set_target(k, collation, mcxt)?;
            let kk = self.target.kind;
            let tk = kind_of(t);
            let is_int = |x: HashKind| matches!(x, HashKind::Int2 | HashKind::Int4 | HashKind::Int8);
            self.mode = if t == k
                || is_int(tk) && is_int(kk)
                || tk == HashKind::Bytes && kk == HashKind::Bytes
                || tk == HashKind::Extended
                    && kk == HashKind::Extended
                    && key.kind == KeyKind::Builtin
                    && same_hash_family(t, k)
            {
                Convert::Direct
            } else if t == pg_sys::TEXTOID || t == pg_sys::VARCHAROID {
                // Text is read with the key type's input function: only for a
                // caller who may use that type (a value can name a type its
                // reader was never granted).
                if pg_sys::pg_type_aclcheck(k, pg_sys::GetUserId(), pg_sys::ACL_USAGE as pg_sys::AclMode)
                    != pg_sys::AclResult::ACLCHECK_OK
                {
                    return Err(PrepareError::NoUsage(k));
                }
                self.read_text_as(k, mcxt);
                Convert::Input
            } else if is_int(kk) && (t == pg_sys::NUMERICOID || t == pg_sys::FLOAT4OID || t == pg_sys::FLOAT8OID) {
                if t == pg_sys::NUMERICOID {
                    output_function(t, &mut self.convert, mcxt);
                }
                Convert::ToInteger
            } else {
                let mut func = pg_sys::InvalidOid;
                match pg_sys::find_coercion_pathway(k, t, pg_sys::CoercionContext::COERCION_IMPLICIT, &mut func) {
                    pg_sys::CoercionPathType::COERCION_PATH_FUNC => {
                        // The cast runs as the caller's own cast would: only
                        // if the caller may execute its function.
                        if pg_sys::pg_proc_aclcheck(func, pg_sys::GetUserId(), pg_sys::ACL_EXECUTE as pg_sys::AclMode)
                            != pg_sys::AclResult::ACLCHECK_OK
                        {
                            return Err(PrepareError::NoExecute(func));
                        }
                        pg_sys::fmgr_info_cxt(func, &mut self.convert, mcxt);
                        Convert::Cast
                    }
                    pg_sys::CoercionPathType::COERCION_PATH_RELABELTYPE => Convert::Relabel,
                    _ => return Err(PrepareError::Mismatch),
                }
            };
            self.prepared = true;
            Ok(())
        }
    }

    /// Keys hash as type `typ` hashes them (its extended hash function under
    /// `collation` when it has no native hashing).
    ///
    /// # Safety
    /// `typ` is a type that exists; `mcxt` must outlive `self`.
    unsafe fn set_target(
        &mut self,
        typ: pg_sys::Oid,
        collation: pg_sys::Oid,
        mcxt: pg_sys::MemoryContext,
    ) -> Result<(), PrepareError> {
        // SAFETY: as documented.
        unsafe {
            let kind = kind_of(typ);
            if kind == HashKind::Extended {
                let entry = pg_sys::lookup_type_cache(typ, pg_sys::TYPECACHE_HASH_EXTENDED_PROC as i32);
                if (*entry).hash_extended_proc == pg_sys::InvalidOid {
                    return Err(PrepareError::NoHash);
                }
                pg_sys::fmgr_info_cxt((*entry).hash_extended_proc, &mut self.target.extended, mcxt);
                self.target.collation = collation;
            }
            self.target.kind = kind;
            Ok(())
        }
    }

    /// A text argument is read with type `typ`'s input function (`INPUT`).
    ///
    /// # Safety
    /// `typ` is a type that exists; `mcxt` must outlive `self`.
    unsafe fn read_text_as(&mut self, typ: pg_sys::Oid, mcxt: pg_sys::MemoryContext) {
        // SAFETY: as documented.
        unsafe {
            let (mut input, mut ioparam) = (pg_sys::InvalidOid, pg_sys::InvalidOid);
            pg_sys::getTypeInputInfo(typ, &mut input, &mut ioparam);
            pg_sys::fmgr_info_cxt(input, &mut self.convert, mcxt);
            self.ioparam = ioparam;
        }
    }

    /// Whether a key is hashed as it is (or relabeled), calling no function
    /// to convert it first.
    pub fn converts_nothing(&self) -> bool {
        matches!(self.mode, Convert::Direct | Convert::Relabel)
    }

    /// Whether converting a key can raise an error or run a role's own
    /// function: a cast or an input function can (a `date` too large for a
    /// `timestamp`); a whole-number test of a float or numeric cannot.
    pub fn converts_without_failing(&self) -> bool {
        matches!(self.mode, Convert::Direct | Convert::Relabel | Convert::ToInteger)
    }

    /// The 64-bit hash of a non-null key datum under `seed`, hashed as its own
    /// type (a filter that records no key type).
    ///
    /// # Safety
    /// The hasher is resolved, and `datum` is a non-null value of its type.
    #[inline]
    pub unsafe fn hash_datum(&mut self, datum: pg_sys::Datum, seed: u64) -> u64 {
        // SAFETY: as documented.
        unsafe { hash_by(self.kind, &mut self.extended, self.collation, datum, seed) }
    }

    /// The hash of a non-null key datum as a key of the filter the hasher was
    /// prepared for; None when it has no equal among such keys.
    ///
    /// # Safety
    /// The hasher is resolved and prepared, and `datum` is a non-null value of
    /// its argument type.
    #[inline(never)]
    pub unsafe fn hash_datum_for(&mut self, datum: pg_sys::Datum, seed: u64) -> Option<u64> {
        // SAFETY: each mode reads the datum as its argument type and passes the
        // key type's hashing a value of the key type.
        unsafe {
            match self.mode {
                Convert::Direct => Some(self.hash_datum(datum, seed)),
                Convert::Relabel => Some(self.hash_target(datum, seed)),
                Convert::Input => {
                    let text = pg_sys::text_to_cstring(datum.cast_mut_ptr());
                    let key = pg_sys::InputFunctionCall(&mut self.convert, text, self.ioparam, -1);
                    pg_sys::pfree(text as *mut std::ffi::c_void);
                    Some(self.hash_target(key, seed))
                }
                Convert::Cast => {
                    let key = pg_sys::FunctionCall3Coll(
                        &mut self.convert,
                        self.collation,
                        datum,
                        pg_sys::Datum::from(-1i32),
                        pg_sys::Datum::from(false),
                    );
                    Some(self.hash_target(key, seed))
                }
                Convert::ToInteger => {
                    // A whole number in range, or no equal key.
                    let t = pg_sys::getBaseType(self.typid);
                    let whole = if t == pg_sys::NUMERICOID {
                        let s = pg_sys::OutputFunctionCall(&mut self.convert, datum);
                        let v = whole_number(std::ffi::CStr::from_ptr(s).to_bytes());
                        pg_sys::pfree(s as *mut std::ffi::c_void);
                        v
                    } else {
                        let x = if t == pg_sys::FLOAT4OID {
                            f32::from_bits(datum.value() as u32) as f64
                        } else {
                            f64::from_bits(datum.value() as u64)
                        };
                        (x.is_finite()
                            && x.fract() == 0.0
                            && (-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&x))
                        .then_some(x as i64)
                    };
                    whole.map(|v| hash_i64(seed, v))
                }
            }
        }
    }

    /// A value of the key type, hashed as the key type hashes.
    unsafe fn hash_target(&mut self, datum: pg_sys::Datum, seed: u64) -> u64 {
        // SAFETY: `datum` is a non-null value of the prepared key type.
        unsafe {
            if self.target.kind == HashKind::Label {
                let label = pg_sys::OutputFunctionCall(&mut self.target.output, datum);
                let h = hash_bytes(seed, std::ffi::CStr::from_ptr(label).to_bytes());
                pg_sys::pfree(label as *mut std::ffi::c_void);
                h
            } else {
                hash_by(self.target.kind, &mut self.target.extended, self.target.collation, datum, seed)
            }
        }
    }
}

/// Type `typ`'s output function, set up in `finfo`.
///
/// # Safety
/// `typ` is a type that exists; `mcxt` must outlive `finfo`.
pub(super) unsafe fn output_function(typ: pg_sys::Oid, finfo: &mut pg_sys::FmgrInfo, mcxt: pg_sys::MemoryContext) {
    // SAFETY: as documented.
    unsafe {
        let (mut out, mut varlena) = (pg_sys::InvalidOid, false);
        pg_sys::getTypeOutputInfo(typ, &mut out, &mut varlena);
        pg_sys::fmgr_info_cxt(out, finfo, mcxt);
    }
}

/// 42804 for a key of type `t` given to a filter of `k` keys.
pub(super) fn type_mismatch(k: pg_sys::Oid, t: pg_sys::Oid) -> ! {
    // SAFETY: a catalog lookup of an existing type.
    let array_keys = unsafe { pg_sys::get_element_type(k) } == t;
    ereport!(
        ERROR,
        PgSqlErrorCode::ERRCODE_DATATYPE_MISMATCH,
        format!("cuckoo filter keys are of type {}, not {}", type_name(k), type_name(t)),
        if array_keys {
            format!("The filter's keys are arrays: probe one with cf_contains_key(f, key::{}).", type_name(k))
        } else {
            format!("Probe with a key of type {}, for example key::{}.", type_name(k), type_name(k))
        }
    );
}
