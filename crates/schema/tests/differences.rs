//! Where this crate's output differs from llama.cpp's on purpose (llama.cpp fails or emits a
//! wrong grammar there), and schemas in common use that must convert.

use schema::{to_grammar, to_grammar_str};
use serde_json::json;

const SPACE: &str = r#"space ::= | " " | "\n"{1,2} [ \t]{0,20}"#;

fn grammar(schema: &str) -> String {
    to_grammar_str(schema).unwrap_or_else(|e| panic!("{schema}: {e}"))
}

#[test]
fn the_true_schema_is_any_value() {
    let any = grammar(r#"{"description": "anything"}"#);
    assert_eq!(grammar("true"), any);
    assert!(grammar(r#"{"items": true}"#).contains("item ::= value\n"));
}

#[test]
fn a_closed_prefix_items_tuple_is_the_tuple() {
    let tuple = grammar(r#"{"prefixItems": [{"type": "string"}, {"type": "integer"}]}"#);
    assert!(tuple.contains(r#"root ::= "[" space string "," space integer "]" space"#), "{tuple}");
    for items in ["false", "true", "{}"] {
        let schema = format!(r#"{{"prefixItems": [{{"type": "string"}}, {{"type": "integer"}}], "items": {items}}}"#);
        assert_eq!(grammar(&schema), tuple, "{schema}");
    }
}

#[test]
fn references_inside_referenced_definitions_resolve() {
    // llama.cpp does not collect references under a schema that has `$ref` itself, and emits
    // `object` for `#/$defs/B` here.
    let g = grammar(
        r##"{
            "$ref": "#/$defs/A",
            "$defs": {
                "A": {"type": "object", "properties": {"b": {"$ref": "#/$defs/B"}}, "required": ["b"]},
                "B": {"type": "integer", "minimum": 1}
            }
        }"##,
    );
    let want = [
        r#"ref-defs-A ::= "{" space ref-defs-A-b-kv "}" space"#,
        "ref-defs-A-b ::= ref-defs-B",
        r#"ref-defs-A-b-kv ::= "\"b\"" space ":" space ref-defs-A-b"#,
        "ref-defs-B ::= ([1-9] [0-9]{0,15}) space",
        "root ::= ref-defs-A",
        SPACE,
    ];
    assert_eq!(g, want.join("\n") + "\n");
}

#[test]
fn recursive_references() {
    let g = grammar(
        r##"{
            "$ref": "#/$defs/Node",
            "$defs": {"Node": {
                "type": "object",
                "properties": {
                    "value": {"type": "integer"},
                    "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}
                },
                "required": ["value"]
            }}
        }"##,
    );
    let want = [
        r#"integer ::= ("-"? integral-part) space"#,
        "integral-part ::= [0] | [1-9] [0-9]{0,15}",
        r#"ref-defs-Node ::= "{" space ref-defs-Node-value-kv ( "," space ( ref-defs-Node-children-kv ) )? "}" space"#,
        r#"ref-defs-Node-children ::= "[" space (ref-defs-Node-children-item ("," space ref-defs-Node-children-item)*)? "]" space"#,
        "ref-defs-Node-children-item ::= ref-defs-Node",
        r#"ref-defs-Node-children-kv ::= "\"children\"" space ":" space ref-defs-Node-children"#,
        r#"ref-defs-Node-value-kv ::= "\"value\"" space ":" space integer"#,
        "root ::= ref-defs-Node",
        SPACE,
    ];
    assert_eq!(g, want.join("\n") + "\n");
}

#[test]
fn integer_bounds_round_inwards_and_take_the_tighter() {
    let three = grammar(r#"{"type": "integer", "minimum": 3}"#);
    assert_eq!(grammar(r#"{"type": "integer", "minimum": 2.5}"#), three);
    assert_eq!(grammar(r#"{"type": "integer", "exclusiveMinimum": 2}"#), three);
    assert_eq!(grammar(r#"{"type": "integer", "exclusiveMinimum": 2.5}"#), three);
    assert_eq!(grammar(r#"{"type": "integer", "minimum": 1, "exclusiveMinimum": 2}"#), three);
    assert_eq!(grammar(r#"{"type": "integer", "minimum": 3.0}"#), three);
    let nine = grammar(r#"{"type": "integer", "maximum": 9}"#);
    assert_eq!(grammar(r#"{"type": "integer", "maximum": 9.9}"#), nine);
    assert_eq!(grammar(r#"{"type": "integer", "exclusiveMaximum": 10}"#), nine);
    assert_eq!(grammar(r#"{"type": "integer", "exclusiveMaximum": 9.5}"#), nine);
    assert_eq!(grammar(r#"{"type": "integer", "maximum": 20, "exclusiveMaximum": 10}"#), nine);
}

#[test]
fn excluded_key_names_escape_class_characters() {
    let g = grammar(
        r#"{"properties": {"a-b": {}, "ab": {}, "x]": {}, "^q": {}}, "additionalProperties": {"type": "integer"}}"#,
    );
    let want = r#"additional-k ::= ["] ( [\x5E] ([q] char+ | [^"q] char*) | [a] ([-] ([b] char+ | [^"b] char*) | [b] char+ | [^"\-b] char*) | [x] ([\]] char+ | [^"\]] char*) | [^"^ax] char* )? ["] space"#;
    assert!(g.lines().any(|l| l == want), "{g}");
}

#[test]
fn non_ascii_key_names_work_per_character() {
    let g = grammar(
        r#"{"properties": {"é": {"type": "integer"}, "ë": {"type": "integer"}}, "additionalProperties": {"type": "string"}}"#,
    );
    assert!(g.contains(r#"additional-k ::= ["] ( [é] char+ | [ë] char+ | [^"éë] char* )? ["] space"#), "{g}");
    assert!(g.contains("--kv ::= \"\\\"é\\\"\" space \":\" space integer"), "{g}");
}

#[test]
fn value_order_is_the_maps_order() {
    // serde_json's preserve_order keeps insertion order: `json!` and parsed text agree.
    let from_text =
        grammar(r#"{"properties": {"b": {"type": "string"}, "a": {"type": "string"}}, "required": ["a", "b"]}"#);
    let from_value = to_grammar(&json!({
        "properties": {"b": {"type": "string"}, "a": {"type": "string"}},
        "required": ["a", "b"]
    }))
    .unwrap();
    assert_eq!(from_text, from_value);
    assert!(from_value.contains(r#"root ::= "{" space b-kv "," space a-kv "}" space"#));
}

#[test]
fn floats_in_literals_are_written_as_llama_cpp_writes_them() {
    let g = grammar(r#"{"enum": [1.5, 1e20, 0.00001, 100.0, -0.25, 18446744073709551615]}"#);
    assert!(
        g.contains(r#"root ::= ("1.5" | "1e+20" | "1e-05" | "100.0" | "-0.25" | "18446744073709551615") space"#),
        "{g}"
    );
}

#[test]
fn schemas_in_common_use() {
    // A nullable type list with enum values of both types.
    let g = grammar(r#"{"type": ["string", "null"], "enum": ["a", null]}"#);
    assert!(g.contains(r#"alternative-0 ::= ("\"a\"" | "null") space"#), "{g}");

    // pydantic: Optional[Model] with a default, a title, and an enum class behind allOf.
    let g = grammar(
        r##"{
            "title": "Order",
            "type": "object",
            "properties": {
                "id": {"title": "Id", "type": "integer", "minimum": 1},
                "note": {"anyOf": [{"type": "string", "maxLength": 20}, {"type": "null"}], "default": null, "title": "Note"},
                "color": {"allOf": [{"$ref": "#/definitions/Color"}], "description": "Paint"},
                "item": {"anyOf": [{"$ref": "#/$defs/Item"}, {"type": "null"}], "default": null},
                "when": {"type": "string", "format": "date-time"},
                "tags": {"type": "array", "items": {"type": "string", "pattern": "^[a-z]+$"}, "maxItems": 3}
            },
            "required": ["id", "color"],
            "additionalProperties": false,
            "definitions": {"Color": {"title": "Color", "description": "An enumeration.", "enum": ["red", "green"], "type": "string"}},
            "$defs": {"Item": {"title": "Item", "type": "object", "properties": {"sku": {"type": "string", "format": "uuid"}}, "required": ["sku"]}}
        }"##,
    );
    for line in [
        r#"color ::= ("\"green\"" | "\"red\"") space"#,
        r#"id ::= ([1-9] [0-9]{0,15}) space"#,
        r#"note-0 ::= "\"" char{0,20} "\"" space"#,
        r#"ref-defs-Item ::= "{" space ref-defs-Item-sku-kv "}" space"#,
        r#"tags-item ::= "\"" ([a-z]+) "\"" space"#,
        r#"when ::= date-time-string"#,
        r#"root ::= "{" space id-kv "," space color-kv ( "," space ( note-kv note-rest | item-kv item-rest | when-kv when-rest | tags-kv ) )? "}" space"#,
    ] {
        assert!(g.lines().any(|l| l == line), "missing {line}\n{g}");
    }
}

#[test]
fn a_pattern_count_without_a_maximum_converts() {
    // `{m,}` in a pattern (found by fuzzing: it was refused as a bad count).
    let g = schema::to_grammar_str(r#"{"type": "string", "pattern": "^a{2,}$"}"#).unwrap();
    let g = grammar::Grammar::new(&g).unwrap();
    assert!(g.matches("\"aa\"") && g.matches("\"aaaaa\"") && !g.matches("\"a\""));
}
