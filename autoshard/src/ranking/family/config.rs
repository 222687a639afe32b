//! The shape of a board family, its validation, and the text it is stored
//! as (in the family's registry board: `mod.rs`).

use super::window::{Weekday, Window};
use crate::error::{Error, Result};
use crate::ranking::composite;
use crate::ranking::{BoardConfig, Policy, RankingConfig, ScoreOrder};

/// Longest family name, in bytes (member boards' names carry it).
pub const MAX_FAMILY_NAME_LEN: usize = 64;
/// Most filter dimensions per family.
pub const MAX_FILTERS: usize = 8;
/// Longest filter dimension name or value, in bytes.
pub const MAX_FILTER_LEN: usize = 32;
/// Most values per filter dimension.
pub const MAX_FILTER_VALUES: usize = 256;
/// Most old periods a window keeps.
pub const MAX_KEEP: u32 = 100_000;

/// The shape of a [`Family`](super::Family): one board configuration shared
/// by every member, the windows kept, the local time's UTC offset and first
/// weekday, the filter dimensions with their allowed values, and how many
/// old periods each window keeps.
///
/// ```
/// use autoshard::ranking::{FamilyConfig, ScoreOrder, Policy, RankingConfig, Weekday, Window};
///
/// let config = FamilyConfig::new(
///     RankingConfig::new(1..86_400).policy(Policy::Best).order(ScoreOrder::LowerIsBetter),
/// )
/// .window(Window::AllTime)
/// .window(Window::Month)
/// .window(Window::Day)
/// .utc_offset_minutes(-8 * 60)
/// .week_starts(Weekday::Sunday)
/// .filter("age_group", ["u25", "25-34", "35-44", "45+"])
/// .keep(Window::Day, 7);
/// assert_eq!(config.keeps(Window::Day), 7);
/// assert_eq!(config.keeps(Window::Month), 1); // the default: the previous period
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FamilyConfig {
    board: BoardConfig,
    windows: Vec<(Window, u32)>,
    offset_minutes: i32,
    week: Weekday,
    filters: Vec<(String, Vec<String>)>,
    auto_drop: bool,
}

impl FamilyConfig {
    /// A family of boards shaped `board`, with no window yet (add at least
    /// one), UTC, weeks starting on Monday, no filter, and expired periods
    /// dropped by submissions ([`auto_drop`](FamilyConfig::auto_drop)).
    pub fn new(board: RankingConfig) -> Self {
        FamilyConfig {
            board: board.into(),
            windows: Vec::new(),
            offset_minutes: 0,
            week: Weekday::Monday,
            filters: Vec::new(),
            auto_drop: true,
        }
    }

    /// Keeps `window`, with the previous period kept after it ends (see
    /// [`keep`](FamilyConfig::keep)).
    pub fn window(mut self, window: Window) -> Self {
        if !self.windows.iter().any(|&(w, _)| w == window) {
            self.windows.push((window, 1));
            self.windows.sort_unstable();
        }
        self
    }

    /// Keeps `window` (adding it if needed) and `periods` periods before
    /// the current one; older ones are dropped
    /// ([`Family::drop_expired`](super::Family::drop_expired)).
    pub fn keep(mut self, window: Window, periods: u32) -> Self {
        self = self.window(window);
        for w in &mut self.windows {
            if w.0 == window {
                w.1 = periods;
            }
        }
        self
    }

    /// Local time is UTC plus `minutes` (-18 to +18 hours): where days,
    /// weeks, months and years start.
    pub fn utc_offset_minutes(mut self, minutes: i32) -> Self {
        self.offset_minutes = minutes;
        self
    }

    /// The first day of a [`Window::Week`] (default Monday).
    pub fn week_starts(mut self, day: Weekday) -> Self {
        self.week = day;
        self
    }

    /// Declares filter dimension `name` with its allowed values: every
    /// window then also keeps one board per value, which a submission
    /// carrying that value updates.
    pub fn filter<I, S>(mut self, name: &str, values: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let values = values.into_iter().map(Into::into).collect();
        self.filters.retain(|(n, _)| n != name);
        self.filters.push((name.into(), values));
        self
    }

    /// Whether a submission that opens a new period also drops the periods
    /// that expired with it (default true); without it, call
    /// [`Family::drop_expired`](super::Family::drop_expired) from a job.
    /// Expiry is judged as of the earlier of the submission's time
    /// ([`FamilyUpdate::at`](super::FamilyUpdate::at)) and the system clock:
    /// a submission stamped in the future drops only what the clock has
    /// expired, never the current periods' boards.
    pub fn auto_drop(mut self, on: bool) -> Self {
        self.auto_drop = on;
        self
    }

    /// The members' board configuration.
    pub fn board(&self) -> &BoardConfig {
        &self.board
    }

    /// The windows kept, in [`Window`] order.
    pub fn windows(&self) -> impl Iterator<Item = Window> + '_ {
        self.windows.iter().map(|&(w, _)| w)
    }

    /// How many periods before the current one `window` keeps (0 if the
    /// family does not keep the window).
    pub fn keeps(&self, window: Window) -> u32 {
        self.windows
            .iter()
            .find(|&&(w, _)| w == window)
            .map_or(0, |&(_, k)| k)
    }

    /// Whether the family keeps `window`.
    pub fn has_window(&self, window: Window) -> bool {
        self.windows.iter().any(|&(w, _)| w == window)
    }

    /// The UTC offset of local time, in minutes.
    pub fn offset_minutes(&self) -> i32 {
        self.offset_minutes
    }

    /// The first day of a week.
    pub fn first_weekday(&self) -> Weekday {
        self.week
    }

    /// The filter dimensions and their allowed values, as declared.
    pub fn filters(&self) -> &[(String, Vec<String>)] {
        &self.filters
    }

    /// Whether submissions drop expired periods.
    pub fn drops_automatically(&self) -> bool {
        self.auto_drop
    }

    /// Whether `value` is allowed for dimension `name`: `Ok(index of the
    /// dimension)`, or the typed error a submission or query gets.
    pub(crate) fn check_filter(&self, family: &str, name: &str, value: &str) -> Result<usize> {
        let unknown = |value: Option<&str>| Error::UnknownFilter {
            family: family.into(),
            filter: name.into(),
            value: value.map(Into::into),
        };
        let i = self
            .filters
            .iter()
            .position(|(n, _)| n == name)
            .ok_or_else(|| unknown(None))?;
        if !self.filters[i].1.iter().any(|v| v == value) {
            return Err(unknown(Some(value)));
        }
        Ok(i)
    }

    pub(crate) fn check_window(&self, family: &str, window: Window) -> Result<()> {
        if self.has_window(window) {
            return Ok(());
        }
        Err(Error::UnknownWindow {
            family: family.into(),
            window: window.as_str(),
        })
    }

    /// Everything [`Family::create`](super::Family::create) refuses.
    pub(crate) fn validate(&self) -> Result<()> {
        self.board.geometry()?;
        let invalid = |reason: String| Err(Error::InvalidRanking { reason });
        if self.windows.is_empty() {
            return invalid("a family needs at least one window".into());
        }
        // One transaction writes every member: a split member would be
        // several databases (SQLite files), an approximate one has no tree
        // to rank a submission in.
        if self.board.trees() > 1 {
            return invalid("a family's members are boards of one tree (no `trees`)".into());
        }
        if self.board.approximate().is_some() {
            return invalid("a family's members are exact boards (no `approximate`)".into());
        }
        if self.offset_minutes.unsigned_abs() > 18 * 60 {
            return invalid(format!(
                "UTC offset {} minutes is beyond ±18 hours",
                self.offset_minutes
            ));
        }
        if let Some(&(w, k)) = self.windows.iter().find(|&&(_, k)| k > MAX_KEEP) {
            return invalid(format!("{} keeps {k} periods, over {MAX_KEEP}", w.as_str()));
        }
        if self.filters.len() > MAX_FILTERS {
            return invalid(format!("over {MAX_FILTERS} filter dimensions"));
        }
        for (name, values) in &self.filters {
            check_label("filter dimension", name)?;
            if values.is_empty() || values.len() > MAX_FILTER_VALUES {
                return invalid(format!(
                    "filter {name:?} needs 1 to {MAX_FILTER_VALUES} values"
                ));
            }
            for (i, v) in values.iter().enumerate() {
                check_label("filter value", v)?;
                if values[..i].contains(v) {
                    return invalid(format!("filter {name:?} lists {v:?} twice"));
                }
            }
        }
        Ok(())
    }

    /// The configuration as stored: one `key value…` line each, fields
    /// separated by U+0001 (no name or value may hold a control character).
    pub(crate) fn encode(&self) -> String {
        let b = &self.board;
        let mut out = vec![
            "autoshard-family 1".to_owned(),
            format!("range\u{1}{}\u{1}{}", b.range().start, b.range().end),
            format!("branching\u{1}{}", b.branching()),
            format!("shards\u{1}{}", b.node_shards()),
            format!("queues\u{1}{}", b.queues()),
            format!("policy\u{1}{}", b.policy().stored()),
            format!("order\u{1}{}", b.order().stored()),
            format!("entry_data\u{1}{}", b.entry_data()),
            format!("offset\u{1}{}", self.offset_minutes),
            format!("week\u{1}{}", self.week as i64),
            format!("auto_drop\u{1}{}", u8::from(self.auto_drop)),
        ];
        // Without them a reopened family's members would be plain boards
        // over the encoded range: ranked alike, but `decode` would give
        // the encoded number back instead of the tuple.
        let dims = b.dimensions();
        if !dims.is_empty() {
            out.push(format!("dims\u{1}{}", composite::stored(dims)));
        }
        for &(w, k) in &self.windows {
            out.push(format!("window\u{1}{}\u{1}{k}", w.as_str()));
        }
        for (name, values) in &self.filters {
            out.push(format!("filter\u{1}{name}\u{1}{}", values.join("\u{1}")));
        }
        out.join("\n")
    }

    /// The configuration [`encode`](FamilyConfig::encode) wrote, or what is
    /// wrong with the text.
    pub(crate) fn decode(text: &str) -> Result<Self, String> {
        let mut lines = text.lines();
        if lines.next() != Some("autoshard-family 1") {
            return Err("not a family configuration of this version".into());
        }
        let (mut range, mut nums) = (None, std::collections::HashMap::new());
        let (mut policy, mut order) = (Policy::Replace, ScoreOrder::HigherIsBetter);
        let (mut windows, mut filters) = (Vec::new(), Vec::new());
        let mut dims = Vec::new();
        let int = |s: Option<&str>| -> Result<i64, String> {
            let s = s.ok_or("a field is missing")?;
            s.parse().map_err(|_| format!("{s:?} is not an integer"))
        };
        for line in lines {
            let mut f = line.split('\u{1}');
            match f.next().unwrap_or_default() {
                "range" => range = Some((int(f.next())?, int(f.next())?)),
                "policy" => {
                    let p = f.next().unwrap_or_default();
                    policy = Policy::from_stored(p).ok_or(format!("policy {p:?}"))?;
                }
                "order" => {
                    let o = f.next().unwrap_or_default();
                    order = ScoreOrder::from_stored(o).ok_or(format!("order {o:?}"))?;
                }
                "window" => {
                    let w = f.next().unwrap_or_default();
                    let w = Window::from_str(w).ok_or(format!("window {w:?}"))?;
                    let k = u32::try_from(int(f.next())?).map_err(|e| e.to_string())?;
                    windows.push((w, k));
                }
                "dims" => dims = composite::from_stored(f.next().unwrap_or_default())?,
                "filter" => {
                    let name = f.next().ok_or("a filter without a name")?;
                    filters.push((name.to_owned(), f.map(str::to_owned).collect()));
                }
                key => {
                    nums.insert(key.to_owned(), int(f.next())?);
                }
            }
        }
        let num = |k: &str| nums.get(k).copied().ok_or(format!("{k} is missing"));
        let small = |k: &str| -> Result<u32, String> {
            u32::try_from(num(k)?).map_err(|_| format!("{k} is out of range"))
        };
        let (min, max) = range.ok_or("range is missing")?;
        let board = if dims.is_empty() {
            RankingConfig::new(min..max)
        } else {
            // `validate` below checks the range against the dimensions'.
            RankingConfig::dimensions(dims)
        };
        if board.as_built().range() != (min..max) {
            return Err(format!(
                "range {min}..{max} is not the dimensions' {:?}",
                board.as_built().range()
            ));
        }
        let board = board
            .branching(small("branching")?)
            .node_shards(small("shards")?)
            .queues(small("queues")?)
            .policy(policy)
            .order(order)
            .entry_data(small("entry_data")?);
        let week = Weekday::from_index(num("week")?).ok_or("week is out of range")?;
        let mut config = FamilyConfig::new(board)
            .utc_offset_minutes(i32::try_from(num("offset")?).map_err(|e| e.to_string())?)
            .week_starts(week)
            .auto_drop(num("auto_drop")? != 0);
        for (w, k) in windows {
            config = config.keep(w, k);
        }
        config.filters = filters;
        config.validate().map_err(|e| e.to_string())?;
        Ok(config)
    }
}

/// A family name, filter dimension or value: 1 to [`MAX_FILTER_LEN`] (names:
/// [`MAX_FAMILY_NAME_LEN`]) bytes without control characters, which member
/// board names use as separators.
pub(crate) fn check_label(what: &str, label: &str) -> Result<()> {
    let max = match what {
        "family name" => MAX_FAMILY_NAME_LEN,
        _ => MAX_FILTER_LEN,
    };
    if label.is_empty() || label.len() > max || label.chars().any(char::is_control) {
        return Err(Error::InvalidName {
            name: label.into(),
            reason: format!("a {what} must be 1 to {max} bytes without control characters"),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stored_text_round_trips() {
        let config = FamilyConfig::new(
            RankingConfig::new(-5..1_000)
                .policy(Policy::Increment)
                .order(ScoreOrder::LowerIsBetter)
                .node_shards(4)
                .entry_data(16),
        )
        .keep(Window::Week, 3)
        .window(Window::AllTime)
        .utc_offset_minutes(-330)
        .week_starts(Weekday::Sunday)
        .filter("club", ["a b", "c=d"])
        .auto_drop(false);
        assert_eq!(FamilyConfig::decode(&config.encode()), Ok(config));
        assert!(FamilyConfig::decode("autoshard-family 2").is_err());
    }

    /// Control: without the `dims` line (as before it was written) the
    /// decoded board is a plain one and this fails.
    #[test]
    fn a_composite_board_round_trips() {
        use crate::ranking::Dim;
        let dims = [Dim::higher(0..100), Dim::lower(0..10), Dim::lower(-5..5)];
        let config =
            FamilyConfig::new(RankingConfig::dimensions(dims.clone()).policy(Policy::Best))
                .window(Window::Day);
        let decoded = FamilyConfig::decode(&config.encode()).unwrap();
        assert_eq!(decoded.board().dimensions(), &dims);
        assert_eq!(decoded, config);
        let forged = config
            .encode()
            .replace("range\u{1}0\u{1}", "range\u{1}1\u{1}");
        assert!(FamilyConfig::decode(&forged).is_err());
    }

    #[test]
    fn validation_refuses_bad_shapes() {
        let base = || FamilyConfig::new(RankingConfig::new(0..10)).window(Window::Day);
        assert!(base().validate().is_ok());
        assert!(FamilyConfig::new(RankingConfig::new(0..10))
            .validate()
            .is_err());
        assert!(base().utc_offset_minutes(19 * 60).validate().is_err());
        assert!(base().filter("g", Vec::<String>::new()).validate().is_err());
        assert!(base().filter("g", ["a", "a"]).validate().is_err());
        assert!(base().filter("g\n", ["a"]).validate().is_err());
        assert!(base().filter("g", ["a".repeat(33)]).validate().is_err());
        assert!(base().keep(Window::Day, MAX_KEEP + 1).validate().is_err());
    }
}
