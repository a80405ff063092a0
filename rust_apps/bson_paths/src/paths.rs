//! The article's four ways from a find reply's bytes to typed Rust structs.

use std::fmt;
use std::str::FromStr;

use bson::Document;
use serde::{Deserialize, Serialize};

use crate::Error;

/// How a reply is deserialized ("Making slow Rust code fast"): the article's baseline and its two improvements, plus
/// borrowing strings from the buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DeserializePath {
    /// `Document::from_reader`, clone the `Document`, `from_document` on the clone (the baseline).
    Clone,
    /// `Document::from_reader`, then `from_document` taking ownership (the clone removed).
    Document,
    /// `from_slice` straight from the bytes into owned structs (no `Document` tree).
    Raw,
    /// `from_slice` into structs holding `&str` borrowed from the buffer.
    RawBorrowed,
}

impl DeserializePath {
    pub const ALL: [DeserializePath; 4] = [
        DeserializePath::Clone,
        DeserializePath::Document,
        DeserializePath::Raw,
        DeserializePath::RawBorrowed,
    ];

    pub fn name(self) -> &'static str {
        match self {
            DeserializePath::Clone => "clone",
            DeserializePath::Document => "document",
            DeserializePath::Raw => "raw",
            DeserializePath::RawBorrowed => "raw_borrowed",
        }
    }
}

// The name/Display/FromStr trio of datasets.rs: for two small enums a macro would hide more.
impl fmt::Display for DeserializePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for DeserializePath {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        DeserializePath::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| Error::UnknownPath(s.to_owned()))
    }
}

/// A `firstBatch` document, owned. `number` accepts int32 or int64.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Greeting {
    pub hello: String,
    pub another_key: String,
    pub number: i64,
}

/// A `firstBatch` document borrowing its strings from the reply's bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GreetingRef<'a> {
    pub hello: &'a str,
    pub another_key: &'a str,
    pub number: i64,
}

/// What every path reports: equal across paths for the same bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Outcome {
    /// Documents in `firstBatch`.
    pub documents: usize,
    /// 64-bit FNV-1a over `ns`, then `id` (i64 little-endian), then per document `hello`, `anotherKey`
    /// and `number` (i64 little-endian), each string followed by one 0xFF byte.
    pub checksum: u64,
}

#[derive(Deserialize)]
struct Reply<C> {
    cursor: C,
    ok: f64,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Cursor<S, D> {
    id: i64,
    ns: S,
    first_batch: Vec<D>,
}

trait Fields {
    fn fields(&self) -> (&str, &str, i64);
}

impl Fields for Greeting {
    fn fields(&self) -> (&str, &str, i64) {
        (&self.hello, &self.another_key, self.number)
    }
}

impl Fields for GreetingRef<'_> {
    fn fields(&self) -> (&str, &str, i64) {
        (self.hello, self.another_key, self.number)
    }
}

/// Does something with the deserialized batch, whichever document type the path produced.
trait BatchVisitor {
    type Output;
    fn visit<D: Fields + Serialize>(
        self,
        ns: &str,
        id: i64,
        docs: &[D],
    ) -> Result<Self::Output, Error>;
}

struct Summarize;

impl BatchVisitor for Summarize {
    type Output = Outcome;

    fn visit<D: Fields + Serialize>(self, ns: &str, id: i64, docs: &[D]) -> Result<Outcome, Error> {
        let mut hash = Fnv1a::default();
        hash.string(ns);
        hash.bytes(&id.to_le_bytes());
        for doc in docs {
            let (hello, another_key, number) = doc.fields();
            hash.string(hello);
            hash.string(another_key);
            hash.bytes(&number.to_le_bytes());
        }
        Ok(Outcome {
            documents: docs.len(),
            checksum: hash.0,
        })
    }
}

struct ToJson;

impl BatchVisitor for ToJson {
    type Output = Vec<u8>;

    fn visit<D: Fields + Serialize>(
        self,
        _ns: &str,
        _id: i64,
        docs: &[D],
    ) -> Result<Vec<u8>, Error> {
        Ok(serde_json::to_vec(docs)?)
    }
}

/// Deserializes one reply document by `path` and summarizes its batch (the structs are dropped before
/// returning, so timing this call includes freeing them, as the article's benchmark did).
pub fn deserialize_reply(data: &[u8], path: DeserializePath) -> Result<Outcome, Error> {
    run(data, path, Summarize)
}

/// Deserializes one reply by `path` and returns its `firstBatch` as a JSON array of
/// `{"hello", "anotherKey", "number"}` objects (what an HTTP server would answer).
pub fn documents_json(data: &[u8], path: DeserializePath) -> Result<Vec<u8>, Error> {
    run(data, path, ToJson)
}

fn run<V: BatchVisitor>(
    data: &[u8],
    path: DeserializePath,
    visitor: V,
) -> Result<V::Output, Error> {
    check_length(data)?;
    let err = |source| Error::Deserialize { path, source };
    match path {
        DeserializePath::Clone => {
            let doc = Document::from_reader(data).map_err(err)?;
            let reply: Reply<Cursor<String, Greeting>> =
                bson::from_document(doc.clone()).map_err(err)?;
            drop(doc);
            finish(&reply, visitor)
        }
        DeserializePath::Document => {
            let doc = Document::from_reader(data).map_err(err)?;
            let reply: Reply<Cursor<String, Greeting>> = bson::from_document(doc).map_err(err)?;
            finish(&reply, visitor)
        }
        DeserializePath::Raw => {
            let reply: Reply<Cursor<String, Greeting>> = bson::from_slice(data).map_err(err)?;
            finish(&reply, visitor)
        }
        DeserializePath::RawBorrowed => {
            let reply: Reply<Cursor<&str, GreetingRef<'_>>> =
                bson::from_slice(data).map_err(err)?;
            finish(&reply, visitor)
        }
    }
}

fn finish<S: AsRef<str>, D: Fields + Serialize, V: BatchVisitor>(
    reply: &Reply<Cursor<S, D>>,
    visitor: V,
) -> Result<V::Output, Error> {
    if reply.ok != 1.0 {
        return Err(Error::NotOk(reply.ok));
    }
    let cursor = &reply.cursor;
    visitor.visit(cursor.ns.as_ref(), cursor.id, &cursor.first_batch)
}

/// Every path must see the same bytes: exactly one document, no trailing garbage.
fn check_length(data: &[u8]) -> Result<(), Error> {
    let declared = match data.first_chunk::<4>() {
        Some(prefix) => i64::from(i32::from_le_bytes(*prefix)),
        None => -1,
    };
    if data.len() < 5 || usize::try_from(declared).ok() != Some(data.len()) {
        return Err(Error::Length {
            declared,
            actual: data.len(),
        });
    }
    Ok(())
}

/// 64-bit FNV-1a.
struct Fnv1a(u64);

impl Default for Fnv1a {
    fn default() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv1a {
    fn bytes(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    fn string(&mut self, s: &str) {
        self.bytes(s.as_bytes());
        self.bytes(&[0xFF]);
    }
}
