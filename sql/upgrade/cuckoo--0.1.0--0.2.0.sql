-- cuckoo 0.1.0 -> 0.2.0.
--
-- 0.2.0 changes the shared library, not the SQL objects: values are written in
-- format 2 (any bucket count, the shape chosen from the fpp, bit-packed or
-- semi-sorted buckets without migration counters); format-1 values written by
-- 0.1.0, stored in tables or dumps, are still read and answer every probe as
-- before. The library is preloaded: the server runs 0.2.0's code after a restart,
-- and named filters, which live in shared memory only, do not survive it.
--
-- The catalog after this script equals a fresh 0.2.0 install's; tests/upgrade.sh
-- checks that.
\echo Use "ALTER EXTENSION cuckoo UPDATE TO '0.2.0'" to load this file. \quit

COMMENT ON AGGREGATE cf_union_agg(cuckoofilter) IS 'the union of non-null filters of one shape (built with the same capacity and fpp)';
