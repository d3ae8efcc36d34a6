//! Reading the bindings catalog (`cuckoo_bindings`): which table and column a
//! binding name belongs to. The triggers ask once per binding and relation
//! (and again when the binding's slot changes epoch), so that a trigger made
//! by hand on another table, naming someone's bound filter, is refused
//! instead of adding keys to it or queuing deletes of them.

use std::ffi::CStr;

use pgrx::pg_sys;
use pgrx::prelude::*;
use pgrx::spi::Spi;

use crate::sql::named::errors::fail;

/// Runs `f` (this module's SQL, and what runs it) with `search_path` set to
/// `pg_catalog, pg_temp` (functions and operators only from `pg_catalog`),
/// restored after (also on error, by the transaction's cleanup): the
/// caller's path must not choose the operators of queries that may run as
/// another role (`as_role`), as SECURITY DEFINER functions pin theirs.
pub(super) fn with_safe_path<T>(f: impl FnOnce() -> T) -> T {
    crate::sql::with_setting(c"search_path", c"pg_catalog, pg_temp", f)
}

/// The first column of the first row of read-only query `q`, as text.
pub(super) fn one_text(q: &str) -> Option<String> {
    with_safe_path(|| one_text_as_is(q))
}

fn one_text_as_is(q: &str) -> Option<String> {
    Spi::connect(|c| {
        let t = c.select(q, Some(1), &[])?;
        let mut out = None;
        for r in t {
            out = r.get::<String>(1)?;
        }
        Ok::<_, pgrx::spi::Error>(out)
    })
    .ok()
    .flatten()
}

/// The schema-qualified name of `cuckoo_bindings` in this database.
pub(super) fn bindings_table() -> String {
    format!("{}.cuckoo_bindings", ext_schema())
}

/// The extension's schema in this database, quoted for SQL.
pub(super) fn ext_schema() -> String {
    // Read-only SPI (Spi::get_one asks for a read-write connection, which a
    // parallel worker cannot have).
    let nsp = one_text(
        "SELECT n.nspname::text FROM pg_catalog.pg_extension e JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'cuckoo'",
    )
    .unwrap_or_else(|| {
        fail(
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            "extension \"cuckoo\" is not installed in this database".into(),
            None,
        )
    });
    // SAFETY: quote_identifier returns its argument or a palloc'd quoted copy.
    let q = unsafe {
        let c = std::ffi::CString::new(nsp).unwrap();
        std::ffi::CStr::from_ptr(pg_sys::quote_identifier(c.as_ptr())).to_string_lossy().into_owned()
    };
    q
}

/// The namespace of the extension's functions in this backend's database
/// (set by the last of them called here), where the catalog is.
static mut NAMESPACE: pg_sys::Oid = pg_sys::InvalidOid;
/// The function `NAMESPACE` was last read from.
static mut NOTED_FN: pg_sys::Oid = pg_sys::InvalidOid;

/// Notes where the extension's objects are, from one of its functions (read
/// again when another function calls: after the extension is dropped and
/// made again, in another schema maybe, its functions are new).
pub(super) fn note_function(fn_oid: pg_sys::Oid) {
    // SAFETY: backend-local; a syscache lookup of the calling function.
    unsafe {
        if NOTED_FN != fn_oid {
            NAMESPACE = pg_sys::get_func_namespace(fn_oid);
            NOTED_FN = fn_oid;
        }
    }
}

/// The catalog's OID, if the extension is installed here.
fn catalog_relid() -> Option<pg_sys::Oid> {
    // SAFETY: backend-local; syscache lookups.
    unsafe {
        if NAMESPACE != pg_sys::InvalidOid {
            let r = pg_sys::get_relname_relid(c"cuckoo_bindings".as_ptr(), NAMESPACE);
            if r != pg_sys::InvalidOid {
                return Some(r);
            }
        }
        // Not known, or no longer there (the extension was dropped, or made
        // again elsewhere): asked again. Not in parallel mode: SPI there
        // could need a snapshot.
        if pg_sys::IsInParallelMode() {
            return None;
        }
        NAMESPACE = pg_sys::InvalidOid;
        NOTED_FN = pg_sys::InvalidOid;
        let nsp = one_text("SELECT e.extnamespace::text FROM pg_catalog.pg_extension e WHERE e.extname = 'cuckoo'")?;
        NAMESPACE = pg_sys::Oid::from(nsp.parse::<u32>().ok()?);
        let r = pg_sys::get_relname_relid(c"cuckoo_bindings".as_ptr(), NAMESPACE);
        (r != pg_sys::InvalidOid).then_some(r)
    }
}

/// A binding's row in the catalog, as the backend needs it.
pub(super) struct Row {
    pub tab: pg_sys::Oid,
    pub col: String,
    /// What identifies the contents the last committed fill made (None: no
    /// fill committed on this server since the row was written or restored).
    pub built: Option<u64>,
    /// Whether this transaction wrote the row (not committed yet: only this
    /// transaction may rely on it).
    pub mine: bool,
}

/// What the catalog says of binding `name`: its table and column.
pub(super) fn binding(name: &str) -> Option<(pg_sys::Oid, String)> {
    row(name).map(|r| (r.tab, r.col))
}

/// Binding `name`'s row. Read under the latest snapshot (a binding
/// committed after this transaction's snapshot was taken is seen: its
/// triggers already fire here), or in parallel mode (a pre-screen in a
/// parallel plan), where no new snapshot may be taken, under the query's
/// own. A plain scan of the small catalog, without SPI, so that parallel
/// workers may read it too.
pub(super) fn row(name: &str) -> Option<Row> {
    let mut out = None;
    scan(|n, r| {
        if n == name {
            out = Some(r);
            true
        } else {
            false
        }
    });
    out
}

/// Reads the catalog's rows (as [`row`] says) and gives each to `each`, until
/// it returns true.
fn scan(mut each: impl FnMut(&str, Row) -> bool) {
    let Some(relid) = catalog_relid() else { return };
    // SAFETY: the catalog is opened, scanned under a registered snapshot and
    // closed here; its first three columns are name text, tab regclass and
    // col name, and its column "built" is a bigint (sql/src/bound.sql),
    // checked before they are read.
    unsafe {
        let rel = pg_sys::table_open(relid, pg_sys::AccessShareLock as i32);
        let td = (*rel).rd_att;
        let attrs = (*td).attrs.as_slice((*td).natts as usize);
        let built_at = attrs.iter().position(|a| {
            !a.attisdropped
                && CStr::from_ptr(a.attname.data.as_ptr()).to_bytes() == b"built"
                && a.atttypid == pg_sys::INT8OID
        });
        if attrs.len() < 3
            || attrs[0].atttypid != pg_sys::TEXTOID
            || attrs[1].atttypid != pg_sys::REGCLASSOID
            || attrs[2].atttypid != pg_sys::NAMEOID
            || built_at.is_none()
        {
            pg_sys::table_close(rel, pg_sys::AccessShareLock as i32);
            fail(
                PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                "cuckoo: the bindings catalog is not as this library expects".into(),
                Some("Update the extension (ALTER EXTENSION cuckoo UPDATE)."),
            );
        }
        let built_at = built_at.unwrap_or(0);
        let snap = if pg_sys::IsInParallelMode() {
            pg_sys::RegisterSnapshot(pg_sys::GetActiveSnapshot())
        } else {
            pg_sys::RegisterSnapshot(pg_sys::GetLatestSnapshot())
        };
        let hscan = pg_sys::heap_beginscan(
            rel,
            snap,
            0,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            pg_sys::ScanOptions::SO_TYPE_SEQSCAN | pg_sys::ScanOptions::SO_ALLOW_PAGEMODE,
        );
        let n = (*td).natts as usize;
        let mut values = vec![pg_sys::Datum::from(0usize); n];
        let mut nulls = vec![false; n];
        loop {
            let tup = pg_sys::heap_getnext(hscan, pg_sys::ScanDirection::ForwardScanDirection);
            if tup.is_null() {
                break;
            }
            pg_sys::heap_deform_tuple(tup, td, values.as_mut_ptr(), nulls.as_mut_ptr());
            if nulls[0] || nulls[1] || nulls[2] {
                continue;
            }
            let t = pg_sys::text_to_cstring(values[0].cast_mut_ptr());
            let name = CStr::from_ptr(t).to_string_lossy().into_owned();
            pg_sys::pfree(t.cast());
            let tab = pg_sys::Oid::from(values[1].value() as u32);
            let col = CStr::from_ptr(values[2].cast_mut_ptr::<std::ffi::c_char>()).to_string_lossy().into_owned();
            let built = (!nulls[built_at]).then(|| values[built_at].value() as i64 as u64);
            let mine = pg_sys::TransactionIdIsCurrentTransactionId((*(*tup).t_data).t_choice.t_heap.t_xmin);
            if each(&name, Row { tab, col, built, mine }) {
                break;
            }
        }
        pg_sys::heap_endscan(hscan);
        pg_sys::UnregisterSnapshot(snap);
        pg_sys::table_close(rel, pg_sys::AccessShareLock as i32);
    }
}

unsafe extern "C-unwind" {
    /// PostgreSQL's list of a partition's ancestors, nearest first.
    fn get_partition_ancestors(relid: pg_sys::Oid) -> *mut pg_sys::List;
}

/// Whether relation `relid` is a partition (at any level) of `ancestor`.
pub(super) fn is_partition_of(relid: pg_sys::Oid, ancestor: pg_sys::Oid) -> bool {
    // SAFETY: syscache and catalog lookups of an existing relation; the list
    // holds OIDs and is freed after.
    unsafe {
        if !pg_sys::get_rel_relispartition(relid) {
            return false;
        }
        let l = get_partition_ancestors(relid);
        if l.is_null() {
            return false;
        }
        let found = (0..(*l).length as usize).any(|i| (*(*l).elements.add(i)).oid_value == ancestor);
        pg_sys::list_free(l);
        found
    }
}

/// Refuses a trigger or call on relation `relid` that names binding `name`
/// with column `col`, unless the catalog binds `name` to that table (or to a
/// partitioned table `relid` is a partition of) and column. Returns the
/// bound table.
pub(super) fn require_bound(name: &str, relid: pg_sys::Oid, col: &str) -> pg_sys::Oid {
    match binding(name) {
        Some((tab, c)) if (tab == relid || is_partition_of(relid, tab)) && c == col => tab,
        _ => fail(
            PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
            format!("cuckoo filter \"{name}\" is not bound to column \"{col}\" of this table"),
            Some("Bound filters are kept only by the triggers cf_bind() makes."),
        ),
    }
}

/// The number of column `col` of relation `relid` (0 if it has none).
pub(super) fn column_number(relid: pg_sys::Oid, col: &str) -> i16 {
    let c = std::ffi::CString::new(col).unwrap_or_default();
    // SAFETY: a syscache lookup.
    unsafe { pg_sys::get_attnum(relid, c.as_ptr()).max(0) }
}

/// Whether the current role may read the column that filter `name` is bound
/// to (false when it is not bound): then it may probe the filter through the
/// pre-screen without a lookup grant, learning nothing the column does not
/// tell it. Reads the catalog (the planner's estimates).
pub fn may_read_bound(name: &str) -> bool {
    let Some((tab, col)) = binding(name) else { return false };
    may_read(tab, column_number(tab, &col))
}

/// Whether the current role may read column `attnum` of table `tab`.
pub(super) fn may_read(tab: pg_sys::Oid, attnum: i16) -> bool {
    // SAFETY: privilege checks of an existing relation (checked first).
    unsafe {
        if attnum <= 0 || pg_sys::get_rel_name(tab).is_null() {
            return false;
        }
        // Row-level security hides rows the filter holds keys of.
        if pg_sys::check_enable_rls(tab, pg_sys::InvalidOid, true) != pg_sys::CheckEnableRlsResult::RLS_NONE as i32 {
            return false;
        }
        let me = pg_sys::GetUserId();
        pg_sys::pg_class_aclcheck(tab, me, pg_sys::ACL_SELECT as pg_sys::AclMode) == pg_sys::AclResult::ACLCHECK_OK
            || pg_sys::pg_attribute_aclcheck(tab, attnum, me, pg_sys::ACL_SELECT as pg_sys::AclMode)
                == pg_sys::AclResult::ACLCHECK_OK
    }
}

/// Runs `f` as role `role` (its privileges, and the owner of what it
/// creates), restoring the caller's role after (also on error, by the
/// transaction's cleanup), as PostgreSQL's own maintenance commands do.
pub(super) fn as_role<T>(role: pg_sys::Oid, f: impl FnOnce() -> T) -> T {
    let (mut user, mut ctx) = (pg_sys::InvalidOid, 0);
    // SAFETY: saves and switches the current user for the duration of `f`,
    // as a restricted operation (no SET ROLE, no temporary objects), with
    // the search path pinned (`with_safe_path`).
    unsafe {
        pg_sys::GetUserIdAndSecContext(&mut user, &mut ctx);
        pg_sys::SetUserIdAndSecContext(
            role,
            ctx | pg_sys::SECURITY_LOCAL_USERID_CHANGE as i32 | pg_sys::SECURITY_RESTRICTED_OPERATION as i32,
        );
    }
    let out = with_safe_path(f);
    // SAFETY: restores what was saved above.
    unsafe { pg_sys::SetUserIdAndSecContext(user, ctx) };
    out
}

/// Runs `f` as the bootstrap superuser: the catalog's rows are written only
/// through the checks of the functions that call this.
pub(super) fn as_catalog_owner<T>(f: impl FnOnce() -> T) -> T {
    as_role(pg_sys::Oid::from(pg_sys::BOOTSTRAP_SUPERUSERID), f)
}

/// The names of the bindings of table `relid`.
pub(super) fn bindings_of(relid: pg_sys::Oid) -> Vec<String> {
    let mut out = Vec::new();
    scan(|name, row| {
        if row.tab == relid {
            out.push(name.to_string());
        }
        false
    });
    out
}
