//! The extension's one error type, and its single conversion into Python exceptions.

use std::io;
use std::path::PathBuf;

use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::PyErr;

#[derive(Debug, thiserror::Error)]
pub(crate) enum ExtError {
    /// An OS-level failure on a named file; becomes the matching `OSError` subclass.
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    /// Input that is not what the call expects (malformed JSON with its line and column, etc.).
    #[error("{0}")]
    InvalidInput(String),
    /// A bad argument from the caller (unknown mode, zero capacity).
    #[error("{0}")]
    InvalidArgument(String),
}

impl ExtError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: io::Error) -> Self {
        Self::Io {
            path: path.into(),
            source,
        }
    }
}

impl From<ExtError> for PyErr {
    fn from(err: ExtError) -> PyErr {
        match err {
            // OSError(errno, strerror, filename) makes Python pick the subclass itself
            // (FileNotFoundError, IsADirectoryError, PermissionError, ...).
            ExtError::Io { path, source } => {
                let errno = source.raw_os_error().unwrap_or(0);
                let path = path.to_string_lossy().into_owned();
                PyOSError::new_err((errno, source.to_string(), path))
            }
            ExtError::InvalidInput(msg) | ExtError::InvalidArgument(msg) => {
                PyValueError::new_err(msg)
            }
        }
    }
}
