//! The encoding of a composite score: dimensions, the mixed-radix codec
//! between tuples and encoded scores, the stored text of the dimensions,
//! and which composite configurations make a board. No store access.

use crate::error::{Error, Result};
use crate::ranking::policy::{Policy, ScoreOrder};
use crate::seam::{dims_from_text, dims_text, DimSpec};
use std::ops::Range;

/// Most dimensions of a composite score.
pub const MAX_DIMENSIONS: usize = 4;

/// One dimension of a composite score: its range `[min, max)` and which
/// end ranks first. See [`RankingConfig::dimensions`](crate::ranking::RankingConfig::dimensions).
///
/// ```
/// use autoshard::ranking::{Dim, ScoreOrder};
///
/// let trophies = Dim::higher(0..10_000);
/// let retries = Dim::lower(0..1_000);
/// assert_eq!((retries.range(), retries.order()), (0..1_000, ScoreOrder::LowerIsBetter));
/// assert_eq!(trophies, Dim::new(0..10_000, ScoreOrder::HigherIsBetter));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Dim {
    min: i64,
    max: i64,
    order: ScoreOrder,
}

impl Dim {
    /// A dimension of values in `range` ranked by `order`.
    pub fn new(range: Range<i64>, order: ScoreOrder) -> Self {
        Dim {
            min: range.start,
            max: range.end,
            order,
        }
    }

    /// A dimension where the highest value ranks first: trophies, points.
    pub fn higher(range: Range<i64>) -> Self {
        Dim::new(range, ScoreOrder::HigherIsBetter)
    }

    /// A dimension where the lowest value ranks first: retries, elapsed
    /// time.
    pub fn lower(range: Range<i64>) -> Self {
        Dim::new(range, ScoreOrder::LowerIsBetter)
    }

    /// The values `[min, max)`.
    pub fn range(&self) -> Range<i64> {
        self.min..self.max
    }

    /// Which values rank first.
    pub fn order(&self) -> ScoreOrder {
        self.order
    }

    /// How many values the dimension holds (at least 1 once checked).
    fn width(&self) -> u128 {
        // Two's complement: the difference of two i64 fits u64 exactly.
        u128::from(self.max.wrapping_sub(self.min) as u64)
    }

    /// The value's digit: its offset, mirrored when lower is better, so a
    /// larger digit always ranks first.
    fn digit(&self, index: usize, value: i64) -> Result<u128> {
        if !(self.min..self.max).contains(&value) {
            return Err(Error::DimensionOutOfRange {
                dimension: index,
                value,
                min: self.min,
                max: self.max,
            });
        }
        let offset = u128::from(value.wrapping_sub(self.min) as u64);
        Ok(match self.order {
            ScoreOrder::HigherIsBetter => offset,
            ScoreOrder::LowerIsBetter => self.width() - 1 - offset,
        })
    }

    /// The value of a digit below the width.
    fn value(&self, digit: u128) -> i64 {
        let offset = match self.order {
            ScoreOrder::HigherIsBetter => digit,
            ScoreOrder::LowerIsBetter => self.width() - 1 - digit,
        };
        // offset < width <= 2^64 - 1, and min + offset < max: no wrap.
        self.min.wrapping_add(offset as u64 as i64)
    }
}

/// A composite board's dimensions, checked: 1 to [`MAX_DIMENSIONS`], none
/// empty, the product of the widths at most `u64::MAX`.
#[derive(Debug, Clone)]
pub(crate) struct Codec<'a> {
    dims: &'a [Dim],
    /// The encoded score of the all-zero-digits tuple: 0 when the product
    /// fits `i64` (so small boards show small encoded scores), else
    /// `i64::MIN` so that up to `u64::MAX` scores fit.
    base: i64,
    product: u128,
}

impl<'a> Codec<'a> {
    /// The codec of `dims`, or why they make no composite board.
    pub fn new(dims: &'a [Dim]) -> Result<Self> {
        let invalid = |reason: String| Err(Error::InvalidRanking { reason });
        if !(1..=MAX_DIMENSIONS).contains(&dims.len()) {
            return invalid(format!(
                "a composite score has 1 to {MAX_DIMENSIONS} dimensions, not {}",
                dims.len()
            ));
        }
        let mut product: u128 = 1;
        for (i, d) in dims.iter().enumerate() {
            if d.min >= d.max {
                return invalid(format!(
                    "dimension {i} has an empty range {}..{}",
                    d.min, d.max
                ));
            }
            // Each width is below 2^64 and the running product is kept at
            // most 2^64 - 1, so this cannot overflow u128.
            product *= d.width();
            if product > u128::from(u64::MAX) {
                return invalid(format!(
                    "the product of the dimensions' widths ({}) is over 2^64 - 1, the most \
                     scores a board holds",
                    product_text(dims)
                ));
            }
        }
        let base = if product <= i64::MAX as u128 {
            0
        } else {
            i64::MIN
        };
        Ok(Codec {
            dims,
            base,
            product,
        })
    }

    /// The encoded scores, `[min, max)` of the board underneath.
    pub fn range(&self) -> Range<i64> {
        // product <= u64::MAX, so base + product wraps into i64 exactly.
        self.base..self.base.wrapping_add(self.product as u64 as i64)
    }

    /// The encoded score of `values`, or which value is wrong.
    pub fn encode(&self, values: &[i64]) -> Result<i64> {
        if values.len() != self.dims.len() {
            return Err(Error::DimensionCount {
                expected: self.dims.len(),
                got: values.len(),
            });
        }
        let mut n: u128 = 0;
        for (i, (d, &v)) in self.dims.iter().zip(values).enumerate() {
            n = n * d.width() + d.digit(i, v)?;
        }
        Ok(self.base.wrapping_add(n as u64 as i64))
    }

    /// The tuple an encoded score stands for.
    pub fn decode(&self, score: i64) -> Result<Vec<i64>> {
        let mut n = u128::from(score.wrapping_sub(self.base) as u64);
        if !self.range().contains(&score) || n >= self.product {
            let r = self.range();
            return Err(Error::ScoreOutOfRange {
                score,
                min: r.start,
                max: r.end,
            });
        }
        let mut values = vec![0; self.dims.len()];
        for (d, v) in self.dims.iter().zip(&mut values).rev() {
            *v = d.value(n % d.width());
            n /= d.width();
        }
        Ok(values)
    }
}

fn product_text(dims: &[Dim]) -> String {
    let widths: Vec<String> = dims.iter().map(|d| d.width().to_string()).collect();
    widths.join(" × ")
}

/// The dimensions as the catalog record holds them.
pub(crate) fn specs(dims: &[Dim]) -> Vec<DimSpec> {
    dims.iter()
        .map(|d| DimSpec {
            min: d.min,
            max: d.max,
            order: d.order.stored().into(),
        })
        .collect()
}

/// The dimensions a catalog record holds, or why they are none this
/// version knows.
pub(crate) fn from_specs(specs: &[DimSpec]) -> std::result::Result<Vec<Dim>, String> {
    specs
        .iter()
        .map(|d| match ScoreOrder::from_stored(&d.order) {
            Some(order) => Ok(Dim::new(d.min..d.max, order)),
            None => Err(format!("unknown dimension order {:?}", d.order)),
        })
        .collect()
}

/// The dimensions as text (a family's stored configuration).
pub(crate) fn stored(dims: &[Dim]) -> String {
    dims_text(&specs(dims))
}

/// The dimensions of a text [`stored`] wrote, or why it is none.
pub(crate) fn from_stored(text: &str) -> std::result::Result<Vec<Dim>, String> {
    from_specs(&dims_from_text(text)?)
}

/// Why a composite configuration is not a board, if it is not: checked by
/// `RankingConfig::geometry` for `create` and `open`.
pub(crate) fn check_config(
    dims: &[Dim],
    range: Range<i64>,
    policy: Policy,
    order: ScoreOrder,
) -> Result<()> {
    let codec = Codec::new(dims)?;
    let invalid = |reason: String| Err(Error::InvalidRanking { reason });
    if policy == Policy::Increment {
        // A sum of tuples has no order-preserving definition: carrying
        // from one dimension into the next changes the tuple's meaning.
        return invalid("a composite board cannot use Policy::Increment".into());
    }
    if order != ScoreOrder::HigherIsBetter {
        return invalid("a composite board's order is per dimension (Dim::lower)".into());
    }
    if codec.range() != range {
        return invalid(format!(
            "stored range {range:?} is not the dimensions' {:?}",
            codec.range()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lexicographic(dims: &[Dim], a: &[i64], b: &[i64]) -> std::cmp::Ordering {
        for (d, (x, y)) in dims.iter().zip(a.iter().zip(b)) {
            let o = match d.order {
                ScoreOrder::HigherIsBetter => x.cmp(y),
                ScoreOrder::LowerIsBetter => y.cmp(x),
            };
            if o.is_ne() {
                return o;
            }
        }
        std::cmp::Ordering::Equal
    }

    /// Every tuple of a small board: the encoding is a bijection onto the
    /// range and orders like the tuples.
    #[test]
    fn encoding_is_an_order_preserving_bijection() {
        let dims = [Dim::higher(-2..1), Dim::lower(5..9), Dim::lower(-1..1)];
        let codec = Codec::new(&dims).unwrap();
        assert_eq!(codec.range(), 0..24);
        let mut tuples = Vec::new();
        for a in -2..1 {
            for b in 5..9 {
                for c in -1..1 {
                    tuples.push(vec![a, b, c]);
                }
            }
        }
        let mut seen = std::collections::BTreeSet::new();
        for t in &tuples {
            let e = codec.encode(t).unwrap();
            assert!(codec.range().contains(&e));
            assert_eq!(&codec.decode(e).unwrap(), t);
            assert!(seen.insert(e));
            for u in &tuples {
                let f = codec.encode(u).unwrap();
                assert_eq!(e.cmp(&f), lexicographic(&dims, t, u), "{t:?} {u:?}");
            }
        }
    }

    /// The widest boards: a product of exactly `2^64 - 1`, at the ends of
    /// `i64`, and one value more is refused naming the product.
    #[test]
    fn the_product_of_widths_is_limited_to_u64() {
        // 2^32 * (2^32 - 1) = 2^64 - 2^32: fits; full i64 in one dimension.
        let widest = [
            Dim::lower(i64::MIN..i64::MIN + (1 << 32)),
            Dim::higher(i64::MAX - ((1 << 32) - 1)..i64::MAX),
        ];
        let codec = Codec::new(&widest).unwrap();
        assert_eq!(codec.range().start, i64::MIN);
        let best = codec.encode(&[i64::MIN, i64::MAX - 1]).unwrap();
        assert_eq!(best, codec.range().end - 1);
        assert_eq!(
            codec.decode(best).unwrap(),
            [i64::MIN, i64::MAX - 1],
            "extremes round-trip"
        );
        let worst = codec
            .encode(&[i64::MIN + (1 << 32) - 1, widest[1].min])
            .unwrap();
        assert_eq!(worst, i64::MIN);
        let whole = [Dim::higher(i64::MIN..i64::MAX)];
        let codec = Codec::new(&whole).unwrap();
        assert_eq!(codec.range(), i64::MIN..i64::MAX);
        assert_eq!(codec.encode(&[-1]).unwrap(), -1);
        // 3 × 5 × 17 × 257 × 641 × 65537 × 6700417 = 2^64 - 1.
        let exact = [
            Dim::higher(0..3 * 5 * 17),
            Dim::lower(0..257 * 641),
            Dim::higher(0..65_537),
            Dim::lower(0..6_700_417),
        ];
        assert!(Codec::new(&exact).is_ok());
        for too_wide in [
            vec![Dim::higher(0..1 << 32), Dim::higher(0..1 << 32)],
            vec![Dim::higher(0..1 << 16); 4],
            vec![Dim::higher(i64::MIN..i64::MAX), Dim::lower(0..2)],
        ] {
            match Codec::new(&too_wide) {
                Err(Error::InvalidRanking { reason }) => {
                    assert!(reason.contains("product"), "{reason}")
                }
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn bad_tuples_name_what_is_wrong() {
        let dims = [Dim::higher(0..10), Dim::lower(-5..5)];
        let codec = Codec::new(&dims).unwrap();
        assert!(matches!(
            codec.encode(&[1]),
            Err(Error::DimensionCount {
                expected: 2,
                got: 1
            })
        ));
        assert!(matches!(
            codec.encode(&[1, 5]),
            Err(Error::DimensionOutOfRange {
                dimension: 1,
                value: 5,
                min: -5,
                max: 5
            })
        ));
        assert!(matches!(
            codec.decode(100),
            Err(Error::ScoreOutOfRange { score: 100, .. })
        ));
        for dims in [vec![], vec![Dim::higher(0..2); 5], vec![Dim::higher(3..3)]] {
            assert!(matches!(
                Codec::new(&dims),
                Err(Error::InvalidRanking { .. })
            ));
        }
    }

    #[test]
    fn stored_dimensions_round_trip() {
        let dims = vec![Dim::higher(-3..i64::MAX), Dim::lower(i64::MIN..0)];
        assert_eq!(from_stored(&stored(&dims)).unwrap(), dims);
        assert_eq!(from_stored("").unwrap(), vec![]);
        for bad in ["x:0:1", "h:0", "h:0:1,", "h:a:1"] {
            assert!(from_stored(bad).is_err(), "{bad}");
        }
    }
}
