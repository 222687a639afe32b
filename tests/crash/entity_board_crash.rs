//! kill -9 of a writer of entity boards on Redis Cluster (issue 18, item
//! 4): a child process saving a kind with two ranked fields (a static one,
//! `votes`, and a dynamic one, `views`), by `save` and by `save_delta`, is
//! SIGKILLed at a random moment, 20 times (`AUTOSHARD_KILLS` overrides).
//! The child pauses 2 ms between a save's pieces and its board writes
//! (`redis_hooks::pause_before_board_writes`), so many kills land where a
//! board write is owed. After each kill the parent runs one compaction
//! pass, which pays what the killed writer owed, and checks:
//!
//! - each board holds every entity's total, exactly (nothing lost, nothing
//!   counted twice), and passes `check_integrity`;
//! - the votes of all entities grew by the acknowledged saves, or by one
//!   more (the save in flight at the kill).
//!
//! The test fails if no kill left a board write owed (the recovery would
//! not have been exercised; a run of 20 kills left one after 12). Control:
//! with the compaction's recovery call commented out, it failed after the
//! first kill (`entity 3: boards hold (Some(7), Some(3)), totals are (8,
//! 4)`). What catches a recovery that pays twice:
//! `tests/redis/redis_entity_board.rs`, whose control runs it without
//! operation ids.
#![cfg(all(unix, feature = "redis"))]

use crate::child::say;
use autoshard::ranking::{Policy, Ranking, RankingConfig};
use autoshard::{shard_method, Pending, RedisCluster, Shardable, Store};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::child::{self, kills, Child};
use crate::stores;
use stores::redis_cluster as rc;

const ENV_PREFIX: &str = "AUTOSHARD_ENTITY_BOARD_CRASH_PREFIX";
const KILLS: u64 = 20;
const CHILD_LIFETIME: Duration = Duration::from_secs(20);
const IDS: [u64; 3] = [1, 2, 3];

#[derive(Shardable, Debug)]
#[shard(kind = "Voted")]
struct Voted {
    #[shard(id)]
    id: u64,
    #[shard(neutral = 0, shards = 4, fold = autoshard::fold::checked_sum, ranked = "votes")]
    votes: i64,
    #[shard(neutral = 0, fold = autoshard::fold::checked_sum, ranked = "views")]
    views: i64,
    #[shard(pending)]
    pending: Pending<Self>,
}

impl Voted {
    #[shard_method]
    fn vote(&mut self) {
        self.votes += 1;
        self.views += 1;
    }
}

fn open(prefix: &str) -> RedisCluster {
    rc::builder(prefix, &stores::Options::default())
        .open()
        .expect("open")
}

/// The child's entry point; without the parent's environment it returns.
#[test]
#[ignore = "the crash tests run it as a child process"]
fn entity_board_child() {
    let Ok(prefix) = std::env::var(ENV_PREFIX) else {
        return;
    };
    crate::child::abort_on_panic();
    say("");
    let db = open(&prefix);
    autoshard::__private::redis_hooks::pause_before_board_writes(Duration::from_millis(2));
    say("ready");
    let started = Instant::now();
    let mut n = 0u64;
    while started.elapsed() < CHILD_LIFETIME {
        let id = IDS[(n % 3) as usize];
        if n.is_multiple_of(2) {
            db.save_delta::<Voted, _>(&id, "votes", &1i64)
                .expect("child: save_delta");
        } else {
            let mut q = db.load::<Voted>(&id).expect("child: load").expect("stored");
            q.vote();
            db.save(&mut q).expect("child: save");
        }
        say(&format!("ack {n}"));
        n += 1;
    }
}

/// Every entity's totals against both boards; the votes' sum.
fn check(db: &RedisCluster, votes: &Ranking, views: &Ranking) -> Result<i64, String> {
    let mut sum = 0;
    for id in IDS {
        let q = db.load::<Voted>(&id).unwrap().expect("stored");
        let player = id.to_string();
        let held = (votes.score(&player).unwrap(), views.score(&player).unwrap());
        if held != (Some(q.votes), Some(q.views)) {
            return Err(format!(
                "entity {id}: boards hold {held:?}, totals are {:?}",
                (q.votes, q.views)
            ));
        }
        sum += q.votes;
    }
    for board in [votes, views] {
        board.check_integrity().map_err(|e| e.to_string())?;
    }
    Ok(sum)
}

#[test]
fn redis_entity_board_writers_killed_20_times_lose_and_double_nothing() {
    let prefix = rc::new_prefix();
    let _cleanup = rc::DropPrefix(prefix.clone());
    let db = open(&prefix);
    let config = RankingConfig::new(-1_000_000..1_000_000).policy(Policy::Increment);
    let votes = Ranking::create(&db, "votes", config.clone()).unwrap();
    let views = Ranking::create(&db, "views", config).unwrap();
    for id in IDS {
        db.insert(&Voted {
            id,
            votes: 0,
            views: 0,
            pending: Pending::new(),
        })
        .unwrap();
    }
    let mut sum = 0;
    let mut owed_rounds = 0;
    for round in 0..kills(KILLS) {
        let child = Child::spawn(
            Command::new(std::env::current_exe().expect("test binary"))
                .args([
                    "--exact",
                    child::test_path(module_path!(), "entity_board_child").as_str(),
                    "--ignored",
                    "--nocapture",
                ])
                .arg("--test-threads=1")
                .env(ENV_PREFIX, &prefix),
        );
        let clock = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
        let micros = 20_000 + clock.unwrap().subsec_nanos() as u64 % 280_000;
        let run = child.kill_after(Duration::from_micros(micros));
        assert!(run.killed(), "the child ended by itself: {:?}", run.status);
        let acked = run.acks().count() as i64;
        if !rc::scan(&format!("{prefix}:*:voted:i")).is_empty() {
            owed_rounds += 1;
        }
        db.compact::<Voted>().unwrap();
        let now = check(&db, &votes, &views).unwrap_or_else(|e| panic!("after kill {round}: {e}"));
        assert!(
            (sum + acked..=sum + acked + 1).contains(&now),
            "after kill {round}: votes went from {sum} to {now} with {acked} acknowledged"
        );
        sum = now;
    }
    eprintln!("{sum} votes across the kills; {owed_rounds} kills left a board write owed");
    assert!(sum > 0, "the children saved nothing");
    assert!(owed_rounds > 0, "no kill left a board write owed");
}
