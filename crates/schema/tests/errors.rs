//! Refusals: every keyword the converter cannot apply, bad references, malformed schemas and
//! bad JSON, each with the place it names.

use schema::{SchemaError, to_grammar, to_grammar_str};
use serde_json::json;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Unsupported,
    Invalid,
    Reference,
    Pattern,
}

fn kind(e: &SchemaError) -> Option<Kind> {
    match e {
        SchemaError::Unsupported { .. } => Some(Kind::Unsupported),
        SchemaError::Invalid { .. } => Some(Kind::Invalid),
        SchemaError::Reference { .. } => Some(Kind::Reference),
        SchemaError::Pattern { .. } => Some(Kind::Pattern),
        _ => None,
    }
}

/// Checks every (schema, expected kind, expected pointer) and reports all mismatches at once.
fn check_all(cases: &[(&str, Kind, &str)]) {
    let mut failures = Vec::new();
    for (schema, want_kind, want_pointer) in cases {
        match to_grammar_str(schema) {
            Ok(g) => failures.push(format!("{schema}\n  converted:\n{g}")),
            Err(e) => {
                if kind(&e) != Some(*want_kind) || e.pointer() != Some(*want_pointer) {
                    failures.push(format!(
                        "{schema}\n  want {want_kind:?} at {want_pointer:?}, got {:?} at {:?}: {e}",
                        kind(&e),
                        e.pointer()
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn keywords_never_applied() {
    use Kind::Unsupported as U;
    check_all(&[
        (r#"{"type": "string", "not": {"const": "a"}}"#, U, "/not"),
        (r#"{"if": {"type": "string"}, "then": {"minLength": 1}}"#, U, "/if"),
        (r#"{"type": "string", "then": {"minLength": 1}}"#, U, "/then"),
        (r#"{"type": "string", "else": {"minLength": 1}}"#, U, "/else"),
        (r#"{"type": "integer", "multipleOf": 2}"#, U, "/multipleOf"),
        (r#"{"type": "integer", "minimum": 0, "multipleOf": 2}"#, U, "/multipleOf"),
        (r#"{"type": "array", "items": {"type": "integer"}, "uniqueItems": true}"#, U, "/uniqueItems"),
        (r#"{"type": "array", "items": {"type": "integer"}, "contains": {"const": 1}}"#, U, "/contains"),
        (r#"{"type": "array", "items": {"type": "integer"}, "minContains": 2}"#, U, "/minContains"),
        (r#"{"type": "array", "items": {"type": "integer"}, "maxContains": 2}"#, U, "/maxContains"),
        (r#"{"type": "array", "items": {"type": "integer"}, "unevaluatedItems": false}"#, U, "/unevaluatedItems"),
        (r#"{"type": "object", "patternProperties": {"^x": {"type": "string"}}}"#, U, "/patternProperties"),
        (r#"{"type": "object", "minProperties": 1}"#, U, "/minProperties"),
        (r#"{"type": "object", "maxProperties": 1}"#, U, "/maxProperties"),
        (r#"{"type": "object", "propertyNames": {"pattern": "^a$"}}"#, U, "/propertyNames"),
        (r#"{"properties": {"a": {}}, "dependentRequired": {"a": ["b"]}}"#, U, "/dependentRequired"),
        (r#"{"properties": {"a": {}}, "dependentSchemas": {"a": {"required": ["b"]}}}"#, U, "/dependentSchemas"),
        (r#"{"properties": {"a": {}}, "dependencies": {"a": ["b"]}}"#, U, "/dependencies"),
        (r#"{"properties": {"a": {}}, "unevaluatedProperties": false}"#, U, "/unevaluatedProperties"),
        (r##"{"$dynamicRef": "#meta"}"##, U, "/$dynamicRef"),
        (r##"{"$recursiveRef": "#"}"##, U, "/$recursiveRef"),
        // Nested: the pointer leads to the keyword.
        (r#"{"properties": {"age": {"type": "number", "minimum": 0}}}"#, U, "/properties/age/minimum"),
        (r#"{"items": {"anyOf": [{"type": "string", "not": {}}]}}"#, U, "/items/anyOf/0/not"),
    ]);
}

#[test]
fn keywords_the_chosen_rule_skips() {
    use Kind::{Invalid as I, Unsupported as U};
    check_all(&[
        // Strings.
        (r#"{"type": "string", "pattern": "^a+$", "minLength": 1}"#, U, "/minLength"),
        (r#"{"type": "string", "pattern": "^a+$", "format": "date"}"#, U, "/format"),
        (r#"{"type": "string", "format": "date", "maxLength": 10}"#, U, "/maxLength"),
        (r#"{"minLength": 3}"#, U, "/minLength"),
        (r#"{"type": "string", "enum": ["ab", "c"], "maxLength": 1}"#, U, "/maxLength"),
        (r#"{"const": "abc", "minLength": 1}"#, U, "/minLength"),
        // Numbers.
        (r#"{"type": "number", "minimum": 0}"#, U, "/minimum"),
        (r#"{"type": "number", "exclusiveMaximum": 1}"#, U, "/exclusiveMaximum"),
        (r#"{"maximum": 10}"#, U, "/maximum"),
        (r#"{"type": "integer", "enum": [1, 2], "minimum": 2}"#, U, "/minimum"),
        // Arrays.
        (r#"{"type": "array", "maxItems": 3}"#, U, "/maxItems"),
        (r#"{"type": "array", "items": {"type": "integer"}, "prefixItems": [{"type": "string"}]}"#, U, "/prefixItems"),
        (r#"{"prefixItems": [{"type": "string"}], "minItems": 2}"#, U, "/minItems"),
        (r#"{"prefixItems": [{"type": "string"}, {"type": "string"}], "maxItems": 1}"#, U, "/maxItems"),
        (r#"{"items": false}"#, U, "/items"),
        // Objects.
        (r#"{"type": "object", "required": ["a"]}"#, U, "/required"),
        (r#"{"properties": {"a": {}}, "required": ["a", "b"]}"#, U, "/required/1"),
        (r#"{"properties": {"*": {"type": "integer"}}}"#, U, "/properties/*"),
        (r#"{"properties": {"a\"b": {"type": "integer"}}, "additionalProperties": true}"#, U, "/properties/a\"b"),
        // Next to $ref, anyOf, oneOf.
        (r##"{"$ref": "#/$defs/s", "maxLength": 3, "$defs": {"s": {"type": "string"}}}"##, U, "/maxLength"),
        (r##"{"$ref": "#/$defs/s", "type": "string", "$defs": {"s": {"type": "integer"}}}"##, U, "/type"),
        (r#"{"type": "string", "anyOf": [{"type": "string"}, {"type": "null"}]}"#, U, "/type"),
        (r#"{"anyOf": [{"type": "string"}], "maxLength": 2}"#, U, "/maxLength"),
        (r#"{"oneOf": [{"type": "string"}], "anyOf": [{"type": "integer"}]}"#, U, "/anyOf"),
        (r#"{"const": 1, "enum": [1, 2]}"#, U, "/enum"),
        (r#"{"type": "integer", "const": "a"}"#, U, "/type"),
        (r#"{"properties": {"a": {}}, "allOf": [{"properties": {"b": {}}}]}"#, U, "/allOf"),
        // Formats and types.
        (r#"{"type": "string", "format": "email"}"#, U, "/format"),
        (r#"{"type": "integer", "format": "int64"}"#, U, "/format"),
        (r#"{"type": "string", "format": 3}"#, I, "/format"),
        (r#"{"type": "kaboom"}"#, I, "/type"),
        (r#"{"type": 123}"#, I, "/type"),
        (r#"{"type": "uuid"}"#, I, "/type"),
        (r#"{"type": null}"#, I, "/type"),
        (r#"{"type": []}"#, I, "/type"),
        (r#"{"type": ["string", "kaboom"]}"#, I, "/type"),
    ]);
}

#[test]
fn all_of_combinations_llama_cpp_gets_wrong() {
    use Kind::Unsupported as U;
    check_all(&[
        (r#"{"allOf": [{"properties": {"a": {}}}, {"enum": ["x"]}]}"#, U, "/allOf/1/enum"),
        (r#"{"allOf": [{"enum": ["a", "b"]}, {"enum": ["c"]}]}"#, U, "/allOf/0/enum"),
        (r#"{"allOf": [{"enum": ["a", "a"]}, {"enum": ["b"]}]}"#, U, "/allOf/1"),
        (
            r#"{"allOf": [{"properties": {"a": {}}}, {"properties": {"a": {"type": "string"}}}]}"#,
            U,
            "/allOf/1/properties/a",
        ),
        (
            r#"{"allOf": [{"properties": {"a": {}}, "additionalProperties": false}, {"properties": {"b": {}}}]}"#,
            U,
            "/allOf/0/additionalProperties",
        ),
        (r#"{"allOf": [{"anyOf": [{"properties": {"b": {}}, "required": ["b"]}]}]}"#, U, "/allOf/0/anyOf/0/required/0"),
        (r#"{"allOf": [{"properties": {"a": {}}}, {"anyOf": [{"type": "null"}]}]}"#, U, "/allOf/1/anyOf"),
        (r#"{"allOf": [{"anyOf": [{"properties": {"a": {}}}], "required": ["a"]}]}"#, U, "/allOf/0/required"),
        (r#"{"allOf": [{"properties": {"a": {}}}, {"minProperties": 1}]}"#, U, "/allOf/1/minProperties"),
        (r#"{"allOf": [{"properties": {"a": {}}}, {"type": "string"}]}"#, U, "/allOf/1/type"),
        (r#"{"allOf": [{"properties": {"a": {}}, "required": ["b"]}]}"#, U, "/allOf/0/required/0"),
        (
            r##"{"allOf": [{"$ref": "#/$defs/A", "minProperties": 1}], "$defs": {"A": {"properties": {"a": {}}}}}"##,
            U,
            "/allOf/0/minProperties",
        ),
        (r#"{"allOf": [{"properties": {"a": {}}}, {"allOf": []}]}"#, U, "/allOf/1/allOf"),
    ]);
}

#[test]
fn references() {
    use Kind::{Invalid as I, Reference as R};
    check_all(&[
        (r#"{"$ref": "https://example.com/schema.json"}"#, R, "/$ref"),
        (r#"{"$ref": "https://example.com/schema.json#/$defs/a"}"#, R, "/$ref"),
        (r#"{"$ref": "other.json#/a"}"#, R, "/$ref"),
        (r##"{"$ref": "#"}"##, R, "/$ref"),
        (r##"{"$ref": "#anchor"}"##, R, "/$ref"),
        (r##"{"$ref": "#/$defs/missing", "$defs": {}}"##, R, "/$ref"),
        (r##"{"$ref": "#/definitions/a/0", "definitions": {"a": {}}}"##, R, "/$ref"),
        (r##"{"$ref": "#/$defs/a/01", "$defs": {"a": [{}, {}]}}"##, R, "/$ref"),
        (r#"{"$ref": 3}"#, I, "/$ref"),
        // Nested, and in an unused definition (llama.cpp resolves them all up front too).
        (r##"{"properties": {"a": {"$ref": "#/$defs/nope"}}}"##, R, "/properties/a/$ref"),
        (r##"{"type": "string", "$defs": {"x": {"$ref": "#/$defs/nope"}}}"##, R, "/$defs/x/$ref"),
        // A reference that only refers to itself can produce nothing.
        (r##"{"$ref": "#/$defs/a", "$defs": {"a": {"$ref": "#/$defs/a"}}}"##, R, "/$defs/a/$ref"),
        (
            r##"{"$ref": "#/$defs/a", "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}}"##,
            R,
            "/$defs/b/$ref",
        ),
        (r##"{"$ref": "#/$defs/a", "$defs": {"a": {"anyOf": [{"$ref": "#/$defs/a"}]}}}"##, R, "/$defs/a/anyOf/0/$ref"),
        // An invalid target is reported as what it is.
        (r##"{"$ref": "#/$defs/a", "$defs": {"a": {"type": "kaboom"}}}"##, I, "/$defs/a/type"),
    ]);
}

#[test]
fn malformed_values() {
    use Kind::{Invalid as I, Unsupported as U};
    check_all(&[
        (r#"{"type": "string", "minLength": -1}"#, I, "/minLength"),
        (r#"{"type": "string", "maxLength": 1.5}"#, I, "/maxLength"),
        (r#"{"type": "string", "maxLength": "3"}"#, I, "/maxLength"),
        (r#"{"type": "string", "minLength": 5, "maxLength": 2}"#, I, "/minLength"),
        (r#"{"type": "string", "maxLength": 4294967296}"#, U, "/maxLength"),
        (r#"{"items": {}, "minItems": 3, "maxItems": 2}"#, I, "/minItems"),
        (r#"{"enum": []}"#, I, "/enum"),
        (r#"{"enum": "a"}"#, I, "/enum"),
        (r#"{"anyOf": []}"#, I, "/anyOf"),
        (r#"{"oneOf": {"type": "string"}}"#, I, "/oneOf"),
        (r#"{"allOf": {"type": "string"}}"#, I, "/allOf"),
        (r#"{"properties": []}"#, I, "/properties"),
        (r#"{"properties": {"a": 3}}"#, I, "/properties/a"),
        (r#"{"properties": {"a": null}}"#, I, "/properties/a"),
        (r#"{"properties": {"a": {}}, "required": "a"}"#, I, "/required"),
        (r#"{"properties": {"a": {}}, "required": [1]}"#, I, "/required/0"),
        (r#"{"properties": {}, "additionalProperties": 1}"#, I, "/additionalProperties"),
        (r#"{"type": "integer", "minimum": "1"}"#, I, "/minimum"),
        (r#"{"type": "integer", "minimum": 5, "maximum": 4}"#, I, "/minimum"),
        (r#"{"type": "integer", "exclusiveMinimum": 4, "exclusiveMaximum": 5}"#, I, "/exclusiveMinimum"),
        (r#"{"type": "integer", "minimum": 3, "exclusiveMinimum": true}"#, U, "/exclusiveMinimum"),
        (r#"{"type": "integer", "minimum": 1e300}"#, U, "/minimum"),
        (r#"{"type": "integer", "maximum": 9223372036854775807}"#, U, "/maximum"),
        (r#"{"type": "integer", "minimum": 1000000000000000}"#, U, "/minimum"),
        (r#"{"type": "integer", "maximum": -1000000000000000}"#, U, "/maximum"),
        (r#"{"properties": {"a": false}}"#, U, "/properties/a"),
        ("false", U, ""),
        ("42", I, ""),
        ("null", I, ""),
        (r#"{"pattern": 3}"#, I, "/pattern"),
    ]);
}

#[test]
fn patterns() {
    let cases: &[(&str, usize)] = &[
        ("abc", 0),
        ("^abc", 0),
        ("^a\\\\d+$", 2),
        ("^a(?=b)$", 2),
        ("^(?<n>a)$", 1),
        ("^a+?$", 3),
        ("^a{2,3}?$", 7),
        ("^a|^b$", 3),
        ("^(ab$", 1),
        ("^ab)$", 3),
        ("^[ab$", 1),
        ("^a]$", 2),
        ("^[]a]$", 1),
        ("^[\\\\w]$", 2),
        ("^ab\\\\.+$", 5),
        ("^\\\\x41*$", 5),
        ("^a\\\\/b$", 2),
        ("^(a)\\\\1$", 4),
        ("^\\\\bword$", 1),
        ("^(a|)*$", 5),
        ("^x(|b)+$", 6),
    ];
    let mut failures = Vec::new();
    for (pattern, offset) in cases {
        let schema = format!(r#"{{"type": "string", "pattern": "{pattern}"}}"#);
        match to_grammar_str(&schema) {
            Err(SchemaError::Pattern { pointer, offset: got, .. }) if pointer == "/pattern" && got == *offset => {}
            other => failures.push(format!("{pattern}: want offset {offset}, got {other:?}")),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn bad_json_names_line_and_column() {
    let text = "{\n  \"type\": \"string\",\n  \"minLength\": }\n";
    match to_grammar_str(text) {
        Err(SchemaError::Json { line, column, message }) => {
            assert_eq!((line, column), (3, 16));
            assert!(!message.contains("line"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    let e = to_grammar_str("{\"a\": 1,}").unwrap_err();
    assert!(matches!(e, SchemaError::Json { line: 1, column: 9, .. }), "{e:?}");
    assert_eq!(e.pointer(), None);
    assert!(e.to_string().starts_with("invalid JSON at line 1, column 9: "), "{e}");
    let e = to_grammar_str("").unwrap_err();
    assert!(matches!(e, SchemaError::Json { line: 1, column: 0, .. }), "{e:?}");
}

#[test]
fn messages_name_the_place_and_the_problem() {
    let e = to_grammar_str(r#"{"properties": {"age": {"type": "number", "minimum": 0}}}"#).unwrap_err();
    assert_eq!(e.pointer(), Some("/properties/age/minimum"));
    let text = e.to_string();
    assert!(text.starts_with("at /properties/age/minimum: "), "{text}");
    assert!(text.contains("integer"), "{text}");

    let e = to_grammar_str(r#"{"not": {}}"#).unwrap_err();
    assert_eq!(e.to_string(), "at /not: `not` is not supported: the converter cannot express it");

    let e = to_grammar_str("false").unwrap_err();
    assert!(e.to_string().starts_with("at the schema root: "), "{e}");

    let e = to_grammar_str(r##"{"$ref": "#/$defs/x"}"##).unwrap_err();
    assert_eq!(e.to_string(), "at /$ref: reference `#/$defs/x` does not resolve: the document root has no `$defs`");

    let e = to_grammar_str(r#"{"type": "string", "pattern": "^a\\d$"}"#).unwrap_err();
    assert!(e.to_string().contains("`\\d`") && e.to_string().contains("[0-9]"), "{e}");

    // A pointer token with `/` or `~` is escaped.
    let e = to_grammar_str(r#"{"properties": {"a/b~c": {"type": "number", "maximum": 1}}}"#).unwrap_err();
    assert_eq!(e.pointer(), Some("/properties/a~1b~0c/maximum"));
}

#[test]
fn errors_inside_referenced_schemas_name_their_own_place() {
    let e = to_grammar_str(
        r##"{"properties": {"a": {"$ref": "#/$defs/A"}}, "$defs": {"A": {"type": "string", "not": {}}}}"##,
    )
    .unwrap_err();
    assert_eq!(e.pointer(), Some("/$defs/A/not"));
}

#[test]
fn too_deep() {
    let mut schema = json!({"type": "string"});
    for _ in 0..300 {
        schema = json!({"items": schema});
    }
    let e = to_grammar(&schema).unwrap_err();
    assert!(matches!(e, SchemaError::Unsupported { .. }), "{e:?}");
}

#[test]
fn annotations_and_unknown_keywords_are_ignored() {
    let plain = to_grammar_str(r#"{"type": "string"}"#).unwrap();
    let annotated = to_grammar_str(
        r#"{
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": "https://example.com/s",
            "$comment": "c",
            "title": "T",
            "description": "D",
            "examples": ["x"],
            "default": "x",
            "deprecated": false,
            "readOnly": true,
            "writeOnly": false,
            "$defs": {"unused": {"type": "integer"}},
            "definitions": {},
            "x-vendor": {"anything": 1},
            "nullable": false,
            "type": "string"
        }"#,
    )
    .unwrap();
    assert_eq!(plain, annotated);
}

#[test]
fn keywords_for_other_types_are_harmless() {
    // A keyword only constrains instances of its own type: next to a rule that never produces
    // that type it constrains nothing.
    let plain = to_grammar_str(r#"{"type": "string"}"#).unwrap();
    for extra in [
        r#""minimum": 3"#,
        r#""multipleOf": 2"#,
        r#""maxItems": 1"#,
        r#""uniqueItems": true"#,
        r#""required": ["a"]"#,
        r#""minProperties": 2"#,
    ] {
        let schema = format!(r#"{{"type": "string", {extra}}}"#);
        assert_eq!(to_grammar_str(&schema).unwrap(), plain, "{schema}");
    }
    // No-op values are harmless anywhere.
    for extra in [
        r#""uniqueItems": false"#,
        r#""minLength": 0"#,
        r#""minProperties": 0"#,
        r#""required": []"#,
        r#""patternProperties": {}"#,
    ] {
        let schema = format!(r#"{{"type": "string", "pattern": "^a$", {extra}}}"#);
        let want = to_grammar_str(r#"{"type": "string", "pattern": "^a$"}"#).unwrap();
        assert_eq!(to_grammar_str(&schema).unwrap(), want, "{schema}");
    }
    // With a list of types, each member's rule decides.
    assert!(to_grammar_str(r#"{"type": ["integer", "null"], "minimum": 1}"#).is_ok());
    assert!(to_grammar_str(r#"{"type": ["string", "null"], "maxLength": 3}"#).is_ok());
    assert!(to_grammar_str(r#"{"type": ["number", "null"], "minimum": 1}"#).is_err());
}

#[test]
fn large_inputs_do_not_exhaust_the_stack() {
    // Thousands of optional properties (a chain of `-rest` rules), a very long key under
    // additional properties (a deep trie), deeply nested groups in a pattern (refused).
    let mut props = serde_json::Map::new();
    for i in 0..5000 {
        props.insert(format!("p{i}"), json!({"type": "integer"}));
    }
    let g = to_grammar(&json!({"properties": props, "additionalProperties": false})).unwrap();
    assert!(g.contains("p4998-rest ::= ( \",\" space p4999-kv )?\n"));

    let long_key = "k".repeat(100_000);
    let g = to_grammar(&json!({
        "properties": {long_key: {"type": "integer"}},
        "additionalProperties": {"type": "string"}
    }))
    .unwrap();
    assert!(g.contains("additional-k ::= "));

    let pattern = format!("^{}a{}$", "(".repeat(10_000), ")".repeat(10_000));
    let e = to_grammar(&json!({"type": "string", "pattern": pattern})).unwrap_err();
    assert!(matches!(e, SchemaError::Pattern { .. }), "{e:?}");
}
