//! Host buffers: zero-initialised, 64-byte-aligned allocations used for both memory kinds, and
//! read-only imports of memory owned elsewhere (a mapped model file's weights,
//! `Backend::import_host`), which hold their [`SharedBytes`] so that the memory outlives the buffer
//! and are never written (`bytes_mut` refuses; the backend and dispatcher check `writable`).

use sched::SharedBytes;
use std::alloc::{Layout, alloc_zeroed, dealloc};
use std::ptr::NonNull;

/// Alignment of every allocated buffer, in bytes.
pub(crate) const ALIGN: usize = 64;

/// One owned, aligned, zeroed allocation, or an imported read-only range.
#[derive(Debug)]
pub(crate) struct Buffer {
    ptr: NonNull<u8>,
    len: usize,
    /// For an import: the bytes `ptr` points at, kept alive (and never written) while the buffer
    /// lives.
    imported: Option<SharedBytes>,
}

// SAFETY: an owned buffer exclusively owns its allocation; access is synchronised by `&`/`&mut` on
// the backend that owns it. An imported one only reads memory its `SharedBytes` keeps alive, which
// is `Send + Sync`.
unsafe impl Send for Buffer {}
// SAFETY: as above; shared access only reads.
unsafe impl Sync for Buffer {}

impl Buffer {
    /// Allocates `len` zeroed bytes aligned to [`ALIGN`]; `None` when the allocator refuses.
    pub(crate) fn new(len: usize) -> Option<Buffer> {
        let layout = Layout::from_size_align(len.max(1), ALIGN).ok()?;
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        NonNull::new(ptr).map(|ptr| Buffer { ptr, len, imported: None })
    }

    /// A read-only buffer over `bytes`, without a copy.
    pub(crate) fn import(bytes: SharedBytes) -> Buffer {
        let s = bytes.bytes();
        let (ptr, len) = (NonNull::from(s).cast::<u8>(), s.len());
        Buffer { ptr, len, imported: Some(bytes) }
    }

    /// Whether the buffer may be written (it is not an import).
    pub(crate) fn writable(&self) -> bool {
        self.imported.is_none()
    }

    /// Size in bytes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The first byte (writes through it need exclusive access to the buffer's region, and a
    /// [`Buffer::writable`] buffer).
    pub(crate) fn ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// The bytes.
    pub(crate) fn bytes(&self) -> &[u8] {
        match &self.imported {
            Some(b) => b.bytes(),
            // SAFETY: `len` bytes were allocated and zero-initialised.
            None => unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) },
        }
    }

    /// The bytes, mutably; `None` for an import (read-only).
    pub(crate) fn bytes_mut(&mut self) -> Option<&mut [u8]> {
        // SAFETY: as `bytes`, with exclusive access through `&mut self` to an allocation we own.
        self.writable().then(|| unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) })
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        if self.imported.is_some() {
            return; // the `SharedBytes` owner frees its memory
        }
        let layout = Layout::from_size_align(self.len.max(1), ALIGN).expect("layout was valid at allocation");
        // SAFETY: allocated in `new` with this layout.
        unsafe { dealloc(self.ptr.as_ptr(), layout) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_and_zeroed() {
        for len in [0, 1, 63, 64, 1000] {
            let b = Buffer::new(len).unwrap();
            assert_eq!(b.ptr() as usize % ALIGN, 0);
            assert_eq!(b.len(), len);
            assert!(b.bytes().iter().all(|&x| x == 0));
        }
    }

    #[test]
    fn an_import_reads_in_place_and_refuses_writes() {
        let shared = SharedBytes::from(vec![1u8, 2, 3, 4, 5]).slice(1, 3);
        let mut b = Buffer::import(shared.clone());
        assert_eq!((b.ptr() as usize, b.len(), b.bytes()), (shared.addr(), 3, &[2u8, 3, 4][..]));
        assert!(!b.writable() && b.bytes_mut().is_none());
        drop(shared);
        assert_eq!(b.bytes(), &[2, 3, 4], "the buffer keeps the memory alive");
    }
}
