//! Roles that own named filters: `DROP ROLE` of one is refused (2BP01), as
//! PostgreSQL refuses dropping a role that owns objects, so that no later
//! role given the same OID inherits its filters. The filters live in the
//! cluster-wide region, so those of every database count (but not those of
//! databases dropped since, which nobody can reach and the next create or
//! publish drops). `DROP OWNED` and `REASSIGN OWNED` do not reach named
//! filters: they say so in a NOTICE.
//!
//! A `ProcessUtility_hook` (chained to the one before it) checks before the
//! command runs, and only what the command's own checks would let through: a
//! role that may not drop (or `DROP OWNED`) a role learns nothing about its
//! filters. Installed only when the library is preloaded (with the region).
//! Unlike PostgreSQL's check, it takes no lock: a filter that a session of
//! the role creates between the check and the drop's commit stays, owned by
//! the dropped role's OID (superusers see it in `cuckoo_usage`).
//!
//! The hook itself is not guarded: PostgreSQL's errors from the command pass
//! through its frame (which holds nothing to drop) exactly as through C, with
//! every field they carry; the check runs in a guarded function before.

use pgrx::pg_sys;
use pgrx::prelude::*;

use super::attach::REGION;
use super::call::database_exists;
use super::errors::{database_text, role_text};

static mut PREV_PROCESS_UTILITY: pg_sys::ProcessUtility_hook_type = None;

/// Installs the hook (from `_PG_init`, when preloaded).
pub fn register() {
    // SAFETY: called once from _PG_init, single-threaded; chained as
    // PostgreSQL documents.
    unsafe {
        PREV_PROCESS_UTILITY = pg_sys::ProcessUtility_hook;
        pg_sys::ProcessUtility_hook = Some(process_utility);
    }
}

/// Filters (database, name) owned by role `oid` in databases that exist.
fn owned_by(oid: pg_sys::Oid) -> Vec<(u32, String)> {
    // SAFETY: REGION is written once, before any backend runs SQL.
    let Some(r) = (unsafe { (*std::ptr::addr_of!(REGION)).as_ref() }) else { return Vec::new() };
    let mut owned: Vec<(u32, String)> =
        r.list_all().into_iter().filter(|i| i.owner == oid.to_u32()).map(|i| (i.db, i.name)).collect();
    owned.retain(|&(db, _)| database_exists(db));
    owned
}

fn filters_text(n: usize) -> String {
    if n == 1 {
        "1 cuckoo filter".into()
    } else {
        format!("{n} cuckoo filters")
    }
}

/// The roles of a role list (`List` of `RoleSpec`): each with its OID
/// (`InvalidOid` for one that does not exist); `names_only` leaves out
/// CURRENT_USER and the like (which DROP ROLE refuses itself).
///
/// # Safety
/// `list` is NIL or a valid `List` of `RoleSpec` nodes.
unsafe fn roles_of(list: *mut pg_sys::List, names_only: bool) -> Vec<pg_sys::Oid> {
    let mut out = Vec::new();
    if list.is_null() {
        return out;
    }
    // SAFETY: as documented.
    unsafe {
        for i in 0..(*list).length as usize {
            let spec = (*(*list).elements.add(i)).ptr_value as *mut pg_sys::RoleSpec;
            if names_only && (*spec).roletype != pg_sys::RoleSpecType::ROLESPEC_CSTRING {
                continue;
            }
            out.push(pg_sys::get_rolespec_oid(spec, true));
        }
    }
    out
}

/// The hook: [`inspect`], then the command. Not guarded, and nothing in this
/// frame needs dropping: an error of the command (a longjmp) leaves it as it
/// leaves PostgreSQL's own frames.
#[allow(clippy::too_many_arguments)]
unsafe extern "C-unwind" fn process_utility(
    pstmt: *mut pg_sys::PlannedStmt,
    query_string: *const std::ffi::c_char,
    read_only_tree: bool,
    context: pg_sys::ProcessUtilityContext::Type,
    params: pg_sys::ParamListInfo,
    query_env: *mut pg_sys::QueryEnvironment,
    dest: *mut pg_sys::DestReceiver,
    qc: *mut pg_sys::QueryCompletion,
) {
    // SAFETY: PostgreSQL passes a valid statement and chains hooks this way;
    // `inspect` is guarded (its errors become PostgreSQL errors there).
    unsafe {
        inspect((*pstmt).utilityStmt);
        crate::sql::call_process_utility(
            PREV_PROCESS_UTILITY,
            pstmt,
            query_string,
            read_only_tree,
            context,
            params,
            query_env,
            dest,
            qc,
        );
    }
}

/// Before `DROP ROLE`, `DROP OWNED` and `REASSIGN OWNED`: refuses dropping a
/// role that owns filters, and says that the other two leave them alone.
#[pg_guard]
unsafe extern "C-unwind" fn inspect(stmt: *mut pg_sys::Node) {
    // SAFETY: a valid utility statement of the tag it has.
    unsafe {
        match (*stmt).type_ {
            pg_sys::NodeTag::T_DropRoleStmt => {
                refuse_drop(roles_of((*(stmt as *mut pg_sys::DropRoleStmt)).roles, true))
            }
            pg_sys::NodeTag::T_DropOwnedStmt => tell_owned(
                roles_of((*(stmt as *mut pg_sys::DropOwnedStmt)).roles, false),
                "DROP OWNED does not drop them",
            ),
            pg_sys::NodeTag::T_ReassignOwnedStmt => tell_owned(
                roles_of((*(stmt as *mut pg_sys::ReassignOwnedStmt)).roles, false),
                "REASSIGN OWNED does not give them to another role",
            ),
            _ => {}
        }
    }
}

/// Refuses (2BP01) dropping a role of `roles` that owns filters, if the
/// current role may drop it (else `DROP ROLE` refuses it itself): it has
/// CREATEROLE, and is a superuser to drop a superuser.
fn refuse_drop(roles: Vec<pg_sys::Oid>) {
    // SAFETY: catalog lookups by OID.
    let may_drop = |oid: pg_sys::Oid| unsafe {
        pg_sys::has_createrole_privilege(pg_sys::GetUserId()) && (!pg_sys::superuser_arg(oid) || pg_sys::superuser())
    };
    for oid in roles.into_iter().filter(|&o| o != pg_sys::InvalidOid && may_drop(o)) {
        let owned = owned_by(oid);
        if owned.is_empty() {
            continue;
        }
        const SHOWN: usize = 5;
        let mut named: Vec<(String, &str)> = owned.iter().map(|(db, f)| (database_text(*db), f.as_str())).collect();
        named.sort();
        let mut detail: Vec<String> =
            named.iter().take(SHOWN).map(|(db, f)| format!("owner of cuckoo filter \"{f}\" in {db}")).collect();
        if owned.len() > SHOWN {
            detail.push(format!("and {} more", owned.len() - SHOWN));
        }
        pgrx::pg_sys::panic::ErrorReport::new(
            PgSqlErrorCode::ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST,
            format!("{} cannot be dropped because it owns {}", role_text(oid.to_u32()), filters_text(owned.len())),
            "cuckoo",
        )
        .set_detail(detail.join("\n"))
        .set_hint("Drop them first with cf_drop() in their databases (as the role or a superuser); DROP OWNED and REASSIGN OWNED do not reach cuckoo filters.")
        .report(PgLogLevel::ERROR);
    }
}

/// A NOTICE for each role of `roles` that owns filters and whose privileges
/// the current role has (else the command refuses it itself).
fn tell_owned(roles: Vec<pg_sys::Oid>, what: &str) {
    // SAFETY: a catalog check on valid role ids.
    let may = |oid: pg_sys::Oid| unsafe { pg_sys::has_privs_of_role(pg_sys::GetUserId(), oid) };
    for oid in roles.into_iter().filter(|&o| o != pg_sys::InvalidOid && may(o)) {
        let owned = owned_by(oid);
        if !owned.is_empty() {
            pgrx::pg_sys::panic::ErrorReport::new(
                PgSqlErrorCode::ERRCODE_SUCCESSFUL_COMPLETION,
                format!("{} owns {} (in shared memory, in any database); {what}", role_text(oid.to_u32()), filters_text(owned.len())),
                "cuckoo",
            )
            .set_hint("Drop them with cf_drop() in their databases, or publish copies under another role (cf_snapshot, then cf_publish as that role).")
            .report(PgLogLevel::NOTICE);
        }
    }
}
