//! How sharded field values are stored.
//!
//! Scalars are stored natively (an SQL `INTEGER` / `REAL`) so that SQL can
//! read and aggregate them; everything else is stored as JSON text.

use serde::de::{self, DeserializeOwned, IntoDeserializer, Visitor};
use serde::ser::{self, Serialize};

/// A sharded value as it is stored: integers and floats natively, anything else as JSON text.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A value that serializes as a single integer fitting in `i64`.
    Integer(i64),
    /// A value that serializes as a single finite `f32` / `f64`.
    Real(f64),
    /// Any other value, as JSON.
    Text(String),
}

/// Why a value could not be encoded or decoded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ValueError {
    /// A float that is NaN or infinite anywhere inside the value (databases
    /// can't store them faithfully; SQLite turns NaN into NULL).
    #[error("{0} cannot be stored")]
    NonFinite(f64),
    /// serde failed to serialize or deserialize (message from serde / serde_json).
    #[error("{0}")]
    Serde(String),
    /// A string holding a NUL character in an entity's document (its
    /// unsharded fields): PostgreSQL stores it, but cannot read a document
    /// holding one as JSON, which every query on the kind's document
    /// fields does; the stores agree to refuse it everywhere.
    #[error("a string holding a NUL character cannot be stored in a document")]
    Nul,
}

impl ser::Error for ValueError {
    fn custom<T: std::fmt::Display>(msg: T) -> Self {
        ValueError::Serde(msg.to_string())
    }
}

impl de::Error for ValueError {
    fn custom<T: std::fmt::Display>(msg: T) -> Self {
        ValueError::Serde(msg.to_string())
    }
}

impl From<serde_json::Error> for ValueError {
    fn from(e: serde_json::Error) -> Self {
        ValueError::Serde(e.to_string())
    }
}

/// Encodes `value` for storage.
///
/// A top-level integer that fits in `i64` becomes [`Value::Integer`], a
/// top-level float becomes [`Value::Real`] (newtype structs count as what they
/// wrap); everything else, including `u64` above `i64::MAX`, becomes JSON
/// [`Value::Text`].
///
/// # Errors
/// [`ValueError::NonFinite`] if a NaN or infinite float occurs anywhere in the
/// value, [`ValueError::Serde`] if serialization fails.
pub fn encode<T: Serialize + ?Sized>(value: &T) -> Result<Value, ValueError> {
    match value.serialize(Classifier)? {
        Some(scalar) => Ok(scalar),
        // The walk above already rejected non-finite floats, which serde_json
        // would silently write as `null`.
        None => Ok(Value::Text(serde_json::to_string(value)?)),
    }
}

/// Decodes a stored value into `T`.
///
/// Integers decode into any integer type (with range checks), floats and
/// newtype structs; reals into floats; text is parsed as JSON.
///
/// # Errors
/// [`ValueError::Serde`] if the value does not fit `T`.
pub fn decode<T: DeserializeOwned>(value: &Value) -> Result<T, ValueError> {
    match value {
        Value::Integer(i) => T::deserialize(Scalar(i.into_deserializer())),
        Value::Real(f) => T::deserialize(Scalar(f.into_deserializer())),
        Value::Text(s) => Ok(serde_json::from_str(s)?),
    }
}

/// Whether JSON text (as serde_json writes it) holds a string with a NUL
/// character, which it writes as the escape `\u0000`. A backslash outside
/// an escape cannot occur in JSON, so walking escape by escape is exact:
/// `"\\u0000"` (a backslash, then `u0000`) is not a NUL.
pub(crate) fn json_holds_nul(json: &str) -> bool {
    let mut bytes = json.as_bytes().iter();
    while let Some(&b) = bytes.next() {
        if b != b'\\' {
            continue;
        }
        if bytes.next() == Some(&b'u') && bytes.as_slice().starts_with(b"0000") {
            return true;
        }
    }
    false
}

/// Serializer that yields the stored scalar for a top-level integer or float
/// (`None` for anything else) and fails on any non-finite float it meets.
struct Classifier;

/// Walks the parts of a compound value only to check their floats; a compound
/// value is never a scalar.
struct Walk;

fn integer<N: TryInto<i64>>(n: N) -> Result<Option<Value>, ValueError> {
    // Out of range (u64 above i64::MAX, big i128) stays lossless as a JSON number.
    Ok(n.try_into().ok().map(Value::Integer))
}

fn real(f: f64) -> Result<Option<Value>, ValueError> {
    if f.is_finite() {
        Ok(Some(Value::Real(f)))
    } else {
        Err(ValueError::NonFinite(f))
    }
}

/// Checks `value` for non-finite floats, discarding its classification.
fn check<T: Serialize + ?Sized>(value: &T) -> Result<(), ValueError> {
    value.serialize(Classifier).map(drop)
}

fn not_scalar<T: Serialize + ?Sized>(value: &T) -> Result<Option<Value>, ValueError> {
    check(value).map(|()| None)
}

impl ser::Serializer for Classifier {
    type Ok = Option<Value>;
    type Error = ValueError;
    type SerializeSeq = Walk;
    type SerializeTuple = Walk;
    type SerializeTupleStruct = Walk;
    type SerializeTupleVariant = Walk;
    type SerializeMap = Walk;
    type SerializeStruct = Walk;
    type SerializeStructVariant = Walk;

    fn serialize_bool(self, _: bool) -> Result<Self::Ok, ValueError> {
        Ok(None)
    }
    fn serialize_i8(self, v: i8) -> Result<Self::Ok, ValueError> {
        integer(v)
    }
    fn serialize_i16(self, v: i16) -> Result<Self::Ok, ValueError> {
        integer(v)
    }
    fn serialize_i32(self, v: i32) -> Result<Self::Ok, ValueError> {
        integer(v)
    }
    fn serialize_i64(self, v: i64) -> Result<Self::Ok, ValueError> {
        integer(v)
    }
    fn serialize_i128(self, v: i128) -> Result<Self::Ok, ValueError> {
        integer(v)
    }
    fn serialize_u8(self, v: u8) -> Result<Self::Ok, ValueError> {
        integer(v)
    }
    fn serialize_u16(self, v: u16) -> Result<Self::Ok, ValueError> {
        integer(v)
    }
    fn serialize_u32(self, v: u32) -> Result<Self::Ok, ValueError> {
        integer(v)
    }
    fn serialize_u64(self, v: u64) -> Result<Self::Ok, ValueError> {
        integer(v)
    }
    fn serialize_u128(self, v: u128) -> Result<Self::Ok, ValueError> {
        integer(v)
    }
    fn serialize_f32(self, v: f32) -> Result<Self::Ok, ValueError> {
        real(f64::from(v))
    }
    fn serialize_f64(self, v: f64) -> Result<Self::Ok, ValueError> {
        real(v)
    }
    fn serialize_char(self, _: char) -> Result<Self::Ok, ValueError> {
        Ok(None)
    }
    fn serialize_str(self, _: &str) -> Result<Self::Ok, ValueError> {
        Ok(None)
    }
    fn serialize_bytes(self, _: &[u8]) -> Result<Self::Ok, ValueError> {
        Ok(None)
    }
    fn serialize_none(self) -> Result<Self::Ok, ValueError> {
        Ok(None)
    }
    // `Some(5)` stays JSON text: an integer deserializer can't produce an Option.
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<Self::Ok, ValueError> {
        not_scalar(value)
    }
    fn serialize_unit(self) -> Result<Self::Ok, ValueError> {
        Ok(None)
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<Self::Ok, ValueError> {
        Ok(None)
    }
    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
    ) -> Result<Self::Ok, ValueError> {
        Ok(None)
    }
    // serde_json writes a newtype struct as its content, so it is that scalar.
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<Self::Ok, ValueError> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        value: &T,
    ) -> Result<Self::Ok, ValueError> {
        not_scalar(value)
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Walk, ValueError> {
        Ok(Walk)
    }
    fn serialize_tuple(self, _: usize) -> Result<Walk, ValueError> {
        Ok(Walk)
    }
    fn serialize_tuple_struct(self, _: &'static str, _: usize) -> Result<Walk, ValueError> {
        Ok(Walk)
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Walk, ValueError> {
        Ok(Walk)
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Walk, ValueError> {
        Ok(Walk)
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Walk, ValueError> {
        Ok(Walk)
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Walk, ValueError> {
        Ok(Walk)
    }
}

/// Implements a compound-serializer trait for [`Walk`] whose per-element method
/// takes just the element.
macro_rules! walk_elements {
    ($($trait:ident::$method:ident),*) => {$(
        impl ser::$trait for Walk {
            type Ok = Option<Value>;
            type Error = ValueError;
            fn $method<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), ValueError> {
                check(value)
            }
            fn end(self) -> Result<Option<Value>, ValueError> {
                Ok(None)
            }
        }
    )*};
}

walk_elements!(
    SerializeSeq::serialize_element,
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field,
    SerializeTupleVariant::serialize_field
);

impl ser::SerializeMap for Walk {
    type Ok = Option<Value>;
    type Error = ValueError;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), ValueError> {
        check(key)
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), ValueError> {
        check(value)
    }
    fn end(self) -> Result<Option<Value>, ValueError> {
        Ok(None)
    }
}

impl ser::SerializeStruct for Walk {
    type Ok = Option<Value>;
    type Error = ValueError;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        _: &'static str,
        value: &T,
    ) -> Result<(), ValueError> {
        check(value)
    }
    fn end(self) -> Result<Option<Value>, ValueError> {
        Ok(None)
    }
}

impl ser::SerializeStructVariant for Walk {
    type Ok = Option<Value>;
    type Error = ValueError;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        _: &'static str,
        value: &T,
    ) -> Result<(), ValueError> {
        check(value)
    }
    fn end(self) -> Result<Option<Value>, ValueError> {
        Ok(None)
    }
}

/// Wraps serde's primitive deserializers, which forward everything to
/// `deserialize_any` and so reject newtype structs and `Option`s.
struct Scalar<D>(D);

impl<'de, D: de::Deserializer<'de, Error = ValueError>> de::Deserializer<'de> for Scalar<D> {
    type Error = ValueError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ValueError> {
        self.0.deserialize_any(visitor)
    }
    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        visitor: V,
    ) -> Result<V::Value, ValueError> {
        visitor.visit_newtype_struct(self)
    }
    // A scalar written by SQL (e.g. `v + 1`) may be read into an `Option` field.
    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ValueError> {
        visitor.visit_some(self)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf unit unit_struct seq tuple tuple_struct map struct enum
        identifier ignored_any
    }
}

/// What a sharded field's type must be: stored (serde), compared with the
/// neutral element (to skip empty writes), and kept in `Pending` across
/// threads. Implemented for every such type; name it in the bounds of a
/// generic entity's impl blocks: `impl<T: autoshard::ShardValue> Counter<T>`.
pub trait ShardValue: Serialize + DeserializeOwned + PartialEq + Send + Sync + 'static {}
impl<T: Serialize + DeserializeOwned + PartialEq + Send + Sync + 'static> ShardValue for T {}

/// The error of a value that does not encode or decode as its field's
/// type.
pub(crate) fn invalid_value(
    kind: &'static str,
    field: &'static str,
    e: ValueError,
) -> crate::error::Error {
    crate::error::Error::InvalidValue {
        kind,
        field,
        reason: e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde::{Deserialize, Serialize};
    use std::collections::{BTreeMap, HashSet};
    use std::fmt::Debug;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Score(i64);

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Ratio(f64);

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Stats {
        name: String,
        hits: u64,
        best: f64,
        tags: Vec<String>,
    }

    fn round_trip<T: Serialize + DeserializeOwned + PartialEq + Debug>(value: T) -> Value {
        let stored = encode(&value).unwrap();
        assert_eq!(decode::<T>(&stored).unwrap(), value, "via {stored:?}");
        stored
    }

    fn non_finite<T: Serialize>(value: T) -> f64 {
        match encode(&value) {
            Err(ValueError::NonFinite(f)) => f,
            other => panic!("expected NonFinite, got {other:?}"),
        }
    }

    #[test]
    fn integers_are_native() {
        assert_eq!(round_trip(0_i64), Value::Integer(0));
        assert_eq!(round_trip(i64::MIN), Value::Integer(i64::MIN));
        assert_eq!(round_trip(i64::MAX), Value::Integer(i64::MAX));
        assert_eq!(round_trip(-7_i32), Value::Integer(-7));
        assert_eq!(round_trip(255_u8), Value::Integer(255));
        assert_eq!(round_trip(i64::MAX as u64), Value::Integer(i64::MAX));
        assert_eq!(round_trip(-3_i128), Value::Integer(-3));
        assert_eq!(round_trip(Score(42)), Value::Integer(42));
    }

    #[test]
    fn big_integers_are_json_numbers() {
        assert_eq!(round_trip(u64::MAX), Value::Text(u64::MAX.to_string()));
        assert_eq!(
            encode(&(i64::MAX as u64 + 1)).unwrap(),
            Value::Text("9223372036854775808".into())
        );
        assert_eq!(
            encode(&u128::MAX).unwrap(),
            Value::Text(u128::MAX.to_string())
        );
    }

    #[test]
    fn floats_are_native() {
        for f in [0.0, 1.5, -2.25, f64::MIN_POSITIVE, f64::MAX, f64::MIN] {
            assert_eq!(round_trip(f), Value::Real(f));
        }
        let Value::Real(z) = round_trip(-0.0_f64) else {
            panic!("not Real")
        };
        assert!(z.is_sign_negative());
        assert_eq!(round_trip(0.5_f32), Value::Real(0.5));
        assert_eq!(round_trip(Ratio(0.25)), Value::Real(0.25));
    }

    #[test]
    fn everything_else_is_json() {
        assert_eq!(
            round_trip(String::from("hé \"x\"")),
            Value::Text(r#""hé \"x\"""#.into())
        );
        assert_eq!(round_trip(true), Value::Text("true".into()));
        assert_eq!(round_trip(Some(5_i64)), Value::Text("5".into()));
        assert_eq!(round_trip(None::<i64>), Value::Text("null".into()));
        assert_eq!(
            round_trip((u64::MAX, -1_i64, 2_i64)),
            Value::Text(format!("[{},-1,2]", u64::MAX))
        );
        assert_eq!(
            round_trip(vec![1.5, -0.0, 3.0]),
            Value::Text("[1.5,-0.0,3.0]".into())
        );
        round_trip(HashSet::from(["a".to_string(), "b".to_string()]));
        let map = BTreeMap::from([("x".to_string(), 1_i64), ("y".to_string(), i64::MIN)]);
        assert_eq!(
            round_trip(map),
            Value::Text(format!(r#"{{"x":1,"y":{}}}"#, i64::MIN))
        );
        round_trip(Stats {
            name: "n".into(),
            hits: u64::MAX,
            best: 0.1,
            tags: vec!["t".into()],
        });
    }

    #[test]
    fn nested_floats_round_trip_exactly() {
        // serde_json's default float parser can be off by one ulp; this needs
        // its `float_roundtrip` feature.
        let v = vec![5.035968890161794e98, 0.1 + 0.2, f64::MIN_POSITIVE];
        assert_eq!(
            round_trip(v.clone()),
            Value::Text(serde_json::to_string(&v).unwrap())
        );
    }

    #[test]
    fn non_finite_floats_are_rejected_anywhere() {
        assert!(non_finite(f64::NAN).is_nan());
        assert_eq!(non_finite(f64::INFINITY), f64::INFINITY);
        assert_eq!(non_finite(f32::NEG_INFINITY), f64::NEG_INFINITY);
        assert_eq!(non_finite(Ratio(f64::INFINITY)), f64::INFINITY);
        assert!(non_finite((1_u64, f64::NAN, 2_i64)).is_nan());
        assert!(non_finite(vec![1.0, f64::NAN]).is_nan());
        assert!(non_finite(Some(f64::NAN)).is_nan());
        assert!(non_finite(BTreeMap::from([("k", f64::NEG_INFINITY)])).is_infinite());
        let stats = Stats {
            name: "n".into(),
            hits: 1,
            best: f64::INFINITY,
            tags: vec![],
        };
        assert_eq!(non_finite(stats), f64::INFINITY);
    }

    #[test]
    fn nul_is_found_in_any_json_string_and_only_there() {
        fn json<T: Serialize>(v: T) -> String {
            serde_json::to_string(&v).unwrap()
        }
        assert!(json_holds_nul(&json("a\0b")));
        assert!(json_holds_nul(&json(vec!["x", "\0"])));
        assert!(json_holds_nul(&json(BTreeMap::from([("k\0", 1)]))));
        assert!(json_holds_nul(&json(Some('\0'))));
        // Control: an escaped backslash before `u0000`, other escapes and
        // other control characters are not NUL.
        assert!(!json_holds_nul(&json("\\u0000")));
        assert!(!json_holds_nul(&json("\\\u{1}0000 \"\n\t")));
        assert!(!json_holds_nul(&json(vec![0_u8, 0])));
        assert!(!json_holds_nul(&json("u0000")));
    }

    #[test]
    fn error_messages() {
        assert_eq!(
            ValueError::NonFinite(f64::NAN).to_string(),
            "NaN cannot be stored"
        );
        assert_eq!(
            ValueError::NonFinite(f64::INFINITY).to_string(),
            "inf cannot be stored"
        );
        assert_eq!(
            ValueError::NonFinite(f64::NEG_INFINITY).to_string(),
            "-inf cannot be stored"
        );
    }

    #[test]
    fn decode_errors() {
        let corrupt = decode::<BTreeMap<String, i64>>(&Value::Text("{not json".into()));
        assert!(matches!(corrupt, Err(ValueError::Serde(_))), "{corrupt:?}");
        let too_big = decode::<u8>(&Value::Integer(300));
        assert!(matches!(too_big, Err(ValueError::Serde(_))), "{too_big:?}");
        assert!(matches!(
            decode::<u64>(&Value::Integer(-1)),
            Err(ValueError::Serde(_))
        ));
        assert!(matches!(
            decode::<i64>(&Value::Real(1.5)),
            Err(ValueError::Serde(_))
        ));
        assert!(matches!(
            decode::<String>(&Value::Integer(1)),
            Err(ValueError::Serde(_))
        ));
    }

    #[test]
    fn scalars_decode_leniently() {
        assert_eq!(decode::<f64>(&Value::Integer(3)).unwrap(), 3.0);
        assert_eq!(decode::<Ratio>(&Value::Integer(3)).unwrap(), Ratio(3.0));
        assert_eq!(decode::<Option<i64>>(&Value::Integer(3)).unwrap(), Some(3));
        assert_eq!(decode::<f32>(&Value::Real(0.5)).unwrap(), 0.5);
    }

    proptest! {
        #[test]
        fn any_i64_round_trips(n: i64) {
            prop_assert_eq!(encode(&n).unwrap(), Value::Integer(n));
            prop_assert_eq!(decode::<i64>(&Value::Integer(n)).unwrap(), n);
        }

        #[test]
        fn any_u64_round_trips(n: u64) {
            prop_assert_eq!(decode::<u64>(&encode(&n).unwrap()).unwrap(), n);
        }

        #[test]
        fn any_finite_f64_round_trips(f in proptest::num::f64::NORMAL | proptest::num::f64::SUBNORMAL | proptest::num::f64::ZERO) {
            let stored = encode(&f).unwrap();
            prop_assert_eq!(decode::<f64>(&stored).unwrap().to_bits(), f.to_bits());
        }

        #[test]
        fn any_f64_vec_round_trips(v in proptest::collection::vec(proptest::num::f64::NORMAL | proptest::num::f64::ZERO, 0..8)) {
            let back = decode::<Vec<f64>>(&encode(&v).unwrap()).unwrap();
            prop_assert_eq!(back.iter().map(|f| f.to_bits()).collect::<Vec<_>>(),
                            v.iter().map(|f| f.to_bits()).collect::<Vec<_>>());
        }

        #[test]
        fn any_strings_round_trip(v: Vec<String>) {
            prop_assert_eq!(decode::<Vec<String>>(&encode(&v).unwrap()).unwrap(), v);
        }
    }
}
