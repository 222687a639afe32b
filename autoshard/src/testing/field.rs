//! The typed side of one sharded field's checks: its generated values,
//! encoded as a store keeps them, and the three fold laws (identity,
//! commutativity, associativity) checked on them.

use super::{describe, report};
use crate::fold::FoldError;
use crate::value::ShardValue;
use crate::value::{self, Value};
use proptest::strategy::{BoxedStrategy, Strategy};
use proptest::test_runner::{TestCaseError, TestRunner};
use std::fmt::{self, Debug};

/// A generated value of a field, encoded as stored (or why it cannot be),
/// shown as `field = value` in a failing case.
#[derive(Clone)]
pub(super) struct Encoded {
    field: &'static str,
    pub(super) stored: Result<Value, String>,
    shown: String,
}

impl Debug for Encoded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} = {}", self.field, self.shown)
    }
}

/// The typed side of one field's checks, behind a trait object so the
/// builder holds fields of different types.
pub(super) trait FieldValues {
    fn name(&self) -> &'static str;
    /// Values from the strategy, encoded as stored, with their `Debug`.
    fn encoded(&self) -> BoxedStrategy<Encoded>;
    /// Whether two stored values decode to equal values.
    fn equal(&self, a: &Value, b: &Value) -> Result<bool, String>;
    /// A stored value as the field's type shows it.
    fn show(&self, v: &Value) -> String;
    fn check_fold(&self, runner: TestRunner) -> Result<(), String>;
}

type FoldFn = fn(usize, &mut dyn Iterator<Item = Value>) -> std::result::Result<Value, FoldError>;

pub(super) struct Typed<V> {
    pub(super) entity: &'static str,
    pub(super) field: &'static str,
    pub(super) index: usize,
    pub(super) fold: FoldFn,
    pub(super) strategy: BoxedStrategy<V>,
    pub(super) eq: fn(&V, &V) -> bool,
}

/// A fold's result: a value, or the fold's error.
type Folded<V> = Result<V, String>;

impl<V: ShardValue + Clone + Debug> Typed<V> {
    /// The fold of `values` starting from neutral, as the stores fold.
    fn fold(&self, values: &[&V]) -> Result<Folded<V>, String> {
        let encoded = values
            .iter()
            .map(|v| encode(*v))
            .collect::<Result<Vec<_>, _>>()?;
        match (self.fold)(self.index, &mut encoded.into_iter()) {
            Ok(value) => self.decode(&value).map(Ok),
            Err(FoldError::Fold(e)) => Ok(Err(e.to_string())),
            Err(e) => Err(describe(e)),
        }
    }

    fn decode(&self, value: &Value) -> Result<V, String> {
        value::decode(value).map_err(|e| {
            format!(
                "`{}.{}`: a folded value does not decode: {e}",
                self.entity, self.field
            )
        })
    }

    fn same(&self, a: &Folded<V>, b: &Folded<V>) -> bool {
        match (a, b) {
            (Ok(a), Ok(b)) => (self.eq)(a, b),
            (Err(_), Err(_)) => true,
            _ => false,
        }
    }

    fn broken(&self, law: &str, details: String) -> TestCaseError {
        TestCaseError::fail(format!(
            "the fold of `{}.{}` breaks a law: {law}:\n  {details}",
            self.entity, self.field
        ))
    }

    /// All three laws on one case. Identity first, for all three values:
    /// the others are computed through folds that start from neutral, which
    /// only mean `fold(a, b)` once `fold(neutral, a) == a`.
    fn laws(&self, a: &V, b: &V, c: &V) -> Result<(), TestCaseError> {
        let fail = TestCaseError::fail;
        let neutral = self.fold(&[]).map_err(fail)?;
        for x in [a, b, c] {
            let left = self.fold(&[x]).map_err(fail)?;
            if !self.same(&left, &Ok(x.clone())) {
                return Err(self.broken(
                    "neutral is not its identity",
                    format!("fold(neutral, {x:?}) = {}, expected {x:?}", shown(&left)),
                ));
            }
            if let Ok(neutral) = &neutral {
                let right = self.fold(&[x, neutral]).map_err(fail)?;
                if !self.same(&right, &Ok(x.clone())) {
                    return Err(self.broken(
                        "neutral is not its identity",
                        format!(
                            "fold({x:?}, neutral {neutral:?}) = {}, expected {x:?}",
                            shown(&right)
                        ),
                    ));
                }
            }
        }
        let ab = self.fold(&[a, b]).map_err(fail)?;
        let ba = self.fold(&[b, a]).map_err(fail)?;
        if !self.same(&ab, &ba) {
            return Err(self.broken(
                "not commutative",
                format!(
                    "fold({a:?}, {b:?}) = {}\n  fold({b:?}, {a:?}) = {}",
                    shown(&ab),
                    shown(&ba)
                ),
            ));
        }
        let ab_c = self.fold(&[a, b, c]).map_err(fail)?;
        let bc = self.fold(&[b, c]).map_err(fail)?;
        let a_bc = match &bc {
            Ok(bc) => self.fold(&[a, bc]).map_err(fail)?,
            Err(e) => Err(e.clone()),
        };
        if !self.same(&ab_c, &a_bc) {
            return Err(self.broken(
                "not associative",
                format!(
                    "fold(fold({a:?}, {b:?}), {c:?}) = {}\n  fold({a:?}, fold({b:?}, {c:?})) = {}",
                    shown(&ab_c),
                    shown(&a_bc)
                ),
            ));
        }
        Ok(())
    }
}

impl<V: ShardValue + Clone + Debug> FieldValues for Typed<V> {
    fn name(&self) -> &'static str {
        self.field
    }

    fn encoded(&self) -> BoxedStrategy<Encoded> {
        let field = self.field;
        self.strategy
            .clone()
            .prop_map(move |v| Encoded {
                field,
                stored: encode(&v),
                shown: format!("{v:?}"),
            })
            .boxed()
    }

    fn equal(&self, a: &Value, b: &Value) -> Result<bool, String> {
        Ok((self.eq)(&self.decode(a)?, &self.decode(b)?))
    }

    fn show(&self, v: &Value) -> String {
        match self.decode(v) {
            Ok(v) => format!("{v:?}"),
            Err(_) => format!("{v:?}"),
        }
    }

    fn check_fold(&self, mut runner: TestRunner) -> Result<(), String> {
        let s = &self.strategy;
        let result = runner.run(&(s.clone(), s.clone(), s.clone()), |(a, b, c)| {
            self.laws(&a, &b, &c)
        });
        report(result)
    }
}

fn encode<V: ShardValue>(v: &V) -> Result<Value, String> {
    value::encode(v).map_err(|e| format!("a generated value cannot be stored: {e}"))
}

fn shown<V: Debug>(folded: &Folded<V>) -> String {
    match folded {
        Ok(v) => format!("{v:?}"),
        Err(e) => format!("error ({e})"),
    }
}
