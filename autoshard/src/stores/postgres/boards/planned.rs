//! A read in one statement (issue 18, item 5): `rank`, `rank_of_score` and
//! `score` name their rows up front ([`ReadPlan`]), so PostgreSQL computes
//! the root-to-leaf path next to the data and returns the board's name, the
//! player's row, every shard row of the path (part B only where the read
//! needs it) and the arrival path in ONE statement. A single statement sees
//! one snapshot, so no transaction is opened: one round trip where a read
//! transaction took five (`BEGIN`, the board check, the player, the path,
//! `ROLLBACK`).
//!
//! The query then runs over [`Loaded`], which answers from those rows only.
//! A read that asks for anything else (a case the plan did not foresee)
//! makes `Loaded` note the miss, and the read runs again in a read
//! transaction: the plan is an optimisation, never a second truth.

use super::small;
use crate::error::{Error, Result};
use crate::seam::{
    Board, NodeRow, Part, QueuedRow, ReadPlan, ScannedArrival, ScannedNode, Storage,
};
use crate::stores::postgres::Postgres;
use std::cell::Cell;

/// The rows one planned statement returned.
pub(super) struct Loaded<'a> {
    name: &'a str,
    branching: u32,
    player: Option<&'a str>,
    place: Option<(i64, u64)>,
    /// `(height, idx, part, shard, vector)` of the score-tree path.
    nodes: Vec<(u32, u64, Part, u32, Vec<u8>)>,
    /// `(height, idx)` of the path, whether or not a row exists there.
    path: Vec<(u32, u64)>,
    /// Whether part B was loaded: of the leaf, of the inner nodes.
    with_b: (bool, bool),
    /// `(height, idx, vector)` of the arrival path, if planned.
    arrivals: Option<Vec<(u32, u64, Vec<u8>)>>,
    /// Set when a read asked for a row the plan did not load.
    missed: Cell<bool>,
}

/// Runs `f` over the rows of `plan`, loaded in one statement; `Ok(false)`
/// if `f` needed more (then nothing it returned counts).
pub(super) fn run(
    db: &Postgres,
    board: Board<'_>,
    plan: &ReadPlan<'_>,
    f: &mut dyn FnMut(&dyn Storage) -> Result<()>,
) -> Result<bool> {
    let sql = db.boards_sql();
    let rows = db.read(|tx| {
        let params: [&(dyn ::postgres::types::ToSql + Sync); 8] = [
            &board.id,
            &plan.player,
            &plan.score,
            &plan.min,
            &i64::from(plan.branching),
            &small(plan.depth),
            &plan.counters,
            &plan.distinct,
        ];
        let statement = if plan.arrivals {
            &sql.planned_arrivals
        } else {
            &sql.planned
        };
        Ok(tx.query(statement, &params)?)
    })?;
    let mut loaded = Loaded {
        name: board.name,
        branching: plan.branching,
        player: plan.player,
        place: None,
        nodes: Vec::new(),
        path: Vec::new(),
        with_b: (plan.counters, plan.distinct),
        arrivals: plan.arrivals.then(Vec::new),
        missed: Cell::new(false),
    };
    let mut alive = false;
    let mut path_score = plan.score;
    for row in &rows {
        let kind: i16 = row.try_get(0)?;
        match kind {
            0 => alive = row.try_get::<_, Option<&str>>(6)? == Some(board.name),
            1 => {
                let score: i64 = row.try_get(7)?;
                let arrival = loaded.unsigned(row.try_get::<_, i64>(8)?, "player arrival")?;
                loaded.place = Some((score, arrival));
                path_score = path_score.or(Some(score));
            }
            2 => {
                let part = Part::from_stored(row.try_get::<_, i16>(3)?.into())
                    .ok_or_else(|| loaded.corrupt("node part".into(), "not 0 or 1".into()))?;
                loaded.nodes.push((
                    loaded.unsigned(row.try_get::<_, i32>(1)?, "node height")?,
                    loaded.unsigned(row.try_get::<_, i64>(2)?, "node idx")?,
                    part,
                    loaded.unsigned(row.try_get::<_, i32>(4)?, "node shard")?,
                    row.try_get(5)?,
                ));
            }
            _ => {
                let node = (
                    loaded.unsigned(row.try_get::<_, i32>(1)?, "arrival node height")?,
                    loaded.unsigned(row.try_get::<_, i64>(2)?, "arrival node idx")?,
                    row.try_get(5)?,
                );
                if let Some(arrivals) = loaded.arrivals.as_mut() {
                    arrivals.push(node);
                }
            }
        }
    }
    if !alive {
        return Err(board.not_found());
    }
    if let Some(score) = path_score {
        let offset = score.wrapping_sub(plan.min) as u64 as u128;
        let b = u128::from(plan.branching);
        let mut scale = 1u128;
        for h in 1..=plan.depth {
            scale = scale.saturating_mul(b);
            loaded.path.push((h, (offset / scale) as u64));
        }
    }
    let outcome = f(&loaded);
    if loaded.missed.get() {
        return Ok(false);
    }
    outcome.map(|()| true)
}

impl Loaded<'_> {
    fn unsigned<T: TryFrom<i64>>(&self, value: impl Into<i64>, what: &str) -> Result<T> {
        let value = value.into();
        T::try_from(value)
            .map_err(|_| self.corrupt(what.into(), format!("{value} is out of range")))
    }

    /// A read the plan did not load: noted, so the caller runs the read
    /// again in a transaction.
    fn miss<T>(&self) -> Result<T> {
        self.missed.set(true);
        Err(Error::Unsupported {
            store: "PostgreSQL",
            operation: "a read outside its one-statement plan",
        })
    }
}

impl Storage for Loaded<'_> {
    fn claim_queue(&self, _queue: u32) -> Result<bool> {
        self.miss()
    }

    fn applied_through(&self, _queue: u32) -> Result<i64> {
        self.miss()
    }

    fn set_applied_through(&self, _queue: u32, _seq: i64) -> Result<()> {
        self.miss()
    }

    fn take_queued(&self, _: u32, _: i64, _: usize, _: &mut Vec<QueuedRow>) -> Result<()> {
        self.miss()
    }

    fn dead_letter(&self, _: u32, _: i64, _: &str, _: Option<i64>, _: &str) -> Result<()> {
        self.miss()
    }

    fn path_rows(&self, path: &[(u32, u64, bool)], f: &mut NodeRow<'_>) -> Result<()> {
        let loaded = |h: u32, with_b: bool| {
            let b_loaded = if h == 1 { self.with_b.0 } else { self.with_b.1 };
            !with_b || b_loaded
        };
        if !path
            .iter()
            .all(|&(h, i, with_b)| self.path.contains(&(h, i)) && loaded(h, with_b))
        {
            return self.miss();
        }
        for &(h, i, with_b) in path {
            let rows = self.nodes.iter().filter(|n| (n.0, n.1) == (h, i));
            for (_, _, part, shard, v) in rows {
                if *part == Part::A || with_b {
                    f(h, *part, *shard, v)?;
                }
            }
        }
        Ok(())
    }

    fn node_shard(
        &self,
        _: u32,
        _: u64,
        _: u32,
        _: &mut dyn FnMut(Part, &[u8]) -> Result<()>,
    ) -> Result<()> {
        self.miss()
    }

    fn put_node_part(&self, _: u32, _: u64, _: Part, _: u32, _: &[u8]) -> Result<()> {
        self.miss()
    }

    fn arrival_path(
        &self,
        score: i64,
        path: &[(u32, u64)],
        f: &mut dyn FnMut(u32, &[u8]) -> Result<()>,
    ) -> Result<()> {
        let (Some(arrivals), Some((held, arrival))) = (&self.arrivals, self.place) else {
            return self.miss();
        };
        // Loaded: the player's own arrival path in their score's tree.
        let b = u128::from(self.branching);
        let on_path = path.iter().all(|&(h, idx)| {
            let scale = (1..=h).fold(1u128, |s, _| s.saturating_mul(b));
            u128::from(arrival) / scale == u128::from(idx)
        });
        if score != held || b == 0 || !on_path {
            return self.miss();
        }
        for &(h, idx) in path {
            for (_, _, v) in arrivals.iter().filter(|n| (n.0, n.1) == (h, idx)) {
                f(h, v)?;
            }
        }
        Ok(())
    }

    fn put_arrival_node(&self, _: i64, _: u32, _: u64, _: &[u8]) -> Result<()> {
        self.miss()
    }

    fn player(&self, player: &str) -> Result<Option<(i64, u64)>> {
        if self.player == Some(player) {
            Ok(self.place)
        } else {
            self.miss()
        }
    }

    fn put_player(&self, _: &str, _: i64, _: u64) -> Result<()> {
        self.miss()
    }

    fn delete_player(&self, _: &str) -> Result<()> {
        self.miss()
    }

    fn put_player_data(&self, _: &str, _: Option<&[u8]>) -> Result<()> {
        self.miss()
    }

    fn players_data(&self, _: &[&str], _: &mut dyn FnMut(&str, &[u8]) -> Result<()>) -> Result<()> {
        self.miss()
    }

    fn entries_at(&self, _: i64, _: u64, _: u64, _: &mut Vec<(String, i64)>) -> Result<()> {
        self.miss()
    }

    fn entries_below(&self, _: i64, _: u64, _: &mut Vec<(String, i64)>) -> Result<()> {
        self.miss()
    }

    fn scan_players(&self, _: &mut dyn FnMut(i64, u64) -> Result<()>) -> Result<()> {
        self.miss()
    }

    fn scan_nodes(&self, _: &mut ScannedNode<'_>) -> Result<()> {
        self.miss()
    }

    fn scan_arrival_nodes(&self, _: &mut ScannedArrival<'_>) -> Result<()> {
        self.miss()
    }

    fn clear(&self) -> Result<()> {
        self.miss()
    }

    fn board_name(&self) -> &str {
        self.name
    }
}
