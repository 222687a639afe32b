//! Transactions on the PostgreSQL store: retried whole after a
//! serialization failure, a deadlock or a lost connection, and, for writes,
//! an operation id that tells whether a `COMMIT` that got no answer was
//! applied (see `docs/design/store-postgres.md`, "Exactly once on PostgreSQL").

use super::error::{classify, typed, Class};
use super::{Concurrency, Conn, Postgres};
use crate::deadline::Deadline;
use crate::error::{Error, Result};
use crate::stores::pool::Checkout;
use crate::trace;
use postgres::types::ToSql;
use postgres::{Client, Row, SimpleQueryMessage, Statement};
use std::collections::HashMap;
use std::time::Duration;

impl Postgres {
    /// Runs `body` in a write transaction, re-running the whole transaction
    /// after a serialization failure, a deadlock or a lost connection.
    /// Returns the result and the attempts made. A lock timeout is not
    /// re-run (it already waited `lock_timeout`): it is [`Error::Busy`].
    pub(crate) fn write<R>(&self, body: impl FnMut(&mut Tx<'_>) -> Result<R>) -> Result<(R, u32)> {
        self.write_at(self.inner.options.concurrency.isolation(), body, &mut || {})
    }

    /// [`write`](Self::write), calling `after_conflict` after each attempt
    /// that failed with a serialization failure or a deadlock (the last
    /// one too), with no connection held: a save raises automatic shard
    /// counts there, so that its retry already spreads over more rows.
    pub(crate) fn write_observed<R>(
        &self,
        body: impl FnMut(&mut Tx<'_>) -> Result<R>,
        after_conflict: &mut dyn FnMut(),
    ) -> Result<(R, u32)> {
        self.write_at(
            self.inner.options.concurrency.isolation(),
            body,
            after_conflict,
        )
    }

    /// [`write`](Self::write) at `READ COMMITTED` whatever the store's
    /// [`Concurrency`]: for callers that take their own locks and must read
    /// the latest committed rows after each lock (the ranking tree), which a
    /// `REPEATABLE READ` snapshot taken before the lock would not show.
    pub(crate) fn write_read_committed<R>(
        &self,
        body: impl FnMut(&mut Tx<'_>) -> Result<R>,
    ) -> Result<(R, u32)> {
        self.write_at(Concurrency::Locking.isolation(), body, &mut || {})
    }

    fn write_at<R>(
        &self,
        isolation: &str,
        body: impl FnMut(&mut Tx<'_>) -> Result<R>,
        after_conflict: &mut dyn FnMut(),
    ) -> Result<(R, u32)> {
        // Where the driver may block, if it may (`runtime.rs`).
        super::runtime::blocking(|| self.write_attempts(isolation, body, after_conflict))
    }

    fn write_attempts<R>(
        &self,
        isolation: &str,
        mut body: impl FnMut(&mut Tx<'_>) -> Result<R>,
        after_conflict: &mut dyn FnMut(),
    ) -> Result<(R, u32)> {
        let max = self.inner.options.max_attempts;
        for attempt in 1..=max {
            let last = attempt == max;
            match self.attempt(isolation, &mut body) {
                Ok(r) => return Ok((r, attempt)),
                Err(Failure::Fatal(e)) => return Err(typed(e, attempt)),
                Err(Failure::Conflict(_)) if last => {
                    after_conflict();
                    return Err(Error::Conflict { attempts: attempt });
                }
                Err(Failure::Conflict(e)) => {
                    after_conflict();
                    let _retry = retry(attempt, &e);
                    backoff_conflict(attempt)
                }
                Err(Failure::InDoubt {
                    result,
                    writer,
                    seq,
                }) => {
                    if self.resolve(writer, seq)? {
                        return Ok((result, attempt));
                    }
                    // Not applied: an ordinary failed attempt.
                    if last {
                        return Err(Error::Unavailable {
                            attempts: attempt,
                            source: "the connection was lost during COMMIT".into(),
                        });
                    }
                    let _retry = trace::retry!(
                        store = "postgres",
                        attempt,
                        error = "the connection was lost during COMMIT, which did not apply"
                    );
                    backoff_lost(attempt);
                }
                Err(Failure::Lost(e)) if last => {
                    return Err(Error::Unavailable {
                        attempts: attempt,
                        source: Box::new(e),
                    })
                }
                Err(Failure::Lost(e)) => {
                    let _retry = retry(attempt, &e);
                    backoff_lost(attempt)
                }
            }
        }
        unreachable!("the last attempt returns")
    }

    fn attempt<R>(
        &self,
        isolation: &str,
        body: &mut dyn FnMut(&mut Tx<'_>) -> Result<R>,
    ) -> Result<R, Failure<R>> {
        let mut checkout = self.checkout().map_err(|e| self.failure(e))?;
        let conn = &mut *checkout;
        let options = &self.inner.options;
        conn.seq += 1;
        let (writer, seq) = (conn.writer, conn.seq);
        let begin = format!("BEGIN ISOLATION LEVEL {isolation}");
        let begun = if options.exactly_once {
            // One round trip: the mark is written (and its row locked) before
            // COMMIT is ever sent, which is what `resolve` relies on.
            let sql = format!("{begin}; {}", self.inner.names.mark(writer, seq));
            conn.client
                .simple_query(&sql)
                .map_err(Error::from)
                .and_then(|messages| check_marked(&messages))
        } else {
            conn.client.batch_execute(&begin).map_err(Error::from)
        };
        if let Err(e) = begun {
            return Err(self.rollback(checkout, e));
        }
        let mut tx = Tx {
            client: &mut conn.client,
            statements: &mut conn.statements,
            mode: options.concurrency,
        };
        let result = match body(&mut tx) {
            Ok(result) => result,
            Err(e) => return Err(self.rollback(checkout, e)),
        };
        match conn.client.batch_execute("COMMIT") {
            Ok(()) => Ok(result),
            // The server answered: the transaction did not commit.
            Err(e) if e.as_db_error().is_some() && classify(&e) != Class::Lost => {
                Err(self.failure(Error::from(e)))
            }
            // No answer: it may or may not have committed.
            Err(e) => {
                checkout.broken();
                self.drop_idle();
                if options.exactly_once {
                    Err(Failure::InDoubt {
                        result,
                        writer,
                        seq,
                    })
                } else {
                    Err(Failure::Lost(e))
                }
            }
        }
    }

    /// Ends a failed transaction and classifies the failure.
    fn rollback<R>(&self, mut checkout: Checkout<'_, Conn>, error: Error) -> Failure<R> {
        let failure = self.failure(error);
        if let Failure::Lost(_) = failure {
            checkout.broken();
            self.drop_idle();
        } else if checkout.client.batch_execute("ROLLBACK").is_err() {
            checkout.broken();
        }
        failure
    }

    fn failure<R>(&self, error: Error) -> Failure<R> {
        let class = match &error {
            Error::Postgres(e) => classify(e),
            _ => Class::Other,
        };
        match (class, error) {
            (Class::Conflict, Error::Postgres(e)) => Failure::Conflict(e),
            (Class::Lost, Error::Postgres(e)) => Failure::Lost(e),
            (_, error) => Failure::Fatal(error),
        }
    }

    /// Whether the transaction that wrote operation `seq` of `writer`
    /// committed. Its connection is gone, but its backend may still be
    /// running it: terminate that backend, then wait on the writer row, which
    /// the transaction locked before its COMMIT was sent, so the answer is
    /// final once the lock is ours.
    fn resolve(&self, writer: i64, seq: i64) -> Result<bool> {
        let deadline = Deadline::after(self.inner.options.in_doubt_timeout);
        let mut tries = 0;
        loop {
            tries += 1;
            let error = match self.check_applied(writer, seq) {
                Ok(Some(applied)) => return Ok(applied),
                Ok(None) => "the writer's row is missing".into(),
                Err(Error::Postgres(e)) if classify(&e) == Class::Lost => {
                    self.drop_idle();
                    if !deadline.passed() {
                        backoff_lost(tries);
                        continue;
                    }
                    Box::new(e) as Box<dyn std::error::Error + Send + Sync>
                }
                Err(e) => Box::new(e),
            };
            return Err(Error::InDoubt {
                writer,
                seq,
                source: error,
            });
        }
    }

    fn check_applied(&self, writer: i64, seq: i64) -> Result<Option<bool>> {
        let mut checkout = self.checkout()?;
        let conn = &mut *checkout;
        let names = &self.inner.names;
        // In milliseconds, which PostgreSQL takes up to `i32::MAX` of.
        let timeout = self
            .inner
            .options
            .in_doubt_timeout
            .as_millis()
            .clamp(1, i32::MAX as u128);
        let outcome = (|| {
            conn.client.batch_execute(&format!(
                "BEGIN; SET LOCAL lock_timeout = {timeout}; SET LOCAL statement_timeout = {timeout}"
            ))?;
            conn.client.query(&names.terminate_writer, &[&writer])?;
            let stored = conn.client.query_opt(&names.lock_writer, &[&writer])?;
            conn.client.batch_execute("COMMIT")?;
            Ok::<_, postgres::Error>(stored.map(|row| row.get::<_, i64>(0) >= seq))
        })();
        if outcome.is_err() {
            checkout.broken();
        }
        Ok(outcome?)
    }

    /// Runs `body` outside a transaction: every read is one statement, so
    /// it sees one snapshot without `BEGIN`/`COMMIT` round trips. Retried
    /// after a lost connection.
    pub(crate) fn read<R>(&self, body: impl FnMut(&mut Tx<'_>) -> Result<R>) -> Result<R> {
        super::runtime::blocking(|| self.read_attempts(body))
    }

    fn read_attempts<R>(&self, mut body: impl FnMut(&mut Tx<'_>) -> Result<R>) -> Result<R> {
        let max = self.inner.options.max_attempts;
        for attempt in 1..=max {
            let outcome = self.checkout().and_then(|mut checkout| {
                let conn = &mut *checkout;
                let mut tx = Tx {
                    client: &mut conn.client,
                    statements: &mut conn.statements,
                    mode: self.inner.options.concurrency,
                };
                let outcome = body(&mut tx);
                if matches!(&outcome, Err(Error::Postgres(e)) if classify(e) == Class::Lost) {
                    checkout.broken();
                }
                outcome
            });
            match outcome {
                Err(Error::Postgres(e)) if classify(&e) == Class::Lost => {
                    self.drop_idle();
                    if attempt == max {
                        return Err(Error::Unavailable {
                            attempts: attempt,
                            source: Box::new(e),
                        });
                    }
                    backoff_lost(attempt);
                }
                other => return other.map_err(|e| typed(e, attempt)),
            }
        }
        unreachable!("the last attempt returns")
    }

    /// Runs `body` in one `REPEATABLE READ READ ONLY` transaction: several
    /// statements that must agree with one another (a rank computed from a
    /// path, an arrival tree and a player row) see one snapshot. Retried
    /// after a lost connection.
    pub(crate) fn read_snapshot<R>(
        &self,
        mut body: impl FnMut(&mut Tx<'_>) -> Result<R>,
    ) -> Result<R> {
        self.read(|tx| {
            tx.batch("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")?;
            let outcome = body(tx);
            // A read-only transaction has nothing to commit: ROLLBACK ends
            // it the same way, also after an error.
            match (outcome, tx.batch("ROLLBACK")) {
                (Err(e), _) => Err(e),
                (Ok(_), Err(e)) => Err(e.into()),
                (Ok(r), Ok(())) => Ok(r),
            }
        })
    }
}

/// Why an attempt failed, and so what `write` does next.
enum Failure<R> {
    /// Serialization failure or deadlock: retry. The error, for its
    /// SQLSTATE in the retry's span.
    Conflict(postgres::Error),
    /// The connection broke before COMMIT was sent: nothing was applied.
    Lost(postgres::Error),
    /// The connection broke during COMMIT: `result` stands if the
    /// transaction turns out to have committed.
    InDoubt { result: R, writer: i64, seq: i64 },
    /// Anything else: return it.
    Fatal(Error),
}

/// The span of a retry after `error`, with its SQLSTATE (`40001`: a
/// serialization failure, `40P01`: a deadlock; none: the connection broke).
#[cfg_attr(not(feature = "tracing"), allow(unused_variables))]
fn retry(attempt: u32, error: &postgres::Error) -> trace::Entered {
    trace::retry!(
        store = "postgres",
        attempt,
        sqlstate = error.code().map(|c| c.code()),
        error = %error
    )
}

/// The `BEGIN; UPDATE autoshard_writers ...` batch must have updated the
/// writer's row; without it there would be no evidence to check later.
fn check_marked(messages: &[SimpleQueryMessage]) -> Result<()> {
    let updated = messages.iter().rev().find_map(|m| match m {
        SimpleQueryMessage::CommandComplete(n) => Some(*n),
        _ => None,
    });
    if updated == Some(1) {
        return Ok(());
    }
    Err(Error::SchemaMismatch {
        kind: "autoshard_writers".into(),
        reason: "this connection's writer row is missing (deleted by hand?)".into(),
    })
}

/// One transaction's view of its connection: statements are prepared once
/// per connection and cached.
pub(crate) struct Tx<'a> {
    client: &'a mut Client,
    statements: &'a mut HashMap<String, Statement>,
    pub(crate) mode: Concurrency,
}

type Params<'p> = [&'p (dyn ToSql + Sync)];

#[cfg(feature = "failpoints")]
thread_local! {
    /// Round trips this thread's store calls sent through [`Tx`]: what the
    /// statement-count tests bound (`__private::pg_hooks`). Only with the
    /// `failpoints` feature; a build without it counts nothing.
    static ROUND_TRIPS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

fn count_round_trip() {
    #[cfg(feature = "failpoints")]
    ROUND_TRIPS.set(ROUND_TRIPS.get() + 1);
}

/// See `ROUND_TRIPS`.
#[cfg(feature = "failpoints")]
pub(crate) fn round_trips() -> u64 {
    ROUND_TRIPS.get()
}

impl Tx<'_> {
    fn prepare(&mut self, sql: &str) -> Result<Statement, postgres::Error> {
        if let Some(statement) = self.statements.get(sql) {
            return Ok(statement.clone());
        }
        let statement = {
            count_round_trip();
            self.client.prepare(sql)?
        };
        self.statements.insert(sql.to_owned(), statement.clone());
        Ok(statement)
    }

    pub fn query(&mut self, sql: &str, params: &Params<'_>) -> Result<Vec<Row>, postgres::Error> {
        let statement = self.prepare(sql)?;
        {
            count_round_trip();
            self.client.query(&statement, params)
        }
    }

    pub fn query_one(&mut self, sql: &str, params: &Params<'_>) -> Result<Row, postgres::Error> {
        let statement = self.prepare(sql)?;
        {
            count_round_trip();
            self.client.query_one(&statement, params)
        }
    }

    pub fn query_opt(
        &mut self,
        sql: &str,
        params: &Params<'_>,
    ) -> Result<Option<Row>, postgres::Error> {
        let statement = self.prepare(sql)?;
        {
            count_round_trip();
            self.client.query_opt(&statement, params)
        }
    }

    pub fn execute(&mut self, sql: &str, params: &Params<'_>) -> Result<u64, postgres::Error> {
        let statement = self.prepare(sql)?;
        {
            count_round_trip();
            self.client.execute(&statement, params)
        }
    }

    /// Statements without parameters or results (DDL).
    pub fn batch(&mut self, sql: &str) -> Result<(), postgres::Error> {
        {
            count_round_trip();
            self.client.batch_execute(sql)
        }
    }
}

/// Full jitter, 0.1 ms doubling to 100 ms: a conflict means another writer
/// is in the row right now, so the retry should land at a random later
/// moment, not in step with the other loser.
fn backoff_conflict(attempt: u32) {
    let cap = (100u64 << attempt.min(10)).min(100_000);
    std::thread::sleep(Duration::from_micros(crate::random::range(0..=cap)));
}

/// A lost connection needs the server back: 10 ms doubling to 1 s.
fn backoff_lost(attempt: u32) {
    let cap = (10u64 << attempt.min(7)).min(1_000);
    std::thread::sleep(Duration::from_millis(crate::random::range(cap / 2..=cap)));
}
