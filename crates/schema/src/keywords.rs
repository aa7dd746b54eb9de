//! What each JSON Schema keyword is: an annotation (constrains nothing), a constraint on any
//! instance, or a constraint that only applies to instances of one type; plus the keywords no
//! rule of the converter applies anywhere, and the values that make a keyword a no-op.

use crate::types::Types;
use serde_json::Value;

/// The kind of a keyword.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Constrains nothing (`title`, `description`, `$defs`, ...): ignored silently.
    Annotation,
    /// Constrains every instance (`type`, `enum`, `anyOf`, `not`, ...).
    Any,
    /// Constrains only instances of these types (`minLength` only strings, ...).
    Only(Types),
    /// Not a JSON Schema keyword: the specification says such keywords constrain nothing.
    Unknown,
}

pub(crate) fn kind(keyword: &str) -> Kind {
    match keyword {
        "title" | "description" | "$schema" | "$id" | "$comment" | "examples" | "default" | "deprecated"
        | "readOnly" | "writeOnly" | "$defs" | "definitions" | "$anchor" | "$dynamicAnchor" | "$recursiveAnchor"
        | "$vocabulary" | "contentEncoding" | "contentMediaType" | "contentSchema" => Kind::Annotation,
        "type" | "enum" | "const" | "allOf" | "anyOf" | "oneOf" | "not" | "if" | "then" | "else" | "$ref"
        | "$dynamicRef" | "$recursiveRef" => Kind::Any,
        "minLength" | "maxLength" | "pattern" | "format" => Kind::Only(Types::STRING),
        "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" | "multipleOf" => Kind::Only(Types::NUMBER),
        "items" | "prefixItems" | "additionalItems" | "minItems" | "maxItems" | "uniqueItems" | "contains"
        | "minContains" | "maxContains" | "unevaluatedItems" => Kind::Only(Types::ARRAY),
        "properties"
        | "required"
        | "additionalProperties"
        | "patternProperties"
        | "minProperties"
        | "maxProperties"
        | "propertyNames"
        | "dependentRequired"
        | "dependentSchemas"
        | "dependencies"
        | "unevaluatedProperties" => Kind::Only(Types::OBJECT),
        _ => Kind::Unknown,
    }
}

/// Keywords that no rule of the converter applies, wherever they stand.
pub(crate) fn never_applied(keyword: &str) -> bool {
    matches!(
        keyword,
        "not"
            | "if"
            | "then"
            | "else"
            | "$dynamicRef"
            | "$recursiveRef"
            | "multipleOf"
            | "uniqueItems"
            | "contains"
            | "minContains"
            | "maxContains"
            | "unevaluatedItems"
            | "patternProperties"
            | "minProperties"
            | "maxProperties"
            | "propertyNames"
            | "dependentRequired"
            | "dependentSchemas"
            | "dependencies"
            | "unevaluatedProperties"
    )
}

/// Whether this keyword with this value admits every instance, so ignoring it loses nothing.
pub(crate) fn is_no_op(keyword: &str, value: &Value) -> bool {
    let empty_object = value.as_object().is_some_and(|m| m.is_empty());
    match keyword {
        "minLength" | "minItems" | "minProperties" => value.as_u64() == Some(0),
        "uniqueItems" => value == &Value::Bool(false),
        "required" => value.as_array().is_some_and(|a| a.is_empty()),
        "additionalProperties"
        | "additionalItems"
        | "unevaluatedItems"
        | "unevaluatedProperties"
        | "propertyNames"
        | "items" => value == &Value::Bool(true) || empty_object,
        "properties" | "patternProperties" | "dependentRequired" | "dependentSchemas" | "dependencies" => empty_object,
        _ => false,
    }
}

/// The string formats that have a rule.
pub(crate) fn known_format(format: &str) -> bool {
    matches!(format, "date" | "time" | "date-time") || is_uuid_format(format)
}

/// `uuid`, or `uuid1` to `uuid5` (llama.cpp's `^uuid[1-5]?$`).
pub(crate) fn is_uuid_format(format: &str) -> bool {
    match format.strip_prefix("uuid") {
        Some("") => true,
        Some(rest) => matches!(rest, "1" | "2" | "3" | "4" | "5"),
        None => false,
    }
}
