//! The entity operations of the seam on Redis Cluster: the mapper's plans
//! (`crate::mapper`) cut into single-slot pieces.

use super::keys::{self, KindKeys, BUCKETS};
use super::writes::owing;
use super::{Conn, RedisCluster};
use crate::entity::{Key, KeyKind};
use crate::error::{Error, Result};
use crate::naming::table_base;
use crate::seam::{
    BatchPlan, Census, EntityStore, InsertPlan, Kind, Resume, SavePlan, Stored, StoredKey,
};
use crate::stores::registry::KindTables;
use crate::value::Value;
use redis::cluster::{cluster_pipe, ClusterConnection};
use std::collections::HashMap;

/// What a handle keeps per kind.
pub(crate) struct KindInfo {
    pub keys: KindKeys,
    pub key_kind: KeyKind,
    /// Per field: whether its fold adds `i64`s, so a save can `HINCRBY`.
    pub sums: Vec<bool>,
}

impl KindTables for KindInfo {
    fn key_kind(&self) -> KeyKind {
        self.key_kind
    }
}

impl KindInfo {
    pub fn new(kind: &Kind, prefix: &str) -> Result<Self> {
        Ok(KindInfo {
            keys: KindKeys::new(prefix, table_base(kind.name)?),
            key_kind: kind.key_kind,
            sums: (0..kind.fields.len())
                .map(|i| kind.adds_integers(i))
                .collect(),
        })
    }
}

/// One entity's keys.
pub(super) struct Entity {
    pub home: u16,
    pub id: String,
    pub document: String,
    pub buckets: Vec<String>,
}

impl Entity {
    pub(super) fn new(info: &KindInfo, key: Key<'_>) -> Self {
        let home = keys::home_slot(&info.keys.base, key);
        let id = keys::encode_id(key);
        Entity {
            home,
            document: info.keys.document(home, &id),
            buckets: (0..BUCKETS)
                .map(|b| info.keys.bucket(home, b, &id))
                .collect(),
            id,
        }
    }

    pub(super) fn bucket_slot(&self, bucket: usize) -> u16 {
        keys::bucket_slot(self.home, bucket)
    }

    /// The intent tables of the entity's slots (its home slot is bucket
    /// 0's).
    pub(super) fn intent_tables(&self, info: &KindInfo) -> Vec<String> {
        (0..BUCKETS)
            .map(|b| info.keys.intents(self.bucket_slot(b)))
            .collect()
    }
}

/// A stored value as a hash field's value: integers in decimal (so
/// `HINCRBY` works on them), floats as `f<shortest round-trip form>`, JSON
/// as `j<text>`.
pub(crate) fn encode(value: &Value) -> String {
    match value {
        Value::Integer(i) => i.to_string(),
        Value::Real(f) => format!("f{f}"),
        Value::Text(s) => format!("j{s}"),
    }
}

pub(crate) fn decode(stored: &str) -> Result<Value, String> {
    match stored.as_bytes().first() {
        Some(b'-' | b'0'..=b'9') => stored
            .parse()
            .map(Value::Integer)
            .map_err(|e| format!("bad integer {stored:?}: {e}")),
        Some(b'f') => stored[1..]
            .parse()
            .map(Value::Real)
            .map_err(|e| format!("bad float {stored:?}: {e}")),
        Some(b'j') => Ok(Value::Text(stored[1..].to_owned())),
        _ => Err(format!("unknown value encoding {stored:?}")),
    }
}

pub(super) fn gone(kind: &Kind, key: Key<'_>) -> Error {
    kind.not_found(key)
}

/// The entity a save writes into: its keys, its id, and the incarnation
/// its pieces must find (empty: any, for a kind without a `Pending`).
pub(super) struct Target<'a> {
    pub info: &'a KindInfo,
    pub entity: &'a Entity,
    pub key: Key<'a>,
    pub inc: &'a str,
}

/// The document and the buckets of one entity, read in one pipelined
/// round per node.
type Read = (HashMap<String, String>, Vec<HashMap<String, String>>);

fn read_entity(c: &mut ClusterConnection, entity: &Entity) -> redis::RedisResult<Read> {
    let mut pipe = cluster_pipe();
    pipe.cmd("HGETALL").arg(&entity.document);
    for bucket in &entity.buckets {
        pipe.cmd("HGETALL").arg(bucket);
    }
    let mut all: Vec<HashMap<String, String>> = pipe.query(c)?;
    let buckets = all.split_off(1);
    Ok((all.pop().unwrap_or_default(), buckets))
}

/// The shard rows of declared fields in the buckets of incarnation `inc`
/// (buckets of an earlier incarnation, not yet replaced, are skipped).
pub(super) fn rows_of<'a>(
    kind: &'a Kind,
    inc: &'a str,
    buckets: &'a [HashMap<String, String>],
) -> impl Iterator<Item = (usize, usize, i64, &'a String)> + 'a {
    buckets
        .iter()
        .enumerate()
        .filter(move |(_, b)| b.get("~").map(String::as_str) == Some(inc))
        .flat_map(move |(bucket, b)| {
            b.iter().filter_map(move |(name, value)| {
                let (field, shard) = keys::parse_row_field(name)?;
                Some((bucket, kind.field_index(field)?, shard, value))
            })
        })
}

impl EntityStore for RedisCluster {
    // No automatic shard counts yet (the default refuses them): the count
    // would live in the entity's slot, be read by the save script and
    // lowered by `compact_entity` (docs/design/auto-shards.md, "Automatic shard
    // counts"). No queries either.
    fn store_name(&self) -> &'static str {
        "redis-cluster"
    }

    // A save's board writes follow its pieces, each exactly once under
    // an operation id reserved for it (`ranked.rs`).
    fn ranked_boards(&self) -> Result<()> {
        Ok(())
    }

    fn insert(&self, kind: &Kind, key: Key<'_>, plan: &InsertPlan) -> Result<()> {
        let info = self.kind(kind)?;
        let mut conn = self.checkout()?;
        let outcome = self.insert_on(&mut conn, &info, kind, key, plan);
        owing(&mut conn, kind, outcome.is_err());
        outcome
    }

    fn load(&self, kind: &Kind, key: Key<'_>) -> Result<Option<Stored>> {
        let info = self.kind(kind)?;
        let entity = Entity::new(&info, key);
        let mut conn = self.checkout()?;
        let (mut document, buckets) = self.with_conn(&mut conn, |c| read_entity(c, &entity))?;
        let (Some(doc), Some(inc)) = (document.remove("doc"), document.remove("inc")) else {
            return Ok(None);
        };
        let rows = rows_of(kind, &inc, &buckets)
            .map(|(_, index, _, value)| (index, decode(value)))
            .collect();
        Ok(Some(Stored {
            document: doc,
            // Written from `InsertPlan::incarnation`; an entity stored
            // before that has an unnumbered one, as the SQL stores' 0.
            incarnation: inc.parse().unwrap_or(0),
            rows,
        }))
    }

    fn save(&self, kind: &Kind, key: Key<'_>, plan: &SavePlan) -> Result<u32> {
        let info = self.kind(kind)?;
        let mut conn = self.checkout()?;
        let outcome = self.save_on(&mut conn, &info, kind, key, plan);
        owing(&mut conn, kind, outcome.is_err());
        outcome
    }

    fn delete(&self, kind: &Kind, key: Key<'_>) -> Result<bool> {
        let info = self.kind(kind)?;
        let mut conn = self.checkout()?;
        let outcome = self.delete_on(&mut conn, &info, kind, key);
        owing(&mut conn, kind, outcome.is_err());
        outcome
    }

    fn compact_batch(&self, kind: &Kind, from: &Resume) -> Result<BatchPlan> {
        super::compaction::compact_batch(self, kind, from)
    }

    fn census(&self, kind: &Kind) -> Result<Census> {
        super::census::census(self, kind)
    }

    fn shard_count(&self, kind: &Kind, key: Key<'_>, field: &str) -> Result<u64> {
        let info = self.kind(kind)?;
        let entity = Entity::new(&info, key);
        let mut conn = self.checkout()?;
        let (document, buckets) = self.with_conn(&mut conn, |c| read_entity(c, &entity))?;
        let Some(inc) = document.get("inc") else {
            return Err(gone(kind, key));
        };
        let index = kind.field_index(field);
        Ok(rows_of(kind, inc, &buckets)
            .filter(|(_, i, _, _)| Some(*i) == index)
            .count() as u64)
    }
}

/// Up to `n` ids of the kind's index from `start` on (a `ZRANGEBYLEX`
/// bound: `-`, or `(id` for after `id`), in byte order.
pub(super) fn index_page(
    db: &RedisCluster,
    conn: &mut Conn,
    index: &str,
    start: &str,
    n: usize,
) -> Result<Vec<String>> {
    db.with_conn(conn, |c| {
        redis::cmd("ZRANGEBYLEX")
            .arg(index)
            .arg(start)
            .arg("+")
            .arg("LIMIT")
            .arg(0)
            .arg(n)
            .query(c)
    })
}

/// An index member back as a key (`None` for a member of the other id
/// type, which the registry makes impossible).
pub(super) fn decode_id(id: &str, kind: KeyKind) -> Option<StoredKey> {
    match (kind, id.split_at_checked(1)?) {
        (KeyKind::Int, ("i", n)) => n.parse().ok().map(StoredKey::Int),
        (KeyKind::Text, ("s", s)) => Some(StoredKey::Text(s.to_owned())),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip_and_integers_stay_plain() {
        for value in [
            Value::Integer(-42),
            Value::Integer(i64::MAX),
            Value::Real(0.1),
            Value::Real(-1e300),
            Value::Real(3.0),
            Value::Text("[1,2]".into()),
            Value::Text("\"5\"".into()),
        ] {
            assert_eq!(decode(&encode(&value)).unwrap(), value);
        }
        assert_eq!(encode(&Value::Integer(7)), "7");
        assert!(decode("x").is_err());
    }
}
