//! Typed GeoJSON (RFC 7946) FeatureCollection, what the I/O benchmarks parse into.
//!
//! Geometry coordinates are checked against their geometry type while deserializing, so a
//! structural error carries serde_json's line and column like a syntax error does.

use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::{Map, Value};

#[derive(Deserialize)]
enum FeatureCollectionTag {
    FeatureCollection,
}

#[derive(Deserialize)]
enum FeatureTag {
    Feature,
}

#[derive(Deserialize)]
pub(crate) struct FeatureCollection {
    #[serde(rename = "type")]
    _kind: FeatureCollectionTag,
    pub(crate) features: Vec<Feature>,
}

#[derive(Deserialize)]
pub(crate) struct Feature {
    #[serde(rename = "type")]
    _kind: FeatureTag,
    #[serde(default)]
    #[allow(dead_code)] // parsed like a user's type would; not part of the checksum
    pub(crate) id: Option<Value>,
    pub(crate) geometry: Option<Geometry>,
    #[serde(default)]
    pub(crate) properties: Option<Map<String, Value>>,
}

#[derive(Deserialize, Clone, Copy, PartialEq, Eq, Debug)]
enum GeometryKind {
    Point,
    MultiPoint,
    LineString,
    MultiLineString,
    Polygon,
    MultiPolygon,
    GeometryCollection,
}

impl GeometryKind {
    /// Array nesting depth of `coordinates` (a position is depth 1).
    fn depth(self) -> Option<usize> {
        match self {
            Self::Point => Some(1),
            Self::MultiPoint | Self::LineString => Some(2),
            Self::MultiLineString | Self::Polygon => Some(3),
            Self::MultiPolygon => Some(4),
            Self::GeometryCollection => None,
        }
    }
}

#[derive(Deserialize)]
struct RawGeometry {
    #[serde(rename = "type")]
    kind: GeometryKind,
    #[serde(default)]
    coordinates: Option<Coordinates>,
    #[serde(default)]
    geometries: Option<Vec<Geometry>>,
}

#[derive(Deserialize)]
#[serde(try_from = "RawGeometry")]
pub(crate) enum Geometry {
    Coordinates(Coordinates),
    Collection(Vec<Geometry>),
}

impl TryFrom<RawGeometry> for Geometry {
    type Error = String;

    fn try_from(raw: RawGeometry) -> Result<Self, String> {
        match (raw.kind.depth(), raw.coordinates, raw.geometries) {
            (None, _, Some(members)) => Ok(Self::Collection(members)),
            (None, _, None) => Err("GeometryCollection without `geometries`".into()),
            (Some(depth), Some(coords), _) => {
                if coords.has_uniform_depth(depth) {
                    Ok(Self::Coordinates(coords))
                } else {
                    Err(format!(
                        "{:?} coordinates must be nested {depth} arrays deep",
                        raw.kind
                    ))
                }
            }
            (Some(_), None, _) => Err(format!("{:?} without `coordinates`", raw.kind)),
        }
    }
}

/// A position (an array of numbers) or an array of coordinates, nested as deep as its geometry.
pub(crate) enum Coordinates {
    Position(Vec<f64>),
    Nested(Vec<Coordinates>),
}

impl Coordinates {
    fn has_uniform_depth(&self, depth: usize) -> bool {
        match self {
            Self::Position(numbers) => depth == 1 && numbers.len() >= 2,
            Self::Nested(items) => {
                depth > 1 && items.iter().all(|item| item.has_uniform_depth(depth - 1))
            }
        }
    }
}

impl<'de> Deserialize<'de> for Coordinates {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_seq(CoordinatesVisitor)
    }
}

/// One element of a coordinates array: a number (inside a position) or a deeper array.
enum Element {
    Number(f64),
    Array(Coordinates),
}

impl<'de> Deserialize<'de> for Element {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ElementVisitor)
    }
}

struct ElementVisitor;

impl<'de> Visitor<'de> for ElementVisitor {
    type Value = Element;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a number or an array of coordinates")
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Element, E> {
        Ok(Element::Number(v))
    }
    #[allow(clippy::cast_precision_loss)] // GeoJSON numbers are doubles
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Element, E> {
        Ok(Element::Number(v as f64))
    }
    #[allow(clippy::cast_precision_loss)]
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Element, E> {
        Ok(Element::Number(v as f64))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Element, A::Error> {
        CoordinatesVisitor.visit_seq(seq).map(Element::Array)
    }
}

struct CoordinatesVisitor;

impl<'de> Visitor<'de> for CoordinatesVisitor {
    type Value = Coordinates;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("an array of coordinates")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Coordinates, A::Error> {
        let mut numbers = Vec::new();
        let mut arrays = Vec::new();
        while let Some(element) = seq.next_element::<Element>()? {
            match element {
                Element::Number(n) => numbers.push(n),
                Element::Array(a) => arrays.push(a),
            }
            if !numbers.is_empty() && !arrays.is_empty() {
                return Err(de::Error::custom("coordinates mix numbers and arrays"));
            }
        }
        Ok(if arrays.is_empty() && !numbers.is_empty() {
            Coordinates::Position(numbers)
        } else {
            Coordinates::Nested(arrays)
        })
    }
}

/// What proves a document was really parsed: equal across parse modes for the same file.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Checksum {
    pub(crate) features: u64,
    pub(crate) positions: u64,
    pub(crate) coordinate_sum: f64,
    pub(crate) properties: u64,
}

impl FeatureCollection {
    pub(crate) fn checksum(&self) -> Checksum {
        let mut sum = Checksum {
            features: self.features.len() as u64,
            ..Checksum::default()
        };
        for feature in &self.features {
            sum.properties += feature.properties.as_ref().map_or(0, |p| p.len() as u64);
            if let Some(geometry) = &feature.geometry {
                geometry.add_to(&mut sum);
            }
        }
        sum
    }
}

impl Geometry {
    fn add_to(&self, sum: &mut Checksum) {
        match self {
            Self::Coordinates(coords) => coords.add_to(sum),
            Self::Collection(members) => members.iter().for_each(|g| g.add_to(sum)),
        }
    }
}

impl Coordinates {
    fn add_to(&self, sum: &mut Checksum) {
        match self {
            Self::Position(numbers) => {
                sum.positions += 1;
                sum.coordinate_sum += numbers.iter().sum::<f64>();
            }
            Self::Nested(items) => items.iter().for_each(|c| c.add_to(sum)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<FeatureCollection, serde_json::Error> {
        serde_json::from_str(text)
    }

    #[test]
    fn every_geometry_type_parses() -> Result<(), serde_json::Error> {
        let text = r#"{"type":"FeatureCollection","features":[
          {"type":"Feature","geometry":{"type":"Point","coordinates":[1,2]},"properties":{"a":1}},
          {"type":"Feature","geometry":{"type":"LineString","coordinates":[[1,2],[3,4,5]]},"properties":null},
          {"type":"Feature","geometry":{"type":"Polygon","coordinates":[[[0,0],[1,0],[1,1],[0,0]]]}},
          {"type":"Feature","geometry":{"type":"MultiPolygon","coordinates":[[[[0,0],[1,0],[0,0]]]]},"properties":{}},
          {"type":"Feature","geometry":{"type":"GeometryCollection","geometries":[{"type":"Point","coordinates":[1.5,2.5]}]},"properties":{}},
          {"type":"Feature","geometry":null,"properties":{"b":[1,2]},"id":"x"}
        ],"bbox":[0,0,1,1]}"#;
        let sum = parse(text)?.checksum();
        assert_eq!(sum.features, 6);
        assert_eq!(sum.positions, 1 + 2 + 4 + 3 + 1);
        assert!((sum.coordinate_sum - 26.0).abs() < 1e-9);
        Ok(())
    }

    #[test]
    fn wrong_nesting_is_an_error_with_position() {
        let text = r#"{"type":"FeatureCollection","features":[{"type":"Feature","geometry":{"type":"Point","coordinates":[[1,2]]}}]}"#;
        let err = parse(text).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(
            err.contains("Point coordinates") && err.contains("line 1"),
            "{err}"
        );
    }

    #[test]
    fn not_a_feature_collection() {
        assert!(parse(r#"{"type":"Feature","features":[]}"#).is_err());
        assert!(parse("[1,2,3]").is_err());
    }
}
