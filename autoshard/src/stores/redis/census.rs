//! `stats::<T>()` on Redis Cluster: the seam's census, counted by walking
//! the kind's index.
//!
//! There is no snapshot across slots, so the counts are per entity: each
//! entity's document and buckets are read in one pipelined round per node
//! (as a load reads them), and the entities one batch after another. A
//! save running meanwhile may be counted with some of its pieces and not
//! others, as a load may see it. An entity whose insert died before it
//! joined the index is not counted (compaction does not see it either).
//!
//! A bucket entry carries no append time (stamping one would add a field to
//! every appended entry and the server's clock to every save script), so
//! `oldest_pending` stays `None` here.

use super::entities::{decode_id, index_page, rows_of, Entity};
use super::RedisCluster;
use crate::error::Result;
use crate::seam::{Census, FieldCensus, Kind};
use redis::cluster::cluster_pipe;
use std::collections::HashMap;

/// Entities read per pipelined batch: 13 keys each.
const BATCH: usize = 64;

pub(super) fn census(db: &RedisCluster, kind: &Kind) -> Result<Census> {
    let info = db.kind(kind)?;
    let mut conn = db.checkout()?;
    let index = info.keys.index();
    let mut census = Census {
        entities: 0,
        fields: vec![FieldCensus::default(); kind.fields.len()],
    };
    let mut start = "-".to_owned();
    loop {
        let ids = index_page(db, &mut conn, &index, &start, BATCH)?;
        let Some(last) = ids.last() else {
            return Ok(census);
        };
        start = format!("({last}");
        let entities: Vec<Entity> = ids
            .iter()
            .filter_map(|id| decode_id(id, info.key_kind))
            .map(|key| Entity::new(&info, key.as_key()))
            .collect();
        let read: Vec<HashMap<String, String>> = db.with_conn(&mut conn, |c| {
            let mut pipe = cluster_pipe();
            for entity in &entities {
                pipe.cmd("HGETALL").arg(&entity.document);
                for bucket in &entity.buckets {
                    pipe.cmd("HGETALL").arg(bucket);
                }
            }
            pipe.query(c)
        })?;
        for keys in read.chunks(1 + super::keys::BUCKETS) {
            // A deleted entity whose index entry is not removed yet.
            let Some(inc) = keys[0].get("inc") else {
                continue;
            };
            census.entities += 1;
            let mut seen = vec![false; kind.fields.len()];
            for (_, field, shard, _) in rows_of(kind, inc, &keys[1..]) {
                let counted = &mut census.fields[field];
                counted.rows += 1;
                let surplus_from = kind.fields[field].shards.map_or(i64::MAX, i64::from);
                counted.surplus += u64::from(shard >= surplus_from);
                seen[field] = true;
            }
            for (counted, seen) in census.fields.iter_mut().zip(seen) {
                counted.entities += u64::from(seen);
            }
        }
    }
}
