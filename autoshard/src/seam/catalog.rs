//! The catalog record: a board's configuration as every store keeps it.
//!
//! A board's row in a store's catalog holds one versioned text,
//! [`BoardSpec::record`], written and read here for every store, so the
//! ranking layer hands the stores a typed [`BoardSpec`] and gets one back,
//! and no store parses a configuration of its own. The record starts with
//! its version (`v1 ...`); a version newer than [`CATALOG_VERSION`] is
//! refused ([`BoardSpec::from_record`]), so a board created by a later
//! autoshard is never misread by an earlier one that knows fewer fields.
//!
//! Boards stored before the record existed kept their configuration in
//! columns of their own, some of it folded into others (a split board's
//! tree count as a `+trees=<k>` suffix of the policy column, a composite
//! board's dimensions as text); [`BoardSpec::from_columns`] reads them, and
//! is the only reader of those conventions. A store writing a new board
//! fills its older columns too (they are `NOT NULL`), with
//! [`RECORD_POLICY`] as the policy: a version from before the record
//! refuses to open such a board (an unknown policy is corruption to it)
//! instead of reading the defaults.

use crate::error::Error;

/// The record version this library writes, and the newest it reads.
pub(crate) const CATALOG_VERSION: u32 = 1;

/// What a store writes into its policy column for a board whose
/// configuration is its record: not a policy any version knows, so a
/// version from before the record refuses the board.
pub(crate) const RECORD_POLICY: &str = "see-record";

/// The stored names of a board made before policies and orders existed.
pub(crate) const DEFAULT_POLICY: &str = "replace";
/// See [`DEFAULT_POLICY`].
pub(crate) const DEFAULT_ORDER: &str = "higher_is_better";

/// The suffix older versions gave a split board's policy column:
/// `replace+trees=4`.
const TREES_TAG: &str = "+trees=";

/// A board's configuration as stored: the public `RankingConfig` without
/// its validation, which the ranking layer does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BoardSpec {
    pub min: i64,
    pub max: i64,
    pub branching: u32,
    pub shards: u32,
    pub queues: u32,
    /// The update policy's stored name (`replace`, `best`, `worst`,
    /// `increment`).
    pub policy: String,
    /// The score order's stored name (`higher_is_better`,
    /// `lower_is_better`).
    pub order: String,
    /// Most bytes of entry data per player; 0 keeps none, and such a board
    /// never reads or writes the players' `data` column, which its table
    /// may lack.
    pub entry_data: u32,
    /// A composite board's dimensions; empty for a single-dimension board.
    pub dims: Vec<DimSpec>,
    /// The trees a split board's players are spread over; 1 for a board
    /// of one tree (which each tree of a split board is).
    pub trees: u32,
    /// Buckets of an approximate board (`ranking/approx/`); 0 for an exact
    /// board.
    pub buckets: u32,
    /// Players an approximate board ranks exactly at the top of each
    /// snapshot (0: none).
    pub exact_top: u32,
}

/// One dimension of a composite board.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DimSpec {
    pub min: i64,
    pub max: i64,
    /// The stored name of its order, as [`BoardSpec::order`].
    pub order: String,
}

/// The columns of a board stored before the record: what
/// [`BoardSpec::from_columns`] reads.
#[derive(Debug, Clone, Default)]
pub(crate) struct Columns<'a> {
    pub min: i64,
    pub max: i64,
    pub branching: u32,
    pub shards: u32,
    pub queues: u32,
    /// `None` for a table from before policies, orders and entry data.
    pub policy: Option<&'a str>,
    pub order: Option<&'a str>,
    pub entry_data: u32,
    /// The dimensions' text (`h:0:10,l:-5:5`); empty for one score.
    pub dims: &'a str,
    pub buckets: u32,
    pub exact_top: u32,
}

/// Why a record describes no board this version can open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RecordError {
    /// A later version wrote it (its version).
    Later(u32),
    /// It is damaged, or not a record.
    Unreadable(String),
}

impl RecordError {
    /// The error a store returns for board `name`, whose configuration it
    /// read but [`BoardSpec::from_record`] or [`BoardSpec::from_columns`]
    /// could not.
    pub(crate) fn for_board(self, name: &str) -> Error {
        match self {
            RecordError::Later(version) => Error::UpgradeRequired {
                kind: "ranking",
                id: name.into(),
                version,
                supported: CATALOG_VERSION,
            },
            RecordError::Unreadable(reason) => Error::Corrupt {
                kind: "ranking",
                id: name.into(),
                field: "configuration".into(),
                reason,
            },
        }
    }
}

impl BoardSpec {
    /// The record a store keeps for this board.
    pub(crate) fn record(&self) -> String {
        let mut record = format!(
            "v{CATALOG_VERSION} min={} max={} branching={} shards={} queues={} policy={} \
             order={} entry_data={} trees={} buckets={} exact_top={}",
            self.min,
            self.max,
            self.branching,
            self.shards,
            self.queues,
            self.policy,
            self.order,
            self.entry_data,
            self.trees,
            self.buckets,
            self.exact_top,
        );
        if !self.dims.is_empty() {
            record.push_str(" dims=");
            record.push_str(&dims_text(&self.dims));
        }
        record
    }

    /// The board a record describes, or why it describes none: a version
    /// newer than this library's, or a record it cannot read.
    pub(crate) fn from_record(record: &str) -> Result<Self, RecordError> {
        let unreadable =
            || RecordError::Unreadable(format!("unreadable catalog record {record:?}"));
        let mut fields = record.split(' ');
        let version: u32 = fields
            .next()
            .and_then(|v| v.strip_prefix('v'))
            .and_then(|v| v.parse().ok())
            .ok_or_else(unreadable)?;
        if version > CATALOG_VERSION {
            return Err(RecordError::Later(version));
        }
        let mut spec = BoardSpec {
            min: 0,
            max: 0,
            branching: 0,
            shards: 0,
            queues: 0,
            policy: String::new(),
            order: String::new(),
            entry_data: 0,
            dims: Vec::new(),
            trees: 0,
            buckets: 0,
            exact_top: 0,
        };
        // Each key's bit, in the order `record` writes them.
        const KEYS: [&str; 12] = [
            "min",
            "max",
            "branching",
            "shards",
            "queues",
            "policy",
            "order",
            "entry_data",
            "trees",
            "buckets",
            "exact_top",
            "dims",
        ];
        let mut seen = 0u32;
        for field in fields {
            let (key, value) = field.split_once('=').ok_or_else(unreadable)?;
            let bit = KEYS.iter().position(|k| *k == key).ok_or_else(unreadable)?;
            if seen & (1 << bit) != 0 {
                return Err(unreadable());
            }
            seen |= 1 << bit;
            let number = || -> Result<i64, RecordError> { value.parse().map_err(|_| unreadable()) };
            let count = || u32::try_from(number()?).map_err(|_| unreadable());
            match key {
                "min" => spec.min = number()?,
                "max" => spec.max = number()?,
                "branching" => spec.branching = count()?,
                "shards" => spec.shards = count()?,
                "queues" => spec.queues = count()?,
                "policy" => spec.policy = value.into(),
                "order" => spec.order = value.into(),
                "entry_data" => spec.entry_data = count()?,
                "trees" => spec.trees = count()?,
                "buckets" => spec.buckets = count()?,
                "exact_top" => spec.exact_top = count()?,
                _ => spec.dims = dims_from_text(value).map_err(RecordError::Unreadable)?,
            }
        }
        // Every field but the dimensions is always written.
        let all = (1 << KEYS.len()) - 1;
        match seen | 1 << (KEYS.len() - 1) == all {
            true => Ok(spec),
            false => Err(unreadable()),
        }
    }

    /// The board an older version stored in columns, or why they make none.
    pub(crate) fn from_columns(columns: Columns<'_>) -> Result<Self, RecordError> {
        let mut policy = columns.policy.unwrap_or(DEFAULT_POLICY).to_owned();
        let trees = match policy.find(TREES_TAG) {
            None => 1,
            Some(at) => {
                let trees = policy[at + TREES_TAG.len()..].parse().map_err(|_| {
                    RecordError::Unreadable(format!("unknown update policy {policy:?}"))
                })?;
                policy.truncate(at);
                trees
            }
        };
        Ok(BoardSpec {
            min: columns.min,
            max: columns.max,
            branching: columns.branching,
            shards: columns.shards,
            queues: columns.queues,
            policy,
            order: columns.order.unwrap_or(DEFAULT_ORDER).to_owned(),
            entry_data: columns.entry_data,
            dims: dims_from_text(columns.dims).map_err(RecordError::Unreadable)?,
            trees,
            buckets: columns.buckets,
            exact_top: columns.exact_top,
        })
    }
}

/// The dimensions' text: `<order>:<min>:<max>` each, `,`-separated, the
/// order `h` (higher is better) or `l`.
pub(crate) fn dims_text(dims: &[DimSpec]) -> String {
    let parts: Vec<String> = dims
        .iter()
        .map(|d| {
            let order = match d.order.as_str() {
                DEFAULT_ORDER => 'h',
                _ => 'l',
            };
            format!("{order}:{}:{}", d.min, d.max)
        })
        .collect();
    parts.join(",")
}

/// The dimensions of a text [`dims_text`] wrote (empty: none).
pub(crate) fn dims_from_text(text: &str) -> Result<Vec<DimSpec>, String> {
    if text.is_empty() {
        return Ok(Vec::new());
    }
    let dim = |part: &str| -> Option<DimSpec> {
        let mut fields = part.splitn(3, ':');
        let order = match fields.next()? {
            "h" => DEFAULT_ORDER,
            "l" => "lower_is_better",
            _ => return None,
        };
        Some(DimSpec {
            min: fields.next()?.parse().ok()?,
            max: fields.next()?.parse().ok()?,
            order: order.into(),
        })
    };
    text.split(',')
        .map(|part| dim(part).ok_or_else(|| format!("unreadable dimensions {text:?}")))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split_composite() -> BoardSpec {
        BoardSpec {
            min: -5,
            max: i64::MAX,
            branching: 16,
            shards: 2,
            queues: 3,
            policy: "best".into(),
            order: "lower_is_better".into(),
            entry_data: 64,
            dims: vec![
                DimSpec {
                    min: -3,
                    max: 10,
                    order: "higher_is_better".into(),
                },
                DimSpec {
                    min: i64::MIN,
                    max: 0,
                    order: "lower_is_better".into(),
                },
            ],
            trees: 4,
            buckets: 0,
            exact_top: 0,
        }
    }

    #[test]
    fn a_record_reads_back_as_written() {
        let spec = split_composite();
        assert_eq!(BoardSpec::from_record(&spec.record()), Ok(spec.clone()));
        let plain = BoardSpec {
            dims: Vec::new(),
            trees: 1,
            buckets: 300,
            exact_top: 10,
            ..spec
        };
        assert!(!plain.record().contains("dims="));
        assert_eq!(BoardSpec::from_record(&plain.record()), Ok(plain));
        // A store may split records on `|` (Redis's registry).
        assert!(!split_composite().record().contains('|'));
    }

    #[test]
    fn a_later_version_is_refused_not_misread() {
        let record = split_composite().record().replacen("v1", "v2", 1);
        let refused = BoardSpec::from_record(&record).unwrap_err();
        assert_eq!(refused, RecordError::Later(2));
        let error = refused.for_board("b");
        assert!(
            matches!(
                error,
                Error::UpgradeRequired {
                    version: 2,
                    supported: 1,
                    ..
                }
            ),
            "{error}"
        );
        assert!(error.to_string().contains("upgrade autoshard"), "{error}");
    }

    #[test]
    fn damaged_records_are_refused() {
        let good = split_composite().record();
        let missing = good.replace(" trees=4", "");
        let repeated = format!("{good} trees=5");
        let unknown = format!("{good} colour=blue");
        let negative = good.replace("shards=2", "shards=-2");
        for bad in [
            "",
            "1 min=0",
            "vx min=0",
            &missing,
            &repeated,
            &unknown,
            &negative,
            &good.replace("dims=h:-3:10", "dims=q:-3:10"),
        ] {
            assert!(BoardSpec::from_record(bad).is_err(), "{bad:?}");
        }
        // Control: the unchanged record reads.
        assert!(BoardSpec::from_record(&good).is_ok());
    }

    #[test]
    fn older_columns_keep_their_conventions() {
        let columns = Columns {
            min: 0,
            max: 100,
            branching: 16,
            shards: 1,
            queues: 1,
            policy: Some("best+trees=4"),
            order: Some("lower_is_better"),
            dims: "h:0:10,l:-5:5",
            ..Columns::default()
        };
        let spec = BoardSpec::from_columns(columns.clone()).unwrap();
        assert_eq!((spec.policy.as_str(), spec.trees), ("best", 4));
        assert_eq!(dims_text(&spec.dims), "h:0:10,l:-5:5");
        let before_policies = Columns {
            policy: None,
            order: None,
            dims: "",
            ..columns.clone()
        };
        let spec = BoardSpec::from_columns(before_policies).unwrap();
        assert_eq!((spec.policy.as_str(), spec.trees), (DEFAULT_POLICY, 1));
        assert_eq!(spec.order, DEFAULT_ORDER);
        for (policy, dims) in [("best+trees=many", ""), ("best", "h:0"), ("best", "x:0:1")] {
            let bad = Columns {
                policy: Some(policy),
                dims,
                ..columns.clone()
            };
            assert!(BoardSpec::from_columns(bad).is_err(), "{policy} {dims}");
        }
    }
}
