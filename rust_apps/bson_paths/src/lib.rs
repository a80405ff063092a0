//! The BSON article's deserialization paths ("Making slow Rust code fast") and the datasets they are measured on.
//!
//! Used by polyperf's PyO3 extension (`polyperf._native.deserialize_reply`, which adds timing and
//! allocation counts) and by the `bson_server` HTTP app (one deserialization per request).
//!
//! # Input
//! One find reply document `{cursor: {id, ns, firstBatch: [...]}, ok}`, exactly (its length prefix must
//! equal the buffer's length), whoever encoded it: fields in any order, unknown fields anywhere are
//! skipped, `id` and each document's `number` may be int32 or int64, `ok` any number equal to 1.
//! Every `firstBatch` document needs `hello` and `anotherKey` (strings) and `number`.
//!
//! # API
//! - [`deserialize_reply`]`(data, path) -> Result<`[`Outcome`]`, `[`Error`]`>`: the measured work; the
//!   outcome's `documents` and `checksum` are equal across [`DeserializePath`]s for the same bytes.
//! - [`documents_json`]`(data, path) -> Result<Vec<u8>, Error>`: the same deserialization, the batch then
//!   serialized as a JSON array of `{"hello", "anotherKey", "number"}` (for the server's response body).
//! - [`encode_reply`]`(n)` / [`encode_documents`]`(n)`: the article's 10,000-document workload, as a
//!   reply or as concatenated documents; [`encode_dataset_reply`] / [`encode_dataset`] for the richer
//!   [`Dataset`]s (all of which still carry the article's three fields).
//!
//! [`DeserializePath`] and [`Dataset`] parse from and print as their snake-case names.

mod datasets;
mod error;
mod paths;
mod writer;

pub use datasets::{
    Dataset, NESTED_DEPTH, encode_dataset, encode_dataset_reply, encode_documents, encode_reply,
};
pub use error::Error;
pub use paths::{
    DeserializePath, Greeting, GreetingRef, Outcome, deserialize_reply, documents_json,
};

#[cfg(test)]
mod tests;
