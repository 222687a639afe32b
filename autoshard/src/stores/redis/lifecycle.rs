//! Listing and deleting boards on Redis Cluster.
//!
//! A board's keys share one slot, so one script deletes them all at once:
//! it unlinks the trees, players, order, queue streams, heads and dead
//! letters, and sets the version key to [`DELETED`], which every later
//! read of a handle of the board meets first (`board_tx/mod.rs`): it fails
//! with [`Error::RankingNotFound`], and a commit prepared before the
//! delete finds the version moved and runs again into the same error. The
//! registry entry is on a slot of its own and goes second, only if it still
//! holds this board's record: a crash in between leaves a name whose board
//! is gone, which a retried delete finishes. Ids are random and never
//! reused, so a board created again never meets the old one's keys.

use super::board_codec::parse_record;
use super::boards::{registry, BoardKeys};
use super::RedisCluster;
use crate::error::{Error, Result};
use redis::Script;
use std::sync::OnceLock;

/// The version a deleted board's version key holds. Versions are
/// operation ids `<writer>:<seq>`, or `0` before the first commit.
pub(crate) const DELETED: &str = "deleted";

/// `KEYS[1]` the version, the rest the board's data keys: tombstones the
/// version and unlinks the rest.
fn delete_script() -> &'static Script {
    static S: OnceLock<Script> = OnceLock::new();
    S.get_or_init(|| {
        Script::new(
            r#"
redis.call('SET', KEYS[1], ARGV[1])
for i = 2, #KEYS do redis.call('UNLINK', KEYS[i]) end
return 1
"#,
        )
    })
}

/// `KEYS[1]` the registry: removes `ARGV[1]` if it still holds `ARGV[2]`.
fn unregister_script() -> &'static Script {
    static S: OnceLock<Script> = OnceLock::new();
    S.get_or_init(|| {
        Script::new(
            r#"
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then
  return redis.call('HDEL', KEYS[1], ARGV[1])
end
return 0
"#,
        )
    })
}

impl RedisCluster {
    pub(super) fn list(&self) -> Result<Vec<String>> {
        let registry = registry(self.prefix());
        let mut conn = self.checkout()?;
        let mut names: Vec<String> =
            self.with_conn(&mut conn, |c| redis::cmd("HKEYS").arg(&registry).query(c))?;
        names.sort_unstable();
        Ok(names)
    }

    pub(super) fn delete(&self, name: &str) -> Result<bool> {
        let registry = registry(self.prefix());
        let mut conn = self.checkout()?;
        let stored: Option<String> = self.with_conn(&mut conn, |c| {
            redis::cmd("HGET").arg(&registry).arg(name).query(c)
        })?;
        let Some(stored) = stored else {
            return Ok(false);
        };
        let (id, spec, _) = parse_record(name, &stored)?;
        let keys = BoardKeys::new(self.prefix(), id);
        let mut invocation = delete_script().prepare_invoke();
        invocation.key(keys.version()).arg(DELETED);
        for key in keys.data() {
            invocation.key(key);
        }
        invocation.key(keys.heads()).key(keys.approx());
        for queue in 0..spec.queues {
            invocation.key(keys.queue(queue));
        }
        self.with_conn(&mut conn, |c| invocation.invoke::<i64>(c))?;
        let mut invocation = unregister_script().prepare_invoke();
        invocation.key(&registry).arg(name).arg(&stored);
        let removed: i64 = self.with_conn(&mut conn, |c| invocation.invoke(c))?;
        Ok(removed == 1)
    }
}

/// The error a read of a deleted board gives.
pub(super) fn not_found(name: &str) -> Error {
    crate::seam::not_found(name)
}
