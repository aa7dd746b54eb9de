//! Offset assignment inside a backend's arena: a best-fit free-list allocator over one or more
//! chunks (a new chunk opens when a tensor fits in no existing one within the backend's largest
//! buffer size). It only computes offsets; the executor allocates the chunks afterwards.

/// Where an allocation landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Slot {
    pub chunk: usize,
    pub offset: usize,
    pub size: usize,
}

#[derive(Debug, Clone, Default)]
struct Chunk {
    /// Free blocks below `size`, sorted by offset, never adjacent (merged).
    free: Vec<(usize, usize)>,
    /// High-water mark: the chunk's final size.
    size: usize,
}

/// A dynamic allocator simulating a backend's arena.
#[derive(Debug, Clone)]
pub(crate) struct Arena {
    align: usize,
    max: usize,
    chunks: Vec<Chunk>,
}

/// Rounds `n` up to a multiple of `align` (at least `align` for `n = 0`).
pub(crate) fn align_up(n: usize, align: usize) -> usize {
    n.max(1).div_ceil(align) * align
}

impl Arena {
    pub(crate) fn new(align: usize, max: usize) -> Arena {
        Arena { align: align.max(1), max, chunks: Vec::new() }
    }

    /// Allocates `bytes` (rounded up to the alignment); `None` when it exceeds the largest buffer.
    pub(crate) fn alloc(&mut self, bytes: usize) -> Option<Slot> {
        let size = align_up(bytes, self.align);
        if size > self.max {
            return None;
        }
        // Best fit among the free blocks of every chunk.
        let mut best: Option<(usize, usize, usize)> = None; // (block size, chunk, block index)
        for (ci, c) in self.chunks.iter().enumerate() {
            for (bi, &(_, len)) in c.free.iter().enumerate() {
                if len >= size && best.is_none_or(|(l, _, _)| len < l) {
                    best = Some((len, ci, bi));
                }
            }
        }
        if let Some((len, ci, bi)) = best {
            let c = &mut self.chunks[ci];
            let off = c.free[bi].0;
            if len == size {
                c.free.remove(bi);
            } else {
                c.free[bi] = (off + size, len - size);
            }
            return Some(Slot { chunk: ci, offset: off, size });
        }
        // Grow a chunk: reuse a trailing free block, or append at its end.
        for (ci, c) in self.chunks.iter_mut().enumerate() {
            let tail = c.free.last().copied().filter(|&(o, l)| o + l == c.size);
            let start = tail.map_or(c.size, |(o, _)| o);
            if start + size <= self.max {
                if tail.is_some() {
                    c.free.pop();
                }
                c.size = start + size;
                return Some(Slot { chunk: ci, offset: start, size });
            }
        }
        self.chunks.push(Chunk { free: Vec::new(), size });
        Some(Slot { chunk: self.chunks.len() - 1, offset: 0, size })
    }

    /// Returns a slot to its chunk, merging with neighbouring free blocks.
    pub(crate) fn free(&mut self, slot: Slot) {
        let c = &mut self.chunks[slot.chunk];
        let i = c.free.partition_point(|&(o, _)| o < slot.offset);
        c.free.insert(i, (slot.offset, slot.size));
        if i + 1 < c.free.len() && c.free[i].0 + c.free[i].1 == c.free[i + 1].0 {
            c.free[i].1 += c.free[i + 1].1;
            c.free.remove(i + 1);
        }
        if i > 0 && c.free[i - 1].0 + c.free[i - 1].1 == c.free[i].0 {
            c.free[i - 1].1 += c.free[i].1;
            c.free.remove(i);
        }
    }

    /// Final size of each chunk.
    pub(crate) fn chunk_sizes(&self) -> Vec<usize> {
        self.chunks.iter().map(|c| c.size).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reuses_freed_blocks_and_merges() {
        let mut a = Arena::new(64, usize::MAX);
        let x = a.alloc(100).unwrap();
        let y = a.alloc(64).unwrap();
        let z = a.alloc(10).unwrap();
        assert_eq!((x.offset, x.size, y.offset, z.offset), (0, 128, 128, 192));
        a.free(x);
        a.free(y);
        // x and y merged into one 192-byte block: a 150-byte tensor fits there.
        let w = a.alloc(150).unwrap();
        assert_eq!((w.chunk, w.offset, w.size), (0, 0, 192));
        assert_eq!(a.chunk_sizes(), vec![256]);
    }

    #[test]
    fn best_fit_and_trailing_growth() {
        let mut a = Arena::new(16, usize::MAX);
        let big = a.alloc(160).unwrap();
        let mid = a.alloc(16).unwrap();
        let small = a.alloc(32).unwrap();
        let end = a.alloc(16).unwrap();
        a.free(big);
        a.free(small);
        // 32 bytes: the 32-byte hole is the best fit, not the 160-byte one.
        assert_eq!(a.alloc(32).unwrap().offset, small.offset);
        a.free(end);
        // A trailing free block is extended rather than appended after.
        let grown = a.alloc(200).unwrap();
        assert_eq!(grown.offset, end.offset);
        assert_eq!(a.chunk_sizes(), vec![end.offset + 208]);
        let _ = mid;
    }

    #[test]
    fn respects_max_buffer_size() {
        let mut a = Arena::new(8, 100);
        assert!(a.alloc(101).is_none());
        let x = a.alloc(64).unwrap();
        let y = a.alloc(64).unwrap();
        assert_eq!((x.chunk, y.chunk, y.offset), (0, 1, 0));
        assert_eq!(a.chunk_sizes(), vec![64, 64]);
    }
}
