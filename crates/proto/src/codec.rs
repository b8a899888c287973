//! Primitive encoders and a bounds-checked reader for message bodies.
//!
//! Integers are big-endian. A string is a `u16` byte length and UTF-8 bytes; a list is a
//! `u32` element count followed by the elements. Decoders ignore bytes after the last
//! field they know, so a newer peer may append fields to a body (see `docs/protocol.md`).

use bytes::{Buf, BufMut, Bytes};

use crate::error::DecodeError;

/// Longest string the protocol carries.
pub const MAX_STRING: usize = u16::MAX as usize;

/// Appends a string field. Panics if it is longer than [`MAX_STRING`]; callers validate
/// user-supplied strings before encoding.
pub fn put_str(buf: &mut impl BufMut, s: &str) {
    assert!(
        s.len() <= MAX_STRING,
        "string field longer than 65535 bytes"
    );
    buf.put_u16(s.len() as u16);
    buf.put_slice(s.as_bytes());
}

/// Appends a list of `u32`.
pub fn put_u32_list(buf: &mut impl BufMut, items: &[u32]) {
    buf.put_u32(items.len() as u32);
    for &v in items {
        buf.put_u32(v);
    }
}

/// Appends a list of `u64`.
pub fn put_u64_list(buf: &mut impl BufMut, items: &[u64]) {
    buf.put_u32(items.len() as u32);
    for &v in items {
        buf.put_u64(v);
    }
}

/// Appends a list of strings.
pub fn put_str_list(buf: &mut impl BufMut, items: &[String]) {
    buf.put_u32(items.len() as u32);
    for s in items {
        put_str(buf, s);
    }
}

/// A cursor over a frame body whose every read is bounds-checked.
pub struct Reader {
    buf: Bytes,
}

impl Reader {
    /// A reader over `body`.
    pub fn new(body: Bytes) -> Self {
        Reader { buf: body }
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.buf.remaining()
    }

    fn need(&self, n: usize, field: &'static str) -> Result<(), DecodeError> {
        if self.buf.remaining() < n {
            Err(DecodeError::Truncated {
                field,
                missing: n - self.buf.remaining(),
            })
        } else {
            Ok(())
        }
    }

    /// Reads a `u8`.
    pub fn u8(&mut self, field: &'static str) -> Result<u8, DecodeError> {
        self.need(1, field)?;
        Ok(self.buf.get_u8())
    }

    /// Reads a `u16`.
    pub fn u16(&mut self, field: &'static str) -> Result<u16, DecodeError> {
        self.need(2, field)?;
        Ok(self.buf.get_u16())
    }

    /// Reads a `u32`.
    pub fn u32(&mut self, field: &'static str) -> Result<u32, DecodeError> {
        self.need(4, field)?;
        Ok(self.buf.get_u32())
    }

    /// Reads a `u64`.
    pub fn u64(&mut self, field: &'static str) -> Result<u64, DecodeError> {
        self.need(8, field)?;
        Ok(self.buf.get_u64())
    }

    /// Reads a boolean encoded as one byte, 0 or 1.
    pub fn bool(&mut self, field: &'static str) -> Result<bool, DecodeError> {
        match self.u8(field)? {
            0 => Ok(false),
            1 => Ok(true),
            v => Err(DecodeError::Malformed(format!(
                "{field} must be 0 or 1, got {v}"
            ))),
        }
    }

    /// Reads a string.
    pub fn string(&mut self, field: &'static str) -> Result<String, DecodeError> {
        let len = self.u16(field)? as usize;
        self.need(len, field)?;
        let raw = self.buf.split_to(len);
        String::from_utf8(raw.to_vec())
            .map_err(|_| DecodeError::Malformed(format!("{field} is not valid UTF-8")))
    }

    /// Reads `n` raw bytes without copying.
    pub fn bytes(&mut self, n: usize, field: &'static str) -> Result<Bytes, DecodeError> {
        self.need(n, field)?;
        Ok(self.buf.split_to(n))
    }

    /// Takes everything not read yet, without copying.
    pub fn rest(&mut self) -> Bytes {
        self.buf.split_to(self.buf.remaining())
    }

    /// Reads a list count and checks that `count` elements of at least `min_elem` bytes
    /// each can fit in what remains, so a hostile count cannot make us allocate.
    pub fn count(&mut self, min_elem: usize, field: &'static str) -> Result<usize, DecodeError> {
        let n = self.u32(field)? as usize;
        self.need(n.saturating_mul(min_elem), field)?;
        Ok(n)
    }

    /// Reads a list of `u32`.
    pub fn u32_list(&mut self, field: &'static str) -> Result<Vec<u32>, DecodeError> {
        let n = self.count(4, field)?;
        Ok((0..n).map(|_| self.buf.get_u32()).collect())
    }

    /// Reads a list of strings.
    pub fn string_list(&mut self, field: &'static str) -> Result<Vec<String>, DecodeError> {
        let n = self.count(2, field)?;
        (0..n).map(|_| self.string(field)).collect()
    }

    /// Reads a list of `u64`.
    pub fn u64_list(&mut self, field: &'static str) -> Result<Vec<u64>, DecodeError> {
        let n = self.count(8, field)?;
        Ok((0..n).map(|_| self.buf.get_u64()).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn primitives_round_trip() {
        let mut b = Vec::new();
        put_str(&mut b, "app-1");
        b.put_u8(1);
        put_u32_list(&mut b, &[1, 2, 3]);
        put_u64_list(&mut b, &[u64::MAX]);
        let mut r = Reader::new(Bytes::from(b));
        assert_eq!(r.string("s").unwrap(), "app-1");
        assert!(r.bool("b").unwrap());
        assert_eq!(r.u32_list("l").unwrap(), vec![1, 2, 3]);
        assert_eq!(r.u64_list("l").unwrap(), vec![u64::MAX]);
        assert_eq!(r.remaining(), 0);
    }

    #[test]
    fn hostile_count_is_truncation_not_allocation() {
        let mut b = Vec::new();
        b.put_u32(u32::MAX);
        let mut r = Reader::new(Bytes::from(b));
        assert!(matches!(
            r.u64_list("l"),
            Err(DecodeError::Truncated { .. })
        ));
    }

    #[test]
    fn bad_utf8_is_malformed() {
        let mut r = Reader::new(Bytes::from_static(&[0, 2, 0xff, 0xfe]));
        assert!(matches!(r.string("s"), Err(DecodeError::Malformed(_))));
    }

    #[test]
    fn bool_rejects_other_values() {
        let mut r = Reader::new(Bytes::from_static(&[2]));
        assert!(matches!(r.bool("b"), Err(DecodeError::Malformed(_))));
    }
}
