//! Declaring a body type once: [`wire_struct!`](crate::wire_struct) for a record of
//! fields, [`wire_enum!`](crate::wire_enum) for a tagged set of them (the protocol's
//! messages, the coordinator's journal records).
//!
//! A declaration lists each variant's tag and its fields in wire order with their
//! types; the encoder, the decoder and the tag enum are generated from that one list,
//! each field encoded by its type's [`Wire`](crate::codec::Wire) impl. So a body's
//! layout is written once and the encoder and decoder cannot drift apart, which is the
//! property Spark's `network-common` gets by putting `encode` and `decode` of a message
//! side by side in one class.

/// Declares a struct whose fields are encoded one after another in the order written,
/// and implements [`Wire`](crate::codec::Wire) for it.
///
/// ```
/// crossdock_proto::wire_struct! {
///     #[derive(Debug, PartialEq)]
///     pub struct Span { pub start: u64, pub len: u32 }
/// }
/// use crossdock_proto::codec::{Reader, Wire};
/// let mut b = Vec::new();
/// Span { start: 1, len: 2 }.put(&mut b);
/// assert_eq!(b.len(), Span::MIN_LEN);
/// let back = Span::get(&mut Reader::new(b.into()), "span").unwrap();
/// assert_eq!(back, Span { start: 1, len: 2 });
/// ```
#[macro_export]
macro_rules! wire_struct {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident {
            $( $(#[$fmeta:meta])* $fvis:vis $field:ident : $ty:ty ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        $vis struct $name {
            $( $(#[$fmeta])* $fvis $field: $ty ),*
        }

        impl $crate::codec::Wire for $name {
            const MIN_LEN: usize = 0 $( + <$ty as $crate::codec::Wire>::MIN_LEN )*;

            fn put(&self, b: &mut impl $crate::bytes::BufMut) {
                $( $crate::codec::Wire::put(&self.$field, b); )*
            }

            fn get(
                r: &mut $crate::codec::Reader,
                _field: &'static str,
            ) -> ::std::result::Result<Self, $crate::DecodeError> {
                // Struct expressions evaluate their fields in the order written: wire order.
                Ok($name {
                    $( $field: $crate::codec::Wire::get(r, stringify!($field))? ),*
                })
            }
        }
    };
}

/// Declares a field-less enum encoded as one byte (its discriminant), and its
/// [`Wire`](crate::codec::Wire) impl; any other byte is malformed, the error naming
/// `$what` and the values allowed.
#[macro_export]
macro_rules! wire_u8_enum {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident ($what:literal) {
            $( $(#[$vmeta:meta])* $variant:ident = $value:literal ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[repr(u8)]
        $vis enum $name {
            $( $(#[$vmeta])* $variant = $value ),*
        }

        impl $crate::codec::Wire for $name {
            const MIN_LEN: usize = 1;

            fn put(&self, b: &mut impl $crate::bytes::BufMut) {
                b.put_u8(*self as u8);
            }

            fn get(
                r: &mut $crate::codec::Reader,
                field: &'static str,
            ) -> ::std::result::Result<Self, $crate::DecodeError> {
                match r.u8(field)? {
                    $( $value => Ok($name::$variant), )*
                    v => Err($crate::DecodeError::Malformed(format!(
                        concat!($what, " must be ", $( stringify!($value), " (", stringify!($variant), ") ", )* "but is {}"),
                        v
                    ))),
                }
            }
        }
    };
}

/// Declares an enum whose variants are told apart by a tag byte, the tag enum `$kind`
/// (with `from_u8`), and on the enum: `kind()`, `encode_body()` (the fields of the
/// variant in the order written) and `decode_body()`.
///
/// A variant without braces has no body. Attributes on the enum, its variants and its
/// fields are kept (documentation, serde).
#[macro_export]
macro_rules! wire_enum {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident : $kind:ident {
            $(
                $(#[$vmeta:meta])*
                $variant:ident = $tag:literal $({
                    $( $(#[$fmeta:meta])* $field:ident : $ty:ty ),* $(,)?
                })?
            ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        $vis enum $name {
            $(
                $(#[$vmeta])*
                $variant $({ $( $(#[$fmeta])* $field: $ty ),* })?
            ),*
        }

        #[doc = concat!("The tag byte of each [`", stringify!($name), "`] variant.")]
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[repr(u8)]
        $vis enum $kind {
            $( $variant = $tag ),*
        }

        impl $kind {
            /// The variant a raw tag byte names, if this build knows it.
            pub fn from_u8(v: u8) -> Option<$kind> {
                match v {
                    $( $tag => Some($kind::$variant), )*
                    _ => None,
                }
            }
        }

        impl $name {
            /// The variant's tag.
            pub fn kind(&self) -> $kind {
                match self {
                    $( $name::$variant { .. } => $kind::$variant, )*
                }
            }

            /// Appends the variant's fields (not its tag).
            pub fn encode_body(&self, b: &mut impl $crate::bytes::BufMut) {
                match self {
                    $(
                        $name::$variant $({ $( $field ),* })? => {
                            $( $( $crate::codec::Wire::put($field, b); )* )?
                        }
                    )*
                }
            }

            /// Reads the fields of the variant `kind`. Bytes after the last field are
            /// left unread (a newer peer may append fields).
            pub fn decode_body(
                kind: $kind,
                r: &mut $crate::codec::Reader,
            ) -> ::std::result::Result<$name, $crate::DecodeError> {
                Ok(match kind {
                    $(
                        $kind::$variant => $name::$variant $({
                            $( $field: <$ty as $crate::codec::Wire>::get(r, stringify!($field))? ),*
                        })?,
                    )*
                })
            }
        }
    };
}
