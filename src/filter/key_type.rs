//! What a value or a named filter records about the type of its keys: a kind
//! and a type OID. The core only stores and validates them; the SQL layer gives
//! the kinds meaning (`sql/keys/`). Values (header bytes 10..16), WAL records,
//! checkpoint files and partial aggregate states carry them as a kind byte and
//! a 32-bit OID.

use super::layout::FormatError;

/// The kind of a recorded key type (its byte in every format).
#[repr(u8)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum KeyKind {
    /// Nothing recorded: keys hash as in 0.5.0 and probes are not checked.
    #[default]
    None = 0,
    /// A built-in type (an OID below 16384, the same in every cluster).
    Builtin = 1,
    /// An enum, hashed by its labels' text.
    Enum = 2,
    /// Another type, its OID valid in the database that built the value.
    Local = 3,
    /// A named filter whose key type its first insert fixes (never in a value).
    Pending = 4,
}

impl KeyKind {
    /// The kind a byte names, if any.
    pub fn from_byte(b: u8) -> Option<KeyKind> {
        [KeyKind::None, KeyKind::Builtin, KeyKind::Enum, KeyKind::Local, KeyKind::Pending]
            .into_iter()
            .find(|k| *k as u8 == b)
    }
}

/// A recorded key type.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KeyType {
    pub kind: KeyKind,
    pub oid: u32,
}

impl KeyType {
    /// Nothing recorded.
    pub const NONE: KeyType = KeyType { kind: KeyKind::None, oid: 0 };

    pub fn is_recorded(&self) -> bool {
        self.kind != KeyKind::None
    }

    /// A key type read from a value's header or a state: a known kind with an
    /// OID that fits it (never pending).
    pub fn from_parts(kind: u8, oid: u32) -> Result<KeyType, FormatError> {
        match KeyKind::from_byte(kind) {
            Some(k) if k != KeyKind::Pending && (KeyType { kind: k, oid }).fits() => Ok(KeyType { kind: k, oid }),
            _ => Err(FormatError::BadParams(format!("key type kind {kind} with type OID {oid} is not valid"))),
        }
    }

    /// A key type read from a named filter's metadata (records, files), where
    /// a pending key type is valid too.
    pub fn from_named_parts(kind: u8, oid: u32) -> Result<KeyType, FormatError> {
        if kind == KeyKind::Pending as u8 && oid == 0 {
            Ok(KeyType { kind: KeyKind::Pending, oid })
        } else {
            KeyType::from_parts(kind, oid)
        }
    }

    /// What a value made from a named filter records: a pending key type
    /// (an empty filter) records none.
    pub fn for_value(self) -> KeyType {
        if self.kind == KeyKind::Pending {
            KeyType::NONE
        } else {
            self
        }
    }

    /// Whether the OID fits the kind.
    fn fits(&self) -> bool {
        match self.kind {
            KeyKind::None => self.oid == 0,
            KeyKind::Builtin => self.oid != 0 && self.oid < 16384,
            KeyKind::Enum | KeyKind::Local => self.oid >= 16384,
            KeyKind::Pending => self.oid == 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_round_trips_through_its_byte() {
        for b in 0..=255u8 {
            if let Some(k) = KeyKind::from_byte(b) {
                assert_eq!(k as u8, b);
            }
        }
        assert_eq!(KeyKind::from_byte(5), None);
        assert!(KeyType::from_parts(4, 0).is_err(), "pending is never in a value");
        assert_eq!(KeyType::from_named_parts(4, 0), Ok(KeyType { kind: KeyKind::Pending, oid: 0 }));
        assert!(KeyType::from_parts(1, 16_384).is_err());
        assert!(KeyType::from_parts(9, 20).is_err());
    }
}
