//! Compaction on Redis Cluster: the kind's index walked in byte order, each
//! entity's buckets folded one by one, each fold one script on the
//! bucket's slot that deletes exactly the rows it folded (docs/design/store-redis.md,
//! "What each operation does").

use super::entities::{decode, decode_id, encode, index_page, Entity, KindInfo};
use super::keys::{self, BUCKETS};
use super::{scripts, Conn, Piece, RedisCluster, Reply};
use crate::error::{Error, Result};
use crate::seam::{BatchPlan, CompactionStats, Resume};
use crate::seam::{Kind, StoredKey};
use crate::trace;
use redis::cluster::cluster_pipe;
use std::collections::HashMap;

pub(super) fn compact_batch(db: &RedisCluster, kind: &Kind, from: &Resume) -> Result<BatchPlan> {
    let started = std::time::Instant::now();
    let info = db.kind(kind)?;
    let mut conn = db.checkout()?;
    let index = info.keys.index();
    let max_rows = db.options().compaction_batch_rows as u64;
    let mut stats = CompactionStats::default();
    let mut skipped = Vec::new();
    let mut start = match from {
        Resume::Done => {
            // A pass starts by paying the entity board writes that crashed
            // writers owe (`ranked.rs`).
            db.recover_intents(kind)?;
            "-".to_owned()
        }
        Resume::After(key) | Resume::At(key) => format!("({}", keys::encode_id(key.as_key())),
    };
    loop {
        let ids = index_page(db, &mut conn, &index, &start, 64)?;
        let Some(last) = ids.last() else {
            return Ok(BatchPlan {
                stats,
                plans: Vec::new(),
                skipped,
                resume: Resume::Done,
                started,
            });
        };
        start = format!("({last}");
        for id in &ids {
            let Some(stored) = decode_id(id, info.key_kind) else {
                continue;
            };
            db.compact_entity(&mut conn, kind, &info, &stored, &mut stats, &mut skipped)?;
            if stats.rows_scanned >= max_rows {
                return Ok(BatchPlan {
                    stats,
                    plans: Vec::new(),
                    skipped,
                    resume: Resume::After(stored),
                    started,
                });
            }
        }
    }
}

/// What compaction does to one field's rows in one bucket.
struct BucketPlan {
    index: usize,
    target: i64,
    /// The target's value as read, if it was there.
    target_value: Option<String>,
    /// Rows folded into the target and deleted, with their values as read.
    removed: Vec<(i64, String)>,
}

/// Plans one bucket: a dynamic field's rows fold into its lowest row; a
/// static field's rows at or above `shards` fold into the bucket's lowest
/// shard below `shards` (shard number `bucket`), or, in a bucket that
/// holds no shard below `shards`, into the lowest of them.
fn plan_bucket(kind: &Kind, bucket: usize, rows: &[(usize, i64, &String)]) -> Vec<BucketPlan> {
    let mut plans = Vec::new();
    for (index, spec) in kind.fields.iter().enumerate() {
        let mut group: Vec<(i64, &String)> = rows
            .iter()
            .filter(|(i, _, _)| *i == index)
            .map(|(_, s, v)| (*s, *v))
            .collect();
        group.sort();
        let (target, removed): (i64, Vec<(i64, String)>) = match spec.shards {
            None if group.len() > 1 => (
                group[0].0,
                group[1..].iter().map(|(s, v)| (*s, (*v).clone())).collect(),
            ),
            None => continue,
            Some(n) => {
                let n = i64::from(n);
                let surplus: Vec<(i64, String)> = group
                    .iter()
                    .filter(|(s, _)| *s >= n)
                    .map(|(s, v)| (*s, (*v).clone()))
                    .collect();
                let home = bucket as i64;
                if surplus.is_empty() {
                    continue;
                } else if home < n {
                    (home, surplus)
                } else if surplus.len() > 1 {
                    (surplus[0].0, surplus[1..].to_vec())
                } else {
                    continue;
                }
            }
        };
        let target_value = group
            .iter()
            .find(|(s, _)| *s == target)
            .map(|(_, v)| (*v).clone());
        plans.push(BucketPlan {
            index,
            target,
            target_value,
            removed,
        });
    }
    plans
}

impl RedisCluster {
    /// Compacts every bucket of one entity, each bucket's fold one script.
    /// A bucket's group that does not fold (a corrupt row, a total out of
    /// the field's range) is left as it is and added to `skipped`: per
    /// bucket, because that is the unit a fold here is atomic over.
    fn compact_entity(
        &self,
        conn: &mut Conn,
        kind: &Kind,
        info: &KindInfo,
        stored: &StoredKey,
        stats: &mut CompactionStats,
        skipped: &mut Vec<(StoredKey, &'static str, Error)>,
    ) -> Result<()> {
        let key = stored.as_key();
        let entity = Entity::new(info, key);
        let max = self.options().max_attempts;
        let mut compacted = false;
        let mut counted = false;
        for bucket in 0..BUCKETS {
            for attempt in 1..=max {
                let (inc, read): (Option<String>, HashMap<String, String>) =
                    self.with_conn(conn, |c| {
                        let mut pipe = cluster_pipe();
                        pipe.cmd("HGET").arg(&entity.document).arg("inc");
                        pipe.cmd("HGETALL").arg(&entity.buckets[bucket]);
                        pipe.query(c)
                    })?;
                let Some(inc) = inc else {
                    // Deleted meanwhile: nothing left to fold.
                    return Ok(());
                };
                if read.get("~") != Some(&inc) {
                    break;
                }
                let all: Vec<(&str, i64, &String)> = read
                    .iter()
                    .filter_map(|(name, v)| {
                        let (field, shard) = keys::parse_row_field(name)?;
                        Some((field, shard, v))
                    })
                    .collect();
                let rows: Vec<(usize, i64, &String)> = all
                    .iter()
                    .filter_map(|(f, s, v)| Some((kind.field_index(f)?, *s, *v)))
                    .collect();
                if attempt == 1 {
                    stats.rows_scanned += all.len() as u64;
                    if !all.is_empty() && !counted {
                        stats.entities_visited += 1;
                        counted = true;
                    }
                }
                let plans = plan_bucket(kind, bucket, &rows);
                if plans.is_empty() {
                    break;
                }
                let mut conflict = false;
                for plan in &plans {
                    let spec = &kind.fields[plan.index];
                    let value = plan
                        .target_value
                        .iter()
                        .chain(plan.removed.iter().map(|(_, v)| v))
                        .map(|v| decode(v).map_err(|r| kind.corrupt(&key, spec.name, r)))
                        .collect::<Result<Vec<_>>>()
                        .and_then(|values| kind.fold(&key, plan.index, &mut values.into_iter()));
                    let value = match value {
                        Ok(value) => value,
                        Err(e) => {
                            // A retried bucket meets the same group again.
                            if attempt == 1 {
                                skipped.push((stored.clone(), spec.name, e));
                            }
                            continue;
                        }
                    };
                    let mut args = vec![inc.clone(), keys::row_field(spec.name, plan.target)];
                    for (shard, v) in &plan.removed {
                        args.push(keys::row_field(spec.name, *shard));
                        args.push(v.clone());
                    }
                    args.push(
                        if plan.target_value.is_some() {
                            "1"
                        } else {
                            "0"
                        }
                        .into(),
                    );
                    args.push(plan.target_value.clone().unwrap_or_default());
                    args.push(encode(&value));
                    let piece = Piece {
                        script: scripts::compact(),
                        key: &entity.buckets[bucket],
                        slot: entity.bucket_slot(bucket),
                        binary: Vec::new(),
                        more_keys: &[],
                        args,
                    };
                    let id = self.next_seq(conn);
                    match self.run(conn, &piece, id)? {
                        Reply::Gone => return Ok(()),
                        Reply::Conflict => {
                            conflict = true;
                            break;
                        }
                        _ => {
                            stats.rows_merged += plan.removed.len() as u64;
                            compacted = true;
                        }
                    }
                }
                if !conflict {
                    break;
                }
                if attempt == max {
                    return Err(Error::Conflict { attempts: max });
                }
                let _retry = trace::retry!(
                    store = "redis",
                    attempt,
                    error = "a row changed during its fold"
                );
                super::backoff(attempt);
            }
        }
        if compacted {
            stats.entities_compacted += 1;
        }
        Ok(())
    }
}
