//! Reading the bindings catalog (`cuckoo_bindings`): which table and column a
//! binding name belongs to. The triggers ask once per binding and relation
//! (and again when the binding's slot changes epoch), so that a trigger made
//! by hand on another table, naming someone's bound filter, is refused
//! instead of adding keys to it or queuing deletes of them.

use pgrx::pg_sys;
use pgrx::prelude::*;
use pgrx::spi::Spi;

use crate::sql::named::errors::fail;

/// The schema-qualified name of `cuckoo_bindings` in this database.
pub(super) fn bindings_table() -> String {
    let nsp = Spi::get_one::<String>(
        "SELECT n.nspname::text FROM pg_catalog.pg_extension e JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'cuckoo'",
    )
    .ok()
    .flatten()
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
    format!("{q}.cuckoo_bindings")
}

/// What the catalog says of binding `name`: its table and column, read under
/// the latest snapshot (a binding committed after this transaction's
/// snapshot was taken is seen: its triggers already fire here).
pub(super) fn binding(name: &str) -> Option<(pg_sys::Oid, String)> {
    let q = format!("SELECT tab::oid, col::text FROM {} WHERE name = $1", bindings_table());
    // SAFETY: the latest snapshot is pushed for the query and popped after it
    // (also on error, by the error cleanup of the active snapshot stack).
    unsafe { pg_sys::PushActiveSnapshot(pg_sys::GetLatestSnapshot()) };
    let row = Spi::connect(|c| {
        let t = c.select(&q, Some(1), &[name.into()])?;
        let mut out = None;
        for r in t {
            let tab: Option<pg_sys::Oid> = r.get(1)?;
            let col: Option<String> = r.get(2)?;
            if let (Some(tab), Some(col)) = (tab, col) {
                out = Some((tab, col));
            }
        }
        Ok::<_, pgrx::spi::Error>(out)
    });
    // SAFETY: pops the snapshot pushed above.
    unsafe { pg_sys::PopActiveSnapshot() };
    match row {
        Ok(r) => r,
        Err(e) => fail(
            PgSqlErrorCode::ERRCODE_INTERNAL_ERROR,
            format!("cuckoo: could not read the bindings catalog: {e}"),
            None,
        ),
    }
}

/// Refuses a trigger or call on relation `relid` that names binding `name`
/// with column `col`, unless the catalog binds `name` to that table and column.
pub(super) fn require_bound(name: &str, relid: pg_sys::Oid, col: &str) {
    match binding(name) {
        Some((tab, c)) if tab == relid && c == col => {}
        _ => fail(
            PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
            format!("cuckoo filter \"{name}\" is not bound to column \"{col}\" of this table"),
            Some("Bound filters are kept only by the triggers cf_bind() makes."),
        ),
    }
}
