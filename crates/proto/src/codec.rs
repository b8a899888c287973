//! The wire encoding of field values: primitive encoders, a bounds-checked reader, and
//! the [`Wire`] trait that gives every field type exactly one encoding.
//!
//! Integers are big-endian. A string is a `u16` byte length and UTF-8 bytes; a list is a
//! `u32` element count followed by the elements; an optional value is a `u8` flag, then
//! the value if the flag is 1 (0 means none). Decoders ignore bytes after the last field
//! they know, so a newer peer may append fields to a body (see `docs/protocol.md`).

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
}

/// A value with one wire encoding. Message bodies and journal records are sequences of
/// such values (see [`crate::wire_enum!`]), so a field's layout is written once, here,
/// for its type, and never again per message.
pub trait Wire: Sized {
    /// The fewest bytes an encoded value takes: a list's count is checked against it
    /// before anything is allocated, so a hostile count cannot make the reader allocate.
    const MIN_LEN: usize;

    /// Appends the value.
    fn put(&self, b: &mut impl BufMut);

    /// Reads a value; `field` names it in the error if the body is cut or malformed.
    fn get(r: &mut Reader, field: &'static str) -> Result<Self, DecodeError>;
}

macro_rules! wire_int {
    ($($t:ty => $put:ident, $get:ident;)*) => {$(
        impl Wire for $t {
            const MIN_LEN: usize = std::mem::size_of::<$t>();
            fn put(&self, b: &mut impl BufMut) {
                b.$put(*self);
            }
            fn get(r: &mut Reader, field: &'static str) -> Result<Self, DecodeError> {
                r.$get(field)
            }
        }
    )*};
}

wire_int! {
    u8 => put_u8, u8;
    u16 => put_u16, u16;
    u32 => put_u32, u32;
    u64 => put_u64, u64;
}

impl Wire for bool {
    const MIN_LEN: usize = 1;
    fn put(&self, b: &mut impl BufMut) {
        b.put_u8(*self as u8);
    }
    fn get(r: &mut Reader, field: &'static str) -> Result<Self, DecodeError> {
        r.bool(field)
    }
}

impl Wire for String {
    const MIN_LEN: usize = 2;
    fn put(&self, b: &mut impl BufMut) {
        put_str(b, self);
    }
    fn get(r: &mut Reader, field: &'static str) -> Result<Self, DecodeError> {
        r.string(field)
    }
}

impl<T: Wire> Wire for Vec<T> {
    const MIN_LEN: usize = 4;
    fn put(&self, b: &mut impl BufMut) {
        b.put_u32(self.len() as u32);
        for v in self {
            v.put(b);
        }
    }
    fn get(r: &mut Reader, field: &'static str) -> Result<Self, DecodeError> {
        let n = r.count(T::MIN_LEN, field)?;
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            out.push(T::get(r, field)?);
        }
        Ok(out)
    }
}

impl<T: Wire> Wire for Option<T> {
    const MIN_LEN: usize = 1;
    fn put(&self, b: &mut impl BufMut) {
        match self {
            None => b.put_u8(0),
            Some(v) => {
                b.put_u8(1);
                v.put(b);
            }
        }
    }
    fn get(r: &mut Reader, field: &'static str) -> Result<Self, DecodeError> {
        if r.bool(field)? {
            Ok(Some(T::get(r, field)?))
        } else {
            Ok(None)
        }
    }
}

/// A field appended to a body after its version was fixed (see `docs/protocol.md`,
/// "Compatibility"): `None` when the body ends before it, which is how a sender that
/// predates the field writes the body, and then encoded as nothing, so that a decoded
/// message encodes back to exactly the bytes it was read from. Only the last fields of a
/// body can be `Appended`, and a sender that fills one fills those before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct Appended<T>(pub Option<T>);

impl<T: Copy + Default> Appended<T> {
    /// A field a current sender fills.
    pub fn of(v: T) -> Self {
        Appended(Some(v))
    }

    /// Its value, or `T::default()` (zero) from a sender that predates it.
    pub fn value(&self) -> T {
        self.0.unwrap_or_default()
    }
}

impl<T: Wire> Wire for Appended<T> {
    const MIN_LEN: usize = 0;
    fn put(&self, b: &mut impl BufMut) {
        if let Some(v) = &self.0 {
            v.put(b);
        }
    }
    fn get(r: &mut Reader, field: &'static str) -> Result<Self, DecodeError> {
        if r.remaining() == 0 {
            Ok(Appended(None))
        } else {
            Ok(Appended(Some(T::get(r, field)?)))
        }
    }
}

/// Raw bytes are the rest of the body: a payload, which can only be a body's last field
/// (its length is the frame's).
impl Wire for Bytes {
    const MIN_LEN: usize = 0;
    fn put(&self, b: &mut impl BufMut) {
        b.put_slice(self);
    }
    fn get(r: &mut Reader, _field: &'static str) -> Result<Self, DecodeError> {
        Ok(r.rest())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn primitives_round_trip() {
        let mut b = Vec::new();
        "app-1".to_string().put(&mut b);
        true.put(&mut b);
        vec![1u32, 2, 3].put(&mut b);
        vec![u64::MAX].put(&mut b);
        Some(7u32).put(&mut b);
        None::<u32>.put(&mut b);
        vec!["x".to_string()].put(&mut b);
        let mut r = Reader::new(Bytes::from(b));
        assert_eq!(String::get(&mut r, "s").unwrap(), "app-1");
        assert!(bool::get(&mut r, "b").unwrap());
        assert_eq!(Vec::<u32>::get(&mut r, "l").unwrap(), vec![1, 2, 3]);
        assert_eq!(Vec::<u64>::get(&mut r, "l").unwrap(), vec![u64::MAX]);
        assert_eq!(Option::<u32>::get(&mut r, "o").unwrap(), Some(7));
        assert_eq!(Option::<u32>::get(&mut r, "o").unwrap(), None);
        assert_eq!(
            Vec::<String>::get(&mut r, "l").unwrap(),
            vec!["x".to_string()]
        );
        assert_eq!(r.remaining(), 0);
    }

    #[test]
    fn hostile_count_is_truncation_not_allocation() {
        let mut b = Vec::new();
        b.put_u32(u32::MAX);
        let mut r = Reader::new(Bytes::from(b));
        assert!(matches!(
            Vec::<u64>::get(&mut r, "l"),
            Err(DecodeError::Truncated { .. })
        ));
    }

    #[test]
    fn bad_utf8_is_malformed() {
        let mut r = Reader::new(Bytes::from_static(&[0, 2, 0xff, 0xfe]));
        assert!(matches!(r.string("s"), Err(DecodeError::Malformed(_))));
    }

    #[test]
    fn appended_field_reads_as_default_when_the_body_ends_before_it() {
        let mut r = Reader::new(Bytes::new());
        let absent = Appended::<u64>::get(&mut r, "a").unwrap();
        assert_eq!((absent, absent.value()), (Appended(None), 0));
        // Absent, it encodes as nothing: decoding then encoding gives the same bytes.
        let mut b = Vec::new();
        absent.put(&mut b);
        assert!(b.is_empty());
        let mut r = Reader::new(Bytes::from_static(&[0, 0, 0, 0, 0, 0, 1, 0]));
        assert_eq!(
            Appended::<u64>::get(&mut r, "a").unwrap(),
            Appended::of(256)
        );
        // Half a field is a truncated body, not an absent field.
        let mut r = Reader::new(Bytes::from_static(&[0, 0, 1, 0]));
        assert!(matches!(
            Appended::<u64>::get(&mut r, "a"),
            Err(DecodeError::Truncated { .. })
        ));
    }

    #[test]
    fn heartbeat_of_a_worker_that_predates_its_counters_decodes() {
        use crate::message::{Message, MessageKind};
        let mut body = Vec::new();
        body.put_u32(3); // worker_id
        body.put_u64(4096); // buffered_bytes
        body.put_u64(1 << 40); // stored_bytes
        body.put_u8(0); // disk_full
        let mut r = Reader::new(Bytes::from(body));
        let m = Message::decode_body(MessageKind::Heartbeat, &mut r).unwrap();
        assert_eq!(
            m,
            Message::Heartbeat {
                worker_id: 3,
                buffered_bytes: 4096,
                stored_bytes: 1 << 40,
                disk_full: false,
                pushed_bytes: Appended(None),
                fetched_bytes: Appended(None),
                object_bytes: Appended(None),
            }
        );
    }

    #[test]
    fn bool_rejects_other_values() {
        let mut r = Reader::new(Bytes::from_static(&[2]));
        assert!(matches!(r.bool("b"), Err(DecodeError::Malformed(_))));
    }
}
