//! Reading text files forgivingly (BOM, CRLF) and writing files atomically.

use crate::error::{CorpusError, Result};
use std::io::Write;
use std::path::Path;

/// Reads a UTF-8 text file. A leading BOM is dropped; invalid UTF-8 is an
/// error naming the line where it occurs.
pub fn read_text(path: &Path) -> Result<String> {
    let bytes = std::fs::read(path).map_err(|e| CorpusError::io(path, e))?;
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(&bytes);
    match std::str::from_utf8(bytes) {
        Ok(s) => Ok(s.to_string()),
        Err(e) => {
            let ok = &bytes[..e.valid_up_to()];
            let line = ok.iter().filter(|&&b| b == b'\n').count() + 1;
            let col = ok.len() - ok.iter().rposition(|&b| b == b'\n').map_or(0, |p| p + 1) + 1;
            Err(CorpusError::at(
                path,
                line,
                format!("invalid UTF-8 at byte {col} of the line: expected a UTF-8 text file"),
            ))
        }
    }
}

/// Lines of a text with their 1-based numbers; a trailing `\r` is removed.
pub fn numbered_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.split('\n').enumerate().map(|(i, l)| (i + 1, l.strip_suffix('\r').unwrap_or(l)))
}

/// Writes `contents` to `path` through a temporary file in the same folder,
/// flushed and renamed, so readers never see a half-written file.
pub fn write_atomic(path: &Path, contents: impl AsRef<[u8]>) -> Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    std::fs::create_dir_all(dir).map_err(|e| CorpusError::io(dir, e))?;
    let name = path.file_name().ok_or_else(|| CorpusError::Invalid(format!("{}: not a file path", path.display())))?;
    let tmp = dir.join(format!(".{}.tmp{}", name.to_string_lossy(), std::process::id()));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(contents.as_ref())?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(CorpusError::io(path, e));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bom_is_dropped_and_crlf_lines_are_clean() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.txt");
        std::fs::write(&p, b"\xEF\xBB\xBFa b\r\nc d\r\n").unwrap();
        let text = read_text(&p).unwrap();
        let lines: Vec<_> = numbered_lines(&text).collect();
        assert_eq!(lines, vec![(1, "a b"), (2, "c d"), (3, "")]);
    }

    #[test]
    fn invalid_utf8_names_the_line() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("bad.txt");
        std::fs::write(&p, b"ok O\nbad\xff O\n").unwrap();
        let err = read_text(&p).unwrap_err().to_string();
        assert!(err.contains("bad.txt:2:"), "{err}");
        assert!(err.contains("UTF-8"), "{err}");
    }

    #[test]
    fn atomic_write_replaces_and_leaves_no_temp() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("out.txt");
        write_atomic(&p, "one").unwrap();
        write_atomic(&p, "two").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "two");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
