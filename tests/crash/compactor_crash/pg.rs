//! The PostgreSQL side of the compactor crash tests: a fresh schema per
//! test, children's sessions named so the parent can wait them out.

use super::*;
use autoshard::{Concurrency, Postgres};

/// A child's connections carry a name of their own, so the parent can
/// see its transactions and wait for the server to end its sessions.
fn application(schema: &str, child: u64) -> String {
    if child == PARENT {
        format!("cc_{schema}_parent")
    } else {
        format!("cc_{schema}_c{child}")
    }
}

fn url_for(schema: &str, child: u64) -> String {
    let url = stores::pg::url();
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}application_name={}", application(schema, child))
}

impl CrashStore for Postgres {
    const NAME: &'static str = "postgres";
    // A batch is a dozen round trips, and waits for the row locks of
    // the other compactors and the writers.
    const DELAY_MS: std::ops::RangeInclusive<u64> = 150..=700;

    fn create() -> (Self, String, Box<dyn Any>) {
        let schema = stores::pg::new_schema();
        let cleanup = stores::pg::DropSchema(schema.clone());
        let db = Postgres::builder(&stores::pg::url())
            .schema(&schema)
            .max_attempts(1_000)
            .open()
            .expect("open the PostgreSQL store");
        (db, schema, Box::new(cleanup))
    }

    /// Odd children in locking mode, even ones optimistic (with enough
    /// attempts that conflicts are retried, not fatal).
    fn connect(schema: &str, child: u64) -> Self {
        let concurrency = if child.is_multiple_of(2) {
            Concurrency::Optimistic
        } else {
            Concurrency::Locking
        };
        Postgres::builder(&url_for(schema, child))
            .schema(schema)
            .concurrency(concurrency)
            .max_attempts(1_000)
            .open()
            .expect("open the PostgreSQL store")
    }

    /// A session of the child with a transaction open, seen in
    /// `pg_stat_activity`.
    fn in_transaction(schema: &str, child: u64, _pid: u32) -> Option<bool> {
        thread_local! {
            static CLIENT: std::cell::RefCell<Option<postgres::Client>> =
                const { std::cell::RefCell::new(None) };
        }
        CLIENT.with_borrow_mut(|client| {
            let client = client.get_or_insert_with(stores::pg::client);
            let row = client
                .query_one(
                    "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 \
                 AND xact_start IS NOT NULL AND state IN ('active', 'idle in transaction')",
                    &[&application(schema, child)],
                )
                .unwrap();
            Some(row.get::<_, i64>(0) > 0)
        })
    }

    fn split_compactor(schema: &str, child: u64) -> ! {
        let mut client =
            postgres::Client::connect(&url_for(schema, child), postgres::NoTls).unwrap();
        let table = format!("\"{schema}\".as_shard_ledger");
        loop {
            for entity in 0..ENTITIES as i64 {
                let mut tx = client.transaction().unwrap();
                let rows = tx
                    .query(
                        &format!(
                            "SELECT shard, int_value FROM {table} \
                             WHERE entity = $1 AND field = 'grown' ORDER BY shard FOR UPDATE"
                        ),
                        &[&entity],
                    )
                    .unwrap();
                if rows.len() < 2 {
                    continue;
                }
                let kept: i64 = rows[0].get(0);
                let removed: Vec<i64> = rows[1..].iter().map(|r| r.get(0)).collect();
                let sum: i64 = rows[1..].iter().map(|r| r.get::<_, i64>(1)).sum();
                tx.execute(
                    &format!(
                        "DELETE FROM {table} \
                         WHERE entity = $1 AND field = 'grown' AND shard = ANY($2)"
                    ),
                    &[&entity, &removed],
                )
                .unwrap();
                tx.commit().unwrap();
                pause_between_transactions();
                // The bug: the folded value is written in a second
                // transaction.
                client
                    .execute(
                        &format!(
                            "UPDATE {table} SET int_value = int_value + $3 \
                             WHERE entity = $1 AND field = 'grown' AND shard = $2"
                        ),
                        &[&entity, &kept, &sum],
                    )
                    .unwrap();
            }
        }
    }

    /// A killed child's last `COMMIT` may still be on its way through
    /// its server session; wait for the server to end them all.
    fn settle(schema: &str) {
        let mut client = stores::pg::client();
        let started = Instant::now();
        loop {
            let row = client
                .query_one(
                    "SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE $1",
                    &[&format!("cc_{schema}_c%")],
                )
                .unwrap();
            if row.get::<_, i64>(0) == 0 {
                return;
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "killed children's sessions are still open after 30 s"
            );
            thread::sleep(Duration::from_millis(10));
        }
    }
}
