//! How ids that clients choose become names on disk and keys in the object store.
//!
//! An app id may hold any UTF-8: dots, slashes, `..`, spaces, newlines. It never reaches
//! a path or a key as written. Each is encoded reversibly into one name: ASCII letters,
//! digits, `-` and `_` stay as they are, every other byte becomes `%XX` (its value in
//! upper-case hex). So `..` is `%2E%2E`, `x/y` is `x%2Fy` and `x_y` stays `x_y`: two ids
//! never share a name, and no name is empty, `.`, `..` or holds a `/`.
//!
//! A name must fit in one path component (255 bytes on the usual file systems), so an
//! id whose name would be longer is refused when the app registers, as is an empty id.

/// Longest name (file name or key component) an id may take.
pub const MAX_NAME: usize = 255;

/// Why an app id cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadAppId {
    #[error("app id must not be empty")]
    Empty,
    #[error("app id of {bytes} bytes is too long: it takes {name} bytes as a file name, and at most {MAX_NAME} are allowed (ASCII letters, digits, '-' and '_' take one byte each, any other byte three)")]
    TooLong { bytes: usize, name: usize },
}

/// Checks that `id` can name an app.
pub fn check_app_id(id: &str) -> Result<(), BadAppId> {
    if id.is_empty() {
        return Err(BadAppId::Empty);
    }
    let name = encoded_len(id);
    if name > MAX_NAME {
        return Err(BadAppId::TooLong {
            bytes: id.len(),
            name,
        });
    }
    Ok(())
}

fn kept(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-' || b == b'_'
}

fn encoded_len(id: &str) -> usize {
    id.bytes().map(|b| if kept(b) { 1 } else { 3 }).sum()
}

/// The name of app `id` on disk and in the object store.
pub fn app_name(id: &str) -> String {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut out = String::with_capacity(encoded_len(id));
    for b in id.bytes() {
        if kept(b) {
            out.push(b as char);
        } else {
            out.push('%');
            out.push(HEX[(b >> 4) as usize] as char);
            out.push(HEX[(b & 15) as usize] as char);
        }
    }
    out
}

/// The app id a name encodes; `None` if it is not a name [`app_name`] gives.
pub fn app_id_of(name: &str) -> Option<String> {
    let raw = name.as_bytes();
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        match raw[i] {
            b'%' => {
                let hex = raw.get(i + 1..i + 3)?;
                // Two upper-case hex digits, as app_name writes them: `from_str_radix`
                // alone would also take "+F" (a sign) and lower case, two more names
                // of one id.
                if !hex.iter().all(|c| matches!(c, b'0'..=b'9' | b'A'..=b'F')) {
                    return None;
                }
                let b = u8::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()?;
                if kept(b) {
                    return None; // not how app_name writes it: one id, one name
                }
                out.push(b);
                i += 3;
            }
            b if kept(b) => {
                out.push(b);
                i += 1;
            }
            _ => return None,
        }
    }
    String::from_utf8(out).ok().filter(|s| !s.is_empty())
}

/// True if `name` is a name [`app_name`] could give: one non-empty path component that
/// leaves no directory (checked again before anything is deleted under it).
pub fn is_app_name(name: &str) -> bool {
    app_id_of(name).is_some_and(|id| app_name(&id) == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_one_safe_component_and_never_shared() {
        let ids = [
            ".",
            "..",
            "/",
            "x/y",
            "x_y",
            "x%2Fy",
            "a b",
            "a\nb",
            "アプリ-1",
            "app-1",
            "../etc",
        ];
        let names: Vec<String> = ids.iter().map(|id| app_name(id)).collect();
        for (id, name) in ids.iter().zip(&names) {
            assert!(
                !name.is_empty() && name != "." && name != "..",
                "{id:?} -> {name}"
            );
            assert!(
                !name.contains('/') && !name.contains('.'),
                "{id:?} -> {name}"
            );
            assert_eq!(app_id_of(name).as_deref(), Some(*id), "reversible");
            assert!(is_app_name(name));
        }
        let distinct: std::collections::BTreeSet<&String> = names.iter().collect();
        assert_eq!(distinct.len(), ids.len(), "no two ids share a name");
        assert_eq!(app_name(".."), "%2E%2E");
        assert_eq!(app_name("x/y"), "x%2Fy");
        assert_eq!(app_name("x_y"), "x_y");
        assert_eq!(app_name("app-20261123-0001"), "app-20261123-0001");
    }

    #[test]
    fn foreign_names_decode_to_nothing() {
        for name in [
            "", ".", "..", "a.b", "a/b", "%2", "%zz", "%2e", "%41", "%FF",
            // Found by the fuzzer (crates/fuzz, shuffle-meta): a sign taken as a digit
            // made "%+E" a second name of "\u{e}".
            "%+E", "%+0E",
        ] {
            assert_eq!(app_id_of(name), None, "{name:?}");
            assert!(!is_app_name(name), "{name:?}");
        }
    }

    #[test]
    fn empty_and_overlong_ids_are_refused() {
        assert_eq!(check_app_id(""), Err(BadAppId::Empty));
        assert!(check_app_id(&"a".repeat(255)).is_ok());
        assert!(matches!(
            check_app_id(&"a".repeat(256)),
            Err(BadAppId::TooLong {
                bytes: 256,
                name: 256
            })
        ));
        assert!(matches!(
            check_app_id(&".".repeat(86)),
            Err(BadAppId::TooLong {
                bytes: 86,
                name: 258
            })
        ));
        assert!(check_app_id("アプリ").is_ok());
    }
}
