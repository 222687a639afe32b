//! What a [`Ranking`] handle holds (`Inner`), how `create` and `open` make
//! it (what its shape keeps beside its row is made in `shape/build.rs`),
//! the name rules every call checks, and the read and write transactions
//! the calls in `read.rs`, `write.rs` and the other modules run in. The
//! handle's API is `facade.rs`.

use super::policy::Rules;
use super::queue::QueueState;
use super::shape::{self, ApproxCache};
use super::storage::Storage;
use super::tree::Geometry;
use super::{
    BoardConfig, Ranking, RankingConfig, RankingStore, MAX_BOARD_NAME_LEN, MAX_PLAYER_LEN,
};
use crate::error::{Error, Result};
use crate::seam::{Board, BoardStore, Placement};
use std::sync::{Arc, OnceLock};

pub(in crate::ranking) struct Inner {
    pub(super) boards: Arc<dyn BoardStore>,
    pub(super) name: String,
    pub(super) id: i64,
    pub(super) config: BoardConfig,
    pub(super) geometry: Geometry,
    /// This process's queue coordination for the board (group commit,
    /// worker wake-ups), made on the first queue call: see `queue.rs`.
    pub(super) queue: OnceLock<Arc<QueueState>>,
    /// This process's copy of an approximate board's published snapshot.
    pub(super) approx: ApproxCache,
    /// A split board's trees (`trees/mod.rs`); empty for a board of one.
    pub(super) trees: Vec<Ranking>,
    /// Whether this board is a tree of a split board: its arrival numbers
    /// are board-wide (`trees/arrival.rs`).
    pub(super) tree_member: bool,
}

pub(super) fn check_board_name(name: &str) -> Result<()> {
    let reason = if name.is_empty() || name.len() > MAX_BOARD_NAME_LEN {
        "a board name must be 1 to 128 bytes long"
    } else if name.chars().any(char::is_control) {
        "a board name may not contain control characters"
    } else {
        return Ok(());
    };
    Err(Error::InvalidName {
        name: name.into(),
        reason: reason.into(),
    })
}

pub(super) fn check_player(player: &str) -> Result<()> {
    let reason = if player.is_empty() || player.len() > MAX_PLAYER_LEN {
        "a player name must be 1 to 256 bytes long"
    } else if player.contains('\0') {
        // PostgreSQL text cannot hold NUL; refuse it on every backend.
        "a player name may not contain NUL"
    } else {
        return Ok(());
    };
    Err(Error::InvalidName {
        name: player.into(),
        reason: reason.into(),
    })
}

/// Creates board `name` (checked by [`Ranking::create`]).
pub(in crate::ranking) fn create(
    db: &impl RankingStore,
    name: &str,
    config: RankingConfig,
) -> Result<Ranking> {
    check_board_name(name)?;
    let config = BoardConfig::from(config);
    let geometry = config.geometry()?;
    let boards = db.__boards().0;
    shape::check_name_free(&boards, name)?;
    let id = boards.create_board(name, &config.spec(), Placement::Anywhere)?;
    shape::with_shape(with(boards, name, id, config, geometry), true)
}

/// Creates a tree of a split board (`trees/mod.rs`) under its stored
/// name, which `create` would refuse, where `placement` puts it.
pub(in crate::ranking) fn create_tree(
    boards: Arc<dyn BoardStore>,
    name: &str,
    config: BoardConfig,
    placement: Placement<'_>,
) -> Result<Ranking> {
    let geometry = config.geometry()?;
    let id = boards.create_board(name, &config.spec(), placement)?;
    let mut board = with(boards, name, id, config, geometry);
    Arc::get_mut(&mut board.inner)
        .expect("not shared yet")
        .tree_member = true;
    Ok(board)
}

/// Opens a tree of a split board.
pub(in crate::ranking) fn open_tree(boards: Arc<dyn BoardStore>, name: &str) -> Result<Ranking> {
    let mut board = open_in(boards, name)?;
    Arc::get_mut(&mut board.inner)
        .expect("not shared yet")
        .tree_member = true;
    Ok(board)
}

/// Opens board `name` (checked by [`Ranking::open`]).
pub(in crate::ranking) fn open(db: &impl RankingStore, name: &str) -> Result<Ranking> {
    check_board_name(name)?;
    shape::with_shape(open_in(db.__boards().0, name)?, false)
}

fn open_in(boards: Arc<dyn BoardStore>, name: &str) -> Result<Ranking> {
    let (id, spec) = boards
        .open_board(name)?
        .ok_or_else(|| Error::RankingNotFound { name: name.into() })?;
    let corrupt = |reason: String| Error::Corrupt {
        kind: "ranking",
        id: name.into(),
        field: "configuration".into(),
        reason,
    };
    let config = BoardConfig::from_spec(spec).map_err(corrupt)?;
    let geometry = config.geometry().map_err(|e| corrupt(e.to_string()))?;
    Ok(with(boards, name, id, config, geometry))
}

/// A handle on board `id`, with nothing of its shape yet.
pub(in crate::ranking) fn with(
    boards: Arc<dyn BoardStore>,
    name: &str,
    id: i64,
    config: BoardConfig,
    geometry: Geometry,
) -> Ranking {
    Ranking {
        inner: Arc::new(Inner {
            boards,
            name: name.into(),
            id,
            config,
            geometry,
            queue: OnceLock::new(),
            approx: ApproxCache::default(),
            trees: Vec::new(),
            tree_member: false,
        }),
    }
}

impl Inner {
    pub(super) fn geometry(&self) -> &Geometry {
        &self.geometry
    }

    pub(super) fn rules(&self) -> Rules {
        self.config.rules()
    }

    /// The shard row a direct write's inner-node deltas go to.
    pub(super) fn random_shard(&self) -> u32 {
        crate::random::range(0..self.config.node_shards())
    }

    pub(super) fn board(&self) -> Board<'_> {
        Board {
            id: self.id,
            name: &self.name,
        }
    }

    /// Runs `f` in one read transaction (one snapshot) of this board's own
    /// tree.
    ///
    /// A split board's own row holds no players, so a query that read it
    /// instead of merging the trees would answer "empty" without an error
    /// (`among` did, issue 21). Such a read is refused here, loudly: every
    /// read of a split board goes through `trees/`, and the every-read test
    /// (`tests/suites/stores_ranking_trees.rs`, `EVERY_READ`) finds one that does
    /// not.
    pub(super) fn read<R>(&self, f: impl Fn(&dyn Storage, &Geometry) -> Result<R>) -> Result<R> {
        if !self.trees.is_empty() {
            return Err(Error::Corrupt {
                kind: "ranking",
                id: self.name.clone(),
                field: "trees".into(),
                reason: "a query read the split board's own row instead of its trees".into(),
            });
        }
        let mut out = None;
        self.boards.read_board(self.board(), &mut |st| {
            out = Some(f(st, self.geometry())?);
            Ok(())
        })?;
        Ok(out.expect("set by a successful transaction"))
    }

    /// Runs `f` in one write transaction (retried whole if the store must).
    pub(super) fn write_with<R>(&self, mut f: impl FnMut(&dyn Storage) -> Result<R>) -> Result<R> {
        self.write_generation(|st, _| f(st))
    }

    /// [`write_with`](Inner::write_with), passing `f` the board's write
    /// generation as the transaction found it. Every write transaction
    /// moves it first thing: a queue worker's cache relies on that
    /// (`cache.rs`).
    pub(super) fn write_generation<R>(
        &self,
        mut f: impl FnMut(&dyn Storage, Option<u64>) -> Result<R>,
    ) -> Result<R> {
        let mut out = None;
        self.boards.write_board(self.board(), &mut |st| {
            let before = st.bump_generation()?;
            out = Some(f(st, before)?);
            Ok(())
        })?;
        Ok(out.expect("set by a successful transaction"))
    }

    /// Queue shards (`RankingConfig::queues`).
    pub(super) fn queues(&self) -> u32 {
        self.config.queues()
    }
}
