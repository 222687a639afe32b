//! Field handles and the conditions and orders made from them.
//!
//! `#[derive(Shardable)]` gives every entity a struct of handles, one per
//! field and named like it, which a [`Query`](crate::Query) hands to its
//! closures: `q.filter(|f| f.votes.ge(50))`. A handle is typed by its
//! field, so a misspelled field or a value of the wrong type is a compile
//! error, not a query that fails at run time.

use crate::seam::query::{Class, Op, Operand};
use std::cmp::Ordering;
use std::fmt;
use std::marker::PhantomData;

/// Where a field lives in the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
    /// The `#[shard(id)]` field, the entity table's key.
    Id,
    /// Sharded field number `n` (declaration order), folded over its rows.
    Sharded(usize),
    /// An unsharded field, in the JSON document.
    Document,
}

/// The handle of field `V` of entity `T`: filters with
/// [`eq`](Field::eq) .. [`ge`](Field::ge) and orders with
/// [`asc`](Field::asc) / [`desc`](Field::desc) when `V` is
/// [`Comparable`].
pub struct Field<T, V> {
    name: &'static str,
    source: Source,
    get: fn(&T) -> &V,
    _value: PhantomData<fn() -> V>,
}

impl<T, V> Clone for Field<T, V> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T, V> Copy for Field<T, V> {}

impl<T, V> fmt::Debug for Field<T, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Field")
            .field("name", &self.name)
            .field("source", &self.source)
            .finish()
    }
}

impl<T, V> Field<T, V> {
    fn new(name: &'static str, source: Source, get: fn(&T) -> &V) -> Self {
        Field {
            name,
            source,
            get,
            _value: PhantomData,
        }
    }

    #[doc(hidden)]
    pub fn __id(name: &'static str, get: fn(&T) -> &V) -> Self {
        Self::new(name, Source::Id, get)
    }

    #[doc(hidden)]
    pub fn __sharded(name: &'static str, index: usize, get: fn(&T) -> &V) -> Self {
        Self::new(name, Source::Sharded(index), get)
    }

    #[doc(hidden)]
    pub fn __document(name: &'static str, get: fn(&T) -> &V) -> Self {
        Self::new(name, Source::Document, get)
    }

    /// The field's name, as stored.
    pub fn name(&self) -> &'static str {
        self.name
    }
}

impl<T: 'static, V: Comparable> Field<T, V> {
    /// Entities whose field equals `value`.
    pub fn eq(self, value: V) -> Filter<T> {
        self.compare(Op::Eq, value)
    }

    /// Entities whose field differs from `value`.
    pub fn ne(self, value: V) -> Filter<T> {
        self.compare(Op::Ne, value)
    }

    /// Entities whose field is less than `value`.
    pub fn lt(self, value: V) -> Filter<T> {
        self.compare(Op::Lt, value)
    }

    /// Entities whose field is at most `value`.
    pub fn le(self, value: V) -> Filter<T> {
        self.compare(Op::Le, value)
    }

    /// Entities whose field is greater than `value`.
    pub fn gt(self, value: V) -> Filter<T> {
        self.compare(Op::Gt, value)
    }

    /// Entities whose field is at least `value`.
    pub fn ge(self, value: V) -> Filter<T> {
        self.compare(Op::Ge, value)
    }

    /// Smallest first (ties by id, ascending).
    pub fn asc(self) -> SortKey<T> {
        self.order(false)
    }

    /// Largest first (ties by id, ascending).
    pub fn desc(self) -> SortKey<T> {
        self.order(true)
    }

    fn compare(self, op: Op, value: V) -> Filter<T> {
        let get = self.get;
        let nul = value.__has_nul();
        // No document string holds NUL (every store refuses one), and
        // PostgreSQL cannot bind one; a text id may hold one on SQLite, so
        // a comparison with the id is tested in Rust instead.
        let operand = match nul {
            true => None,
            false => value.__operand(),
        };
        let invalid = match (value.__is_nan(), nul && self.source != Source::Id) {
            (true, _) => Some(format!(
                "`{}` compared with NaN, which nothing equals",
                self.name
            )),
            (_, true) => Some(format!(
                "`{}` compared with a string holding NUL, which no stored document holds",
                self.name
            )),
            _ => None,
        };
        let want: fn(Ordering) -> bool = match op {
            Op::Eq => Ordering::is_eq,
            Op::Ne => Ordering::is_ne,
            Op::Lt => Ordering::is_lt,
            Op::Le => Ordering::is_le,
            Op::Gt => Ordering::is_gt,
            Op::Ge => Ordering::is_ge,
        };
        Filter {
            name: self.name,
            source: self.source,
            class: V::__CLASS,
            op,
            operand,
            invalid,
            // Stored values are never NaN (the stores refuse them), so
            // `partial_cmp` always answers; `None` would fail every test.
            test: Box::new(move |entity| get(entity).partial_cmp(&value).is_some_and(want)),
        }
    }

    fn order(self, descending: bool) -> SortKey<T> {
        let get = self.get;
        SortKey {
            name: self.name,
            source: self.source,
            class: V::__CLASS,
            descending,
            compare: Box::new(move |a, b| {
                let ordering = get(a).partial_cmp(get(b)).unwrap_or(Ordering::Equal);
                if descending {
                    ordering.reverse()
                } else {
                    ordering
                }
            }),
        }
    }
}

/// A condition on one field: made by a [`Field`]'s comparison methods,
/// given to [`Query::filter`](crate::Query::filter).
pub struct Filter<T> {
    pub(crate) name: &'static str,
    pub(crate) source: Source,
    pub(crate) class: Class,
    pub(crate) op: Op,
    /// `None`: a value SQL cannot hold (a `u64` above `i64::MAX`), so the
    /// condition is tested in Rust.
    pub(crate) operand: Option<Operand>,
    pub(crate) invalid: Option<String>,
    pub(crate) test: Box<dyn Fn(&T) -> bool + Send + Sync>,
}

impl<T> fmt::Debug for Filter<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} {:?}", self.name, self.op.sql(), self.operand)
    }
}

/// How an order compares two entities by its key.
type Compare<T> = dyn Fn(&T, &T) -> Ordering + Send + Sync;

/// One key of an order: made by [`Field::asc`] or [`Field::desc`], given to
/// [`Query::order_by`](crate::Query::order_by).
pub struct SortKey<T> {
    pub(crate) name: &'static str,
    pub(crate) source: Source,
    pub(crate) class: Class,
    pub(crate) descending: bool,
    pub(crate) compare: Box<Compare<T>>,
}

impl<T> fmt::Debug for SortKey<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let direction = if self.descending { "desc" } else { "asc" };
        write!(f, "{} {direction}", self.name)
    }
}

mod sealed {
    pub trait Sealed {}
}

/// Field types a query can compare and order by: the integer types,
/// `f32`, `f64`, `bool` and `String`. Sealed: each one's comparison in
/// SQL is checked to agree with its `PartialOrd` in Rust.
#[diagnostic::on_unimplemented(
    message = "a query cannot compare or order by a field of type `{Self}`",
    label = "not an integer, float, `bool` or `String` field",
    note = "queries compare fields of the types that SQL compares the way Rust does"
)]
pub trait Comparable: PartialOrd + Send + Sync + 'static + sealed::Sealed {
    #[doc(hidden)]
    const __CLASS: Class;
    #[doc(hidden)]
    fn __operand(&self) -> Option<Operand>;
    #[doc(hidden)]
    fn __is_nan(&self) -> bool {
        false
    }
    #[doc(hidden)]
    fn __has_nul(&self) -> bool {
        false
    }
}

macro_rules! comparable_ints {
    ($class:ident: $($t:ty),*) => {$(
        impl sealed::Sealed for $t {}
        impl Comparable for $t {
            const __CLASS: Class = Class::$class;
            fn __operand(&self) -> Option<Operand> {
                i64::try_from(*self).ok().map(Operand::Int)
            }
        }
    )*};
}
comparable_ints!(Int: i8, i16, i32, i64, u8, u16, u32, isize);
comparable_ints!(Wide: u64, usize, i128, u128);

macro_rules! comparable_floats {
    ($($t:ty),*) => {$(
        impl sealed::Sealed for $t {}
        impl Comparable for $t {
            const __CLASS: Class = Class::Real;
            fn __operand(&self) -> Option<Operand> {
                Some(Operand::Real(f64::from(*self)))
            }
            fn __is_nan(&self) -> bool {
                self.is_nan()
            }
        }
    )*};
}
comparable_floats!(f32, f64);

impl sealed::Sealed for bool {}
impl Comparable for bool {
    const __CLASS: Class = Class::Bool;
    fn __operand(&self) -> Option<Operand> {
        Some(Operand::Bool(*self))
    }
}

impl sealed::Sealed for String {}
impl Comparable for String {
    const __CLASS: Class = Class::Text;
    fn __operand(&self) -> Option<Operand> {
        Some(Operand::Text(self.clone()))
    }
    fn __has_nul(&self) -> bool {
        self.contains('\0')
    }
}
