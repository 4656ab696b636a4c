//! Errors that name the file, the line and what was expected.

use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum CorpusError {
    /// Bad content at a known place in a file.
    #[error("{}:{line}: {message}", path.display())]
    At { path: PathBuf, line: usize, message: String },
    /// Bad content of a whole file (empty, no sentences, inconsistent tags).
    #[error("{}: {message}", path.display())]
    File { path: PathBuf, message: String },
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A problem that is not tied to one file (a bad option, say).
    #[error("{0}")]
    Invalid(String),
}

impl CorpusError {
    pub fn at(path: &Path, line: usize, message: impl Into<String>) -> Self {
        CorpusError::At { path: path.to_path_buf(), line, message: message.into() }
    }

    pub fn file(path: &Path, message: impl Into<String>) -> Self {
        CorpusError::File { path: path.to_path_buf(), message: message.into() }
    }

    pub fn io(path: &Path, source: std::io::Error) -> Self {
        CorpusError::Io { path: path.to_path_buf(), source }
    }
}

pub type Result<T, E = CorpusError> = std::result::Result<T, E>;

/// A JSON error naming file and line, without serde_json's own position suffix.
pub fn json_error(path: &std::path::Path, e: &serde_json::Error) -> CorpusError {
    let msg = e.to_string();
    let msg = msg.rsplit_once(" at line ").map_or(msg.as_str(), |(m, _)| m).to_string();
    if e.line() == 0 {
        CorpusError::file(path, msg)
    } else {
        CorpusError::at(path, e.line(), msg)
    }
}
