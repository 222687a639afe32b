//! What [`Store::stats`](crate::Store::stats) reports: how many entities a
//! kind has, how many shard rows each sharded field keeps, and how many of
//! them compaction would fold, so an operator can see dynamic rows pile up
//! and a compactor keep up.
//!
//! A store counts (`seam::Census`, one read snapshot); what the counts mean
//! is decided here, the same for every store.

use crate::error::Result;
use crate::seam::compaction::counts::AutoStats;
use crate::seam::{Census, EntityStore, Kind};
use std::time::Duration;

/// The shard rows of one kind, as [`Store::stats`](crate::Store::stats)
/// counted them in one snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct KindStats {
    /// The stored kind.
    pub kind: &'static str,
    /// Entities stored.
    pub entities: u64,
    /// One entry per sharded field, in declaration order.
    pub fields: Vec<FieldStats>,
}

/// The shard rows of one sharded field, over all entities of its kind.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct FieldStats {
    /// The field's name.
    pub name: &'static str,
    /// `shards = N` of a static field (`HIGH` of an automatic one); `None`
    /// for a dynamic one.
    pub shards: Option<u32>,
    /// Shard rows stored.
    pub rows: u64,
    /// Entities with at least one row of the field.
    pub entities: u64,
    /// Rows that compaction would fold away now: a dynamic field's rows
    /// beyond one per entity (one per save since the entity was last
    /// compacted), a static field's rows numbered `N` or above, an
    /// automatic field's rows numbered at or above their entity's count.
    pub pending: u64,
    /// How long ago the oldest of the `pending` rows was appended, by the
    /// database's clock: how far compaction lags. Only appends (a dynamic
    /// field's saves) stamp a row, so `None` when nothing is pending, when
    /// the pending rows predate the append-time column (a database made by
    /// an older autoshard), on Redis Cluster (its rows carry no time), and
    /// for a static or automatic field whose surplus rows were written in
    /// place (left by a lowered shard count, not by saves waiting to be
    /// folded); rows the field appended while it was dynamic keep their
    /// age.
    pub oldest_pending: Option<Duration>,
    /// For `shards = LOW..=HIGH`: how many entities have which count, and
    /// why; counted in a second snapshot, just after the first.
    pub automatic: Option<AutoStats>,
}

impl KindStats {
    /// The sharded field `name`, if the kind declares it.
    pub fn field(&self, name: &str) -> Option<&FieldStats> {
        self.fields.iter().find(|f| f.name == name)
    }

    /// Rows that compaction would fold away now, over all fields.
    pub fn pending(&self) -> u64 {
        self.fields.iter().map(|f| f.pending).sum()
    }

    /// The oldest pending row's age over all fields; see
    /// [`FieldStats::oldest_pending`].
    pub fn oldest_pending(&self) -> Option<Duration> {
        self.fields.iter().filter_map(|f| f.oldest_pending).max()
    }

    pub(crate) fn new(kind: &Kind, census: Census) -> Self {
        let fields = kind
            .fields
            .iter()
            .zip(census.fields)
            .map(|(spec, counted)| FieldStats {
                name: spec.name,
                shards: spec.shards,
                rows: counted.rows,
                entities: counted.entities,
                pending: match spec.shards {
                    Some(_) => counted.surplus,
                    None => counted.rows - counted.entities,
                },
                oldest_pending: counted.oldest_pending,
                automatic: None,
            })
            .collect();
        KindStats {
            kind: kind.name,
            entities: census.entities,
            fields,
        }
    }
}

/// Fills in the automatic fields of `stats` from the store's counts.
pub(crate) fn add_auto(stats: &mut KindStats, kind: &Kind, store: &dyn EntityStore) -> Result<()> {
    for (index, spec) in kind.fields.iter().enumerate() {
        if spec.auto_range().is_none() {
            continue;
        }
        let census = store.auto_census(kind, index)?;
        let field = &mut stats.fields[index];
        field.pending = census.surplus;
        field.automatic = Some(census.stats(spec));
    }
    Ok(())
}

impl std::fmt::Display for KindStats {
    /// One line per field: `votes (static, 10 shards): 160 rows on 16 entities, 0 pending`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {} entities", self.kind, self.entities)?;
        for field in &self.fields {
            let sharding = match (&field.automatic, field.shards) {
                (Some(auto), _) => {
                    let counts: Vec<String> = auto
                        .counts
                        .iter()
                        .map(|(n, e)| format!("{n}×{e}"))
                        .collect();
                    format!(
                        "automatic, {}..={} shards, counts {}",
                        auto.low,
                        auto.high,
                        counts.join(" ")
                    )
                }
                (None, Some(n)) => format!("static, {n} shards"),
                (None, None) => "dynamic".to_owned(),
            };
            write!(
                f,
                "\n  {} ({sharding}): {} rows on {} entities, {} pending compaction",
                field.name, field.rows, field.entities, field.pending
            )?;
            if let Some(age) = field.oldest_pending {
                write!(f, ", oldest {:.1} s ago", age.as_secs_f64())?;
            }
        }
        Ok(())
    }
}
