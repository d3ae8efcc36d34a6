# Thin wrappers; the scripts under tests/ do the work.
PG_CONFIG ?= /usr/lib/postgresql/15/bin/pg_config
export PG_CONFIG
export PATH := $(HOME)/.cargo/bin:$(PATH)

.PHONY: setup install package demo test test-core loom test-pg test-isolation test-regress test-clients test-shared test-security test-durable test-faults soak test-citus bench bench-core

setup:
	bash tests/tools/setup.sh

# Each file is written anew and renamed into place: a running server that has the
# library loaded is not disturbed (tests/tools/install.sh).
install: setup
	bash tests/tools/install.sh

# The package directory alone (target/package), for packagers: cargo-pgrx
# packages neither sql/install/ nor sql/upgrade/, this does.
package: setup
	bash tests/tools/install.sh --package

demo: install
	bash tests/demo.sh

test: setup test-core loom test-isolation test-regress test-clients test-shared test-security test-durable test-faults test-citus

# The filter core alone, without pgrx: proves it does not depend on it. Includes
# the threaded stress test (scale with CUCKOO_STRESS_OPS, CUCKOO_STRESS_THREADS);
# the native benchmark is compiled too, so that it cannot fall behind the core;
# the sources are formatted (rustfmt.toml) and clippy finds nothing (the lints
# are chosen in Cargo.toml's [lints] table), for the core alone and with pgrx;
# the source files import one another without a circle, and the lower layers
# only through their fronts (tests/tools/layering.py); docs/source.md lists
# every file as its header describes it (tests/tools/source_map.py).
test-core: setup
	cargo fmt --check
	cargo clippy --no-default-features --lib --tests -- -D warnings
	cargo clippy --all-targets --features pg_test -- -D warnings
	python3 tests/tools/layering.py --self-test
	python3 tests/tools/layering.py
	python3 tests/tools/source_map.py
	cargo test --no-default-features --lib --release
	cargo bench --no-default-features --bench core --no-run

# Model checking of the lock-free table with loom (src/filter/loom_tests.rs).
loom:
	RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
	  cargo test --no-default-features --lib --release loom -- --nocapture --test-threads 1

# #[pg_test]s inside a temporary PostgreSQL run by pgrx as user postgres, from a
# private installation tree in /tmp (tests/tools/pgtree.sh): the system's installation is
# never written (tests/tools/pg_test.sh).
test-pg: setup
	bash tests/tools/pg_test.sh

# test-pg while a server with cuckoo preloaded runs from the system's
# installation: the server, its durability worker and the installed files are
# left exactly as they were (tests/isolation.sh).
test-isolation: install
	bash tests/isolation.sh

# SQL behaviour against an installed extension in a throwaway cluster.
test-regress: install
	bash tests/regress.sh

# Client drivers as applications use them (psycopg 3, asyncpg, node-postgres,
# installed into target/clients/): the README's recipes without casts give the
# answers typed SQL gives.
test-clients: install
	bash tests/clients/run.sh

# Named filters: many-backend stress, cancellation, region exhaustion, no preload.
test-shared: install
	bash tests/concurrency/run.sh

# What one unprivileged role sends costs only that role (issue 29): each case
# of the issue as a fixed test, then a seeded mutation fuzzer over every input
# that crosses the trust boundary (fixed seed and count; a failure prints its
# seed and iteration), on a cluster whose server processes are limited to
# 4 GiB of address space (tests/security).
test-security: install
	bash tests/security/run.sh

# Durable filters: restarts, crashes, standbys and switchover, base backups,
# point-in-time recovery, the checkpoint files (half written, damaged, not
# writable), corrupt WAL, and a server that ran 0.4.0 (built once from this
# repository's history into target/old/, run from a private installation tree).
test-durable: install
	bash tests/durable/run.sh

# Faults, by testgres and hypothesis (tests/faults): each case of issue 28 as a
# fixed scenario, then a randomized fault-schedule tester with a model of what
# was acknowledged, for a fixed set of seeds (a failure prints its seed).
test-faults: install
	bash tests/faults/run.sh

# The fault-schedule tester with new seeds for SOAK_MINUTES (default 60), then
# the security fuzzer with new seeds for as long.
soak: install
	bash tests/faults/run.sh soak
	bash tests/security/run.sh soak

# A Citus coordinator and two workers (Citus 13.2.2 built and installed by the
# shared tools' build-citus.sh if missing): cf_sharded_agg pushed down for every
# key type and its shipped states, named filters that distributed queries use
# (tests/citus/run.sh).
test-citus: install
	bash tests/citus/run.sh

bench: install bench-core
	bash tests/bench/run.sh

# Native benchmarks of the lock-free core (tests/bench/core.rs), no PostgreSQL.
bench-core:
	cargo bench --no-default-features --bench core
