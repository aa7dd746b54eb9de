//! UTF-8 decoding of token texts, byte by byte, exactly as llama.cpp's grammar decodes them
//! (`decode_utf8` with a partial start): a token may end inside a character (the rest comes with
//! the next token), the bytes that complete a character begun by the previous token are checked
//! to be continuation bytes, a lead byte that is a continuation byte makes the token invalid, and
//! the continuation bytes of a character begun inside the token are taken without a check.

/// A character begun but not finished (llama.cpp's `llama_partial_utf8`): the bits so far and how
/// many bytes remain; `n_remain == -1` after an invalid sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Partial {
    /// The value's bits so far.
    pub value: u32,
    /// Bytes still to come (0: none; -1: the sequence was invalid).
    pub n_remain: i32,
}

/// The byte count of a sequence by its lead byte's high nibble (0: a continuation byte).
const LEN: [i32; 16] = [1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 2, 2, 3, 4];

/// What a byte does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// It completes this code point.
    Char(u32),
    /// The character needs more bytes.
    Pending,
    /// The token is invalid UTF-8: llama.cpp drops all its code points.
    Invalid,
}

/// The decoder's state within one token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Decoder {
    value: u32,
    n_remain: i32,
    /// Still completing the character the previous token began.
    resuming: bool,
}

impl Decoder {
    /// Starts a token after `partial`.
    pub(crate) fn new(partial: Partial) -> Self {
        Self { value: partial.value, n_remain: partial.n_remain, resuming: partial.n_remain > 0 }
    }

    /// Between characters, with nothing to resume: an ASCII byte is its own character and leaves
    /// the decoder as [`Decoder::CLEAR`] (the mask walk's fast path).
    #[inline]
    pub(crate) fn is_clear(&self) -> bool {
        self.n_remain <= 0 && !self.resuming
    }

    /// The state after a whole character.
    pub(crate) const CLEAR: Decoder = Decoder { value: 0, n_remain: 0, resuming: false };

    /// Takes one byte.
    #[inline]
    pub(crate) fn push(&mut self, b: u8) -> Step {
        if self.resuming {
            if b >> 6 != 2 {
                return Step::Invalid;
            }
            self.value = (self.value << 6) + u32::from(b & 0x3f);
            self.n_remain -= 1;
            if self.n_remain == 0 {
                self.resuming = false;
                return Step::Char(self.value);
            }
            return Step::Pending;
        }
        if self.n_remain > 0 {
            self.value = (self.value << 6) + u32::from(b & 0x3f);
            self.n_remain -= 1;
            return if self.n_remain == 0 { Step::Char(self.value) } else { Step::Pending };
        }
        let n = LEN[usize::from(b >> 4)] - 1;
        if n < 0 {
            return Step::Invalid;
        }
        self.value = u32::from(b) & ((1u32 << (7 - n)) - 1);
        self.n_remain = n;
        if n == 0 { Step::Char(self.value) } else { Step::Pending }
    }

    /// The partial character left at the end of the token.
    pub(crate) fn partial(&self) -> Partial {
        // A finished character leaves nothing pending: its bits are dropped, so that every
        // character boundary is the same partial state (the engine caches by it).
        let value = if self.n_remain == 0 { 0 } else { self.value };
        Partial { value, n_remain: self.n_remain }
    }
}

/// Decodes a whole token after `partial`: its complete code points and the partial character it
/// ends in (`None` for invalid UTF-8, which llama.cpp decodes to no code point and `n_remain = -1`).
pub(crate) fn decode(piece: &[u8], partial: Partial) -> (Vec<u32>, Partial) {
    let mut d = Decoder::new(partial);
    let mut cps = Vec::with_capacity(piece.len());
    for &b in piece {
        match d.push(b) {
            Step::Char(c) => cps.push(c),
            Step::Pending => {}
            Step::Invalid => return (Vec::new(), Partial { value: 0, n_remain: -1 }),
        }
    }
    (cps, d.partial())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_whole_and_split_characters() {
        let (cps, p) = decode("aé€😀".as_bytes(), Partial::default());
        assert_eq!(cps, vec!['a' as u32, 'é' as u32, '€' as u32, '😀' as u32]);
        assert_eq!(p, Partial::default());
        // "€" split after its first byte, then finished by the next token.
        let euro = "€".as_bytes();
        let (cps, p) = decode(&euro[..1], Partial::default());
        assert!(cps.is_empty());
        assert_eq!(p.n_remain, 2);
        let (cps, p) = decode(&euro[1..], p);
        assert_eq!(cps, vec!['€' as u32]);
        assert_eq!(p.n_remain, 0);
    }

    #[test]
    fn invalid_sequences_drop_the_token() {
        // A lead byte that is a continuation byte.
        assert_eq!(decode(&[b'a', 0x80], Partial::default()), (vec![], Partial { value: 0, n_remain: -1 }));
        // A resumed character interrupted by an ASCII byte.
        let (_, p) = decode(&"€".as_bytes()[..1], Partial::default());
        assert_eq!(decode(b"a", p), (vec![], Partial { value: 0, n_remain: -1 }));
        // After an invalid token the next one decodes from scratch.
        assert_eq!(decode(b"a", Partial { value: 0, n_remain: -1 }).0, vec!['a' as u32]);
    }
}
