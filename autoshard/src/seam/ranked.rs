//! Entity boards at the seam: a sharded field declared
//! `#[shard(ranked = "board")]` feeds a ranking board with its folded
//! total, and the board write must commit with the entity write, in the
//! same transaction. Ranking sits above the seam, so the seam only carries
//! the writes and a hook: the derive (at the top) fills the hook in with
//! the ranking layer's function, a store hands it a [`BoardTx`] on its own
//! open transaction, and no store names `crate::ranking`.

use crate::entity::Key;
use crate::error::{Error, Result};
use crate::seam::{Board, BoardSpec, Kind, Storage};
use crate::sum::Sum;
use crate::value::Value;

/// What the derive says about a kind's ranked fields. Not part of the API.
#[doc(hidden)]
#[derive(Clone, Copy)]
pub struct Ranked {
    /// `(sharded field index, board name)`, in field order.
    pub fields: &'static [(usize, &'static str)],
    /// The ranking layer's board writer; `None` when nothing is ranked.
    pub hook: Option<RankedHook>,
}

impl Ranked {
    /// A kind with no ranked field.
    pub const NONE: Ranked = Ranked {
        fields: &[],
        hook: None,
    };

    /// Whether any field feeds a board.
    pub(crate) fn any(&self) -> bool {
        !self.fields.is_empty()
    }

    fn board_of(&self, index: usize) -> Option<&'static str> {
        self.fields
            .iter()
            .find(|(field, _)| *field == index)
            .map(|(_, board)| *board)
    }
}

/// The ranking layer's function that applies a save's board writes in the
/// save's transaction. Opaque outside the crate: only
/// `__private::RANKED_HOOK` makes one.
#[doc(hidden)]
#[derive(Clone, Copy)]
pub struct RankedHook(pub(crate) fn(&dyn BoardTx, &[BoardWrite]) -> Result<()>);

/// One change to an entity board: `Some(delta)` adds the delta to the
/// entity's entry (an `Increment`), `None` removes the entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BoardWrite {
    pub board: &'static str,
    /// The entity id as text, unquoted: `42`, `alice`.
    pub player: String,
    pub change: Option<i64>,
}

/// The boards of a store as seen from inside one of its open entity write
/// transactions: whatever the hook writes commits or rolls back with it.
pub(crate) trait BoardTx {
    /// Board `name`'s id and stored shape, read in this transaction,
    /// without a composite board's dimensions (`BoardSpec::dims` empty): a
    /// board fed by a ranked field is an `Increment` board, which cannot be
    /// composite, so a store may skip reading them.
    fn open(&self, name: &str) -> Result<Option<(i64, BoardSpec)>>;

    /// Runs `f` on `board` in this transaction; [`Error::RankingNotFound`]
    /// if it was deleted meanwhile.
    fn with_board(
        &self,
        board: Board<'_>,
        f: &mut dyn FnMut(&dyn Storage) -> Result<()>,
    ) -> Result<()>;
}

/// The entity's id as a board player: the id's digits, or its text.
pub(crate) fn player(key: Key<'_>) -> String {
    match key {
        Key::Int(i) => i.to_string(),
        Key::Text(s) => s.to_owned(),
    }
}

impl Kind {
    /// The board writes of one save or insert: each value of a ranked
    /// field, `(field index, delta or initial total)`, added to its board.
    /// [`Error::InvalidValue`] if the field's fold does not add integers:
    /// a board follows a total, and only a sum has one to follow.
    pub(crate) fn board_adds(
        &self,
        key: Key<'_>,
        values: impl IntoIterator<Item = (usize, Value)>,
    ) -> Result<Vec<BoardWrite>> {
        let mut writes = Vec::new();
        if !self.ranked.any() {
            return Ok(writes);
        }
        for (index, value) in values {
            let Some(board) = self.ranked.board_of(index) else {
                continue;
            };
            let spec = &self.fields[index];
            let invalid = |reason: String| Error::InvalidValue {
                kind: self.name,
                field: spec.name,
                reason,
            };
            if self.sum(index) != Sum::Integers {
                return Err(invalid(format!(
                    "a field ranked on {board:?} must add integers \
                     (fold `autoshard::fold::checked_sum`); this one's fold does not"
                )));
            }
            let Value::Integer(delta) = value else {
                return Err(invalid(format!(
                    "{value:?} is not an integer for {board:?}"
                )));
            };
            writes.push(BoardWrite {
                board,
                player: player(key),
                change: Some(delta),
            });
        }
        Ok(writes)
    }

    /// The boards the kind's ranked fields feed.
    pub(crate) fn ranked_boards(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.ranked.fields.iter().map(|(_, board)| *board)
    }

    /// The board sharded field `index` feeds, if it is ranked.
    pub(crate) fn board_of(&self, index: usize) -> Option<&'static str> {
        self.ranked.board_of(index)
    }

    /// The board writes of a delete: the entity leaves every board.
    pub(crate) fn board_removals(&self, key: Key<'_>) -> Vec<BoardWrite> {
        self.ranked
            .fields
            .iter()
            .map(|(_, board)| BoardWrite {
                board,
                player: player(key),
                change: None,
            })
            .collect()
    }

    /// Runs `writes` through the ranking layer's hook on `tx` (nothing if
    /// there are none). A store calls it inside the transaction that writes
    /// the entity, after the entity's own statements.
    pub(crate) fn write_boards(&self, tx: &dyn BoardTx, writes: &[BoardWrite]) -> Result<()> {
        if writes.is_empty() {
            return Ok(());
        }
        match self.ranked.hook {
            Some(RankedHook(hook)) => hook(tx, writes),
            None => Err(Error::SchemaMismatch {
                kind: self.name.to_owned(),
                reason: "ranked fields without a board writer".into(),
            }),
        }
    }
}
