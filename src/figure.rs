//! Figures that need not be finite, as the results file and the worker protocol hold them. JSON
//! has no infinity or NaN (serde_json writes both as `null`, which then no `f64` reads back), yet a
//! time can overflow to infinity (a mock time model's 1e308 times a run count) and an error can be
//! NaN (a solver that divided by zero): such a figure must travel from the worker and be
//! reported as what it is. So a finite figure is a JSON number and the others are the strings
//! `"inf"`, `"-inf"` and `"nan"`; `null` reads back as NaN (files written before this encoding,
//! where `null` stood for NaN).
//!
//! `Figure` is the one value type; the modules below are serde's `with` adapters for the shapes
//! the records use (`f64`, `Option<f64>`, `Vec<f64>`, a `(low, high)` pair, a map of facts).

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;

use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// One figure: finite as a number, else `"inf"`, `"-inf"` or `"nan"`.
#[derive(Debug, Clone, Copy)]
pub struct Figure(pub f64);

impl Figure {
    /// How a figure that is not finite is written (None: a finite one, written as a number).
    pub fn word(x: f64) -> Option<&'static str> {
        if x.is_nan() {
            Some("nan")
        } else if x == f64::INFINITY {
            Some("inf")
        } else if x == f64::NEG_INFINITY {
            Some("-inf")
        } else {
            None
        }
    }
}

impl Serialize for Figure {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match Figure::word(self.0) {
            Some(word) => s.serialize_str(word),
            None => s.serialize_f64(self.0),
        }
    }
}

struct FigureVisitor;

impl Visitor<'_> for FigureVisitor {
    type Value = Figure;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a number, or \"inf\", \"-inf\" or \"nan\"")
    }

    fn visit_f64<E: de::Error>(self, x: f64) -> Result<Figure, E> {
        Ok(Figure(x))
    }

    fn visit_i64<E: de::Error>(self, x: i64) -> Result<Figure, E> {
        Ok(Figure(x as f64))
    }

    fn visit_u64<E: de::Error>(self, x: u64) -> Result<Figure, E> {
        Ok(Figure(x as f64))
    }

    fn visit_str<E: de::Error>(self, word: &str) -> Result<Figure, E> {
        match word {
            "inf" => Ok(Figure(f64::INFINITY)),
            "-inf" => Ok(Figure(f64::NEG_INFINITY)),
            "nan" => Ok(Figure(f64::NAN)),
            _ => Err(E::invalid_value(de::Unexpected::Str(word), &self)),
        }
    }

    /// `null`: NaN, as serde_json wrote it before this encoding.
    fn visit_unit<E: de::Error>(self) -> Result<Figure, E> {
        Ok(Figure(f64::NAN))
    }

    fn visit_none<E: de::Error>(self) -> Result<Figure, E> {
        Ok(Figure(f64::NAN))
    }
}

impl<'de> Deserialize<'de> for Figure {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Figure, D::Error> {
        d.deserialize_any(FigureVisitor)
    }
}

impl JsonSchema for Figure {
    fn schema_name() -> Cow<'static, str> {
        "Figure".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "A number; one that is not finite is the string \"inf\", \"-inf\" or \"nan\" (null, in files written before: NaN).",
            "anyOf": [
                { "type": "number" },
                { "type": "string", "enum": ["inf", "-inf", "nan"] },
                { "type": "null" }
            ]
        })
    }
}

/// `f64`.
pub mod one {
    use super::*;

    pub fn serialize<S: Serializer>(x: &f64, s: S) -> Result<S::Ok, S::Error> {
        Figure(*x).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        Ok(Figure::deserialize(d)?.0)
    }
}

/// `Option<f64>`: None is `null`.
pub mod option {
    use super::*;

    pub fn serialize<S: Serializer>(x: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
        x.map(Figure).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
        Ok(Option::<Figure>::deserialize(d)?.map(|f| f.0))
    }
}

/// `Vec<f64>`.
pub mod list {
    use super::*;

    pub fn serialize<S: Serializer>(xs: &[f64], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(xs.iter().map(|x| Figure(*x)))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<f64>, D::Error> {
        Ok(Vec::<Figure>::deserialize(d)?
            .into_iter()
            .map(|f| f.0)
            .collect())
    }
}

/// `(low, high)`.
pub mod pair {
    use super::*;

    pub fn serialize<S: Serializer>(p: &(f64, f64), s: S) -> Result<S::Ok, S::Error> {
        (Figure(p.0), Figure(p.1)).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<(f64, f64), D::Error> {
        let (low, high) = <(Figure, Figure)>::deserialize(d)?;
        Ok((low.0, high.0))
    }
}

/// `Option<(low, high)>`.
pub mod option_pair {
    use super::*;

    pub fn serialize<S: Serializer>(p: &Option<(f64, f64)>, s: S) -> Result<S::Ok, S::Error> {
        p.map(|(low, high)| (Figure(low), Figure(high)))
            .serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<(f64, f64)>, D::Error> {
        let p = Option::<(Figure, Figure)>::deserialize(d)?;
        Ok(p.map(|(low, high)| (low.0, high.0)))
    }
}

/// `BTreeMap<String, f64>` (a case's facts).
pub mod map {
    use super::*;

    pub fn serialize<S: Serializer>(m: &BTreeMap<String, f64>, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(m.iter().map(|(k, v)| (k, Figure(*v))))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<String, f64>, D::Error> {
        Ok(BTreeMap::<String, Figure>::deserialize(d)?
            .into_iter()
            .map(|(k, v)| (k, v.0))
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Shapes {
        #[serde(with = "one")]
        x: f64,
        #[serde(with = "option")]
        o: Option<f64>,
        #[serde(with = "list")]
        v: Vec<f64>,
        #[serde(with = "pair")]
        p: (f64, f64),
        #[serde(with = "option_pair")]
        op: Option<(f64, f64)>,
        #[serde(with = "map")]
        m: BTreeMap<String, f64>,
    }

    #[test]
    fn non_finite_figures_are_words_and_read_back_as_themselves() {
        let shapes = Shapes {
            x: f64::INFINITY,
            o: Some(f64::NEG_INFINITY),
            v: vec![1.5, f64::INFINITY, 2e-9],
            p: (f64::NEG_INFINITY, 0.25),
            op: Some((1.0, f64::INFINITY)),
            m: BTreeMap::from([("iterations".to_string(), f64::INFINITY)]),
        };
        let text = serde_json::to_string(&shapes).unwrap();
        assert_eq!(
            text,
            r#"{"x":"inf","o":"-inf","v":[1.5,"inf",2e-9],"p":["-inf",0.25],"op":[1.0,"inf"],"m":{"iterations":"inf"}}"#
        );
        assert_eq!(serde_json::from_str::<Shapes>(&text).unwrap(), shapes);
    }

    #[test]
    fn nan_is_the_word_nan_and_null_reads_as_nan() {
        let text = serde_json::to_string(&Figure(f64::NAN)).unwrap();
        assert_eq!(text, r#""nan""#);
        assert!(serde_json::from_str::<Figure>(&text).unwrap().0.is_nan());
        assert!(serde_json::from_str::<Figure>("null").unwrap().0.is_nan());
        assert_eq!(serde_json::from_str::<Figure>("3").unwrap().0, 3.0);
        let e = serde_json::from_str::<Figure>(r#""Infinity""#).unwrap_err();
        assert!(e.to_string().contains(r#""inf", "-inf" or "nan""#), "{e}");
    }
}
