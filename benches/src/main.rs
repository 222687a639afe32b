//! autoshard's benchmarks: one binary, one command.
//!
//! ```text
//! cargo run --release -p autoshard-benches -- [mapper|voting|compaction|compactor|ranking|policies|all] [--quick]
//! cargo run --release -p autoshard-benches -- contention [--quick]   # needs PostgreSQL
//! cargo run --release -p autoshard-benches -- sweep [--quick]        # needs PostgreSQL
//! cargo run --release -p autoshard-benches -- auto [--quick]         # needs PostgreSQL; also part of `contention`
//! cargo run --release -p autoshard-benches -- query [--quick]        # needs PostgreSQL
//! cargo run --release -p autoshard-benches -- redis [--quick]        # redis-server, root
//! cargo run --release -p autoshard-benches -- ranking-queue [--quick] # AUTOSHARD_BENCH_* in ranking_queue.rs
//! cargo run --release -p autoshard-benches -- composite [--quick]
//! cargo run --release -p autoshard-benches -- approx [--quick]        # AUTOSHARD_BENCH_APPROX_10M=1 for 10M
//! cargo run --release -p autoshard-benches -- ranking-trees [--quick] # k trees; see ranking_trees.rs
//! cargo run --release -p autoshard-benches -- ranking-ranges [--quick] # between vs rank_of_score; ranking/ranges.rs
//! cargo run --release -p autoshard-benches -- redis-trees [--quick]  # trees(1) vs trees(3), CPU-capped masters; root
//! cargo run --release -p autoshard-benches -- family [--quick]     # PostgreSQL if AUTOSHARD_PG_URL, Redis on 6379 if up
//! cargo run --release -p autoshard-benches -- sqlite-keepup [--quick] # issue 18 item 6; see sqlite_keepup.rs
//! cargo run --release -p autoshard-benches -- async-calls [--quick]  # issue 19; needs PostgreSQL
//! cargo run --release -p autoshard-benches --bin service-load          # issue 19 item 6: examples/service over HTTP
//! cargo run --release -p autoshard-benches [--features tracing] -- tracing-overhead # see tracing_overhead.rs
//! ```
//!
//! Prints Markdown (run facts, then one section per benchmark) on stdout and
//! progress on stderr, so `> out.md` captures a pasteable report. Database
//! files go to a temporary directory under `$TMPDIR` (default `/tmp`); the
//! report names the file system, since tmpfs would hide every fsync.

mod approx;
mod async_calls;
mod auto_contention;
mod compaction;
mod compactor;
mod composite;
mod contention;
mod entity_board;
mod entity_board_redis;
mod family;
mod machine;
mod mapper;
mod model;
mod pg_native;
mod pg_reads;
mod policies;
mod query;
mod ranking;
mod ranking_queue;
mod ranking_trees;
mod redis_boards;
mod redis_cluster;
mod redis_trees;
mod sqlite_keepup;
mod stats;
mod sweep;
mod tracing_overhead;
mod voting;

use std::time::Instant;

const USAGE: &str =
    "usage: autoshard-benches [mapper|voting|compaction|compactor|contention|sweep|auto|query|ranking|ranking-queue|ranking-trees|ranking-ranges|policies|composite|family|redis|redis-boards|redis-trees|approx|entity-board|sqlite-keepup|async-calls|tracing-overhead|pg-reads|all]... [--quick]";

fn main() {
    let mut quick = false;
    let mut which = Vec::new();
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "--quick" => quick = true,
            "mapper" | "voting" | "compaction" | "compactor" | "contention" | "sweep" | "auto"
            | "query" | "ranking" | "ranking-queue" | "ranking-trees" | "ranking-ranges"
            | "policies" | "redis" | "redis-boards" | "redis-trees" | "composite" | "family"
            | "approx" | "entity-board" | "sqlite-keepup" | "async-calls" | "tracing-overhead"
            | "pg-reads" => which.push(arg),
            "all" => which.extend(
                ["mapper", "voting", "compaction", "compactor", "ranking"].map(String::from),
            ),
            "-h" | "--help" => {
                println!("{USAGE}");
                return;
            }
            other => {
                eprintln!("unknown argument `{other}`\n{USAGE}");
                std::process::exit(2);
            }
        }
    }
    if which.is_empty() {
        which.extend(["mapper", "voting", "compaction", "compactor", "ranking"].map(String::from));
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    let command = format!(
        "cargo run --release -p autoshard-benches --{}{}",
        if args.is_empty() { "" } else { " " },
        args.join(" ")
    );
    let dir = tempfile::Builder::new()
        .prefix("autoshard-bench-")
        .tempdir()
        .expect("temporary directory");
    machine::report(dir.path(), quick, &command);
    let start = Instant::now();
    let failed = which.iter().find_map(|bench| {
        let result = match bench.as_str() {
            "mapper" => mapper::run(dir.path(), quick),
            "voting" => voting::run(dir.path(), quick).map_err(|e| e as _),
            "ranking" => ranking::run(dir.path(), quick).map_err(|e| e as _),
            "policies" => policies::run(dir.path(), quick).map_err(|e| e as _),
            "composite" => composite::run(dir.path(), quick).map_err(|e| e as _),
            "family" => family::run(dir.path(), quick).map_err(|e| e as _),
            "ranking-queue" => ranking_queue::run(dir.path(), quick).map_err(|e| e as _),
            "ranking-trees" => ranking_trees::run(dir.path(), quick).map_err(|e| e as _),
            "ranking-ranges" => ranking::ranges::run(dir.path(), quick).map_err(|e| e as _),
            "contention" => contention::run(dir.path(), quick).map_err(|e| e as _),
            "sweep" => sweep::run(dir.path(), quick).map_err(|e| e as _),
            "auto" => auto_contention::run(quick).map_err(|e| e as _),
            "redis" => redis_cluster::run(dir.path(), quick),
            "redis-boards" => redis_boards::run(dir.path(), quick),
            "redis-trees" => redis_trees::run(dir.path(), quick),
            "compactor" => compactor::run(dir.path(), quick).map_err(|e| e as _),
            "query" => query::run(dir.path(), quick).map_err(|e| e as _),
            "approx" => approx::run(dir.path(), quick).map_err(|e| e as _),
            "entity-board" => entity_board::run(dir.path(), quick),
            "sqlite-keepup" => sqlite_keepup::run(dir.path(), quick).map_err(|e| e as _),
            "async-calls" => async_calls::run(dir.path(), quick),
            "tracing-overhead" => tracing_overhead::run(quick),
            "pg-reads" => pg_reads::run().map_err(|e| e as _),
            _ => compaction::run(dir.path(), quick),
        };
        result
            .err()
            .map(|e| format!("{bench} benchmark failed: {e}"))
    });
    if let Some(message) = failed {
        // `exit` skips destructors: remove the database files first.
        drop(dir);
        eprintln!("{message}");
        std::process::exit(1);
    }
    println!(
        "Finished in {:.0} s; load average at end: {}.",
        start.elapsed().as_secs_f64(),
        machine::load_average()
    );
}
