//! Which periods a family keeps, and dropping the others board by board.
//!
//! A drop never blocks writers: it deletes each expired member board with
//! [`BoardStore::delete_board`](crate::seam::BoardStore::delete_board),
//! which takes no lock another board's writer waits for (on SQLite its
//! batches are short transactions of their own), and writers of the
//! current periods never touch an expired board.

use super::window::{check_timestamp, now, Period, Span, Window};
use super::{member_prefix, registry_name, Family, HIDDEN};
use crate::error::Result;

/// A member board's name after the family's prefix, parsed:
/// `(window, period key, filter)`.
type Parsed<'a> = (Window, i64, Option<(&'a str, &'a str)>);

fn parse(rest: &str) -> Option<Parsed<'_>> {
    let mut parts = rest.split(HIDDEN);
    let window = Window::from_str(parts.next()?)?;
    let key = parts.next()?.parse().ok()?;
    let filter = match (parts.next(), parts.next()) {
        (Some(dim), Some(value)) => Some((dim, value)),
        (None, _) => None,
        _ => return None,
    };
    Some((window, key, filter))
}

impl Family {
    /// The periods of `window` that have member boards, oldest first.
    ///
    /// # Errors
    ///
    /// [`Error::UnknownWindow`](crate::Error::UnknownWindow), or a store
    /// error.
    pub fn periods(&self, window: Window) -> Result<Vec<Span>> {
        let c = self.config();
        c.check_window(self.name(), window)?;
        let mut keys: Vec<i64> = self
            .member_names()?
            .into_iter()
            .filter(|(w, _, _)| *w == window)
            .map(|(_, key, _)| key)
            .collect();
        keys.sort_unstable();
        keys.dedup();
        Ok(keys
            .into_iter()
            .map(|key| {
                let (start, end) = window.bounds(key, c.offset_minutes(), c.first_weekday());
                Span {
                    window,
                    key,
                    start,
                    end,
                }
            })
            .collect())
    }

    /// Drops the member boards of periods older than each window keeps
    /// ([`FamilyConfig::keep`](super::FamilyConfig::keep)), as of the
    /// system clock; the number of boards dropped. See
    /// [`drop_expired_at`](Family::drop_expired_at).
    ///
    /// # Errors
    ///
    /// As [`drop_expired_at`](Family::drop_expired_at).
    pub fn drop_expired(&self) -> Result<usize> {
        self.drop_expired_at(now())
    }

    /// Drops the member boards of every period more than `keep` periods
    /// before the one containing `unix_seconds`, board by board, each with
    /// [`Ranking::delete`](crate::ranking::Ranking::delete)'s guarantees:
    /// writers of other boards (the current periods') never wait for more
    /// than one short transaction of it. Also deletes boards a crash in
    /// [`Family::delete`] left behind. Running it twice, or from several
    /// processes at once, is harmless.
    ///
    /// ```
    /// use autoshard::ranking::{Family, FamilyConfig, Period, RankingConfig, Window};
    /// # fn main() -> autoshard::Result<()> {
    /// let db = autoshard::Sqlite::memory()?;
    /// let config = FamilyConfig::new(RankingConfig::new(0..100))
    ///     .keep(Window::Day, 1)
    ///     .auto_drop(false);
    /// let daily = Family::create(&db, "daily", config)?;
    /// let day = 86_400;
    /// for d in 0..4 {
    ///     daily.submission("ann", d).at(d * day).submit()?;
    /// }
    /// assert_eq!(daily.periods(Window::Day)?.len(), 4);
    /// assert_eq!(daily.drop_expired_at(3 * day)?, 2); // days 0 and 1
    /// assert!(daily.board(Window::Day, Period::At(0), None)?.is_none());
    /// assert!(daily.board(Window::Day, Period::At(2 * day), None)?.is_some());
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// A timestamp beyond a million years
    /// ([`Error::InvalidRanking`](crate::Error::InvalidRanking)), or a
    /// store error (what was dropped before it stays dropped).
    pub fn drop_expired_at(&self, unix_seconds: i64) -> Result<usize> {
        check_timestamp(unix_seconds)?;
        let c = self.config();
        let mut dropped = 0;
        for (window, key, name) in self.member_names()? {
            if window == Window::AllTime || !c.has_window(window) {
                continue;
            }
            let current = window.key(unix_seconds, c.offset_minutes(), c.first_weekday());
            if key < current - i64::from(c.keeps(window)) {
                self.forget(Some(&name));
                dropped += usize::from(self.inner.boards.delete_board(&name)?);
            }
        }
        dropped += self.drop_orphans()?;
        Ok(dropped)
    }

    /// The automatic drop after a submission stamped `ts` opened a period
    /// ([`FamilyConfig::auto_drop`](super::FamilyConfig::auto_drop)):
    /// expiry as of the earlier of `ts` and the system clock. A submission
    /// stamped in the past drops what had expired by its time (a backfill
    /// replays retention as it was); one stamped ahead of the clock, by
    /// mistake or on purpose, drops nothing the clock has not expired, so
    /// it cannot take today's boards with it (issue 21). To expire by a
    /// future time, call [`drop_expired_at`](Family::drop_expired_at).
    pub(super) fn drop_expired_after(&self, ts: i64) -> Result<usize> {
        self.drop_expired_at(ts.min(now()))
    }

    /// Drops every member board of `window`'s `period`, overall and
    /// filtered, whatever the family keeps; the number of boards dropped.
    /// Submissions to that period afterwards start it again, empty.
    ///
    /// # Errors
    ///
    /// [`Error::UnknownWindow`](crate::Error::UnknownWindow), or a store
    /// error.
    pub fn delete_period(&self, window: Window, period: Period) -> Result<usize> {
        let span = self.span(window, period)?;
        let mut dropped = 0;
        for (w, key, name) in self.member_names()? {
            if w == window && key == span.key {
                self.forget(Some(&name));
                dropped += usize::from(self.inner.boards.delete_board(&name)?);
            }
        }
        Ok(dropped)
    }

    /// `(window, key, board name)` of every member board in the store.
    fn member_names(&self) -> Result<Vec<(Window, i64, String)>> {
        let prefix = member_prefix(self.inner.id);
        let names = self.inner.boards.list_boards()?;
        Ok(names
            .into_iter()
            .filter_map(|n| {
                let (w, k, _) = parse(n.strip_prefix(&prefix)?)?;
                Some((w, k, n))
            })
            .collect())
    }

    /// Deletes boards of families that no longer exist (what a crash in
    /// [`Family::delete`] leaves): family boards whose id no registry
    /// board has.
    fn drop_orphans(&self) -> Result<usize> {
        let boards = &self.inner.boards;
        let names = boards.list_boards()?;
        let registry = registry_name("");
        let mut live = std::collections::HashSet::new();
        for name in names.iter().filter(|n| n.starts_with(&registry)) {
            if let Some((id, _)) = boards.open_board(name)? {
                live.insert(id);
            }
        }
        let mut dropped = 0;
        for name in &names {
            let Some(rest) = name.strip_prefix(HIDDEN) else {
                continue;
            };
            let Some((id, _)) = rest.split_once(HIDDEN) else {
                continue;
            };
            match id.parse::<i64>() {
                Ok(id) if !live.contains(&id) => {
                    dropped += usize::from(boards.delete_board(name)?);
                }
                _ => {}
            }
        }
        Ok(dropped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn member_names_parse() {
        assert_eq!(parse("day\u{2}20416"), Some((Window::Day, 20_416, None)));
        assert_eq!(
            parse("month\u{2}-3\u{2}age\u{2}35-44"),
            Some((Window::Month, -3, Some(("age", "35-44"))))
        );
        assert_eq!(parse("players"), None);
        assert_eq!(parse("day\u{2}x"), None);
        assert_eq!(parse("day\u{2}1\u{2}age"), None);
    }
}
