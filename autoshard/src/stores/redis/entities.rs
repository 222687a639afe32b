//! The entity operations of the seam on Redis Cluster: the mapper's plans
//! (`crate::mapper`) cut into single-slot pieces.

use super::keys::{self, KindKeys, BUCKETS};
use super::ranked::Intents;
use super::{scripts, Conn, Piece, RedisCluster, Reply};
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
    home: u16,
    id: String,
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
    fn intent_tables(&self, info: &KindInfo) -> Vec<String> {
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
        let entity = Entity::new(&info, key);
        let inc = plan.incarnation.to_string();
        let mut rows: Vec<Vec<String>> = vec![Vec::new(); BUCKETS];
        for (field, shard, value) in &plan.rows {
            let bucket = match kind.fields.iter().find(|f| f.name == *field) {
                Some(spec) if spec.shards.is_some() => keys::static_bucket(*shard),
                _ => 0,
            };
            rows[bucket].push(keys::row_field(field, *shard));
            rows[bucket].push(encode(value));
        }
        let mut conn = self.checkout()?;
        if kind.has_ranked() {
            let player = crate::seam::entity_player(key);
            self.settle_entity(&mut conn, kind, &entity.intent_tables(&info), &player)?;
            self.check_boards(&mut conn, kind, &plan.boards)?;
        }
        // The document and each bucket take an id.
        let mut owed = Intents::reserve(&conn, 1 + BUCKETS);
        let mut intents: Vec<Vec<String>> = vec![Vec::new(); BUCKETS];
        for write in &plan.boards {
            // The intent goes with the piece of the field's initial row.
            let bucket = plan
                .rows
                .iter()
                .find(|(field, _, _)| {
                    kind.field_index(field).and_then(|i| kind.board_of(i)) == Some(write.board)
                })
                .and_then(|(field, shard, _)| {
                    let spec = kind.fields.iter().find(|f| f.name == *field)?;
                    Some(spec.shards.map_or(0, |_| keys::static_bucket(*shard)))
                })
                .unwrap_or(0);
            let (_, args) = owed.owe(&info.keys, entity.bucket_slot(bucket), write.clone());
            intents[bucket].extend(args);
        }
        let doc = Piece {
            script: scripts::insert_document(),
            key: &entity.document,
            slot: entity.home,
            binary: Vec::new(),
            more_keys: &[],
            args: vec![plan.document.clone(), inc.clone()],
        };
        let id = self.next_seq(&mut conn);
        if self.run(&mut conn, &doc, id)? == Reply::Exists {
            return Err(Error::AlreadyExists {
                kind: kind.name,
                id: key.to_string(),
            });
        }
        for (bucket, (rows, intents)) in rows.into_iter().zip(intents).enumerate() {
            let mut args = vec![inc.clone(), (intents.len() / 2).to_string()];
            args.extend(intents);
            args.extend(rows);
            let table = [info.keys.intents(entity.bucket_slot(bucket))];
            let piece = Piece {
                script: scripts::insert_bucket(),
                key: &entity.buckets[bucket],
                slot: entity.bucket_slot(bucket),
                binary: Vec::new(),
                more_keys: &table,
                args,
            };
            let id = self.next_seq(&mut conn);
            self.run(&mut conn, &piece, id)?;
        }
        let index = info.keys.index();
        self.with_conn(&mut conn, |c| {
            redis::cmd("ZADD")
                .arg(&index)
                .arg(0)
                .arg(&entity.id)
                .query::<()>(c)
        })?;
        self.pay(&mut conn, kind, owed)
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
        let entity = Entity::new(&info, key);
        let mut conn = self.checkout()?;
        let mut applied = Vec::new();
        let mut attempts = 1;
        let mut step = |what: &str, outcome: Result<u32>| {
            match outcome {
                Ok(n) => {
                    attempts = attempts.max(n);
                    applied.push(what.to_owned());
                    Ok(())
                }
                // Nothing of the save was applied yet: the object keeps
                // its deltas and the error is the plain one.
                Err(e) if applied.is_empty() => Err(e),
                // The entity went away under a save: its earlier pieces
                // went with it.
                Err(e @ Error::NotFound { .. }) => Err(e),
                Err(e) => Err(Error::InDoubt {
                    writer: 0,
                    seq: 0,
                    source: format!(
                        "save partly applied (done: {}; then {what} failed: {e})",
                        applied.join(", ")
                    )
                    .into(),
                }),
            }
        };
        // Pieces that can fail on the data (a fold's error, a
        // compare-and-set that keeps losing) go first, and with more than
        // one of them their folds are tried on the rows as read before
        // anything is written: a save then fails whole in all but a race
        // with a concurrent writer. The document, which only fails if the
        // entity is gone, goes last.
        let statics: Vec<(&crate::seam::Delta, i64)> = plan
            .deltas
            .iter()
            .filter_map(|d| Some((d, crate::seam::pick_shard(d.spec.shards?))))
            .collect();
        if statics.len() > 1 {
            self.dry_run(&mut conn, kind, &entity, key, &statics)?;
        }
        if kind.has_ranked() {
            self.check_boards(&mut conn, kind, &plan.boards)?;
        }
        // Each delta and the document take an id.
        let mut owed = Intents::reserve(&conn, plan.deltas.len() + 1);
        let mut owe = |delta: &crate::seam::Delta, slot: u16| {
            let board = kind.board_of(delta.index)?;
            let write = plan.boards.iter().find(|w| w.board == board)?;
            Some(owed.owe(&info.keys, slot, write.clone()))
        };
        // Every piece checks it: a save may write no document, and each
        // bucket knows the incarnation it belongs to (`~`).
        let inc = plan.incarnation.map(|i| i.to_string()).unwrap_or_default();
        let target = Target {
            info: &info,
            entity: &entity,
            key,
            inc: &inc,
        };
        for (delta, shard) in &statics {
            let intent = owe(delta, entity.bucket_slot(keys::static_bucket(*shard)));
            let outcome = self.fold_static(&mut conn, kind, &target, delta, *shard, &intent);
            step(delta.spec.name, outcome)?;
        }
        for delta in plan.deltas.iter().filter(|d| d.spec.shards.is_none()) {
            let bucket = crate::random::range(..BUCKETS);
            let (table, intent) = owe(delta, entity.bucket_slot(bucket)).unzip();
            let mut args = vec![
                delta.spec.name.to_owned(),
                encode(&delta.value),
                bucket.to_string(),
                inc.clone(),
            ];
            args.extend(intent.into_iter().flatten());
            let piece = Piece {
                script: scripts::append(),
                key: &entity.buckets[bucket],
                slot: entity.bucket_slot(bucket),
                binary: Vec::new(),
                more_keys: table.as_slice(),
                args,
            };
            let id = self.next_seq(&mut conn);
            let outcome = match self.run(&mut conn, &piece, id) {
                Ok(Reply::Gone) => Err(gone(kind, key)),
                Ok(_) => Ok(1),
                Err(e) => Err(e),
            };
            step(delta.spec.name, outcome)?;
        }
        if plan.document_changed {
            let piece = Piece {
                script: scripts::write_document(),
                key: &entity.document,
                slot: entity.home,
                binary: Vec::new(),
                more_keys: &[],
                args: vec![plan.document.clone(), inc.clone()],
            };
            let id = self.next_seq(&mut conn);
            let outcome = match self.run(&mut conn, &piece, id) {
                Ok(Reply::Gone) => Err(gone(kind, key)),
                Ok(_) => Ok(1),
                Err(e) => Err(e),
            };
            step("the document", outcome)?;
        }
        let outcome = self.pay(&mut conn, kind, owed).map(|()| 1);
        step("the board writes", outcome)?;
        Ok(attempts)
    }

    fn delete(&self, kind: &Kind, key: Key<'_>) -> Result<bool> {
        let info = self.kind(kind)?;
        let entity = Entity::new(&info, key);
        let removals = kind.board_removals(key);
        let mut conn = self.checkout()?;
        if kind.has_ranked() {
            let player = crate::seam::entity_player(key);
            self.settle_entity(&mut conn, kind, &entity.intent_tables(&info), &player)?;
            self.check_boards(&mut conn, kind, &removals)?;
        }
        let mut owed = Intents::reserve(&conn, 0);
        let mut intents = Vec::new();
        for write in removals {
            intents.extend(owed.owe(&info.keys, entity.home, write).1);
        }
        let table = info.keys.intents(entity.home);
        // The document first, with the board removals it owes: from then
        // on loads see no entity and saves find it gone. Buckets are
        // removed only if they belong to the incarnation deleted here (a
        // concurrent re-insert may own them).
        let inc: Option<String> = self.with_conn(&mut conn, |c| {
            delete_document()
                .key(&entity.document)
                .key(&table)
                .arg(&intents)
                .invoke(c)
        })?;
        let Some(inc) = inc else {
            return Ok(false);
        };
        for bucket in &entity.buckets {
            self.with_conn(&mut conn, |c| {
                delete_bucket().key(bucket).arg(&inc).invoke::<i64>(c)
            })?;
        }
        let index = info.keys.index();
        self.with_conn(&mut conn, |c| {
            redis::cmd("ZREM")
                .arg(&index)
                .arg(&entity.id)
                .query::<i64>(c)
        })?;
        self.pay(&mut conn, kind, owed)?;
        Ok(true)
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

fn delete_document() -> &'static redis::Script {
    static S: std::sync::OnceLock<redis::Script> = std::sync::OnceLock::new();
    S.get_or_init(|| {
        redis::Script::new(
            "local inc = redis.call('HGET', KEYS[1], 'inc') \
             redis.call('DEL', KEYS[1]) \
             if inc then for i = 1, #ARGV, 2 do \
               redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1]) end end \
             return inc",
        )
    })
}

fn delete_bucket() -> &'static redis::Script {
    static S: std::sync::OnceLock<redis::Script> = std::sync::OnceLock::new();
    S.get_or_init(|| {
        redis::Script::new(
            "if redis.call('HGET', KEYS[1], '~') == ARGV[1] then \
             return redis.call('DEL', KEYS[1]) end return 0",
        )
    })
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
