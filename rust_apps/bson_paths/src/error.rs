//! The crate's one error type.

use crate::DeserializePath;

/// Everything that can go wrong turning bytes into documents; no input makes this crate panic.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error("unknown deserialize path {0:?} (expected clone, document, raw or raw_borrowed)")]
    UnknownPath(String),
    #[error("unknown dataset {0:?} (expected find, flat, nested or types)")]
    UnknownDataset(String),
    /// The buffer is not exactly one BSON document: too short, or its length prefix disagrees.
    #[error("reply is {actual} bytes but its length prefix says {declared}")]
    Length { declared: i64, actual: usize },
    /// Malformed BSON, or a document without the reply's shape (the message says which field).
    #[error("{path} path: {source}")]
    Deserialize {
        path: DeserializePath,
        source: bson::de::Error,
    },
    #[error("reply has ok = {0}, not 1")]
    NotOk(f64),
    #[error("serializing documents as JSON: {0}")]
    Json(#[from] serde_json::Error),
}
