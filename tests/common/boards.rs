//! The ranking suites' view of a store under test (`stores_ranking/`,
//! `stores_ranking_policy.rs`): its database handle for `Ranking`, and how
//! hard its property tests may push it.
#![allow(dead_code)] // each suite uses its own part of this

use crate::stores::TestStore;
use autoshard::ranking::RankingStore;
use autoshard::Sqlite;
use proptest::test_runner::{Config, TestRunner};

/// A store under test that can hold boards.
pub trait Boards: TestStore {
    type Db: RankingStore;
    fn db(&self) -> &Self::Db;
    /// Property-test cases, and every how many operations a case checks
    /// every query against the oracle (always after the last): one check
    /// is a few hundred queries, each a few round trips on a server, so
    /// a server store runs fewer and checks less often (the oracle is the same).
    const CASES: u32;
    const VERIFY_EVERY: usize;
}

impl Boards for Sqlite {
    type Db = Sqlite;
    fn db(&self) -> &Sqlite {
        self
    }
    const CASES: u32 = 48;
    const VERIFY_EVERY: usize = 1;
}

#[cfg(feature = "postgres")]
impl Boards for autoshard::Postgres {
    type Db = autoshard::Postgres;
    fn db(&self) -> &autoshard::Postgres {
        self
    }
    const CASES: u32 = 6;
    const VERIFY_EVERY: usize = 4;
}

#[cfg(feature = "redis")]
impl Boards for autoshard::RedisCluster {
    type Db = autoshard::RedisCluster;
    fn db(&self) -> &autoshard::RedisCluster {
        self
    }
    // A few round trips per query, as on PostgreSQL.
    const CASES: u32 = 6;
    const VERIFY_EVERY: usize = 4;
}

#[cfg(feature = "postgres")]
impl Boards for crate::stores::pg::Optimistic {
    type Db = autoshard::Postgres;
    fn db(&self) -> &autoshard::Postgres {
        &self.0
    }
    const CASES: u32 = 3;
    const VERIFY_EVERY: usize = 4;
}

/// A property-test runner for `S`: its number of cases, failures saved
/// next to `file`.
pub fn runner<S: Boards>(file: &'static str) -> TestRunner {
    TestRunner::new(Config {
        cases: S::CASES,
        source_file: Some(file),
        ..Config::default()
    })
}
