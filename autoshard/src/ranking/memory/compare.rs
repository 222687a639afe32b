//! Comparing the full contents of two storages, with a readable diff.

use super::super::storage::{self, Part, Storage};
use crate::error::Result;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;

/// Everything a storage holds, as the trait shows it.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Contents {
    /// Every player by name: listed in ranking order through `entries_at`
    /// and `entries_below`, then read back with `player`.
    pub players: BTreeMap<String, (i64, u64)>,
    /// `scan_players`, as a multiset.
    pub scanned: BTreeMap<(i64, u64), usize>,
    /// `scan_nodes`, by `(height, idx, part, shard)`.
    pub nodes: BTreeMap<(u32, u64, Part, u32), Vec<u8>>,
    /// `scan_arrival_nodes`, by `(score, height, idx)`.
    pub arrivals: BTreeMap<(i64, u32, u64), Vec<u8>>,
    /// Broken promises of the storage itself: a scan out of order, a
    /// listing that disagrees with `player` or with `scan_players`.
    pub problems: Vec<String>,
}

/// Reads everything `st` holds (in one transaction: `st`).
pub(crate) fn contents(st: &dyn Storage) -> Result<Contents> {
    let mut c = Contents::default();
    let mut listed = Vec::new();
    // Scores are below i64::MAX; the first call covers a corrupt row at it.
    st.entries_at(i64::MAX, 0, u64::MAX, &mut listed)?;
    st.entries_below(i64::MAX, u64::MAX, &mut listed)?;
    let mut previous: Option<(i64, u64)> = None;
    for (name, score) in listed {
        let Some(row) = st.player(&name)? else {
            c.problems
                .push(format!("{name:?} is listed but has no row"));
            continue;
        };
        if row.0 != score {
            c.problems.push(format!(
                "{name:?} is listed at {score}, its row says {row:?}"
            ));
        }
        if previous.is_some_and(|(s, a)| (Reverse(s), a) > (Reverse(row.0), row.1)) {
            c.problems
                .push(format!("{name:?} {row:?} is listed out of ranking order"));
        }
        previous = Some(row);
        if c.players.insert(name.clone(), row).is_some() {
            c.problems.push(format!("{name:?} is listed twice"));
        }
    }
    st.scan_players(&mut |score, arrival| {
        *c.scanned.entry((score, arrival)).or_default() += 1;
        Ok(())
    })?;
    let mut rows = BTreeMap::new();
    for &(score, arrival) in c.players.values() {
        *rows.entry((score, arrival)).or_default() += 1;
    }
    if rows != c.scanned {
        c.problems
            .push("scan_players disagrees with the listing".into());
    }
    st.scan_nodes(&mut |(h, idx), part, shard, v| {
        let key = (h, idx, part, shard);
        if c.nodes
            .last_key_value()
            .is_some_and(|(last, _)| *last >= key)
        {
            c.problems.push(format!("scan_nodes: {key:?} out of order"));
        }
        c.nodes.insert(key, v.to_vec());
        Ok(())
    })?;
    st.scan_arrival_nodes(&mut |score, h, idx, v| {
        let key = (score, h, idx);
        if c.arrivals
            .last_key_value()
            .is_some_and(|(last, _)| *last >= key)
        {
            c.problems
                .push(format!("scan_arrival_nodes: {key:?} out of order"));
        }
        c.arrivals.insert(key, v.to_vec());
        Ok(())
    })?;
    Ok(c)
}

/// A vector for a diff line: its entries, or its bytes if it has none.
fn show(v: &[u8]) -> String {
    if !v.len().is_multiple_of(8) {
        return format!("malformed {v:?}");
    }
    let entries: Vec<i64> = storage::entries(v).collect();
    let untrimmed = if v.ends_with(&[0; 8]) {
        " (untrimmed)"
    } else {
        ""
    };
    format!("{entries:?}{untrimmed}")
}

/// Diff lines for one table: `-` only left, `+` only right, `~` both and
/// different.
fn diff_rows<K: Ord + Debug, V: PartialEq>(
    table: &str,
    left: &BTreeMap<K, V>,
    right: &BTreeMap<K, V>,
    show: impl Fn(&V) -> String,
    out: &mut Vec<String>,
) {
    let keys: BTreeSet<&K> = left.keys().chain(right.keys()).collect();
    for key in keys {
        match (left.get(key), right.get(key)) {
            (Some(l), None) => out.push(format!("- {table} {key:?}: {}", show(l))),
            (None, Some(r)) => out.push(format!("+ {table} {key:?}: {}", show(r))),
            (Some(l), Some(r)) if l != r => {
                out.push(format!("~ {table} {key:?}: {} != {}", show(l), show(r)))
            }
            _ => {}
        }
    }
}

/// Compares everything two storages hold; `None` when equal, else a diff
/// naming each differing row (vectors compared byte for byte, so an
/// untrimmed encoding differs).
pub(crate) fn diff(left: &dyn Storage, right: &dyn Storage) -> Result<Option<String>> {
    let (l, r) = (contents(left)?, contents(right)?);
    let mut lines = Vec::new();
    for (side, c) in [("left", &l), ("right", &r)] {
        lines.extend(c.problems.iter().map(|p| format!("! {side}: {p}")));
    }
    diff_rows(
        "player",
        &l.players,
        &r.players,
        |p| format!("{p:?}"),
        &mut lines,
    );
    diff_rows(
        "scanned player",
        &l.scanned,
        &r.scanned,
        |n| format!("{n}x"),
        &mut lines,
    );
    diff_rows("node", &l.nodes, &r.nodes, |v| show(v), &mut lines);
    diff_rows(
        "arrival node",
        &l.arrivals,
        &r.arrivals,
        |v| show(v),
        &mut lines,
    );
    if lines.is_empty() {
        return Ok(None);
    }
    const SHOWN: usize = 40;
    let more = lines.len().saturating_sub(SHOWN);
    lines.truncate(SHOWN);
    if more > 0 {
        lines.push(format!("... and {more} more"));
    }
    Ok(Some(format!(
        "storages {:?} and {:?} differ (- left only, + right only, ~ left != right):\n{}",
        left.board_name(),
        right.board_name(),
        lines.join("\n")
    )))
}

/// Panics with the diff unless `left` and `right` hold the same rows.
#[track_caller]
pub(crate) fn assert_same(left: &dyn Storage, right: &dyn Storage) {
    if let Some(diff) = diff(left, right).expect("reading both storages") {
        panic!("{diff}");
    }
}
