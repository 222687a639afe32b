//! Windows and periods: which period of a window a timestamp falls in, in
//! a family's local time (UTC plus a fixed offset), on the proleptic
//! Gregorian calendar.
//!
//! A period is named by an integer *key* per window, consecutive periods
//! by consecutive keys, so "the previous period" is `key - 1` and "older
//! than the `keep` periods before the current one" is `key < current -
//! keep`. The key is what a member board's name carries.

use crate::error::{Error, Result};

const DAY: i64 = 86_400;

/// A family's windows: how often each of its boards starts over.
///
/// ```
/// use autoshard::ranking::{Period, Window};
///
/// // 2026-11-24 10:30 UTC is a Tuesday.
/// let ts = 1_795_516_200;
/// let day = Window::Day.span(Period::At(ts), 0, Default::default()).unwrap();
/// assert_eq!((day.start, day.end), (1_795_478_400, 1_795_478_400 + 86_400));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Window {
    /// One period that never ends: the all-time board.
    AllTime,
    /// Calendar years.
    Year,
    /// Calendar months.
    Month,
    /// Weeks starting on the family's first weekday
    /// ([`FamilyConfig::week_starts`](super::FamilyConfig::week_starts)).
    Week,
    /// Days, midnight to midnight local time.
    Day,
    /// Hours.
    Hour,
}

/// The day a [`Window::Week`] starts on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum Weekday {
    #[default]
    Monday,
    Tuesday,
    Wednesday,
    Thursday,
    Friday,
    Saturday,
    Sunday,
}

/// Which period of a window a query means.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Period {
    /// The period the system clock is in now.
    Current,
    /// The one before [`Current`](Period::Current).
    Previous,
    /// The period containing this timestamp (Unix seconds).
    At(i64),
    /// The one before the period containing this timestamp: "last week"
    /// as of a given time, for tests and replays.
    Before(i64),
}

/// One period of a window: `[start, end)` in Unix seconds, and its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Span {
    /// The window.
    pub window: Window,
    /// Consecutive periods have consecutive keys (0 for all-time).
    pub key: i64,
    /// First second of the period (Unix seconds; `i64::MIN` for all-time).
    pub start: i64,
    /// First second after it (`i64::MAX` for all-time).
    pub end: i64,
}

/// The system clock, in Unix seconds.
pub(crate) fn now() -> i64 {
    use std::time::{SystemTime, UNIX_EPOCH};
    match SystemTime::now().duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_secs() as i64,
        Err(e) => -(e.duration().as_secs() as i64),
    }
}

impl Window {
    /// Every window, in a fixed order.
    pub const ALL: [Window; 6] = [
        Window::AllTime,
        Window::Year,
        Window::Month,
        Window::Week,
        Window::Day,
        Window::Hour,
    ];

    /// The name member boards and the stored configuration use.
    pub fn as_str(self) -> &'static str {
        match self {
            Window::AllTime => "all",
            Window::Year => "year",
            Window::Month => "month",
            Window::Week => "week",
            Window::Day => "day",
            Window::Hour => "hour",
        }
    }

    pub(crate) fn from_str(name: &str) -> Option<Self> {
        Window::ALL.into_iter().find(|w| w.as_str() == name)
    }

    /// The key of the period containing `ts` (Unix seconds), with local
    /// time `offset_minutes` east of UTC.
    pub(crate) fn key(self, ts: i64, offset_minutes: i32, week: Weekday) -> i64 {
        let local = ts.saturating_add(i64::from(offset_minutes) * 60);
        let day = local.div_euclid(DAY);
        match self {
            Window::AllTime => 0,
            Window::Hour => local.div_euclid(3600),
            Window::Day => day,
            // Day 0 (1970-01-01) was a Thursday: 3 days after a Monday.
            Window::Week => (day + 3 - week as i64).div_euclid(7),
            Window::Month => {
                let (y, m, _) = civil_from_days(day);
                y * 12 + (m - 1)
            }
            Window::Year => civil_from_days(day).0,
        }
    }

    /// `[start, end)` of period `key`, in Unix seconds.
    pub(crate) fn bounds(self, key: i64, offset_minutes: i32, week: Weekday) -> (i64, i64) {
        let shift = i64::from(offset_minutes) * 60;
        let day_start = |day: i64| day.saturating_mul(DAY).saturating_sub(shift);
        match self {
            Window::AllTime => (i64::MIN, i64::MAX),
            Window::Hour => (
                (key * 3600).saturating_sub(shift),
                (key + 1).saturating_mul(3600).saturating_sub(shift),
            ),
            Window::Day => (day_start(key), day_start(key + 1)),
            Window::Week => {
                let first = key * 7 - 3 + week as i64;
                (day_start(first), day_start(first + 7))
            }
            Window::Month => {
                let month = |k: i64| days_from_civil(k.div_euclid(12), k.rem_euclid(12) + 1, 1);
                (day_start(month(key)), day_start(month(key + 1)))
            }
            Window::Year => (
                day_start(days_from_civil(key, 1, 1)),
                day_start(days_from_civil(key + 1, 1, 1)),
            ),
        }
    }

    /// The period `period` means, as of the system clock for
    /// [`Period::Current`] and [`Period::Previous`].
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRanking`] for a timestamp whose local time is beyond
    /// year ±1,000,000 (no calendar arithmetic is defined there).
    pub fn span(self, period: Period, offset_minutes: i32, week: Weekday) -> Result<Span> {
        let (ts, back) = match period {
            Period::Current => (now(), 0),
            Period::Previous => (now(), 1),
            Period::At(ts) => (ts, 0),
            Period::Before(ts) => (ts, 1),
        };
        check_timestamp(ts)?;
        let key = match self {
            Window::AllTime => 0,
            _ => self.key(ts, offset_minutes, week) - back,
        };
        let (start, end) = self.bounds(key, offset_minutes, week);
        Ok(Span {
            window: self,
            key,
            start,
            end,
        })
    }
}

/// Timestamps within ±1,000,000 years of 1970: far past any real one, and
/// every key and bound computed from one fits an `i64`.
const MAX_TIMESTAMP: i64 = 1_000_000 * 366 * DAY;

pub(crate) fn check_timestamp(ts: i64) -> Result<()> {
    if ts.unsigned_abs() > MAX_TIMESTAMP as u64 {
        return Err(Error::InvalidRanking {
            reason: format!("timestamp {ts} is more than a million years from 1970"),
        });
    }
    Ok(())
}

impl Weekday {
    pub(crate) fn from_index(i: i64) -> Option<Self> {
        use Weekday::*;
        [
            Monday, Tuesday, Wednesday, Thursday, Friday, Saturday, Sunday,
        ]
        .get(usize::try_from(i).ok()?)
        .copied()
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
/// `days_from_civil`).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of a day since 1970-01-01: `(year, month 1..=12, day 1..=31)`.
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2026-11-24 10:30:00 UTC, a Tuesday.
    const TUE: i64 = 1_795_516_200;

    #[test]
    fn calendar_round_trips() {
        for day in (-800_000..800_000).step_by(37) {
            let (y, m, d) = civil_from_days(day);
            assert_eq!(days_from_civil(y, m, d), day);
        }
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(TUE.div_euclid(DAY)), (2026, 11, 24));
        assert_eq!(
            days_from_civil(2000, 3, 1) - days_from_civil(2000, 2, 1),
            29
        );
    }

    #[test]
    fn periods_contain_their_timestamps() {
        for window in Window::ALL {
            for offset in [-720, -300, 0, 330, 840] {
                for week in [Weekday::Monday, Weekday::Sunday, Weekday::Thursday] {
                    for ts in [TUE, 0, -1, 951_782_400, TUE + 3_600 * 17] {
                        let s = window.span(Period::At(ts), offset, week).unwrap();
                        assert!(s.start <= ts && ts < s.end, "{window:?} {ts} {s:?}");
                        let prev = window.span(Period::Before(ts), offset, week).unwrap();
                        if window != Window::AllTime {
                            assert_eq!((prev.end, prev.key + 1), (s.start, s.key));
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn weeks_start_on_the_configured_day_and_offsets_move_midnight() {
        let monday = Window::Week
            .span(Period::At(TUE), 0, Weekday::Monday)
            .unwrap();
        assert_eq!(monday.start, 1_795_478_400 - DAY); // Mon 2026-11-23 00:00
        let sunday = Window::Week
            .span(Period::At(TUE), 0, Weekday::Sunday)
            .unwrap();
        assert_eq!(sunday.start, 1_795_478_400 - 2 * DAY);
        // 23:30 UTC on Tuesday is already Wednesday at UTC+1.
        let late = 1_795_478_400 + 23 * 3600 + 1800;
        let utc = Window::Day
            .span(Period::At(late), 0, Weekday::Monday)
            .unwrap();
        let cet = Window::Day
            .span(Period::At(late), 60, Weekday::Monday)
            .unwrap();
        assert_eq!(cet.key, utc.key + 1);
        assert_eq!(cet.start, 1_795_478_400 + DAY - 3600);
        let month = Window::Month
            .span(Period::At(TUE), 0, Weekday::Monday)
            .unwrap();
        assert_eq!(month.end - month.start, 30 * DAY);
        assert!(check_timestamp(i64::MAX).is_err());
    }
}
