//! [`Bytes`]: a GGUF file's bytes, mapped from the file (`Gguf::open`) or owned
//! (`Gguf::from_bytes`), shared by reference count, and any range of them (a tensor's data) as a
//! cheap handle to the same memory: loading a model copies no tensor out of the file.

use std::fmt;
use std::ops::{Deref, Range};
use std::path::Path;
use std::sync::Arc;

/// Where the bytes live.
enum Source {
    Owned(Vec<u8>),
    Mapped(memmap2::Mmap),
}

impl Source {
    fn bytes(&self) -> &[u8] {
        match self {
            Source::Owned(v) => v,
            Source::Mapped(m) => m,
        }
    }
}

/// A range of a file's bytes, owned or mapped; cloning shares them.
#[derive(Clone)]
pub struct Bytes {
    src: Arc<Source>,
    range: Range<usize>,
}

impl Bytes {
    /// The file at `path`, mapped read-only (an empty file is read instead: it has nothing to map).
    pub fn map(path: &Path) -> std::io::Result<Bytes> {
        let file = std::fs::File::open(path)?;
        if file.metadata()?.len() == 0 {
            return Ok(Bytes::from(Vec::new()));
        }
        // SAFETY: the mapping is read-only and private to this process; as with llama.cpp's own
        // loader, a file truncated or rewritten by another process while it is mapped is outside
        // what the reader guards against (every length was checked against the mapping's size).
        let map = unsafe { memmap2::Mmap::map(&file)? };
        let len = map.len();
        Ok(Bytes { src: Arc::new(Source::Mapped(map)), range: 0..len })
    }

    /// Bytes `range` of these (relative to their start); panics when it lies outside them.
    pub fn slice(&self, range: Range<usize>) -> Bytes {
        assert!(range.start <= range.end && range.end <= self.len(), "slice {range:?} of {} bytes", self.len());
        Bytes { src: Arc::clone(&self.src), range: self.range.start + range.start..self.range.start + range.end }
    }

    /// Whether the bytes are a mapping of the file (not a copy in memory).
    pub fn is_mapped(&self) -> bool {
        matches!(*self.src, Source::Mapped(_))
    }
}

impl From<Vec<u8>> for Bytes {
    fn from(v: Vec<u8>) -> Bytes {
        let len = v.len();
        Bytes { src: Arc::new(Source::Owned(v)), range: 0..len }
    }
}

impl AsRef<[u8]> for Bytes {
    fn as_ref(&self) -> &[u8] {
        self
    }
}

impl Deref for Bytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.src.bytes()[self.range.clone()]
    }
}

impl PartialEq for Bytes {
    fn eq(&self, other: &Bytes) -> bool {
        **self == **other
    }
}

impl fmt::Debug for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Bytes({} bytes, {})", self.len(), if self.is_mapped() { "mapped" } else { "owned" })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_share_and_compare_by_content() {
        let b = Bytes::from((0u8..10).collect::<Vec<_>>());
        let s = b.slice(2..6);
        assert_eq!(&*s, &[2, 3, 4, 5]);
        assert_eq!(&*s.slice(1..3), &[3, 4]);
        assert_eq!(s, Bytes::from(vec![2, 3, 4, 5]));
        assert!(!s.is_mapped());
        let dir = std::env::temp_dir().join(format!("gguf-bytes-{}", std::process::id()));
        std::fs::write(&dir, [7u8, 8, 9]).unwrap();
        let m = Bytes::map(&dir).unwrap();
        assert!(m.is_mapped() && *m == [7, 8, 9]);
        std::fs::write(&dir, []).unwrap();
        assert_eq!(Bytes::map(&dir).unwrap().len(), 0);
        std::fs::remove_file(&dir).unwrap();
    }

    #[test]
    #[should_panic(expected = "slice 3..5 of 4 bytes")]
    fn a_slice_past_the_end_panics() {
        Bytes::from(vec![0; 4]).slice(3..5);
    }
}
