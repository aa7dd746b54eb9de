//! [`SharedBytes`]: immutable host bytes owned elsewhere (a mapped model file, say), shared by
//! reference count, that a param leaf can be bound to without a copy
//! (`Scheduler::set_input_shared`).
//!
//! Ownership: a `SharedBytes` holds an `Arc` of its owner, so the bytes live as long as any clone
//! does. A backend that wraps them as a read-only buffer (`Backend::import_host`) keeps a clone in
//! that buffer: the memory outlives every buffer that aliases it, whatever the caller drops. The
//! bytes never change: the owner hands them out only through `&self` (`AsRef<[u8]>`), and neither
//! the scheduler nor a backend ever writes through them.

use std::fmt;
use std::sync::Arc;

/// What owns shared bytes: anything that can show them as a slice, immutable while shared.
pub type SharedOwner = Arc<dyn AsRef<[u8]> + Send + Sync>;

/// A read-only byte range of a shared owner; cloning shares the owner.
#[derive(Clone)]
pub struct SharedBytes {
    owner: SharedOwner,
    start: usize,
    len: usize,
}

impl SharedBytes {
    /// All of `owner`'s bytes.
    pub fn new(owner: SharedOwner) -> SharedBytes {
        let len = (*owner).as_ref().len();
        SharedBytes { owner, start: 0, len }
    }

    /// Bytes `start..start + len` of these; panics when the range lies outside them.
    pub fn slice(&self, start: usize, len: usize) -> SharedBytes {
        assert!(start.checked_add(len).is_some_and(|end| end <= self.len), "slice {start}+{len} of {} bytes", self.len);
        SharedBytes { owner: Arc::clone(&self.owner), start: self.start + start, len }
    }

    /// The bytes.
    pub fn bytes(&self) -> &[u8] {
        &(*self.owner).as_ref()[self.start..self.start + self.len]
    }

    /// Their length.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The address of the first byte (for alignment checks).
    pub fn addr(&self) -> usize {
        self.bytes().as_ptr() as usize
    }
}

impl<T: AsRef<[u8]> + Send + Sync + 'static> From<Arc<T>> for SharedBytes {
    fn from(owner: Arc<T>) -> SharedBytes {
        SharedBytes::new(owner)
    }
}

impl From<Vec<u8>> for SharedBytes {
    fn from(v: Vec<u8>) -> SharedBytes {
        SharedBytes::new(Arc::new(v))
    }
}

impl fmt::Debug for SharedBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SharedBytes({} bytes at {:#x})", self.len, self.addr())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_share_the_owner() {
        let b = SharedBytes::from((0u8..10).collect::<Vec<_>>());
        let s = b.slice(2, 4);
        assert_eq!(s.bytes(), &[2, 3, 4, 5]);
        assert_eq!(s.slice(1, 2).bytes(), &[3, 4]);
        assert_eq!(s.addr(), b.addr() + 2);
        assert_eq!((s.len(), s.is_empty()), (4, false));
        drop(b);
        assert_eq!(s.bytes(), &[2, 3, 4, 5], "the slice keeps the owner alive");
    }

    #[test]
    #[should_panic(expected = "slice 3+2 of 4 bytes")]
    fn a_slice_past_the_end_panics() {
        SharedBytes::from(vec![0; 4]).slice(3, 2);
    }
}
