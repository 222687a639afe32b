//! Writing a batch out: every row the overlay changed, once (players, then
//! leaves, inner nodes and arrival nodes). An inner node's delta is added
//! to the batch's one shard row, read just before it is written, so the
//! other shards, which other writers may be adding to, stay untouched;
//! unless the batch writes alone (`Batch::fold_shards`): then it moves
//! every other shard row's counts into its own and deletes them, so the
//! node's sum is the same and readers read one row where they read many.

use super::super::storage::{self, Part};
use super::batch::Batch;
use crate::error::Result;

impl Batch<'_> {
    /// Writes everything the batch changed: each row once.
    pub fn flush(self) -> Result<()> {
        let st = self.st;
        let mut buf = Vec::new();

        let mut players: Vec<_> = self
            .players
            .iter()
            .filter(|(_, p)| p.now != p.stored)
            .collect();
        players.sort_unstable_by(|x, y| x.0.cmp(y.0));
        for (name, state) in players {
            match state.now {
                Some((score, arrival)) => st.put_player(name, score, arrival)?,
                None => st.delete_player(name)?,
            }
        }

        let mut leaves: Vec<_> = self.leaves.iter().collect();
        leaves.sort_unstable_by_key(|(idx, _)| **idx);
        for (&idx, leaf) in leaves {
            for (changed, part, v) in [
                (leaf.a_changed, Part::A, &leaf.a),
                (leaf.b_changed, Part::B, &leaf.b),
            ] {
                if changed {
                    storage::encode(v, &mut buf);
                    st.put_node_part(1, idx, part, 0, &buf)?;
                }
            }
        }

        let mut inner: Vec<_> = self.inner.iter().collect();
        inner.sort_unstable_by_key(|(key, _)| **key);
        let b = self.g.b();
        let mut rows = [vec![0i64; b], vec![0i64; b]];
        for (&(h, idx), delta) in inner {
            let deltas = [&delta.a, &delta.b];
            let mut write = deltas.map(|d| d.iter().any(|&x| x != 0));
            if write == [false, false] {
                continue;
            }
            for (row, d) in rows.iter_mut().zip(deltas) {
                row.copy_from_slice(d);
            }
            // In ascending order, as every writer reads shard rows.
            let shards = if self.fold > 1 {
                0..self.fold
            } else {
                self.shard..self.shard + 1
            };
            for shard in shards {
                let mut held = [false, false];
                st.node_shard(h, idx, shard, &mut |part, v| {
                    held[part as usize] = true;
                    let ok = storage::well_formed(v, b)
                        && storage::add_into(v, &mut rows[part as usize]).is_some();
                    if ok {
                        Ok(())
                    } else {
                        Err(st.corrupt(
                            format!("score-tree node (height {h}, idx {idx}) shard {shard}"),
                            "malformed or overflowing vector".into(),
                        ))
                    }
                })?;
                if shard == self.shard {
                    continue;
                }
                // Its counts now live in the batch's row: both change
                // together, in this transaction.
                for part in [Part::A, Part::B] {
                    if held[part as usize] {
                        st.put_node_part(h, idx, part, shard, &[])?;
                        write[part as usize] = true;
                    }
                }
            }
            for part in [Part::A, Part::B] {
                if write[part as usize] {
                    storage::encode(&rows[part as usize], &mut buf);
                    st.put_node_part(h, idx, part, self.shard, &buf)?;
                }
            }
        }

        let mut arrivals: Vec<_> = self.arrivals.iter().filter(|(_, n)| n.changed).collect();
        arrivals.sort_unstable_by_key(|(key, _)| **key);
        for (&(score, h, idx), node) in arrivals {
            storage::encode(&node.a, &mut buf);
            st.put_arrival_node(score, h, idx, &buf)?;
        }
        Ok(())
    }
}
