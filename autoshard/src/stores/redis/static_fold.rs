//! A save's static deltas on Redis Cluster: each folded into its shard's
//! row by one piece, `HINCRBY` for a sum, else read, fold in Rust and
//! compare-and-set; and the dry run that finds a fold's error before a
//! save writes anything.

use super::entities::{decode, encode, gone, Entity, Target};
use super::keys;
use super::{scripts, Conn, Piece, RedisCluster, Reply};
use crate::entity::Key;
use crate::error::{Error, Result};
use crate::seam::Kind;
use crate::trace;
use crate::value::Value;
use redis::cluster::cluster_pipe;

impl RedisCluster {
    /// Folds each delta into its shard's row as read now, in one pipelined
    /// read, so that a fold error is found before a save writes anything.
    pub(super) fn dry_run(
        &self,
        conn: &mut Conn,
        kind: &Kind,
        entity: &Entity,
        key: Key<'_>,
        statics: &[(&crate::seam::Delta, i64)],
    ) -> Result<()> {
        let stored: Vec<Option<String>> = self.with_conn(conn, |c| {
            let mut pipe = cluster_pipe();
            for (delta, shard) in statics {
                pipe.cmd("HGET")
                    .arg(&entity.buckets[keys::static_bucket(*shard)])
                    .arg(keys::row_field(delta.spec.name, *shard));
            }
            pipe.query(c)
        })?;
        for ((delta, _), stored) in statics.iter().zip(stored) {
            let value = stored
                .as_deref()
                .map(|s| decode(s).map_err(|r| kind.corrupt(&key, delta.spec.name, r)))
                .transpose()?;
            kind.fold_delta(&key, delta.index, value, &delta.value)?;
        }
        Ok(())
    }

    /// Folds `delta` into static shard `shard`: `HINCRBY` for a field
    /// whose fold adds integers, else read, fold in Rust and
    /// compare-and-set, retried on conflict. Returns the attempts made.
    pub(super) fn fold_static(
        &self,
        conn: &mut Conn,
        kind: &Kind,
        target: &Target<'_>,
        delta: &crate::seam::Delta,
        shard: i64,
        intent: &Option<(String, [String; 2])>,
    ) -> Result<u32> {
        let (entity, key) = (target.entity, target.key);
        let (table, intent) = intent.clone().unzip();
        let bucket = keys::static_bucket(shard);
        let bucket_key = &entity.buckets[bucket];
        let slot = entity.bucket_slot(bucket);
        let row = keys::row_field(delta.spec.name, shard);
        // One operation id for the delta, kept across compare-and-set
        // retries: a retry after a lost reply must be recognised as the
        // same piece.
        let id = self.next_seq(conn);
        if let (true, Value::Integer(add)) = (target.info.sums[delta.index], &delta.value) {
            let piece = Piece {
                script: scripts::add(),
                key: bucket_key,
                slot,
                binary: Vec::new(),
                more_keys: table.as_slice(),
                args: [row.clone(), add.to_string(), target.inc.to_owned()]
                    .into_iter()
                    .chain(intent.iter().flatten().cloned())
                    .collect(),
            };
            match self.run(conn, &piece, id)? {
                Reply::Gone => return Err(gone(kind, key)),
                reply if reply.applied() => return Ok(1),
                // Not an integer there, or the sum leaves i64: fold in
                // Rust, which does whatever the user's fold does there.
                _ => {}
            }
        }
        let max = self.options().max_attempts;
        for attempt in 1..=max {
            let stored: Option<String> = self.with_conn(conn, |c| {
                redis::cmd("HGET").arg(bucket_key).arg(&row).query(c)
            })?;
            let value = stored
                .as_deref()
                .map(|s| decode(s).map_err(|r| kind.corrupt(&key, delta.spec.name, r)))
                .transpose()?;
            let new = kind.fold_delta(&key, delta.index, value, &delta.value)?;
            let piece = Piece {
                script: scripts::compare_and_set(),
                key: bucket_key,
                slot,
                binary: Vec::new(),
                more_keys: table.as_slice(),
                args: [
                    row.clone(),
                    if stored.is_some() { "1" } else { "0" }.to_owned(),
                    stored.unwrap_or_default(),
                    encode(&new),
                    target.inc.to_owned(),
                ]
                .into_iter()
                .chain(intent.iter().flatten().cloned())
                .collect(),
            };
            match self.run(conn, &piece, id)? {
                Reply::Gone => return Err(gone(kind, key)),
                Reply::Conflict => {
                    let _retry = trace::retry!(
                        store = "redis",
                        attempt,
                        error = "the row changed between its read and its write"
                    );
                    super::backoff(attempt)
                }
                _ => return Ok(attempt),
            }
        }
        Err(Error::Conflict { attempts: max })
    }
}
