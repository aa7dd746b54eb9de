//! Host buffers: zero-initialised, 64-byte-aligned allocations used for both memory kinds.

use std::alloc::{Layout, alloc_zeroed, dealloc};
use std::ptr::NonNull;

/// Alignment of every buffer, in bytes.
pub(crate) const ALIGN: usize = 64;

/// One owned, aligned, zeroed allocation.
#[derive(Debug)]
pub(crate) struct Buffer {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the buffer exclusively owns its allocation; access is synchronised by `&`/`&mut` on the
// backend that owns it.
unsafe impl Send for Buffer {}
// SAFETY: as above; shared access only reads.
unsafe impl Sync for Buffer {}

impl Buffer {
    /// Allocates `len` zeroed bytes aligned to [`ALIGN`]; `None` when the allocator refuses.
    pub(crate) fn new(len: usize) -> Option<Buffer> {
        let layout = Layout::from_size_align(len.max(1), ALIGN).ok()?;
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        NonNull::new(ptr).map(|ptr| Buffer { ptr, len })
    }

    /// Size in bytes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The first byte (writes through it need exclusive access to the buffer's region).
    pub(crate) fn ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// The bytes.
    pub(crate) fn bytes(&self) -> &[u8] {
        // SAFETY: `len` bytes were allocated and zero-initialised.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The bytes, mutably.
    pub(crate) fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as `bytes`, with exclusive access through `&mut self`.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
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
}
