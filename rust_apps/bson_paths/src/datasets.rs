//! The generated datasets: the article's find reply and three richer document shapes.
//!
//! Every dataset's documents carry the article's three fields (`hello`, `anotherKey`, `number`) so the
//! deserialization paths run on all of them (the other fields are skipped as unknown); the rest is for
//! the Python decoder benchmarks. Generation is deterministic: document `i` depends only on the dataset
//! and `i`.

use std::fmt;
use std::str::FromStr;

use crate::Error;
use crate::writer::Writer;

/// Which documents to generate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dataset {
    /// The article's `{"hello": "world", "anotherKey": "anotherValue", "number": 1234}` (int32), 63 bytes.
    Find,
    /// The three fields plus 97 mixed scalars (int32, int64, double, ASCII and non-ASCII strings, bool,
    /// null, datetime), ~2.4 KB.
    Flat,
    /// The three fields plus a `tree` nested [`NESTED_DEPTH`] documents deep, each level holding an
    /// int32, a string, an array of doubles and an array of two small documents.
    Nested,
    /// The three fields plus one value of every common BSON type: double, string, document, array,
    /// binary (subtypes 0 and 4), ObjectId, bool, datetime, null, regex, int32, timestamp, int64,
    /// decimal128.
    Types,
}

/// Nesting depth of the `nested` dataset's `tree` (its documents are `NESTED_DEPTH + 1` levels deep).
pub const NESTED_DEPTH: usize = 32;

impl Dataset {
    pub const ALL: [Dataset; 4] = [
        Dataset::Find,
        Dataset::Flat,
        Dataset::Nested,
        Dataset::Types,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Dataset::Find => "find",
            Dataset::Flat => "flat",
            Dataset::Nested => "nested",
            Dataset::Types => "types",
        }
    }
}

impl fmt::Display for Dataset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Dataset {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Dataset::ALL
            .into_iter()
            .find(|d| d.name() == s)
            .ok_or_else(|| Error::UnknownDataset(s.to_owned()))
    }
}

/// `n` documents of `dataset`, concatenated (what `bson.decode_all` reads).
pub fn encode_dataset(dataset: Dataset, n: usize) -> Vec<u8> {
    let mut w = Writer::with_capacity(n.saturating_mul(approx_doc_len(dataset)));
    for i in 0..n {
        w.begin();
        write_fields(&mut w, dataset, i);
        w.end();
    }
    w.into_bytes()
}

/// One find reply `{cursor: {id: 0 (int64), ns: "db.coll", firstBatch: [n documents]}, ok: 1.0}`.
pub fn encode_dataset_reply(dataset: Dataset, n: usize) -> Vec<u8> {
    let mut w = Writer::with_capacity(64 + n.saturating_mul(approx_doc_len(dataset) + 6));
    w.begin();
    w.begin_doc("cursor");
    w.int64("id", 0);
    w.string("ns", "db.coll");
    w.begin_array("firstBatch");
    for i in 0..n {
        w.begin_doc_at(i);
        write_fields(&mut w, dataset, i);
        w.end();
    }
    w.end();
    w.end();
    w.double("ok", 1.0);
    w.end();
    w.into_bytes()
}

/// The article's reply: `n` copies of its document.
pub fn encode_reply(n: usize) -> Vec<u8> {
    encode_dataset_reply(Dataset::Find, n)
}

/// `n` copies of the article's document, concatenated.
pub fn encode_documents(n: usize) -> Vec<u8> {
    encode_dataset(Dataset::Find, n)
}

fn approx_doc_len(dataset: Dataset) -> usize {
    match dataset {
        Dataset::Find => 63,
        Dataset::Flat => 2_600,
        Dataset::Nested => 4_500,
        Dataset::Types => 420,
    }
}

fn write_fields(w: &mut Writer, dataset: Dataset, i: usize) {
    let mut rng = SplitMix64::new(dataset as u64 * 0x1000_0000 + i as u64);
    match dataset {
        Dataset::Find => {
            w.string("hello", "world");
            w.string("anotherKey", "anotherValue");
            w.int32("number", 1234);
        }
        Dataset::Flat => {
            article_fields(w, &mut rng);
            flat_fields(w, &mut rng);
        }
        Dataset::Nested => {
            article_fields(w, &mut rng);
            w.begin_doc("tree");
            nested_level(w, &mut rng, 0);
            w.end();
        }
        Dataset::Types => {
            article_fields(w, &mut rng);
            every_type(w, &mut rng, i);
        }
    }
}

/// The article's fields with per-document values, so checksums see every document.
fn article_fields(w: &mut Writer, rng: &mut SplitMix64) {
    w.string("hello", &format!("world-{}", rng.below(1000)));
    w.string("anotherKey", "anotherValue");
    w.int32("number", rng.below(100_000) as i32);
}

/// Mixed text: mostly ASCII, every fifth value with multi-byte UTF-8 (accents, CJK, an emoji).
fn text(rng: &mut SplitMix64, len: usize) -> String {
    const ASCII: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789 -_";
    const WIDE: [&str; 4] = ["é", "ß", "日本", "🦀"];
    let mut s: String = (0..len)
        .map(|_| char::from(ASCII[rng.below(ASCII.len() as u64) as usize]))
        .collect();
    if rng.below(5) == 0 {
        s.push_str(WIDE[rng.below(WIDE.len() as u64) as usize]);
    }
    s
}

/// 2000-01-01T00:00:00Z plus up to ~40 years, in milliseconds.
fn datetime_millis(rng: &mut SplitMix64) -> i64 {
    946_684_800_000 + rng.below(40 * 365 * 86_400_000) as i64
}

fn flat_fields(w: &mut Writer, rng: &mut SplitMix64) {
    for k in 0..97 {
        let key = format!("field_{k:02}");
        match k % 8 {
            0 => w.int32(&key, rng.below(1 << 31) as i32 - (1 << 30)),
            1 => w.int64(&key, (rng.next() >> 1) as i64),
            2 => w.double(&key, rng.unit() * 1e6),
            3 => w.string(&key, &text(rng, 12)),
            4 => w.bool(&key, rng.below(2) == 1),
            5 => w.null(&key),
            6 => w.datetime(&key, datetime_millis(rng)),
            _ => w.string(&key, &text(rng, 40)),
        }
    }
}

fn nested_level(w: &mut Writer, rng: &mut SplitMix64, depth: usize) {
    w.int32("level", depth as i32);
    w.string("name", &text(rng, 10));
    w.begin_array("weights");
    for j in 0..3 {
        w.double_at(j, rng.unit());
    }
    w.end();
    w.begin_array("items");
    for j in 0..2 {
        w.begin_doc_at(j);
        w.string("sku", &text(rng, 6));
        w.int32("qty", rng.below(100) as i32);
        w.end();
    }
    w.end();
    if depth < NESTED_DEPTH {
        w.begin_doc("child");
        nested_level(w, rng, depth + 1);
        w.end();
    } else {
        w.bool("leaf", true);
    }
}

fn every_type(w: &mut Writer, rng: &mut SplitMix64, i: usize) {
    w.double("double", rng.unit() * 1e3 - 500.0);
    w.string("string", &text(rng, 24));
    w.begin_doc("document");
    w.int32("a", rng.below(1000) as i32);
    w.string("b", &text(rng, 8));
    w.end();
    w.begin_array("array");
    w.int32_at(0, rng.below(1000) as i32);
    w.string_at(1, &text(rng, 5));
    w.double_at(2, rng.unit());
    w.bool_at(3, i.is_multiple_of(2));
    w.end();
    let blob: Vec<u8> = (0..32).map(|_| rng.next() as u8).collect();
    w.binary("binary", 0, &blob);
    let uuid: Vec<u8> = (0..16).map(|_| rng.next() as u8).collect();
    w.binary("uuid", 4, &uuid);
    let mut oid = [0u8; 12];
    oid[..4].copy_from_slice(&(1_700_000_000u32 + i as u32).to_be_bytes());
    oid[4..].copy_from_slice(&rng.next().to_be_bytes());
    w.object_id("objectId", oid);
    w.bool("bool", i.is_multiple_of(3));
    w.datetime("datetime", datetime_millis(rng));
    w.null("null");
    w.regex("regex", "^ab+c[0-9]*$", "im");
    w.int32("int32", rng.below(1 << 20) as i32);
    w.timestamp(
        "timestamp",
        1_700_000_000 + i as u32,
        rng.below(1000) as u32,
    );
    w.int64("int64", (rng.next() >> 2) as i64);
    w.decimal128("decimal128", decimal128_bid(rng.below(10_000_000), 2));
}

/// The BID encoding of `coefficient × 10^-scale` (coefficient < 2^49: the small-coefficient form).
fn decimal128_bid(coefficient: u64, scale: u16) -> [u8; 16] {
    const EXPONENT_BIAS: u64 = 6176;
    let high = (EXPONENT_BIAS - u64::from(scale)) << 49;
    let mut bid = [0u8; 16];
    bid[..8].copy_from_slice(&coefficient.to_le_bytes());
    bid[8..].copy_from_slice(&high.to_le_bytes());
    bid
}

/// SplitMix64: a tiny deterministic generator, good enough for test data.
struct SplitMix64(u64);

impl SplitMix64 {
    fn new(seed: u64) -> Self {
        Self(seed ^ 0x9E37_79B9_7F4A_7C15)
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform-enough in `0..bound` (bound > 0).
    fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound.max(1)
    }

    /// In `[0, 1)`.
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for d in Dataset::ALL {
            assert_eq!(d.to_string().parse::<Dataset>().ok(), Some(d));
        }
        assert!("nope".parse::<Dataset>().is_err());
    }

    #[test]
    fn every_dataset_parses_as_bson_documents() {
        for d in Dataset::ALL {
            let bytes = encode_dataset(d, 5);
            let mut rest = bytes.as_slice();
            let mut docs = 0;
            while !rest.is_empty() {
                let doc = bson::Document::from_reader(&mut rest).expect("valid document");
                assert!(doc.contains_key("hello"), "{d}");
                docs += 1;
            }
            assert_eq!(docs, 5, "{d}");
            let reply = bson::Document::from_reader(encode_dataset_reply(d, 5).as_slice())
                .expect("valid reply");
            assert_eq!(reply.get_f64("ok").ok(), Some(1.0));
        }
    }

    #[test]
    fn generation_is_deterministic() {
        assert_eq!(
            encode_dataset(Dataset::Types, 3),
            encode_dataset(Dataset::Types, 3)
        );
        assert_eq!(encode_documents(2).len(), 2 * 63);
    }
}
