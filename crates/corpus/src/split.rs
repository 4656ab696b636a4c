//! The three splits of a dataset (train, dev, test) and the split a file's
//! name claims: shared by tagged-file folders ([`crate::dataset`]) and
//! question-answering folders ([`crate::qa::squad::qa_files`]).

use serde::{Deserialize, Serialize};

/// Role of a split.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SplitName {
    Train,
    Dev,
    Test,
}

impl SplitName {
    pub fn as_str(self) -> &'static str {
        match self {
            SplitName::Train => "train",
            SplitName::Dev => "dev",
            SplitName::Test => "test",
        }
    }
}

impl std::str::FromStr for SplitName {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "train" => Ok(SplitName::Train),
            "dev" => Ok(SplitName::Dev),
            "test" => Ok(SplitName::Test),
            _ => Err(format!("unknown split `{s}`: expected train, dev or test")),
        }
    }
}

/// The split a file's name claims (`train`; `dev`, `valid`, `testa`; `test`).
pub(crate) fn classify(name: &str) -> Option<SplitName> {
    let n = name.to_ascii_lowercase();
    if n.contains("train") {
        Some(SplitName::Train)
    } else if n.contains("dev") || n.contains("valid") || n.contains("testa") {
        Some(SplitName::Dev)
    } else if n.contains("test") {
        Some(SplitName::Test)
    } else {
        None
    }
}
