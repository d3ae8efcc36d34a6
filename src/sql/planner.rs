//! Planner support for every `cf_contains` overload (`cf_contains_support`):
//! how many rows a `cf_contains` qual passes, and what a call costs.
//!
//! Selectivity (`SupportRequestSelectivity`), in this order:
//!
//! 1. The filter is known at plan time when its argument folds to a constant
//!    (`estimate_expression_value`: a literal, a bound parameter of a custom plan,
//!    a stable expression); for a named filter, when the name is a constant and
//!    the filter exists, is usable and the current role may look it up. A NULL
//!    filter passes nothing.
//! 2. If the key is a plain column of an ordinary table that the current role
//!    may read, not under row security and not part of an inheritance tree,
//!    of a built-in type that the filter hashes without conversion, the share
//!    of a sample of the column's rows that the filter passes (`sample`: read
//!    once per backend and table, kept until the table's statistics change;
//!    `cuckoo.estimate_sample_rows`).
//! 3. If the key is a column with statistics the current role may use, the
//!    filter probes the column's most-common values (each passing value adds its
//!    frequency) and its histogram bounds, a sample of the other values: the
//!    fraction of bounds that pass, but at least the filter's false-positive rate
//!    at its fill, applies to the rows that are neither NULL nor most-common.
//!    About 100 bounds are kept at the default statistics target, so a pass rate
//!    around 1% is estimated from one or two bounds; a larger target on the
//!    column (`ALTER TABLE … ALTER … SET STATISTICS`) sharpens it.
//! 4. Known filter, no usable statistics but a known number of distinct values
//!    `d`: `min(1, items / d)`, plus the false-positive rate for the rest (as if
//!    the filter's keys were among the column's values).
//! 5. Otherwise, and whenever the filter is not known at plan time (a scalar
//!    subquery is a Param until execution; a filter read from another table in a
//!    join), PostgreSQL's default for a boolean function, 1/3.
//!
//! Cost (`SupportRequestCost`): a per-call cost in units of `cpu_operator_cost`,
//! measured against built-in operators (`VALUE_PROBE_COST`), higher for named
//! filters and for keys hashed by their type's own hash function; batched calls
//! cost that per key.

use pgrx::pg_sys;
use pgrx::PgList;

pub mod sample;

use super::keys::{native_key_type, KeyHasher};
use super::named::call::{probe_named_for_plan, PlanProbe};
use super::value::cache::ondisk_toast_key;
use super::value::datatype::{in_memory, FilterValue};
use crate::filter::{KeyKind, KeyType};

/// PostgreSQL's selectivity for a boolean function it knows nothing about.
pub const DEFAULT_SELECTIVITY: f64 = 1.0 / 3.0;
/// Per-call cost of a probe, in `cpu_operator_cost` units (a built-in operator
/// costs 1). Measured with serial scans of 5M int8 rows on the development
/// machine: `k > 0` 300 ms, `k > 0 AND k < …` 340 ms (one operator ≈ 35 ms),
/// `cf_contains` of a 1,000-key value 411–424 ms and of a 1,000-key named
/// filter 418–425 ms: about four operators beyond the scan's one.
pub const VALUE_PROBE_COST: f64 = 4.0;
pub const NAMED_PROBE_COST: f64 = 4.5;
/// Added per key whose type hashes through its own extended hash function.
pub const EXTENDED_HASH_COST: f64 = 1.0;
/// Keys assumed in a batched call whose array is not known at plan time.
pub const DEFAULT_BATCH_KEYS: f64 = 100.0;

/// A filter as known at plan time.
enum Known {
    /// The filter argument is NULL: the qual is never true.
    Null,
    Value(ValueArg),
    Named(String),
}

/// A filter value known at plan time, read (detoasted) only when needed: a
/// value stored in a table reaches the planner as a pointer to its toasted
/// copy, and what identifies it for a kept estimate is known from that
/// pointer once it has been read before in this backend.
struct ValueArg {
    raw: *mut pg_sys::varlena,
    value: std::cell::OnceCell<FilterValue>,
    summary: std::cell::OnceCell<ValueSummary>,
}

/// What a plan needs of a value before probing it: its seed, its digest and
/// its key type.
type ValueSummary = (u64, u64, KeyType);

thread_local! {
    /// Summaries of toasted values read by plans, by their toast pointer (the
    /// value's ID in its toast table, which names one stored value while a
    /// snapshot can see it); the latest 32.
    static TOASTED_SEEN: std::cell::RefCell<Vec<([u8; 16], ValueSummary)>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl ValueArg {
    fn get(&self) -> &FilterValue {
        // SAFETY: `raw` is a non-null cuckoofilter datum of a Const.
        self.value.get_or_init(|| unsafe { FilterValue::from_ptr(in_memory(self.raw)) })
    }

    /// The value's toast pointer, if it is one to a value stored in a table.
    fn toast_key(&self) -> Option<[u8; 16]> {
        // SAFETY: `raw` is a varlena in one of its storage forms.
        unsafe { ondisk_toast_key(self.raw) }
    }

    fn summary(&self) -> ValueSummary {
        *self.summary.get_or_init(|| self.read_summary())
    }

    fn read_summary(&self) -> ValueSummary {
        let key = self.toast_key();
        if let Some(k) = key {
            if let Some(s) = TOASTED_SEEN.with(|t| t.borrow().iter().find(|(tk, _)| *tk == k).map(|(_, s)| *s)) {
                return s;
            }
        }
        let v = self.get();
        let s = (v.seed(), v.digest(), v.key_type());
        if let Some(k) = key {
            TOASTED_SEEN.with(|t| {
                let mut t = t.borrow_mut();
                if t.len() >= 32 {
                    t.remove(0);
                }
                t.push((k, s));
            });
        }
        s
    }
}

/// The filter argument `arg` if it is known at plan time.
///
/// # Safety
/// `root` and `arg` come from a support request.
unsafe fn known_filter(root: *mut pg_sys::PlannerInfo, arg: *mut pg_sys::Node) -> Option<Known> {
    // SAFETY: a Const node of the argument's type; a non-null cuckoofilter or
    // text datum is a varlena.
    unsafe {
        if root.is_null() {
            return None;
        }
        // A constant already (a literal; a custom plan's parameter, replaced
        // before estimation) is read as it is: folding it would copy the
        // value, megabytes for a large filter, on every estimate.
        let e =
            if (*arg).type_ == pg_sys::NodeTag::T_Const { arg } else { pg_sys::estimate_expression_value(root, arg) };
        if e.is_null() || (*e).type_ != pg_sys::NodeTag::T_Const {
            return None;
        }
        let c = e as *mut pg_sys::Const;
        if (*c).constisnull {
            return Some(Known::Null);
        }
        if (*c).consttype == pg_sys::TEXTOID {
            let s = pg_sys::text_to_cstring((*c).constvalue.cast_mut_ptr());
            let name = std::ffi::CStr::from_ptr(s).to_str().ok()?.to_string();
            return Some(Known::Named(name));
        }
        Some(Known::Value(ValueArg {
            raw: (*c).constvalue.cast_mut_ptr(),
            value: std::cell::OnceCell::new(),
            summary: std::cell::OnceCell::new(),
        }))
    }
}

impl Known {
    /// The seed the filter's keys hash with and what identifies its contents
    /// (`Sample::kept_rate`); None if a named filter cannot be read.
    fn identity(&self) -> Option<(u64, u64)> {
        match self {
            Known::Null => None,
            Known::Named(name) => super::named::call::named_identity_for_plan(name),
            Known::Value(v) => {
                let (seed, digest, _) = v.summary();
                Some((seed, digest))
            }
        }
    }

    /// The key type a known value records (named filters: none yet).
    fn key_type(&self) -> KeyType {
        match self {
            Known::Value(v) => v.summary().2,
            _ => KeyType::NONE,
        }
    }

    /// Probes the hashes `hashes(seed)`; None if a named filter cannot be read.
    fn probe(&self, hashes: impl FnOnce(u64) -> Vec<u64>) -> Option<PlanProbe> {
        match self {
            Known::Null => None,
            Known::Named(name) => probe_named_for_plan(name, hashes),
            Known::Value(v) => {
                let v = v.get();
                let hs = hashes(v.seed());
                let mut answers = crate::filter::vec_filled(hs.len(), false);
                v.contains_many(&hs, &mut answers);
                let items = v.item_count();
                Some(PlanProbe { answers, items, fpp: v.fpp_bound() })
            }
        }
    }
}

/// One statistics slot's values (and numbers), freed on drop.
struct Slot(pg_sys::AttStatsSlot);

impl Slot {
    /// # Safety
    /// `tuple` is a valid pg_statistic tuple.
    unsafe fn get(tuple: pg_sys::HeapTuple, kind: u32, numbers: bool) -> Option<Slot> {
        // SAFETY: get_attstatsslot fills a zeroed slot or leaves it unused.
        unsafe {
            let mut s: pg_sys::AttStatsSlot = std::mem::zeroed();
            let flags = pg_sys::ATTSTATSSLOT_VALUES | if numbers { pg_sys::ATTSTATSSLOT_NUMBERS } else { 0 };
            pg_sys::get_attstatsslot(&mut s, tuple, kind as i32, pg_sys::InvalidOid, flags as i32).then_some(Slot(s))
        }
    }

    fn values(&self) -> &[pg_sys::Datum] {
        if self.0.values.is_null() {
            return &[];
        }
        // SAFETY: `nvalues` datums, valid until the slot is freed.
        unsafe { std::slice::from_raw_parts(self.0.values, self.0.nvalues as usize) }
    }

    fn numbers(&self) -> &[f32] {
        if self.0.numbers.is_null() {
            return &[];
        }
        // SAFETY: `nnumbers` floats, valid until the slot is freed.
        unsafe { std::slice::from_raw_parts(self.0.numbers, self.0.nnumbers as usize) }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        // SAFETY: filled by get_attstatsslot.
        unsafe { pg_sys::free_attstatsslot(&mut self.0) }
    }
}

/// The statistics of the key expression, released on drop.
struct Stats(pg_sys::VariableStatData);

impl Drop for Stats {
    fn drop(&mut self) {
        if !self.0.statsTuple.is_null() {
            if let Some(free) = self.0.freefunc {
                // SAFETY: the tuple examine_variable returned, released once.
                unsafe { free(self.0.statsTuple) };
            }
        }
    }
}

/// The estimated fraction of rows for which `cf_contains(filter, key)` is
/// true, or None when nothing is known (PostgreSQL's default then applies).
///
/// # Safety
/// The request comes from the planner.
unsafe fn selectivity(req: &pg_sys::SupportRequestSelectivity) -> Option<f64> {
    // SAFETY: the request's args are the call's two argument expressions.
    unsafe {
        let args = PgList::<pg_sys::Node>::from_pg(req.args);
        let (farg, key) = (args.get_ptr(0)?, args.get_ptr(1)?);
        let known = match known_filter(req.root, farg)? {
            Known::Null => return Some(0.0),
            k => k,
        };
        let mut vardata: pg_sys::VariableStatData = std::mem::zeroed();
        pg_sys::examine_variable(req.root, key, req.varRelid, &mut vardata);
        let stats = Stats(vardata);
        let key_type = pg_sys::exprType(key);
        let sel = from_sample(&known, req.root, &stats.0, key_type, req.inputcollid)
            .or_else(|| from_statistics(&known, &stats.0, key_type, req.inputcollid))
            .or_else(|| from_distinct(&known, &stats.0))?;
        Some(sel.clamp(0.0, 1.0))
    }
}

/// Step 3: probing the most-common values and histogram bounds.
///
/// # Safety
/// `vd` comes from examine_variable.
unsafe fn from_statistics(
    known: &Known,
    vd: &pg_sys::VariableStatData,
    key_type: pg_sys::Oid,
    collation: pg_sys::Oid,
) -> Option<f64> {
    // SAFETY: a pg_statistic tuple's fixed part starts at t_hoff; the slots'
    // values are datums of the column type, hashed by a hasher resolved for it.
    unsafe {
        if vd.statsTuple.is_null() || !vd.acl_ok {
            return None;
        }
        let t = vd.statsTuple;
        let form =
            ((*t).t_data as *const u8).add((*(*t).t_data).t_hoff as usize) as *const pg_sys::FormData_pg_statistic;
        let nullfrac = (*form).stanullfrac as f64;
        let mcv = Slot::get(t, pg_sys::STATISTIC_KIND_MCV, true);
        let hist = Slot::get(t, pg_sys::STATISTIC_KIND_HISTOGRAM, false);
        let value_type = match (&mcv, &hist) {
            (Some(s), _) | (None, Some(s)) => s.0.valuetype,
            (None, None) => return None,
        };
        // The statistics describe the column; the probe hashes the argument,
        // which may be a relabeling of it: both must hash alike.
        if pg_sys::getBaseType(value_type) != pg_sys::getBaseType(key_type) {
            return None;
        }
        let mut hasher = plan_hasher(known, value_type, collation)?;
        let mcv_values = mcv.as_ref().map_or(&[][..], |s| s.values());
        let mcv_freqs = mcv.as_ref().map_or(&[][..], |s| s.numbers());
        let bounds = hist.as_ref().map_or(&[][..], |s| s.values());
        // A value with no equal among the keys (42.5 for an integer filter)
        // passes nothing; the others are probed.
        let mut equal: Vec<bool> = Vec::new();
        let mut probe = known.probe(|seed| {
            let hs: Vec<Option<u64>> =
                mcv_values.iter().chain(bounds).map(|&d| hasher.hash_datum_for(d, seed)).collect();
            equal = hs.iter().map(Option::is_some).collect();
            hs.into_iter().flatten().collect()
        })?;
        let mut probed = probe.answers.iter();
        probe.answers = equal.iter().map(|&e| e && *probed.next().expect("one answer per probed value")).collect();
        let (mcv_pass, bound_pass) = probe.answers.split_at(mcv_values.len());
        let mcv_total: f64 = mcv_freqs.iter().map(|&f| f as f64).sum();
        let mcv_sel: f64 = mcv_freqs.iter().zip(mcv_pass).filter(|(_, &p)| p).map(|(&f, _)| f as f64).sum();
        let other = (1.0 - nullfrac - mcv_total).max(0.0);
        let rest = if !bounds.is_empty() {
            (bound_pass.iter().filter(|&&p| p).count() as f64 / bounds.len() as f64).max(probe.fpp)
        } else if other > 0.0 {
            // Values beyond the most-common ones, but no sample of them: the
            // filter's other keys among the column's other distinct values.
            let passing = mcv_pass.iter().filter(|&&p| p).count();
            distinct_rate(&probe, vd, mcv_values.len(), passing).unwrap_or(DEFAULT_SELECTIVITY)
        } else {
            0.0
        };
        Some(mcv_sel + other * rest)
    }
}

/// A hasher of values of `value_type` as the probe hashes them: a value that
/// records its key type hashes keys as that type, and the column's values are
/// converted as the probe's are; None where that conversion could fail (a
/// cast, an input function): an error there would fail a query that reads
/// no such value.
///
/// # Safety
/// `value_type` is a type OID.
unsafe fn plan_hasher(known: &Known, value_type: pg_sys::Oid, collation: pg_sys::Oid) -> Option<KeyHasher> {
    // SAFETY: a zeroed hasher is what try_resolve_type fills.
    unsafe {
        let mut hasher: KeyHasher = std::mem::zeroed();
        hasher.try_resolve_type(value_type, collation, pg_sys::CurrentMemoryContext).ok()?;
        let recorded = known.key_type();
        if recorded.is_recorded() {
            hasher.try_prepare(recorded, pg_sys::CurrentMemoryContext).ok()?;
        }
        hasher.converts_without_failing().then_some(hasher)
    }
}

/// Step 2: a sample of the key column's rows (`sample`).
///
/// # Safety
/// `root` and `vd` come from the support request and examine_variable.
unsafe fn from_sample(
    known: &Known,
    root: *mut pg_sys::PlannerInfo,
    vd: &pg_sys::VariableStatData,
    key_type: pg_sys::Oid,
    collation: pg_sys::Oid,
) -> Option<f64> {
    let rows = sample::SAMPLE_ROWS.get();
    // SAFETY: the RelOptInfo and its range-table entry are the planner's; the
    // relation is locked by the query being planned, opened without a lock of
    // its own and closed before returning.
    unsafe {
        // Not in recovery: a standby plans from its statistics (its reads of
        // a table's blocks for a plan are left to the executor).
        if rows <= 0
            || root.is_null()
            || vd.rel.is_null()
            || vd.var.is_null()
            || !vd.acl_ok
            || pg_sys::RecoveryInProgress()
        {
            return None;
        }
        let rel = &*vd.rel;
        // A base relation of the query itself: not a member of an inheritance
        // or partition tree, whose parent's row security its own entry does
        // not show.
        if rel.rtekind != pg_sys::RTEKind::RTE_RELATION
            || rel.relid == 0
            || rel.reloptkind != pg_sys::RelOptKind::RELOPT_BASEREL
        {
            return None;
        }
        let mut var = vd.var;
        while (*var).type_ == pg_sys::NodeTag::T_RelabelType {
            var = (*(var as *mut pg_sys::RelabelType)).arg as *mut pg_sys::Node;
        }
        if (*var).type_ != pg_sys::NodeTag::T_Var {
            return None;
        }
        let var = &*(var as *mut pg_sys::Var);
        if var.varattno <= 0 || var.varlevelsup != 0 {
            return None;
        }
        let rte = &**(*root).simple_rte_array.add(rel.relid as usize);
        let relkind = rte.relkind as u8;
        if rte.inh
            || !rte.securityQuals.is_null()
            || (relkind != pg_sys::RELKIND_RELATION && relkind != pg_sys::RELKIND_MATVIEW)
        {
            return None;
        }
        // The right to read the column, checked here as the executor will
        // (the planner's `acl_ok` is true for a column without statistics):
        // as the view's owner for a table read through a view.
        let user = if rte.checkAsUser != pg_sys::InvalidOid { rte.checkAsUser } else { pg_sys::GetUserId() };
        if pg_sys::pg_class_aclcheck(rte.relid, user, pg_sys::ACL_SELECT as pg_sys::AclMode)
            != pg_sys::AclResult::ACLCHECK_OK
            && pg_sys::pg_attribute_aclcheck(rte.relid, var.varattno, user, pg_sys::ACL_SELECT as pg_sys::AclMode)
                != pg_sys::AclResult::ACLCHECK_OK
        {
            return None;
        }
        if pg_sys::getBaseType(var.vartype) != pg_sys::getBaseType(key_type) {
            return None;
        }
        // Only keys hashed by built-in code: a built-in column type and key
        // type, and no conversion between them. The sample is read before
        // the query runs, from rows its WHERE clause may never reach: no
        // function of a role's own (a cast, a type's hash function) may see
        // them, and no conversion may fail on them.
        let recorded = known.key_type();
        let builtin = |t: pg_sys::Oid| u32::from(pg_sys::getBaseType(t)) < pg_sys::FirstNormalObjectId;
        if !builtin(var.vartype) || !matches!(recorded.kind, KeyKind::None | KeyKind::Builtin) {
            return None;
        }
        let mut hasher = plan_hasher(known, var.vartype, collation)?;
        if !hasher.converts_nothing() {
            return None;
        }
        let relation = pg_sys::table_open(rte.relid, pg_sys::NoLock as i32);
        let form = &*(*relation).rd_rel;
        // Row-level security may hide rows from this role (or from another
        // that plans later in this backend): such a table is not sampled.
        if form.relrowsecurity {
            pg_sys::table_close(relation, pg_sys::NoLock as i32);
            return None;
        }
        let stats_xmin =
            if vd.statsTuple.is_null() { 0 } else { u32::from((*(*vd.statsTuple).t_data).t_choice.t_heap.t_xmin) };
        let hashing = [recorded.kind as u32, recorded.oid, u32::from(var.vartype), u32::from(collation)];
        let Some((seed, id)) = known.identity() else {
            pg_sys::table_close(relation, pg_sys::NoLock as i32);
            return None;
        };
        let key = sample::SampleKey {
            relid: rte.relid,
            attnum: var.varattno,
            hashing,
            seed,
            stats_xmin,
            relpages: form.relpages,
            reltuples: form.reltuples,
            target_rows: rows,
        };
        let kept = sample::kept_or_read(key, || sample::read(relation, var.varattno, &mut hasher, seed, rows));
        pg_sys::table_close(relation, pg_sys::NoLock as i32);
        if let Some(rate) = kept.kept_rate(id) {
            return rate;
        }
        // A sample that read no rows (an empty table; a Citus table, whose rows
        // are in its shards) says nothing.
        let rate = known
            .probe(|s| if s == seed { kept.hashes.clone() } else { Vec::new() })
            .and_then(|p| (p.answers.len() == kept.hashes.len()).then(|| kept.pass_rate(&p.answers, p.fpp))?);
        kept.keep_rate(id, rate);
        rate
    }
}

/// Step 4: the filter's fill against the column's distinct values.
///
/// # Safety
/// `vd` comes from examine_variable.
unsafe fn from_distinct(known: &Known, vd: &pg_sys::VariableStatData) -> Option<f64> {
    let probe = known.probe(|_| Vec::new())?;
    // SAFETY: as documented.
    unsafe { distinct_rate(&probe, vd, 0, 0) }
}

/// The share of the column's distinct values, less `skip_values` of them
/// (most-common values, `skip_keys` of which the filter holds), that the
/// filter's other keys would cover, plus the false-positive rate for the rest.
///
/// # Safety
/// `vd` comes from examine_variable.
unsafe fn distinct_rate(
    probe: &PlanProbe,
    vd: &pg_sys::VariableStatData,
    skip_values: usize,
    skip_keys: usize,
) -> Option<f64> {
    let mut is_default = false;
    // SAFETY: as documented; the function only reads `vd`.
    let d = unsafe { pg_sys::get_variable_numdistinct(vd as *const _ as *mut _, &mut is_default) } - skip_values as f64;
    if is_default || d < 1.0 {
        return None;
    }
    let inside = (probe.items.saturating_sub(skip_keys as u64) as f64 / d).min(1.0);
    Some(inside + (1.0 - inside) * probe.fpp)
}

/// The per-call cost, in `cpu_operator_cost` units. Reads nothing through
/// `req.root`, which may be NULL.
///
/// # Safety
/// The request comes from the planner.
unsafe fn cost_ops(req: &pg_sys::SupportRequestCost) -> f64 {
    // SAFETY: `node` is the call's expression (a FuncExpr for these functions)
    // or NULL.
    unsafe {
        let named = pg_sys::get_func_nargs(req.funcid) == 2 && {
            let mut types: *mut pg_sys::Oid = std::ptr::null_mut();
            let mut nargs = 0;
            pg_sys::get_func_signature(req.funcid, &mut types, &mut nargs);
            nargs >= 1 && *types == pg_sys::TEXTOID
        };
        let mut per_key = if named { NAMED_PROBE_COST } else { VALUE_PROBE_COST };
        let batched = pg_sys::get_func_rettype(req.funcid) != pg_sys::BOOLOID;
        let mut keys = 1.0;
        if !req.node.is_null() && (*req.node).type_ == pg_sys::NodeTag::T_FuncExpr {
            let args = PgList::<pg_sys::Node>::from_pg((*(req.node as *mut pg_sys::FuncExpr)).args);
            if let Some(key) = args.get_ptr(1) {
                let mut key_type = pg_sys::exprType(key);
                if batched {
                    // Only a constant array is counted: `root` may be NULL here (the
                    // cost of an argument of an inlined SQL function), and folding
                    // an expression just to count its elements could be costly.
                    keys = DEFAULT_BATCH_KEYS;
                    if (*key).type_ == pg_sys::NodeTag::T_Const && !(*(key as *mut pg_sys::Const)).constisnull {
                        let arr = pg_sys::pg_detoast_datum((*(key as *mut pg_sys::Const)).constvalue.cast_mut_ptr())
                            as *mut pg_sys::ArrayType;
                        keys = pg_sys::ArrayGetNItems((*arr).ndim, super::batch::array_dims(arr)) as f64;
                    }
                    key_type = pg_sys::get_element_type(key_type);
                }
                if key_type != pg_sys::InvalidOid && !native_key_type(key_type) {
                    per_key += EXTENDED_HASH_COST;
                }
            }
        } else if batched {
            keys = DEFAULT_BATCH_KEYS;
        }
        per_key * keys
    }
}

v1_functions! {
    /// `cf_contains_support(internal) -> internal`: the planner support
    /// function of every `cf_contains` overload.
    fn cf_contains_support(fcinfo) {
        // SAFETY: the planner passes a support request node; only the two kinds
        // handled here are read or written, as their structs.
        unsafe {
            let req = pgrx::fcinfo::pg_getarg_datum_raw(fcinfo, 0).cast_mut_ptr::<pg_sys::Node>();
            match (*req).type_ {
                pg_sys::NodeTag::T_SupportRequestSelectivity => {
                    let r = req as *mut pg_sys::SupportRequestSelectivity;
                    let sel = selectivity(&*r);
                    (*r).selectivity = sel.unwrap_or(DEFAULT_SELECTIVITY);
                    // An estimate from the filter also prices what a
                    // pre-screen the planner added guards.
                    if let Some(pass) = sel {
                        super::bound::prescreen::scale_guarded((*r).root, (*r).args, pass);
                    }
                    pg_sys::Datum::from(req)
                }
                pg_sys::NodeTag::T_SupportRequestCost => {
                    let r = req as *mut pg_sys::SupportRequestCost;
                    (*r).startup = 0.0;
                    (*r).per_tuple = cost_ops(&*r) * pg_sys::cpu_operator_cost;
                    pg_sys::Datum::from(req)
                }
                _ => pg_sys::Datum::from(0usize),
            }
        }
    }
}
