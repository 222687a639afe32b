//! One trim batch of a board stored natively (`seam::BoardStore::trim_native`):
//! one script (`native_scripts::native_trim`) finds the batch's players in
//! the ranking order and removes them, so a writer committing meanwhile
//! costs the trim nothing, where a batch through a write transaction
//! (reads, then an optimistic commit) is run again whole after every
//! commit of another writer.

use super::board_codec::descending;
use super::boards::BoardKeys;
use super::{native_scripts, Piece, RedisCluster, Reply};
use crate::error::{Error, Result};
use crate::seam::{Board, NativeTrim};

// Lua's numbers are doubles: ranks handed to the script stay below 2^53,
// and no board holds that many players.
const LUA_EXACT: u64 = 1 << 52;

impl RedisCluster {
    /// See `BoardStore::trim_native`.
    pub(super) fn trim_native_batch(
        &self,
        board: Board<'_>,
        pick: NativeTrim,
        limit: u64,
    ) -> Result<Option<(u64, u64)>> {
        let (_, native) = self.board_spec(board.id)?;
        if !native {
            return Ok(None);
        }
        let limit = limit.clamp(1, LUA_EXACT);
        let bounds: [Vec<u8>; 3] = match pick {
            NativeTrim::Between { lo, hi } => {
                // Members start with their score's 8-byte key, better
                // scores first: the range is from `hi`'s key to before
                // the key after `lo`'s.
                let last = descending(lo);
                let end = match last.checked_add(1) {
                    Some(next) => [b"(", &next.to_be_bytes()[..]].concat(),
                    None => b"+".to_vec(),
                };
                let first = descending(hi).to_be_bytes().to_vec();
                [first, end, limit.to_string().into_bytes()]
            }
            NativeTrim::Below(n) if n >= LUA_EXACT => return Ok(Some((0, 0))),
            NativeTrim::Below(n) => {
                let stop = (n + limit - 1).to_string().into_bytes();
                [n.to_string().into_bytes(), stop, Vec::new()]
            }
        };
        let mode: &[u8] = match pick {
            NativeTrim::Between { .. } => b"B",
            NativeTrim::Below(_) => b"R",
        };
        let keys = BoardKeys::new(self.prefix(), board.id);
        let data = keys.data();
        // As `write_native`'s: order, players, entry data, distinct
        // scores, multiplicities, arrival counter.
        let more: Vec<String> = [3, 2, 6, 7, 8, 9]
            .iter()
            .map(|&i| data[i].clone())
            .collect();
        let mut conn = self.checkout()?;
        let id = self.next_seq(&mut conn);
        let [a, b, c] = bounds;
        let binary = vec![
            format!("{}:{}", id.0, id.1).into_bytes(),
            mode.to_vec(),
            a,
            b,
            c,
        ];
        let version = keys.version();
        let piece = Piece {
            script: native_scripts::native_trim(),
            key: &version,
            slot: keys.slot,
            args: Vec::new(),
            binary,
            more_keys: &more,
        };
        match self.run(&mut conn, &piece, id)? {
            Reply::Trimmed(n) => Ok(Some((n, n))),
            // An earlier send removed an unknown number: look again.
            Reply::Dup => Ok(Some((limit, 0))),
            Reply::Gone => Err(super::lifecycle::not_found(board.name)),
            other => Err(Error::SchemaMismatch {
                kind: "redis script".into(),
                reason: format!("unexpected reply {other:?} to a native trim"),
            }),
        }
    }
}
