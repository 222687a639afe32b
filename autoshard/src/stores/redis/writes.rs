//! The entity writes of the seam on Redis Cluster (insert, save, delete),
//! each cut into single-slot pieces, with the board writes they owe an
//! entity board (`ranked.rs`).

use super::entities::{encode, gone, Entity, KindInfo, Target};
use super::keys::{self, BUCKETS};
use super::ranked::Intents;
use super::{scripts, Conn, Piece, RedisCluster, Reply};
use crate::entity::Key;
use crate::error::{Error, Result};
use crate::seam::{InsertPlan, Kind, SavePlan};

/// After an entity write of a kind with a ranked field that failed: the
/// connection takes a new writer id. The write may have left board writes
/// owed, under ids a recovery sends later; a later piece of this writer
/// in a board's slot would raise its mark past them.
pub(super) fn owing(conn: &mut Conn, kind: &Kind, failed: bool) {
    if failed && kind.has_ranked() {
        conn.retire();
    }
}

impl RedisCluster {
    pub(super) fn insert_on(
        &self,
        conn: &mut Conn,
        info: &KindInfo,
        kind: &Kind,
        key: Key<'_>,
        plan: &InsertPlan,
    ) -> Result<()> {
        let entity = Entity::new(info, key);
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
        if kind.has_ranked() {
            let player = crate::seam::entity_player(key);
            self.settle_entity(conn, kind, &entity.intent_tables(info), &player, true)?;
            self.check_boards(conn, kind, &plan.boards)?;
        }
        // The document and each bucket take an id.
        let mut owed = Intents::reserve(conn, 1 + BUCKETS);
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
        let id = self.next_seq(conn);
        if self.run(conn, &doc, id)? == Reply::Exists {
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
            let id = self.next_seq(conn);
            self.run(conn, &piece, id)?;
        }
        let index = info.keys.index();
        self.with_conn(conn, |c| {
            redis::cmd("ZADD")
                .arg(&index)
                .arg(0)
                .arg(&entity.id)
                .query::<()>(c)
        })?;
        self.pay(conn, kind, owed)
    }

    pub(super) fn save_on(
        &self,
        conn: &mut Conn,
        info: &KindInfo,
        kind: &Kind,
        key: Key<'_>,
        plan: &SavePlan,
    ) -> Result<u32> {
        let entity = Entity::new(info, key);
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
            self.dry_run(conn, kind, &entity, key, &statics)?;
        }
        if kind.has_ranked() {
            self.check_boards(conn, kind, &plan.boards)?;
        }
        // Each delta and the document take an id.
        let mut owed = Intents::reserve(conn, plan.deltas.len() + 1);
        let mut owe = |delta: &crate::seam::Delta, slot: u16| {
            let board = kind.board_of(delta.index)?;
            let write = plan.boards.iter().find(|w| w.board == board)?;
            Some(owed.owe(&info.keys, slot, write.clone()))
        };
        // Every piece checks it: a save may write no document, and each
        // bucket knows the incarnation it belongs to (`~`).
        let inc = plan.incarnation.map(|i| i.to_string()).unwrap_or_default();
        let target = Target {
            info,
            entity: &entity,
            key,
            inc: &inc,
        };
        for (delta, shard) in &statics {
            let intent = owe(delta, entity.bucket_slot(keys::static_bucket(*shard)));
            let outcome = self.fold_static(conn, kind, &target, delta, *shard, &intent);
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
            let id = self.next_seq(conn);
            let outcome = match self.run(conn, &piece, id) {
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
            let id = self.next_seq(conn);
            let outcome = match self.run(conn, &piece, id) {
                Ok(Reply::Gone) => Err(gone(kind, key)),
                Ok(_) => Ok(1),
                Err(e) => Err(e),
            };
            step("the document", outcome)?;
        }
        let outcome = self.pay(conn, kind, owed).map(|()| 1);
        step("the board writes", outcome)?;
        Ok(attempts)
    }

    pub(super) fn delete_on(
        &self,
        conn: &mut Conn,
        info: &KindInfo,
        kind: &Kind,
        key: Key<'_>,
    ) -> Result<bool> {
        let entity = Entity::new(info, key);
        let removals = kind.board_removals(key);
        if kind.has_ranked() {
            let player = crate::seam::entity_player(key);
            self.settle_entity(conn, kind, &entity.intent_tables(info), &player, true)?;
            self.check_boards(conn, kind, &removals)?;
        }
        let mut owed = Intents::reserve(conn, 0);
        let mut intents = Vec::new();
        for write in removals {
            intents.extend(owed.owe(&info.keys, entity.home, write).1);
        }
        let table = info.keys.intents(entity.home);
        // The document first, with the board removals it owes: from then
        // on loads see no entity and saves find it gone. Buckets are
        // removed only if they belong to the incarnation deleted here (a
        // concurrent re-insert may own them).
        let inc: Option<String> = self.with_conn(conn, |c| {
            delete_document()
                .key(&entity.document)
                .key(&table)
                .arg(&intents)
                .invoke(c)
        })?;
        let Some(inc) = inc else {
            return Ok(false);
        };
        #[cfg(feature = "failpoints")]
        super::ranked_hooks::before_buckets_deleted();
        for bucket in &entity.buckets {
            self.with_conn(conn, |c| {
                delete_bucket().key(bucket).arg(&inc).invoke::<i64>(c)
            })?;
        }
        if kind.has_ranked() {
            // A concurrent save's piece may have applied, with its board
            // write owed, between the document's delete and its bucket's:
            // paid now, before this delete's removal.
            let player = crate::seam::entity_player(key);
            self.settle_entity(conn, kind, &entity.intent_tables(info), &player, false)?;
        }
        let index = info.keys.index();
        self.with_conn(conn, |c| {
            redis::cmd("ZREM")
                .arg(&index)
                .arg(&entity.id)
                .query::<i64>(c)
        })?;
        self.pay(conn, kind, owed)?;
        Ok(true)
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
