//! Sets of JSON instance types: what a generated rule can produce, and what a `type` keyword
//! admits. They decide whether a keyword the converter does not apply is harmless (it only
//! constrains types the rule never produces) or would be silently dropped.

use std::ops::BitOr;

/// A set of JSON types; numbers are split into integers and numbers with a fraction, so that
/// `"type": "integer"` and `"type": "number"` are told apart.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Types(u8);

impl Types {
    pub(crate) const EMPTY: Types = Types(0);
    pub(crate) const NULL: Types = Types(1);
    pub(crate) const BOOLEAN: Types = Types(2);
    pub(crate) const OBJECT: Types = Types(4);
    pub(crate) const ARRAY: Types = Types(8);
    pub(crate) const STRING: Types = Types(16);
    pub(crate) const INTEGER: Types = Types(32);
    /// Numbers that are not integers.
    pub(crate) const FRACTION: Types = Types(64);
    pub(crate) const NUMBER: Types = Types(32 | 64);
    pub(crate) const ALL: Types = Types(127);

    /// The set a JSON Schema type name stands for; `None` for a name that is not a type.
    pub(crate) fn named(name: &str) -> Option<Types> {
        Some(match name {
            "null" => Types::NULL,
            "boolean" => Types::BOOLEAN,
            "object" => Types::OBJECT,
            "array" => Types::ARRAY,
            "string" => Types::STRING,
            "integer" => Types::INTEGER,
            "number" => Types::NUMBER,
            _ => return None,
        })
    }

    pub(crate) fn is_empty(self) -> bool {
        self.0 == 0
    }

    pub(crate) fn intersects(self, other: Types) -> bool {
        self.0 & other.0 != 0
    }

    pub(crate) fn is_subset(self, other: Types) -> bool {
        self.0 & !other.0 == 0
    }

    pub(crate) fn minus(self, other: Types) -> Types {
        Types(self.0 & !other.0)
    }

    /// The names of the types in the set, for messages ("string, null").
    pub(crate) fn describe(self) -> String {
        const NAMES: [(Types, &str); 7] = [
            (Types::NULL, "null"),
            (Types::BOOLEAN, "boolean"),
            (Types::OBJECT, "object"),
            (Types::ARRAY, "array"),
            (Types::STRING, "string"),
            (Types::INTEGER, "integer"),
            (Types::FRACTION, "non-integer number"),
        ];
        let names: Vec<&str> = NAMES.iter().filter(|(t, _)| self.intersects(*t)).map(|(_, n)| *n).collect();
        names.join(", ")
    }
}

impl BitOr for Types {
    type Output = Types;
    fn bitor(self, rhs: Types) -> Types {
        Types(self.0 | rhs.0)
    }
}
