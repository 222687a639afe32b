//! PostgreSQL boards at the engine's own pace (issue 18, item 5) and split
//! boards on a small pool (issue 21): round trips counted on this thread
//! (`__private::pg_hooks::round_trips`), and merged reads on pools smaller
//! than the number of trees. The answers themselves are checked against a
//! brute-force oracle here and by the shared oracle suites.
#![cfg(feature = "postgres")]

use autoshard::__private::pg_hooks::round_trips;
use autoshard::ranking::{Ranking, RankingConfig, ScoreOrder, Tie};
use autoshard::{Error, Postgres};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use crate::stores;
use stores::pg;

fn open(schema: &str, pool: usize) -> Postgres {
    Postgres::builder(&pg::url())
        .schema(schema)
        .pool_size(pool)
        .pool_timeout(Duration::from_secs(3))
        .open()
        .unwrap()
}

/// Round trips `f` sends from this thread.
fn trips<R>(f: impl FnOnce() -> R) -> (R, u64) {
    let before = round_trips();
    let out = f();
    (out, round_trips() - before)
}

fn name(i: usize) -> String {
    format!("p{i:05}")
}

/// A write batch costs a bounded number of round trips, the same for 10
/// players as for 3,000, arriving or moving. On the row-at-a-time code
/// (615fd58's `ranking/apply/mod.rs`) this failed with `set_scores of 10
/// new players: 109 round trips` (statements per player and per node).
#[test]
fn a_write_batch_costs_bounded_round_trips_whatever_its_size() {
    let schema = pg::new_schema();
    let _drop = pg::DropSchema(schema.clone());
    let db = open(&schema, 4);
    let board = Ranking::create(
        &db,
        "b",
        RankingConfig::new(0..1_000_000)
            .branching(100)
            .node_shards(8),
    )
    .unwrap();
    let names: Vec<String> = (0..3_000).map(name).collect();
    let batch = |from: usize, to: usize, salt: i64| -> Vec<(&str, i64)> {
        (from..to)
            .map(|i| (names[i].as_str(), (i as i64 * 7_919 + salt) % 1_000_000))
            .collect()
    };
    // The first write creates tables and prepares statements: not counted.
    board.set_scores(&batch(0, 1, 0)).unwrap();
    let (done, small) = trips(|| board.set_scores(&batch(1, 11, 0)));
    done.unwrap();
    let (done, arriving) = trips(|| board.set_scores(&batch(0, 3_000, 0)));
    done.unwrap();
    let (done, moving) = trips(|| board.set_scores(&batch(0, 3_000, 12_345)));
    done.unwrap();
    for (what, n) in [
        ("10 new players", small),
        ("3000 new players", arriving),
        ("3000 players moving", moving),
    ] {
        assert!(n <= 16, "set_scores of {what}: {n} round trips");
    }
    board.check_integrity().unwrap();
    // The answers: every player's score and standard rank, brute force.
    let scores: Vec<i64> = batch(0, 3_000, 12_345).iter().map(|p| p.1).collect();
    for i in (0..3_000).step_by(97) {
        let above = scores.iter().filter(|&&s| s > scores[i]).count() as u64;
        assert_eq!(board.score(&names[i]).unwrap(), Some(scores[i]));
        assert_eq!(
            board.rank(&names[i], Tie::Standard).unwrap(),
            Some(above + 1)
        );
    }
}

/// `rank` (each tie rule), `rank_of_score` and `score` are one round trip
/// each, and agree with a brute-force oracle and with `top` (read in a
/// transaction). On 615fd58 this failed with `rank Standard of p00000: 5
/// round trips` (BEGIN, the board check, the player, the path, ROLLBACK).
/// (615fd58's `ranking/read.rs`, run with the round-trip counter.) The
/// control: `score_at_rank`, still a read transaction, is counted at
/// 4 or more, so the counter does see a transaction's statements.
#[test]
fn point_reads_are_one_round_trip() {
    let schema = pg::new_schema();
    let _drop = pg::DropSchema(schema.clone());
    let db = open(&schema, 4);
    for order in [ScoreOrder::HigherIsBetter, ScoreOrder::LowerIsBetter] {
        let board_name = format!("{order:?}");
        let config = RankingConfig::new(0..100)
            .branching(4)
            .node_shards(3)
            .order(order);
        let board = Ranking::create(&db, &board_name, config).unwrap();
        // 25 players per score: arrival trees three levels high at B = 4.
        let names: Vec<String> = (0..500).map(name).collect();
        let scores: Vec<i64> = (0..500).map(|i| (i as i64 * 37) % 20 * 5).collect();
        for chunk in (0..500).collect::<Vec<_>>().chunks(50) {
            let batch: Vec<(&str, i64)> = chunk
                .iter()
                .map(|&i| (names[i].as_str(), scores[i]))
                .collect();
            board.set_scores(&batch).unwrap();
        }
        let better = |a: i64, b: i64| match order {
            ScoreOrder::HigherIsBetter => a > b,
            _ => a < b,
        };
        let top = board.top(500).unwrap();
        let distinct: BTreeSet<i64> = scores.iter().copied().collect();
        // Prepares the statements: without and with the arrival path.
        board.rank(&names[0], Tie::Standard).unwrap();
        board.rank(&names[0], Tie::Ordinal).unwrap();
        for i in (0..500).step_by(41) {
            let s = scores[i];
            let standard = 1 + scores.iter().filter(|&&x| better(x, s)).count() as u64;
            let dense = 1 + distinct.iter().filter(|&&x| better(x, s)).count() as u64;
            let ordinal = 1 + top.iter().position(|e| e.player == names[i]).unwrap() as u64;
            for (tie, want) in [
                (Tie::Standard, standard),
                (Tie::Dense, dense),
                (Tie::Ordinal, ordinal),
            ] {
                let (rank, n) = trips(|| board.rank(&names[i], tie).unwrap());
                assert_eq!(rank, Some(want), "{order:?} {tie:?} of {}", names[i]);
                assert_eq!(n, 1, "rank {tie:?} of {}: {n} round trips", names[i]);
            }
            let (rank, n) = trips(|| board.rank_of_score(s).unwrap());
            assert_eq!((rank, n), (standard, 1), "rank_of_score({s})");
            let (score, n) = trips(|| board.score(&names[i]).unwrap());
            assert_eq!((score, n), (Some(s), 1), "score of {}", names[i]);
        }
        let (absent, n) = trips(|| board.rank("nobody", Tie::Ordinal).unwrap());
        assert_eq!((absent, n), (None, 1));
        let (_, control) = trips(|| board.score_at_rank(3).unwrap());
        assert!(control >= 4, "score_at_rank: {control} round trips");
    }
    // A deleted board is refused by the one statement too.
    let board = Ranking::open(&db, "HigherIsBetter").unwrap();
    assert!(Ranking::delete(&db, "HigherIsBetter").unwrap());
    let gone = board.rank(&name(0), Tie::Standard);
    assert!(
        matches!(gone, Err(Error::RankingNotFound { .. })),
        "{gone:?}"
    );
}

/// The one-statement read keeps a generic plan, with and without the
/// arrival path, even on tables PostgreSQL has no statistics for: after
/// its five custom plans it stops planning the statement on every call
/// (`pg_prepared_statements` counts the plans of this session's prepared
/// statements). The tables are never analyzed here (autovacuum off on
/// them) and the arrival table holds 300,000 rows (48 MB), as a
/// 1M-player board's does. Two controls, each the statement as it was: with
/// `generate_series(1, $6)` for the path's heights (its generic plan
/// guessed 1,000 heights), and with the arrival path under a flag in one
/// text (its generic plan costed the unread path at the size of the
/// unanalyzed table): both were planned on every call (0.2–1.2 ms of a
/// `rank`, BENCHMARKS.md "PostgreSQL boards set-based").
#[test]
fn the_one_statement_read_keeps_a_generic_plan() {
    let schema = pg::new_schema();
    let _drop = pg::DropSchema(schema.clone());
    let db = open(&schema, 2);
    let config = RankingConfig::new(0..1_000_000)
        .branching(100)
        .node_shards(8);
    let board = Ranking::create(&db, "plans", config).unwrap();
    let names: Vec<String> = (0..3_000).map(name).collect();
    let batch: Vec<(&str, i64)> = (0..3_000)
        .map(|i| (names[i].as_str(), (i as i64 * 7_919) % 1_000_000))
        .collect();
    board.set_scores(&batch).unwrap();
    let mut client = postgres::Client::connect(&pg::url(), postgres::NoTls).unwrap();
    let table = |name: &str| format!("\"{schema}\".autoshard_rank_{name}");
    let id: i64 = client
        .query_one(
            &format!("SELECT id FROM {} WHERE name = 'plans'", table("boards")),
            &[],
        )
        .unwrap()
        .get(0);
    let mut setup = String::new();
    for name in ["boards", "players", "nodes", "arrivals"] {
        let t = table(name);
        setup += &format!("ALTER TABLE {t} SET (autovacuum_enabled = false); ");
    }
    // Another board id's rows: they make the table large, not this board.
    setup += &format!(
        "INSERT INTO {} SELECT {}, g, 1, 0, decode(repeat('01', 100), 'hex') \
         FROM generate_series(1, 300000) AS g",
        table("arrivals"),
        id + 1
    );
    client.batch_execute(&setup).unwrap();
    let [sql, with_arrivals] = autoshard::__private::pg_hooks::planned_read_sql(&db);
    let old_heights = sql.replace(
        "generate_series(1, 64) AS h WHERE h <= $6::int4 AND",
        "generate_series(1, $6::int4) AS h WHERE",
    );
    let flagged = with_arrivals.replace(
        "pl.score FROM pl, generate_series(1, 64) AS h)",
        "pl.score FROM pl, generate_series(1, 64) AS h WHERE $9::bool)",
    );
    for (control, text) in [(&old_heights, &sql), (&flagged, &with_arrivals)] {
        assert_ne!(control, text, "the control's text must differ");
    }
    let plans = |client: &mut postgres::Client, text: &str| -> (i64, i64) {
        let statement = client.prepare(text).unwrap();
        for i in (0..3_000).step_by(150) {
            let mut params: Vec<&(dyn postgres::types::ToSql + Sync)> = vec![
                &id,
                &names[i],
                &None::<i64>,
                &0i64,
                &100i64,
                &3i32,
                &true,
                &true,
            ];
            if text.contains("$9") {
                params.push(&false);
            }
            let rows = client.query(&statement, &params).unwrap();
            // The board's name, the player and their path's rows.
            assert!(rows.len() >= 3, "{} rows for {}", rows.len(), names[i]);
        }
        let row = client
            .query_one(
                "SELECT generic_plans, custom_plans FROM pg_prepared_statements \
                 WHERE statement = $1",
                &[&text],
            )
            .unwrap();
        (row.get(0), row.get(1))
    };
    for text in [&sql, &with_arrivals] {
        let (generic, custom) = plans(&mut client, text);
        assert!(
            generic >= 15 && custom <= 5,
            "the read: {generic} generic, {custom} custom plans in 20 calls: {text}"
        );
    }
    for control in [&old_heights, &flagged] {
        let (generic, custom) = plans(&mut client, control);
        assert_eq!((generic, custom), (0, 20), "a control: {control}");
    }
    let analyzed: f32 = client
        .query_one(
            "SELECT reltuples FROM pg_class WHERE oid = $1::text::regclass",
            &[&table("arrivals")],
        )
        .unwrap()
        .get(0);
    assert!(
        analyzed < 0.0,
        "the arrival table got statistics: {analyzed}"
    );
}

/// A merged read of a split board takes one connection, whatever the
/// number of trees: on a pool of 2, `trees(5)` and `trees(64)` answer
/// `top`, `rank` and `len`. On 615fd58 (one read transaction per tree, all
/// open at once) this failed with `top of trees(5): PoolTimeout { waited:
/// 3.000087132s, open: 2, refused: None }`.
#[test]
fn a_merged_read_needs_one_connection() {
    let schema = pg::new_schema();
    let _drop = pg::DropSchema(schema.clone());
    let db = open(&schema, 2);
    for k in [5u32, 64] {
        let config = RankingConfig::new(0..1_000).trees(k);
        let board = Ranking::create(&db, &format!("k{k}"), config).unwrap();
        let batch: Vec<(String, i64)> = (0..200).map(|i| (name(i), i as i64 * 3)).collect();
        let batch: Vec<(&str, i64)> = batch.iter().map(|(p, s)| (p.as_str(), *s)).collect();
        board.set_scores(&batch).unwrap();
        let top = board
            .top(3)
            .unwrap_or_else(|e| panic!("top of trees({k}): {e:?}"));
        let names: Vec<&str> = top.iter().map(|e| e.player.as_str()).collect();
        assert_eq!(names, ["p00199", "p00198", "p00197"], "trees({k})");
        let rank = board.rank(&name(0), Tie::Ordinal);
        assert_eq!(
            rank.unwrap_or_else(|e| panic!("rank of trees({k}): {e:?}")),
            Some(200)
        );
        assert_eq!(board.len().unwrap(), 200);
    }
}

/// Eight tree workers, producers and readers on a pool of 4: nobody waits
/// out the pool's timeout. On 615fd58 this failed in the producers:
/// `enqueue`: `PoolTimeout { waited: 3.000090771s, open: 4, refused: None }`
/// (each merged read held eight connections at once).
#[test]
fn tree_workers_do_not_starve_readers_or_producers() {
    let schema = pg::new_schema();
    let _drop = pg::DropSchema(schema.clone());
    let db = open(&schema, 4);
    let board = Ranking::create(&db, "k8", RankingConfig::new(0..10_000).trees(8)).unwrap();
    let worker = board.worker().spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(4);
    let enqueued = std::thread::scope(|s| {
        let producers: Vec<_> = (0..3)
            .map(|t| {
                let board = board.clone();
                s.spawn(move || {
                    let mut n = 0u64;
                    while Instant::now() < deadline && n < 2_000 {
                        let who = name(t * 10_000 + n as usize % 300);
                        board.enqueue(&who, (n % 10_000) as i64).unwrap();
                        n += 1;
                    }
                    n
                })
            })
            .collect();
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let board = board.clone();
                s.spawn(move || {
                    while Instant::now() < deadline {
                        board.top(3).unwrap();
                        board.rank(&name(1), Tie::Standard).unwrap();
                    }
                })
            })
            .collect();
        readers.into_iter().for_each(|r| r.join().unwrap());
        producers
            .into_iter()
            .map(|p| p.join().unwrap())
            .sum::<u64>()
    });
    board.flush().unwrap();
    let stats = worker.stop().unwrap();
    assert_eq!(stats.updates, enqueued);
    board.check_integrity().unwrap();
}

/// A family without filters has no boards for a player to leave, so its
/// submission does not look at the player's stored values first (a read
/// transaction of its own), and its write checks that its 4 boards still
/// exist in one statement, not one each. Controls: with the look back a
/// submission counted 35; with one check per board, 34 (38 with both,
/// before 2026-11-29, eighth session).
#[test]
fn a_family_without_filters_submits_without_a_look() {
    use autoshard::ranking::{Family, FamilyConfig, Period, Window};
    const AT: i64 = 1_795_516_200;
    let schema = pg::new_schema();
    let _drop = pg::DropSchema(schema.clone());
    let db = open(&schema, 4);
    let mut config = FamilyConfig::new(RankingConfig::new(0..1_000_000));
    for w in [Window::AllTime, Window::Month, Window::Day] {
        config = config.window(w);
    }
    let family = Family::create(&db, "plain", config).unwrap();
    for p in 0..20 {
        family
            .submission(&name(p), p as i64)
            .at(AT)
            .submit()
            .unwrap();
    }
    let counts: Vec<u64> = (0..3)
        .map(|round| {
            trips(|| {
                family
                    .submission(&name(7), 100 + round)
                    .at(AT)
                    .submit()
                    .unwrap()
            })
            .1
        })
        .collect();
    assert!(
        counts.iter().all(|&n| n <= 31),
        "round trips per submission: {counts:?}"
    );
    for w in [Window::AllTime, Window::Month, Window::Day] {
        let board = family.board(w, Period::At(AT), None).unwrap().unwrap();
        assert_eq!(board.score(&name(7)).unwrap(), Some(102), "{w:?}");
        board.check_integrity().unwrap();
    }
}
