//! The replay rule, the check a shard method must pass: from any stored
//! value, the field it leaves equals the fold of that value with the delta
//! it recorded, since the delta is all a save stores. Kept apart from the
//! builder in `mod.rs` because it drives whole entities through the
//! derive's hidden encode/decode items, not one field's fold.

use super::field::Encoded;
use super::{describe, report, Laws};
use crate::__private::Parts;
use crate::entity::Shardable;
use crate::value::Value;
use proptest::strategy::{BoxedStrategy, Strategy};
use proptest::test_runner::TestCaseError;
use std::fmt::Debug;

impl<T: Shardable> Laws<T> {
    /// [`check_shard_method_with`](Laws::check_shard_method_with) for a
    /// method without arguments: `laws.check_shard_method(&question,
    /// Question::view)`.
    ///
    /// # Panics
    ///
    /// As [`check_shard_method_with`](Laws::check_shard_method_with).
    #[track_caller]
    pub fn check_shard_method(&self, entity: &T, method: impl Fn(&mut T)) {
        let name = std::any::type_name_of_val(&method);
        self.check_method(entity, proptest::strategy::Just(()), name, |e, ()| {
            method(e)
        });
    }

    /// Checks the replay rule for a shard method: loaded with a stored value
    /// `x` in each sharded field (from its [`values`](Laws::values); fields
    /// without are taken from `entity`, as are the id and the unsharded
    /// fields), and called with arguments from `args`, the method leaves
    /// every sharded field at `fold(x, delta)`, where `delta` is what it
    /// recorded for the next save. That is what a save stores, so a method
    /// that breaks it makes the object show one value and the store record
    /// another: `self.votes *= 2`, `self.votes = 5`, or a branch on the
    /// field's own value.
    ///
    /// # Panics
    ///
    /// On the first case that breaks the rule, with the smallest one found;
    /// if the method panics; if `entity` cannot be encoded.
    #[track_caller]
    pub fn check_shard_method_with<A, S>(&self, entity: &T, args: S, method: impl Fn(&mut T, A))
    where
        A: Clone + Debug,
        S: Strategy<Value = A>,
    {
        let name = std::any::type_name_of_val(&method);
        self.check_method(entity, args, name, method);
    }

    #[track_caller]
    fn check_method<A, S>(&self, entity: &T, args: S, name: &str, method: impl Fn(&mut T, A))
    where
        A: Clone + Debug,
        S: Strategy<Value = A>,
    {
        let document = entity
            .__encode_document()
            .unwrap_or_else(|e| panic!("cannot encode the entity given: {e}"));
        let defaults: Vec<Value> = (0..T::__FIELDS.len())
            .map(|i| {
                entity
                    .__encode_field(i)
                    .unwrap_or_else(|e| panic!("cannot encode the entity given: {e}"))
            })
            .collect();
        let generated: Vec<BoxedStrategy<Encoded>> = self
            .fields
            .iter()
            .flatten()
            .map(|field| field.encoded())
            .collect();
        let id = entity.id().clone();
        let result = self.runner().run(&(generated, args), |(stored, args)| {
            let mut stored = stored.into_iter();
            let rows: Vec<Value> = (0..T::__FIELDS.len())
                .map(|i| match &self.fields[i] {
                    Some(_) => stored.next().expect("one value per field").stored,
                    None => Ok(defaults[i].clone()),
                })
                .collect::<Result<_, _>>()
                .map_err(TestCaseError::fail)?;
            let mut parts = Parts::new::<T>(format!("{id:?}"), document.clone()).map_err(fail)?;
            for (i, row) in rows.iter().enumerate() {
                parts.push(i, row.clone());
            }
            let mut loaded = T::__from_parts(id.clone(), &mut parts).map_err(fail)?;
            method(&mut loaded, args);
            for (i, before) in rows.iter().enumerate() {
                self.check_replay(i, name, before, &mut loaded)
                    .map_err(TestCaseError::fail)?;
            }
            Ok(())
        });
        if let Err(message) = report(result) {
            panic!("{message}");
        }
    }

    /// One field after the method ran on `before`.
    fn check_replay(
        &self,
        index: usize,
        method: &str,
        before: &Value,
        loaded: &mut T,
    ) -> Result<(), String> {
        let after = loaded.__encode_field(index).map_err(|e| e.to_string())?;
        let delta = match loaded.__encode_pending(index).map_err(|e| e.to_string())? {
            Some(delta) => delta,
            None => T::__fold(index, &mut std::iter::empty()).map_err(describe)?,
        };
        let replayed = T::__fold(index, &mut [before.clone(), delta.clone()].into_iter())
            .map_err(|e| format!("fold({before:?}, delta {delta:?}) failed: {}", describe(e)))?;
        let field = &self.fields[index];
        let same = match field {
            Some(field) => field.equal(&after, &replayed)?,
            None => after == replayed,
        };
        if same {
            return Ok(());
        }
        let show = |v: &Value| match field {
            Some(field) => field.show(v),
            None => format!("{v:?}"),
        };
        Err(format!(
            "`{method}` breaks the replay rule on `{}.{}`: from {} it made {}, but the \
             delta it recorded, {}, folds to {}; the object would show one value and \
             the store record the other",
            T::KIND,
            T::__FIELDS[index].name,
            show(before),
            show(&after),
            show(&delta),
            show(&replayed)
        ))
    }
}

fn fail(e: crate::Error) -> TestCaseError {
    TestCaseError::fail(e.to_string())
}
