//! Reading a whole board family back, for the family suites: every member
//! board in the store with its entries.
#![allow(dead_code)] // each suite uses its own part of this

use autoshard::ranking::{Family, Period, Window};
use std::collections::BTreeMap;

/// A member board: `(window, period key, filter)`.
pub type MemberKey = (Window, i64, Option<(String, String)>);

/// Every member board of a family: `member -> {player: (score, standard
/// rank, dense rank)}`.
pub type Snapshot = BTreeMap<MemberKey, BTreeMap<String, (i64, u64, u64)>>;

/// Every member board the family has in the store, read through
/// [`Family::board`], each checked with `check_integrity`.
pub fn snapshot(family: &Family) -> Snapshot {
    let mut out = Snapshot::new();
    let filters: Vec<Option<(String, String)>> =
        std::iter::once(None)
            .chain(family.config().filters().iter().flat_map(|(dim, values)| {
                values.iter().map(move |v| Some((dim.clone(), v.clone())))
            }))
            .collect();
    let windows: Vec<Window> = family.config().windows().collect();
    for window in windows {
        for span in family.periods(window).unwrap() {
            for filter in &filters {
                let f = filter.as_ref().map(|(d, v)| (d.as_str(), v.as_str()));
                let at = Period::At(span.start.max(-1_000_000_000));
                let Some(board) = family.board(window, at, f).unwrap() else {
                    continue;
                };
                board.check_integrity().unwrap();
                let entries = board
                    .top(1_000_000)
                    .unwrap()
                    .into_iter()
                    .map(|e| (e.player, (e.score, e.rank, e.dense)))
                    .collect();
                out.insert((window, span.key, filter.clone()), entries);
            }
        }
    }
    out
}

/// The snapshot without empty boards (a failed submission may leave the
/// boards of a new period created and empty).
pub fn non_empty(mut s: Snapshot) -> Snapshot {
    s.retain(|_, entries| !entries.is_empty());
    s
}
