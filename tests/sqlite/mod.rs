//! What only the SQLite store has, and what needs no server at all (the
//! derive, the fold laws, the model-based property test): raw-SQL checks of
//! the rows, the ranking tree's damage handling, several writer processes on
//! one file, the job-aggregation queue on SQLite, a read-only file.
//! `cargo test --test store_specific sqlite::ranking_queue::`.

mod concurrency;
mod derive;
mod fold_laws;
mod jobs;
mod mapper;
mod model;
mod ranking;
mod ranking_queue;
mod ranking_reads;
mod read_only;
