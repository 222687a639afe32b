//! One update value for every write: [`Update`] (a player, a score or a
//! composite tuple, optional entry data), taken by [`Ranking::write`],
//! [`Ranking::submit_update`] and [`Ranking::enqueue_update`] (issue 18,
//! item 1). Before, each combination of {set, submit, enqueue} ×
//! {score, dims} × {with data or not} was its own method; now `set_score`,
//! `submit` and `enqueue` with a plain score are the one-line forms, and
//! everything else is an `Update`.

use super::policy;
use super::queue;
use super::{Ranking, Submission};
use crate::error::{Error, Result};

/// One update of a player: a score ([`Update::score`]) or a composite
/// tuple ([`Update::dims`]), with entry data if the board keeps it
/// ([`Update::with_data`]).
///
/// ```
/// use autoshard::ranking::{Dim, Policy, Ranking, RankingConfig, Update};
/// # fn main() -> autoshard::Result<()> {
/// let db = autoshard::Sqlite::memory()?;
/// let board = Ranking::create(&db, "b", RankingConfig::new(0..100).entry_data(8))?;
/// board.write(Update::score("ann", 40))?;
/// let run = board.submit_update(Update::score("bo", 50).with_data(b"run-7"))?;
/// assert_eq!(run.new_rank, 1);
/// assert_eq!(board.top(1)?[0].data.as_deref(), Some(&b"run-7"[..]));
///
/// let dims = RankingConfig::dimensions([Dim::higher(0..10), Dim::lower(0..10)]);
/// let levels = Ranking::create(&db, "levels", dims.policy(Policy::Best))?;
/// levels.write(Update::dims("ann", &[7, 3]))?;
/// assert_eq!(levels.dims("ann")?, Some(vec![7, 3]));
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use = "an update is written by `write`, `submit_update` or `enqueue_update`"]
pub struct Update<'a> {
    player: &'a str,
    value: Value<'a>,
    data: Option<&'a [u8]>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Value<'a> {
    Score(i64),
    Dims(&'a [i64]),
}

impl<'a> Update<'a> {
    /// `score` for `player`.
    pub fn score(player: &'a str, score: i64) -> Self {
        Update {
            player,
            value: Value::Score(score),
            data: None,
        }
    }

    /// The tuple `values` for `player`, on a board of
    /// [`RankingConfig::dimensions`](super::RankingConfig::dimensions)
    /// (encoded as [`Ranking::encode`] does when it is written).
    pub fn dims(player: &'a str, values: &'a [i64]) -> Self {
        Update {
            player,
            value: Value::Dims(values),
            data: None,
        }
    }

    /// The same update with entry data (at most
    /// [`RankingConfig::entry_data`](super::RankingConfig::entry_data)
    /// bytes), stored by the rule [`Ranking::submit_update`] states.
    pub fn with_data(self, data: &'a [u8]) -> Self {
        Update {
            data: Some(data),
            ..self
        }
    }

    /// The player updated.
    pub fn player(&self) -> &'a str {
        self.player
    }

    /// The update's score, a tuple encoded by `encode` (a board's codec,
    /// or a family's).
    pub(crate) fn score_by(&self, encode: impl FnOnce(&[i64]) -> Result<i64>) -> Result<i64> {
        match self.value {
            Value::Score(score) => Ok(score),
            Value::Dims(values) => encode(values),
        }
    }

    /// The update's entry data, if it has any.
    pub(crate) fn data(&self) -> Option<&'a [u8]> {
        self.data
    }
}

/// An [`Update`] that owns its parts, for a call that runs on another
/// thread (`nonblocking/`).
#[cfg(feature = "tokio")]
#[derive(Debug, Clone)]
pub(crate) struct OwnedUpdate {
    player: String,
    value: OwnedValue,
    data: Option<Vec<u8>>,
}

#[cfg(feature = "tokio")]
#[derive(Debug, Clone)]
enum OwnedValue {
    Score(i64),
    Dims(Vec<i64>),
}

#[cfg(feature = "tokio")]
impl Update<'_> {
    pub(crate) fn to_owned_update(self) -> OwnedUpdate {
        OwnedUpdate {
            player: self.player.to_owned(),
            value: match self.value {
                Value::Score(score) => OwnedValue::Score(score),
                Value::Dims(values) => OwnedValue::Dims(values.to_vec()),
            },
            data: self.data.map(<[u8]>::to_vec),
        }
    }
}

#[cfg(feature = "tokio")]
impl OwnedUpdate {
    pub(crate) fn as_update(&self) -> Update<'_> {
        let value = match &self.value {
            OwnedValue::Score(score) => Value::Score(*score),
            OwnedValue::Dims(values) => Value::Dims(values),
        };
        Update {
            player: &self.player,
            value,
            data: self.data.as_deref(),
        }
    }
}

/// [`Ranking::write`].
pub(in crate::ranking) fn write(ranking: &Ranking, update: Update<'_>) -> Result<()> {
    let (score, data) = resolve(ranking, &update)?;
    match data {
        Some(data) => policy::submission(ranking, update.player, score, data).map(drop),
        None => ranking.set_score(update.player, score),
    }
}

/// [`Ranking::submit_update`].
pub(in crate::ranking) fn submit_update(
    ranking: &Ranking,
    update: Update<'_>,
) -> Result<Submission> {
    let (score, data) = resolve(ranking, &update)?;
    policy::submission(ranking, update.player, score, data.flatten())
}

/// [`Ranking::enqueue_update`].
pub(in crate::ranking) fn enqueue_update(ranking: &Ranking, update: Update<'_>) -> Result<()> {
    let (score, data) = resolve(ranking, &update)?;
    let data = data.flatten().map(<[u8]>::to_vec);
    queue::enqueue_item(ranking, update.player, Some(score), data)
}

/// The update's score (a tuple encoded) and data: `None` without data,
/// `Some(None)` for data a board that keeps none drops (it has no
/// column for it) once its length is checked. The tuple is checked
/// before the data, as the per-combination methods did.
fn resolve<'u>(ranking: &Ranking, update: &Update<'u>) -> Result<(i64, Option<Option<&'u [u8]>>)> {
    let score = update.score_by(|values| ranking.encode(values))?;
    let Some(data) = update.data else {
        return Ok((score, None));
    };
    let max = ranking.config().entry_data() as usize;
    if data.len() > max {
        return Err(Error::EntryDataTooLarge {
            len: data.len(),
            max,
        });
    }
    Ok((score, Some(Some(data).filter(|_| max > 0))))
}

#[cfg(all(test, feature = "sqlite"))]
mod tests {
    use super::Update;
    use crate::ranking::{Dim, Policy, Ranking, RankingConfig};
    use crate::Error;

    fn board(config: RankingConfig) -> (crate::Sqlite, Ranking) {
        let db = crate::Sqlite::memory().unwrap();
        let board = Ranking::create(&db, "b", config).unwrap();
        (db, board)
    }

    /// The update value and the one-line forms that remain (`set_score`,
    /// `submit`, `enqueue`) write the same board, direct and queued; with
    /// data, `Best` keeps the record's data.
    #[test]
    fn every_kind_of_update_writes_what_its_one_line_form_writes() {
        let config = || {
            RankingConfig::new(0..100)
                .policy(Policy::Best)
                .entry_data(8)
        };
        let (_a, long) = board(config());
        let (_b, short) = board(config());
        long.write(Update::score("ann", 40)).unwrap();
        short.set_score("ann", 40).unwrap();
        let l = long.submit_update(Update::score("bo", 50)).unwrap();
        let s = short.submit("bo", 50).unwrap();
        assert_eq!(l, s);
        long.enqueue_update(Update::score("di", 20)).unwrap();
        short.enqueue("di", 20).unwrap();
        long.worker().drain().unwrap();
        short.worker().drain().unwrap();
        assert_eq!(long.top(10).unwrap(), short.top(10).unwrap());
        assert_eq!(long.top(10).unwrap().len(), 3);
        long.write(Update::score("cy", 30).with_data(b"r2"))
            .unwrap();
        long.submit_update(Update::score("cy", 20).with_data(b"r3"))
            .unwrap();
        let cy = long.entry("cy").unwrap().unwrap();
        assert_eq!((cy.score, cy.data.as_deref()), (30, Some(&b"r2"[..])));
    }

    #[test]
    fn a_tuple_is_encoded_and_a_wrong_one_refused_before_anything_is_written() {
        let dims = RankingConfig::dimensions([Dim::higher(0..10), Dim::lower(0..10)]);
        let (_db, b) = board(dims.entry_data(4));
        b.write(Update::dims("ann", &[7, 3])).unwrap();
        let run = b
            .submit_update(Update::dims("bo", &[7, 1]).with_data(b"x"))
            .unwrap();
        assert_eq!(b.decode(run.new_score).unwrap(), [7, 1]);
        let short = Update::dims("cy", &[7]);
        assert!(matches!(
            b.write(short),
            Err(Error::DimensionCount {
                expected: 2,
                got: 1
            })
        ));
        assert!(matches!(
            b.enqueue_update(Update::dims("cy", &[7, 99])),
            Err(Error::DimensionOutOfRange { .. })
        ));
        assert_eq!(b.len().unwrap(), 2);
        assert_eq!(b.queued().unwrap(), 0);
    }

    #[test]
    fn data_over_the_limit_is_refused_by_every_write_and_nothing_is_written() {
        let (_db, keeps) = board(RankingConfig::new(0..100).entry_data(2));
        let (_db2, none) = board(RankingConfig::new(0..100));
        for b in [&keeps, &none] {
            let big = Update::score("ann", 5).with_data(b"abc");
            let too_large =
                |r: crate::Result<()>| matches!(r, Err(Error::EntryDataTooLarge { .. }));
            assert!(too_large(b.write(big)));
            assert!(too_large(b.submit_update(big).map(drop)));
            assert!(too_large(b.enqueue_update(big)));
            assert_eq!(b.len().unwrap(), 0);
            assert_eq!(b.queued().unwrap(), 0);
        }
        // Control: within the limit the same update is written.
        keeps
            .write(Update::score("ann", 5).with_data(b"ab"))
            .unwrap();
        assert_eq!(keeps.top(1).unwrap()[0].data.as_deref(), Some(&b"ab"[..]));
    }
}
